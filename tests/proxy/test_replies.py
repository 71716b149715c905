"""A reply is stored after the client has it (ctxwise.proxy.replies): with the session's next
call in that call's one write, by the writer thread when no call comes, never twice when
another process served the next call."""
from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ctxwise import SessionNotFound, SqlStore
from ctxwise.proxy.replies import Pending, Replies
from ctxwise.proxy.routes import Upstreams
from ctxwise.server import create_app

from .conftest import POLICY, Live, _Holder
from .stub import Reply, serve
from .test_routes import openai_client, session_messages


def stored(live: Live, sid: str) -> tuple[int, list[str]]:
    """The session's stored version and message roles, read as they are (nothing settled)."""
    store = SqlStore(live.store_url)
    try:
        state = store.load("acme:proxy", sid)
        return state.version, [r.current.role for r in state.rows]
    finally:
        store.close()


def test_the_reply_is_stored_with_the_next_call_in_one_write(live: Live) -> None:
    live.stub.queue("chat", Reply(text="a1"), Reply(text="a2"))
    client = openai_client(live, **{"X-Ctxwise-Session": "one-write"})
    h: list[Any] = [{"role": "user", "content": "u1"}]
    client.chat.completions.create(model="m", messages=h)
    v1, roles = stored(live, "one-write")
    assert roles == ["user"]  # the client has a1; it waits for the next call
    assert len(live.app.proxy.replies) == 1
    h += [{"role": "assistant", "content": "a1"}, {"role": "user", "content": "u2"}]
    client.chat.completions.create(model="m", messages=h)
    v2, roles = stored(live, "one-write")
    assert roles == ["user", "assistant", "user"]  # a1 (as the upstream sent it) and u2
    assert v2 == v1 + 1  # in one write
    assert [m["content"] for m in live.stub.of("chat")[1].json["messages"]] == ["u1", "a1", "u2"]
    live.settle()
    assert stored(live, "one-write")[1] == ["user", "assistant", "user", "assistant"]


def test_a_reply_no_call_follows_is_stored_by_the_writer_thread(live: Live) -> None:
    live.app.proxy.replies.delay = 0.05
    live.stub.queue("chat", Reply(text="the last word"))
    openai_client(live, **{"X-Ctxwise-Session": "alone"}).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "u1"}])
    deadline = time.monotonic() + 60
    while stored(live, "alone")[1] != ["user", "assistant"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert stored(live, "alone")[1] == ["user", "assistant"]
    assert len(live.app.proxy.replies) == 0


@pytest.fixture
def second(live: Live) -> Iterator[Live]:
    """Another server process on the same store (its own proxy, session cache and replies)."""
    app = create_app(live.store_url, POLICY)
    app.proxy.upstreams = Upstreams(openai=live.stub.url + "/v1", anthropic=live.stub.url)  # type: ignore[attr-defined]
    app.proxy.replies.delay = 60.0  # type: ignore[attr-defined]
    holder = _Holder()
    server, thread = serve(app, holder)
    try:
        yield Live(live.stub, holder.url, live.store_url, live.keys, app)
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def test_a_reply_another_process_stored_first_is_not_stored_twice(live: Live, second: Live,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    live.stub.queue("chat", Reply(text="a1"), Reply(text="a2"))
    h: list[Any] = [{"role": "user", "content": "u1"}]
    openai_client(live, **{"X-Ctxwise-Session": "two-procs"}).chat.completions.create(model="m", messages=h)
    h += [{"role": "assistant", "content": "a1"}, {"role": "user", "content": "u2"}]
    raw = openai_client(second, **{"X-Ctxwise-Session": "two-procs"}).chat.completions.with_raw_response.create(
        model="m", messages=h)
    assert raw.headers["x-ctxwise-session"] == "two-procs"  # continued, not branched
    assert stored(live, "two-procs")[1] == ["user", "assistant", "user"]  # the second process stored a1
    live.settle()  # the first process's late write of a1 is refused by the version check
    second.settle()
    assert [m.role for m in session_messages(live, "acme", "proxy", "two-procs")] == \
        ["user", "assistant", "user", "assistant"]
    assert "moved on before its reply was stored" in caplog.text


# -- Replies itself ----------------------------------------------------------------------------


def _pending(sid: str) -> Pending:
    return Pending(SimpleNamespace(tenant="t", user_id="u", session_id=sid), [{"role": "assistant"}], ["h"], 3)


def test_replies_taken_are_never_written_by_the_thread_and_the_rest_are() -> None:
    written: list[str] = []
    done = threading.Event()

    def write(p: Pending) -> None:
        written.append(p.call.session_id)
        if p.call.session_id == "late":
            done.set()

    replies = Replies(write, delay=0.05)
    taken = _pending("taken")
    replies.add(taken)
    assert replies.take(("t", "u", "taken")) is taken
    assert replies.take(("t", "u", "taken")) is None  # once
    replies.add(_pending("late"))
    assert done.wait(30)
    assert written == ["late"] and len(replies) == 0
    replies.put_back(taken)  # what a call took and did not store is stored at once
    assert written == ["late", "taken"]
    replies.add(_pending("at-close"))
    replies.close()  # stores what waits
    assert written == ["late", "taken", "at-close"]
    replies.add(_pending("after-close"))  # stored at once once closed
    assert written[-1] == "after-close"


def test_a_write_that_raises_is_logged_and_the_reply_released(caplog: pytest.LogCaptureFixture) -> None:
    def write(p: Pending) -> None:
        raise SessionNotFound("gone")

    replies = Replies(write, delay=60)
    replies.add(_pending("s"))
    replies.flush()
    assert len(replies) == 0 and "could not be stored" in caplog.text
    replies.close()


def test_a_negative_delay_is_refused() -> None:
    with pytest.raises(ValueError, match="reply delay"):
        Replies(lambda p: None, delay=-1)


def test_no_reply_is_lost_from_a_served_app_at_shutdown(tmp_path: Path) -> None:
    from .conftest import running

    with running(tmp_path) as lv:
        lv.stub.queue("chat", Reply(text="kept at shutdown"))
        openai_client(lv, **{"X-Ctxwise-Session": "shutdown"}).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "u1"}])
        assert len(lv.app.proxy.replies) == 1
    assert stored(lv, "shutdown")[1] == ["user", "assistant"]  # the server's lifespan stored it


def test_a_second_reply_of_one_session_sends_the_first_to_the_writer_without_blocking() -> None:
    written: list[Pending] = []
    done = threading.Event()

    def write(p: Pending) -> None:
        written.append(p)
        done.set()

    replies = Replies(write, delay=60)
    first, second = _pending("same"), _pending("same")
    replies.add(first)
    replies.add(second)  # two calls of one session at once: the first reply is stored now, by the thread
    assert done.wait(30)
    assert written == [first] and len(replies) == 1
    assert replies.take(("t", "u", "same")) is second
    replies.close()
    assert written == [first]
