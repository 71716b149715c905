"""The per-process session cache (ctxwise.server.sessions) on two nodes over one database
(SQLite and PostgreSQL): a node keeps the sessions it opened, and never serves one that the
other node changed since: its next request sees the other node's write, the payload is byte for
byte what a fresh library session gives, and a client sees 409 only for a real conflict."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from ctxwise import ContextManager
from ctxwise.formats import load, to_openai
from ctxwise.server import create_app

from .conftest import POLICY, Live, canonical_json, raw, start_server, stop_server
from .test_api import RETAIL, model_calls


@pytest.fixture
def two(live: Live) -> Iterator[tuple[httpx.Client, httpx.Client]]:
    """Node A (the ``live`` server) and node B (a second server on the same store), each with
    tenant acme's key."""
    server2, thread2, url2 = start_server(live.store_url)
    b = httpx.Client(base_url=url2, headers={"Authorization": f"Bearer {live.keys['a']}"}, timeout=60)
    try:
        yield live.client("a"), b
    finally:
        b.close()
        stop_server(server2, thread2)


def cache_state(r: httpx.Response) -> str:
    """``hit``, ``miss`` or ``stale``: how the node got the session (its Server-Timing)."""
    parts = dict(p.split(";", 1) for p in r.headers["server-timing"].split(", "))
    return parts["cache"].removeprefix('desc="').removesuffix('"')


def user_text(text: str, i: str) -> dict:
    return {"id": i, "role": "user", "blocks": [{"type": "text", "text": text}]}


Q = {"user_id": "u"}


def test_a_write_on_one_node_is_seen_by_the_other_nodes_next_request(two, live: Live, tmp_path):
    """Kind: a node serving the session as it cached it after another node wrote (a stale
    context or payload), for every way a node gets a session: read, prepare, append."""
    a, b = two
    conv = load(RETAIL)[0]
    batches = model_calls(to_openai(conv.messages, extras=False))
    assert b.post("/v1/sessions/s/messages", params=Q, json={"format": "openai", "messages": batches[0]}).status_code == 200
    first = b.post("/v1/sessions/s/prepare", params=Q)
    assert first.status_code == 200 and cache_state(first) == "hit"  # B keeps what it opened
    # A writes: B's copy is now behind
    r = a.post("/v1/sessions/s/messages", params=Q, json={"format": "canonical", "messages": [user_text("one more", "x1")]})
    assert r.status_code == 200, raw(r)
    version = r.json()["version"]
    ctx = b.get("/v1/sessions/s/context", params=Q)
    assert cache_state(ctx) == "stale"
    assert ctx.json()["version"] == version and ctx.json()["messages"][-1]["id"] == "x1"
    # the payload B sends is the one a fresh library session gives, byte for byte
    r = a.post("/v1/sessions/s/messages", params=Q, json={"format": "canonical", "messages": [user_text("and two", "x2")]})
    p = b.post("/v1/sessions/s/prepare", params=Q)
    assert p.status_code == 200 and cache_state(p) == "stale"
    with ContextManager(live.store_url) as cm:
        fresh = cm.session("acme:u", "s", create=False).prepare()
    assert ('"payload":' + canonical_json(fresh.payload)).encode("utf-8") in p.content
    assert p.json()["payload"][-1]["content"] == "and two"
    # an append on B after A wrote: made on the current session (no 409: the client had no version)
    r = a.post("/v1/sessions/s/messages", params=Q, json={"format": "canonical", "messages": [user_text("three", "x3")]})
    r = b.post("/v1/sessions/s/messages", params=Q, json={"format": "canonical", "messages": [user_text("four", "x4")]})
    assert r.status_code == 200, raw(r)
    assert cache_state(r) == "stale"
    ids = [m["id"] for m in a.get("/v1/sessions/s/context", params=Q).json()["messages"]]
    assert ids[-4:] == ["x1", "x2", "x3", "x4"]


def test_a_batch_valid_only_after_the_other_nodes_write_is_accepted(two):
    """Kind: a stale copy refusing a valid batch: the tool results arrive at node B for a tool
    call appended on node A, which B's cached copy has not seen."""
    a, b = two
    start = [{"role": "system", "content": "You help."}, {"role": "user", "content": "weather in Paris?"}]
    assert b.post("/v1/sessions/t/messages", params=Q, json={"format": "openai", "messages": start}).status_code == 200
    call = [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}]}]
    assert a.post("/v1/sessions/t/messages", params=Q, json={"format": "openai", "messages": call}).status_code == 200
    result = [{"role": "tool", "tool_call_id": "call_1", "content": "18 C, cloudy"}]
    r = b.post("/v1/sessions/t/messages", params=Q, json={"format": "openai", "messages": result})
    assert r.status_code == 200, raw(r)
    p = b.post("/v1/sessions/t/prepare", params=Q)
    assert p.status_code == 200, raw(p)
    assert [m["role"] for m in p.json()["payload"]] == ["system", "user", "assistant", "tool"]


def test_a_real_conflict_is_still_409_and_a_stale_client_version_too(two):
    """Kind: the cache hiding a conflict (two writers on one version both accepted) or turning a
    stale client's retry into a second copy."""
    a, b = two
    assert a.post("/v1/sessions/c/messages", params=Q, json={"format": "canonical", "messages": [user_text("hi", "m1")]}).status_code == 200
    v = b.get("/v1/sessions/c/context", params=Q).json()["version"]  # both nodes hold version v now
    assert a.get("/v1/sessions/c/context", params=Q).json()["version"] == v
    won = a.post("/v1/sessions/c/messages", params=Q,
                 json={"format": "canonical", "messages": [user_text("from A", "m2")], "expected_version": v})
    assert won.status_code == 200
    lost = b.post("/v1/sessions/c/messages", params=Q,
                  json={"format": "canonical", "messages": [user_text("from B", "m3")], "expected_version": v})
    assert lost.status_code == 409, raw(lost)
    # the same batch sent again after a lost answer: refused by id, stored once
    again = b.post("/v1/sessions/c/messages", params=Q,
                   json={"format": "canonical", "messages": [user_text("from A", "m2")]})
    assert again.status_code == 422 and "duplicate-message-id" in raw(again)
    ids = [m["id"] for m in b.get("/v1/sessions/c/context", params=Q).json()["messages"]]
    assert ids == ["m1", "m2"]


def test_memory_retracted_on_one_node_leaves_the_other_nodes_payload(two, live: Live):
    """Kind: a cached session keeping a user-memory block another node changed (memory writes
    do not move the session's version)."""
    a, b = two
    entry = a.post("/v1/users/u/memory", json={"text": "prefers window seats"}).json()["entry"]
    assert b.post("/v1/sessions/m/messages", params=Q,
                  json={"format": "canonical", "messages": [user_text("book me a flight", "u1")]}).status_code == 200
    assert b.post("/v1/sessions/m/prepare", params=Q).status_code == 200  # (a new session's first check may reopen)
    p = b.post("/v1/sessions/m/prepare", params=Q)
    assert p.status_code == 200 and cache_state(p) == "hit"
    assert "prefers window seats" in p.text
    assert a.delete(f"/v1/users/u/memory/{entry['id']}").status_code == 200
    p = b.post("/v1/sessions/m/prepare", params=Q)
    assert p.status_code == 200 and cache_state(p) == "stale"
    assert "prefers window seats" not in p.text
    with ContextManager(live.store_url) as cm:
        fresh = cm.session("acme:u", "m", create=False).prepare()
    assert canonical_json(p.json()["payload"]) == canonical_json(fresh.payload)


def test_the_cache_is_bounded_and_can_be_turned_off(store_url: str):
    """Kind: an unbounded per-process cache (memory growing with every session ever served)."""
    from fastapi.testclient import TestClient

    from .conftest import make_keys

    keys: dict[str, str] = {}
    for size, kept in ((2, 2), (0, 0)):
        app = create_app(store_url, POLICY, session_cache=size)
        keys = keys or make_keys(store_url)[0]
        with TestClient(app) as http:
            for i in range(4):
                r = http.post(f"/v1/sessions/b{size}-{i}/messages", params=Q, headers={"X-API-Key": keys["a"]},
                              json={"format": "canonical", "messages": [user_text("hi", "h")]})
                assert r.status_code == 200, raw(r)
                assert cache_state(r) == "miss"
            r = http.get(f"/v1/sessions/b{size}-3/context", params=Q, headers={"X-API-Key": keys["a"]})
            assert cache_state(r) == ("hit" if size else "miss")
            assert len(app.state.server.sessions) == kept


def test_a_prepare_on_a_current_session_reads_the_store_once(live: Live):
    """Kind: round trips a request makes beyond its work (each one, under load, is a wait for
    the process's one running thread): a prepare on a session the node holds current makes one
    read, the key check and the session's freshness in one statement, and nothing else (the
    freshness read is the library's version check: it is not made again). Counted for every
    engine in the process."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    a = live.client("a")
    start = [{"role": "system", "content": "You help."}, {"role": "user", "content": "hello"}]
    assert a.post("/v1/sessions/r/messages", params=Q, json={"format": "openai", "messages": start}).status_code == 200
    seen: list[str] = []

    def record(_conn, _cursor, statement, *_a) -> None:  # type: ignore[no-untyped-def]
        seen.append(" ".join(statement.split()))

    event.listen(Engine, "before_cursor_execute", record)
    try:
        for k in range(3):
            seen.clear()
            p = a.post("/v1/sessions/r/prepare", params=Q)
            assert p.status_code == 200 and cache_state(p) == "hit", raw(p)
            assert len(seen) == 1, seen
            assert "ctxwise_api_keys" in seen[0] and "user_memory" in seen[0], seen
            more = [{"role": "assistant", "content": f"answer {k}"}, {"role": "user", "content": f"more {k}"}]
            assert a.post("/v1/sessions/r/messages", params=Q,
                          json={"format": "openai", "messages": more}).status_code == 200
    finally:
        event.remove(Engine, "before_cursor_execute", record)
