"""Retries through the drop-in endpoint (issue 27): the official SDKs' own retry loops (an
upstream 500, a client timeout while the first attempt is still upstream) leave one linear
session on every route, Responses included (a multi-item reply, ``previous_response_id``);
a changed request still branches. Real uvicorn, the ``openai`` / ``anthropic`` SDKs with
their retries on, the stub upstream."""
from __future__ import annotations

import logging
import time
from typing import Any

import anthropic
import openai
import pytest

from ctxwise import ContextManager, SqlStore

from .conftest import PROVIDER_KEY, Live
from .stub import Reply
from .test_routes import RESP_TOOLS, session_messages

LATE = "moved on before its reply was stored"
"""The proxy's log line for a reply the store refused (the earlier attempt's, after a retry)."""


def _openai(live: Live, timeout: float = 30.0, **headers: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=live.openai_base, api_key=PROVIDER_KEY, max_retries=2, timeout=timeout,
                         default_headers={"X-Ctxwise-Key": live.keys["a"], **headers})


def _events(live: Live, user: str, sid: str) -> list[str]:
    live.settle()
    cm = ContextManager(live.store_url)
    try:
        return [e["stage"] for e in cm.session(f"acme:{user}", sid, create=False).events()]
    finally:
        cm.close()


def _sessions(live: Live) -> list[str]:
    live.settle()
    with SqlStore(live.store_url) as store:
        return [i.session_id for i in store.query_sessions(None, "acme:", 100, 0)]


def _wait_refused(live: Live, caplog: pytest.LogCaptureFixture) -> None:
    """Wait until the earlier attempt's late reply reached the proxy and the store refused it."""
    deadline = time.monotonic() + 60
    while LATE not in caplog.text:
        assert time.monotonic() < deadline, "the earlier attempt's reply never came back"
        live.settle()
        time.sleep(0.05)


def _retry_counts(live: Live, kind: str) -> list[str | None]:
    return [s.headers.get("x-stainless-retry-count") for s in live.stub.of(kind)]


@pytest.mark.parametrize("name", [None, "trip"])
def test_responses_retry_after_an_upstream_500_is_one_linear_session(live: Live, name: str | None) -> None:
    live.stub.fail_next = [500]
    live.stub.queue("responses", Reply(text="Let me look.", calls=[("call_1", "get_weather", {"city": "Oslo"})]),
                    Reply(text="Cold."))
    client = _openai(live, **({"X-Ctxwise-Session": name} if name else {}))
    items: list[Any] = [{"role": "user", "content": "Oslo weather?"}]
    raw = client.responses.with_raw_response.create(model="gpt-5", input=items, tools=RESP_TOOLS)
    assert _retry_counts(live, "responses") == ["0", "1"]  # the SDK's own retry, as it marks it
    sid = raw.headers["x-ctxwise-session"]
    assert raw.headers.get("x-ctxwise-branched-from") is None
    first = raw.parse()
    items += [o.model_dump(exclude_none=True) for o in first.output]
    items.append({"type": "function_call_output", "call_id": "call_1", "output": "-3C"})
    r2 = client.responses.with_raw_response.create(model="gpt-5", input=items, tools=RESP_TOOLS)
    assert r2.headers["x-ctxwise-session"] == sid and r2.headers.get("x-ctxwise-branched-from") is None
    assert [m.role for m in session_messages(live, "acme", "proxy", sid)] == ["user", "assistant", "tool", "assistant"]
    assert _events(live, "proxy", sid).count("retried") == 1
    assert _sessions(live) == [sid]
    assert live.stub.invalid == []


@pytest.mark.parametrize("mode", ["history", "previous_response_id", "named"])
def test_responses_retry_after_a_timeout_while_the_first_attempt_is_upstream(
        live: Live, caplog: pytest.LogCaptureFixture, mode: str) -> None:
    caplog.set_level(logging.INFO, logger="ctxwise.proxy")
    client = _openai(live, timeout=1.0, **({"X-Ctxwise-Session": "trip"} if mode == "named" else {}))
    items: list[Any] = [{"role": "user", "content": "Plan a trip."}]
    kwargs: dict[str, Any] = {}
    roles = []
    if mode == "previous_response_id":
        live.stub.queue("responses", Reply(text="Where to?"))
        r0 = client.responses.create(model="gpt-5", input=items)
        kwargs["previous_response_id"] = r0.id
        items, roles = [{"role": "user", "content": "Oslo."}], ["user", "assistant"]
        live.stub.requests.clear()
    # the first attempt is answered after the client gave up on it; the retry at once
    live.stub.queue("responses", Reply(text="late", calls=[("call_late", "get_weather", {"city": "X"})]),
                    Reply(text="On it.", calls=[("call_1", "get_weather", {"city": "Oslo"})]))
    live.stub.delay_next = [3.0]
    raw = client.responses.with_raw_response.create(model="gpt-5", input=items, tools=RESP_TOOLS, **kwargs)
    got = raw.parse()
    assert got.output_text == "On it." and _retry_counts(live, "responses") == ["0", "1"]
    sid = raw.headers["x-ctxwise-session"]
    assert raw.headers.get("x-ctxwise-branched-from") is None
    _wait_refused(live, caplog)  # the first attempt's reply came back and was not stored
    user = "proxy"
    stored = session_messages(live, "acme", user, sid)
    assert [m.role for m in stored] == [*roles, "user", "assistant"]
    assert [b.name for b in stored[-1].blocks if b.type == "tool_use"] == ["get_weather"]
    assert "late" not in str([b.model_dump() for b in stored[-1].blocks])
    stages = _events(live, user, sid)
    assert stages.count("retried") == 1 and "popped" not in stages
    # the client goes on from the reply it got: the same session, no branch
    live.stub.queue("responses", Reply(text="Cold."))
    out = {"type": "function_call_output", "call_id": "call_1", "output": "-3C"}
    if mode == "previous_response_id":
        r2 = client.responses.with_raw_response.create(model="gpt-5", input=[out], previous_response_id=got.id)
    else:
        r2 = client.responses.with_raw_response.create(
            model="gpt-5", input=[*items, *(o.model_dump(exclude_none=True) for o in got.output), out])
    assert r2.headers["x-ctxwise-session"] == sid and r2.headers.get("x-ctxwise-branched-from") is None
    assert [m.role for m in session_messages(live, "acme", user, sid)] == [*roles, "user", "assistant", "tool",
                                                                           "assistant"]
    assert _sessions(live) == [sid]


def test_responses_retry_just_after_the_reply_was_made(live: Live, caplog: pytest.LogCaptureFixture) -> None:
    # the first attempt's reply reaches the proxy a moment after the client gave up, about when
    # the retry comes: stored and popped, or refused as late; either way one linear session
    # holding the reply the client got (the pop alone: test_a_responses_repeat_after_its_multi_item_reply_...)
    caplog.set_level(logging.INFO, logger="ctxwise.proxy")
    client = _openai(live, timeout=1.0)
    live.stub.queue("responses", Reply(text="first", calls=[("call_a", "get_weather", {"city": "A"})]),
                    Reply(text="second", calls=[("call_b", "get_weather", {"city": "B"})]))
    live.stub.delay_next = [1.2]
    live.app.proxy.replies.delay = 0.0  # type: ignore[attr-defined]  # stored as soon as it comes
    raw = client.responses.with_raw_response.create(
        model="gpt-5", input=[{"role": "user", "content": "go"}], tools=RESP_TOOLS)
    sid = raw.headers["x-ctxwise-session"]
    assert raw.parse().output_text == "second" and raw.headers.get("x-ctxwise-branched-from") is None
    stored = session_messages(live, "acme", "proxy", sid)
    assert [m.role for m in stored] == ["user", "assistant"]
    assert [b.id for b in stored[-1].blocks if b.type == "tool_use"] == ["call_b"]
    assert _sessions(live) == [sid]


def test_chat_and_messages_retries_after_a_timeout_follow_the_same_rules(
        live: Live, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="ctxwise.proxy")
    live.stub.queue("chat", Reply(text="late"), Reply(text="on time"))
    live.stub.delay_next = [3.0]
    raw = _openai(live, timeout=1.0).chat.completions.with_raw_response.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    assert raw.parse().choices[0].message.content == "on time"
    _wait_refused(live, caplog)
    sid = raw.headers["x-ctxwise-session"]
    assert [(m.role, m.text) for m in session_messages(live, "acme", "proxy", sid)] == \
        [("user", "hi"), ("assistant", "on time")]
    caplog.clear()
    live.stub.queue("messages", Reply(text="late"), Reply(text="on time"))
    live.stub.delay_next = [3.0]
    ac = anthropic.Anthropic(base_url=live.url, api_key=PROVIDER_KEY, max_retries=2, timeout=1.0,
                             default_headers={"X-Ctxwise-Key": live.keys["a"]})
    raw2 = ac.messages.with_raw_response.create(model="claude-sonnet-4-5", max_tokens=50,
                                                messages=[{"role": "user", "content": "hello"}])
    assert raw2.parse().content[0].text == "on time"  # type: ignore[union-attr]
    assert _retry_counts(live, "messages") == ["0", "1"]
    _wait_refused(live, caplog)
    sid2 = raw2.headers["x-ctxwise-session"]
    assert [(m.role, m.text) for m in session_messages(live, "acme", "proxy", sid2)] == \
        [("user", "hello"), ("assistant", "on time")]
    assert _events(live, "proxy", sid2).count("retried") == 1
    assert sorted(_sessions(live)) == sorted([sid, sid2])


def test_a_changed_responses_request_still_branches(live: Live) -> None:
    live.stub.queue("responses", Reply(text="a1", calls=[("c1", "get_weather", {"city": "A"})]), Reply(text="a2"),
                    Reply(text="edited"), Reply(text="old turn again"))
    client = _openai(live, **{"X-Ctxwise-Session": "trip"})
    items: list[Any] = [{"role": "user", "content": "u1"}]
    r1 = client.responses.create(model="gpt-5", input=items, tools=RESP_TOOLS)
    items += [o.model_dump(exclude_none=True) for o in r1.output]
    items.append({"type": "function_call_output", "call_id": "c1", "output": "ok"})
    r2 = client.responses.with_raw_response.create(model="gpt-5", input=items, tools=RESP_TOOLS)
    sid = r2.headers["x-ctxwise-session"]
    # the last message changed: a branch, not a retry
    edited = [*items[:-1], {"type": "function_call_output", "call_id": "c1", "output": "changed"}]
    r3 = client.responses.with_raw_response.create(model="gpt-5", input=edited, tools=RESP_TOOLS)
    assert r3.headers["x-ctxwise-session"] != sid and r3.headers["x-ctxwise-branched-from"] == sid
    # the first turn sent again once the session moved past it: a branch too (of the newest session
    # holding that turn, the branch above), not a regenerate popping a reply
    r4 = client.responses.with_raw_response.create(model="gpt-5", input=items[:1], tools=RESP_TOOLS)
    assert r4.headers["x-ctxwise-branched-from"] == r3.headers["x-ctxwise-session"]
    assert r4.headers["x-ctxwise-session"] not in (sid, r3.headers["x-ctxwise-session"])
    assert "popped" not in _events(live, "proxy", r3.headers["x-ctxwise-session"])
    assert [m.role for m in session_messages(live, "acme", "proxy", sid)] == ["user", "assistant", "tool", "assistant"]
    assert "popped" not in _events(live, "proxy", sid)


@pytest.mark.parametrize("how", ["named", "sdk retry header"])
def test_a_responses_repeat_after_its_multi_item_reply_pops_the_whole_reply(live: Live, how: str) -> None:
    # the reply of the first attempt (a message and a function call: two items) was made and
    # stored; the same request again pops it, as Chat and Messages do, and takes its place
    live.stub.queue("responses", Reply(text="first", calls=[("call_a", "get_weather", {"city": "A"})]),
                    Reply(text="second", calls=[("call_b", "get_weather", {"city": "B"})]))
    client = openai.OpenAI(base_url=live.openai_base, api_key=PROVIDER_KEY, max_retries=0,
                           default_headers={"X-Ctxwise-Key": live.keys["a"],
                                            **({"X-Ctxwise-Session": "trip"} if how == "named" else {})})
    items: list[Any] = [{"role": "user", "content": "go"}]
    r1 = client.responses.with_raw_response.create(model="gpt-5", input=items, tools=RESP_TOOLS)
    sid = r1.headers["x-ctxwise-session"]
    live.settle()  # the reply is stored before the repeat comes
    again = {"x-stainless-retry-count": "1"} if how == "sdk retry header" else {}
    r2 = client.responses.with_raw_response.create(model="gpt-5", input=items, tools=RESP_TOOLS,
                                                   extra_headers=again)
    assert r2.headers["x-ctxwise-session"] == sid and r2.headers.get("x-ctxwise-branched-from") is None
    stored = session_messages(live, "acme", "proxy", sid)
    assert [m.role for m in stored] == ["user", "assistant"]
    assert [b.id for b in stored[-1].blocks if b.type == "tool_use"] == ["call_b"]
    assert _events(live, "proxy", sid).count("popped") == 1
    # the upstream got the history without the popped reply
    assert [i.get("role") or i["type"] for i in live.stub.of("responses")[1].json["input"]] == ["user"]
    # and the client goes on from the second reply in the same session
    out = {"type": "function_call_output", "call_id": "call_b", "output": "ok"}
    r3 = client.responses.with_raw_response.create(
        model="gpt-5", input=[*items, *(o.model_dump(exclude_none=True) for o in r2.parse().output), out])
    assert r3.headers["x-ctxwise-session"] == sid and r3.headers.get("x-ctxwise-branched-from") is None


def test_an_unmarked_responses_repeat_is_still_another_conversation(live: Live) -> None:
    # no session header, no previous_response_id, no SDK retry count: two conversations that
    # start the same way, as on the other routes
    client = openai.OpenAI(base_url=live.openai_base, api_key=PROVIDER_KEY, max_retries=0,
                           default_headers={"X-Ctxwise-Key": live.keys["a"], "x-stainless-retry-count": "0"})
    items: list[Any] = [{"role": "user", "content": "hello"}]
    r1 = client.responses.with_raw_response.create(model="gpt-5", input=items)
    live.settle()
    r2 = client.responses.with_raw_response.create(model="gpt-5", input=items)
    assert r1.headers["x-ctxwise-session"] != r2.headers["x-ctxwise-session"]
    assert r2.headers.get("x-ctxwise-branched-from") is None


def test_a_call_that_keeps_losing_the_race_is_a_409_the_sdks_retry(live: Live, monkeypatch: pytest.MonkeyPatch
                                                                   ) -> None:
    from ctxwise import SessionConflict
    from ctxwise.proxy import conversation

    tries: list[bool] = []

    def lost(*args: Any, **kwargs: Any) -> Any:
        tries.append(True)
        raise SessionConflict("session 's': another call of the session was stored first")

    monkeypatch.setattr(conversation, "_begin", lost)
    oc = openai.OpenAI(base_url=live.openai_base, api_key=PROVIDER_KEY, max_retries=0,
                       default_headers={"X-Ctxwise-Key": live.keys["a"]})
    with pytest.raises(openai.ConflictError) as oe:
        oc.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert oe.value.status_code == 409 and "stored first" in str(oe.value)
    assert len(tries) == conversation.ATTEMPTS  # mapped again each time, then refused
    ac = anthropic.Anthropic(base_url=live.url, api_key=PROVIDER_KEY, max_retries=1,
                             default_headers={"X-Ctxwise-Key": live.keys["a"]})
    with pytest.raises(anthropic.ConflictError) as ae:
        ac.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    assert ae.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    assert len(tries) == 3 * conversation.ATTEMPTS  # the SDK retried the 409 once
    assert live.stub.requests == []  # nothing went upstream
    assert _sessions(live) == []  # nothing stored
