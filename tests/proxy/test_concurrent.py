"""Two processes sharing one database take the same proxied call at once (issue 27): both map
it on the same session before either writes (a barrier between mapping and writing, in each
of two real processes), so exactly one may store it. The loser is mapped again after the
store refuses its write (:meth:`ctxwise.proxy.heads.HeadStore.commit`): the session never holds
the call's messages twice. SQLite, and PostgreSQL under scripts/with-postgres.sh."""
from __future__ import annotations

import multiprocessing
from typing import Any

import pytest
from starlette.requests import Request

from ctxwise import ContextManager
from ctxwise.proxy import conversation
from ctxwise.proxy.conversation import Call, begin, finish, pending
from ctxwise.proxy.wire import ROUTES
from ctxwise.server import create_app

from .conftest import POLICY

CHAT = ROUTES["/v1/chat/completions"]
TENANT = "acme"
FIRST = [{"role": "user", "content": "plan the trip"}]
REPLY = {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m",
         "choices": [{"index": 0, "finish_reason": "stop",
                      "message": {"role": "assistant", "content": "where to?"}}]}


def _child(url: str, barrier: Any, out: Any, messages: list[dict[str, Any]], name: str | None, retry: int,
           sid: str) -> None:
    """In a process of its own: one proxied call's begin() on the shared database, as a
    server process makes it (the session in its session cache, read by an earlier call), the
    first mapping waiting at ``barrier`` (so both processes map before either writes)."""
    app = create_app(url, POLICY)
    server, heads = app.proxy.server, app.proxy.heads  # type: ignore[attr-defined]
    request = Request({"type": "http", "method": "POST", "path": "/v1/chat/completions", "headers": []})
    server.sessions.run(request, TENANT, "proxy", sid, lambda s, checked: None)  # the process has served it
    mapper = conversation._map
    waited = []

    def mapped(*args: Any, **kwargs: Any) -> Any:
        result = mapper(*args, **kwargs)
        if not waited:
            waited.append(True)
            barrier.wait(timeout=60)
        return result

    conversation._map = mapped  # type: ignore[assignment]
    try:
        call = begin(server, heads, Call(CHAT, TENANT, name, None, {"model": "m", "messages": messages},
                                         request=request, retry=retry))
        out.put((call.session_id, call.start, call.branched_from, call.repeated))
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        out.put(("error", repr(e), None, None))


def _first_turn(url: str, name: str | None) -> str:
    """One call and its reply stored (as the proxy stores them); returns the session id."""
    app = create_app(url, POLICY)
    server, heads = app.proxy.server, app.proxy.heads  # type: ignore[attr-defined]
    call = begin(server, heads, Call(CHAT, TENANT, name, None, {"model": "m", "messages": FIRST}))
    finish(server, heads, pending(call, REPLY))
    heads.close()
    server.manager.close()
    return call.session_id


def _race(url: str, sid: str, second: list[list[dict[str, Any]]], name: str | None = None,
          retry: int = 0) -> list[tuple[Any, ...]]:
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_child, args=(url, barrier, out, m, name, retry, sid)) for m in second]
    for p in procs:
        p.start()
    got = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert all(g[0] != "error" for g in got), got
    return got


def _texts(url: str, sid: str) -> list[str]:
    cm = ContextManager(url)
    try:
        return [f"{m.role}:{m.text}" for m in cm.session(f"{TENANT}:proxy", sid, create=False).messages]
    finally:
        cm.close()


def _events(url: str, sid: str) -> list[str]:
    cm = ContextManager(url)
    try:
        return [e["stage"] for e in cm.session(f"{TENANT}:proxy", sid, create=False).events()]
    finally:
        cm.close()


NEXT = [*FIRST, {"role": "assistant", "content": "where to?"}, {"role": "user", "content": "Lisbon"}]
EXPECTED = ["user:plan the trip", "assistant:where to?", "user:Lisbon"]


def test_the_same_call_in_two_processes_is_stored_once(store_url: str) -> None:
    sid = _first_turn(store_url, None)
    got = _race(store_url, sid, [NEXT, NEXT])
    # one process continued the session; the other saw its messages stored and, the call being
    # in flight there, took it for another conversation starting the same way (a new session, no link)
    winners = [g for g in got if g[0] == sid]
    losers = [g for g in got if g[0] != sid]
    assert len(winners) == 1 and winners[0][1:] == (2, None, False), got
    assert len(losers) == 1 and losers[0][1:] == (0, None, False), got
    assert _texts(store_url, sid) == EXPECTED
    assert _texts(store_url, losers[0][0]) == EXPECTED


def test_the_same_named_call_in_two_processes_is_one_session(store_url: str) -> None:
    sid = _first_turn(store_url, "trip")
    got = _race(store_url, sid, [NEXT, NEXT], name="trip")
    assert {g[0] for g in got} == {sid} and sorted(g[3] for g in got) == [False, True], got
    assert _texts(store_url, sid) == EXPECTED
    assert _events(store_url, sid).count("retried") == 1


def test_an_sdk_retry_in_two_processes_is_one_session(store_url: str) -> None:
    # an SDK's retry (x-stainless-retry-count 1) that a load balancer sent to the other process
    # while the first attempt is still being stored: the same conversation, stored once
    sid = _first_turn(store_url, None)
    got = _race(store_url, sid, [NEXT, NEXT], retry=1)
    assert {g[0] for g in got} == {sid}, got
    assert _texts(store_url, sid) == EXPECTED


def test_two_different_continuations_in_two_processes_branch(store_url: str) -> None:
    sid = _first_turn(store_url, None)
    other = [*NEXT[:2], {"role": "user", "content": "Porto"}]
    got = _race(store_url, sid, [NEXT, other])
    assert sorted(g[0] == sid for g in got) == [False, True], got
    branch = next(g for g in got if g[0] != sid)
    assert branch[1:3] == (0, sid)  # a branch of the session, holding the whole history
    kept = _texts(store_url, sid)
    assert kept in (EXPECTED, [*EXPECTED[:2], "user:Porto"])  # one continuation, never both
    assert _texts(store_url, branch[0]) == ([*EXPECTED[:2], "user:Porto"] if kept == EXPECTED else EXPECTED)
    assert _events(store_url, branch[0])[0] == "branched"


def _serve(url: str, upstream: str, log_path: Any) -> tuple[Any, str]:
    """``ctxwise serve`` in a process of its own on a free port, its OpenAI upstream ``upstream``."""
    import socket
    import subprocess
    import sys

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "ctxwise", "serve", "--db", url, "--port", str(port),
                                 "--openai-upstream", upstream, "--log-level", "warning"],
                                stdout=log, stderr=subprocess.STDOUT)
    return proc, f"http://127.0.0.1:{port}"


def _up(proc: Any, base: str, log_path: Any) -> None:
    import time

    import httpx

    deadline = time.monotonic() + 90
    while True:
        assert proc.poll() is None, log_path.read_text()
        try:
            if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.2)


def test_two_ctxwise_serve_processes_take_the_same_calls_at_once(store_url: str, tmp_path: Any) -> None:
    """End to end: two ``ctxwise serve`` processes on one database, the ``openai`` SDK sending
    the same call to both at the same moment, round after round: every call answered (no 4xx
    for a lost race), and no session holds a message twice."""
    import threading

    import openai

    from ctxwise.server.keys import KeyStore

    from .stub import Reply, Stub

    stub = Stub()
    stub.responder = lambda kind, body: Reply(text="ok")
    s_server, _ = stub.start()
    url = store_url
    procs = [_serve(url, stub.url + "/v1", tmp_path / f"serve{k}.log") for k in range(2)]
    try:
        for k, (proc, base) in enumerate(procs):
            _up(proc, base, tmp_path / f"serve{k}.log")
        ks = KeyStore(url)
        key = ks.create("acme", "t")[0]
        ks.close()
        clients = [openai.OpenAI(base_url=base + "/v1", api_key="sk-x", max_retries=0,
                                 default_headers={"X-Ctxwise-Key": key}) for _, base in procs]
        seen: list[str] = []
        for r in range(6):
            first = [{"role": "user", "content": f"conversation {r}"}]
            raw = clients[r % 2].chat.completions.with_raw_response.create(model="m", messages=first)
            seen.append(raw.headers["x-ctxwise-session"])
            nxt = [*first, {"role": "assistant", "content": "ok"}, {"role": "user", "content": f"step {r}"}]
            barrier, got, errors = threading.Barrier(2), [], []

            def send(client: openai.OpenAI, msgs: list[dict[str, Any]] = nxt) -> None:
                try:
                    barrier.wait(timeout=30)
                    got.append(client.chat.completions.with_raw_response.create(model="m", messages=msgs))
                except BaseException as e:  # noqa: BLE001 - asserted below
                    errors.append(e)

            threads = [threading.Thread(target=send, args=(c,)) for c in clients]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=120)
            assert errors == [] and len(got) == 2, errors
            seen += [g.headers["x-ctxwise-session"] for g in got]
    finally:
        for proc, _ in procs:
            proc.terminate()
            proc.wait(timeout=30)
        s_server.should_exit = True
    cm = ContextManager(url)
    try:
        for sid in set(seen):
            texts = [m.text for m in cm.session("acme:proxy", sid, create=False).messages if m.role == "user"]
            assert len(texts) == len(set(texts)), (sid, texts)
            assert texts[0].startswith("conversation ")
    finally:
        cm.close()


def test_a_call_upstream_in_one_process_is_seen_from_the_other(store_url: str, tmp_path: Any) -> None:
    """Two ``ctxwise serve`` processes on one database: the same unnamed call sent to the
    second while the first still waits on the upstream is another conversation (as within one
    process), and the same call after the first ended without a reply (an upstream 500)
    continues that session (its retry)."""
    import threading

    import openai

    from ctxwise.server.keys import KeyStore

    from .stub import Reply, Stub

    stub = Stub()
    stub.responder = lambda kind, body: Reply(text="ok")
    stub.gate = threading.Event()
    s_server, _ = stub.start()
    procs = [_serve(store_url, stub.url + "/v1", tmp_path / f"serve{k}.log") for k in range(2)]
    try:
        for k, (proc, base) in enumerate(procs):
            _up(proc, base, tmp_path / f"serve{k}.log")
        ks = KeyStore(store_url)
        key = ks.create("acme", "t")[0]
        ks.close()
        a, b = (openai.OpenAI(base_url=base + "/v1", api_key="sk-x", max_retries=0,
                              default_headers={"X-Ctxwise-Key": key}) for _, base in procs)
        msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "same start"}]
        first = a.chat.completions.with_raw_response.create(model="m", messages=msgs, stream=True)
        sid_a = first.headers["x-ctxwise-session"]  # its stream waits at the stub's gate
        got_a: list[str] = []
        reader = threading.Thread(target=lambda: got_a.extend(
            c.choices[0].delta.content or "" for c in first.parse() if c.choices))
        reader.start()
        second = b.chat.completions.with_raw_response.create(model="m", messages=msgs)
        assert second.headers["x-ctxwise-session"] != sid_a
        assert second.headers.get("x-ctxwise-branched-from") is None
        stub.gate.set()
        reader.join(timeout=60)
        assert "".join(got_a) == "ok"
        # a call that failed upstream in one process: its retry in the other continues it
        stub.fail_next = [500]
        other = [{"role": "user", "content": "another start"}]
        with pytest.raises(openai.InternalServerError):
            a.chat.completions.create(model="m", messages=other)
        retried = b.chat.completions.with_raw_response.create(model="m", messages=other)
        sid_c = retried.headers["x-ctxwise-session"]
        assert sid_c not in (sid_a, second.headers["x-ctxwise-session"])
    finally:
        stub.gate.set()
        for proc, _ in procs:
            proc.terminate()
            proc.wait(timeout=30)
        s_server.should_exit = True
    cm = ContextManager(store_url)
    try:
        for sid in (sid_a, second.headers["x-ctxwise-session"]):
            assert [m.role for m in cm.session("acme:proxy", sid, create=False).messages] == \
                ["system", "user", "assistant"]
        s = cm.session("acme:proxy", sid_c, create=False)
        assert [m.role for m in s.messages] == ["user", "assistant"]
        assert [e["stage"] for e in s.events()].count("retried") == 1
        assert len(cm.store.query_sessions(None, "acme:", 100, 0)) == 3
    finally:
        cm.close()
