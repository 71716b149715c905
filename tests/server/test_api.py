"""The /v1 API against a real uvicorn server (SQLite and PostgreSQL): recorded conversations
appended and prepared over HTTP give byte for byte the library's payloads; errors are JSON with
the library's text and the right status; optimistic versions make retries safe."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ctxwise import ContextManager
from ctxwise.formats import load, to_openai
from ctxwise.providers import render
from tests.conftest import TRAJECTORIES

from .conftest import POLICY, Live, canonical_json, raw

RETAIL = TRAJECTORIES / "tau2-bench" / "retail_gpt-4.1_1trial.json"
CLAUDE = TRAJECTORIES / "tau2-bench" / "airline_claude-sonnet-4-5-thinking_subset.json"


def model_calls(messages: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The batches an agent appends: what arrived before each model call (a call is a recorded
    assistant message after the first user message), then the trailing rest."""
    batches: list[list[dict[str, Any]]] = [[]]
    seen_user = False
    for m in messages:
        seen_user = seen_user or m["role"] == "user"
        if m["role"] == "assistant" and seen_user and batches[-1]:
            batches.append([])
        batches[-1].append(m)
    return batches


def test_recorded_conversation_over_http_gives_the_library_payload_byte_for_byte(live: Live, tmp_path):
    """Kind: the service's payload drifting from the library's (a serializer, a policy, a
    reopened session that differs from a live one). Every call of two recorded retail
    conversations, under a budget that makes compaction fire, compared as bytes."""
    http = live.client()
    fired = 0
    with ContextManager(f"sqlite:///{tmp_path / 'lib.db'}", POLICY) as cm:
        for conv in load(RETAIL)[:2]:
            msgs = to_openai(conv.messages, extras=False)
            lib = cm.session("alice", conv.id)
            for batch in model_calls(msgs):
                r = http.post(f"/v1/sessions/{conv.id}/messages", params={"user_id": "alice"},
                              json={"format": "openai", "messages": batch})
                assert r.status_code == 200, raw(r)
                version = lib.append_openai(batch)
                assert r.json()["version"] == version
                if batch[-1]["role"] == "assistant" and not batch[-1].get("tool_calls"):
                    continue  # a final reply: the next call comes after the next user message
                p = http.post(f"/v1/sessions/{conv.id}/prepare", params={"user_id": "alice"})
                assert p.status_code == 200, raw(p)
                mine = lib.prepare()
                body = p.json()
                assert canonical_json(body["payload"]) == canonical_json(mine.payload)
                assert json.loads(raw(p))["payload"] == mine.payload
                # the bytes on the wire: the library's payload, serialized once, as they are
                assert ('"payload":' + canonical_json(mine.payload)).encode("utf-8") in p.content
                assert (body["size"], body["size_before"], body["chars"]) == (mine.size, mine.size_before, mine.chars)
                assert [e["stage"] for e in body["events"]] == [e.stage for e in mine.events]
                fired += bool(body["events"])
            t = http.get(f"/v1/sessions/{conv.id}/transcript", params={"user_id": "alice"}).json()["rows"]
            assert [(r["role"], r["text"]) for r in t] == [(r.role, r.text) for r in lib.transcript()]
            ev = http.get(f"/v1/sessions/{conv.id}/events", params={"user_id": "alice"}).json()["events"]
            assert [e["stage"] for e in ev] == [e["stage"] for e in lib.events()]
    assert fired > 0  # compaction really ran over HTTP


def test_anthropic_and_canonical_shapes_give_the_library_payload(live: Live, tmp_path):
    """Kind: a body shape read differently over HTTP (Anthropic thinking blocks and signatures,
    canonical ids). The Claude thinking recording in both shapes, as provider anthropic."""
    policy = POLICY.with_(provider="anthropic", budget=60_000)
    from .conftest import start_server, stop_server

    server, thread, url = start_server(live.store_url, policy)
    try:
        import httpx

        http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {live.keys['a']}"}, timeout=60)
        conv = load(CLAUDE)[0]
        wire = render(conv.messages, "anthropic")
        with ContextManager(f"sqlite:///{tmp_path / 'lib.db'}", policy) as cm:
            lib_a, lib_c = cm.session("u", "anth"), cm.session("u", "canon")
            first = True
            for batch in model_calls(wire["messages"]):
                body: dict[str, Any] = {"format": "anthropic", "messages": batch}
                if first:
                    body["system"] = wire["system"]
                    lib_a.append_anthropic({"system": wire["system"], "messages": batch})
                else:
                    lib_a.append_anthropic(batch)
                first = False
                assert http.post("/v1/sessions/anth/messages", params={"user_id": "u"}, json=body).status_code == 200
                if batch[-1]["role"] == "user":
                    p = http.post("/v1/sessions/anth/prepare", params={"user_id": "u"})
                    assert p.status_code == 200, raw(p)
                    assert canonical_json(p.json()["payload"]) == canonical_json(lib_a.prepare().payload)
            # canonical: the Message dicts with their own ids, one model call at a time
            dumped = [m.model_dump(mode="json") for m in conv.messages]
            for batch in model_calls(dumped):
                assert http.post("/v1/sessions/canon/messages", params={"user_id": "u"},
                                 json={"format": "canonical", "messages": batch}).status_code == 200
                lib_c.append(batch)
            p = http.post("/v1/sessions/canon/prepare", params={"user_id": "u"})
            assert p.status_code == 200, raw(p)
            assert canonical_json(p.json()["payload"]) == canonical_json(lib_c.prepare().payload)
            ctx = http.get("/v1/sessions/canon/context", params={"user_id": "u"}).json()
            assert [m["id"] for m in ctx["messages"]] == [m.id for m in lib_c.messages]
        http.close()
    finally:
        stop_server(server, thread)


def test_bad_batch_is_422_with_the_library_text_and_changes_nothing(live: Live):
    """Kind: a user mistake answered with a traceback or a 500, or half stored."""
    http = live.client()
    ok = http.post("/v1/sessions/s1/messages", params={"user_id": "u"},
                   json={"format": "openai", "messages": [{"role": "system", "content": "be brief"},
                                                          {"role": "user", "content": "hi"}]})
    assert ok.status_code == 200
    version = ok.json()["version"]
    bad = http.post("/v1/sessions/s1/messages", params={"user_id": "u"},
                    json={"format": "canonical", "messages": [
                        {"id": "x1", "role": "user", "blocks": [{"type": "text", "text": "again"}]},
                        {"id": "x2", "role": "user", "blocks": [{"type": "text", "text": "   "}]}]})
    assert bad.status_code == 422, raw(bad)
    err = bad.json()["error"]
    assert err["type"] == "PayloadInvalid" and err["hint"]
    assert err["violations"] and err["violations"][0]["index"] == 3 and err["violations"][0]["rule"]
    assert f"message 3 (appended id 'x2'): [{err['violations'][0]['rule']}]" in err["message"]
    assert err["violations"][0]["where"] == "appended id 'x2'"
    assert "Traceback" not in raw(bad) and "acme" not in raw(bad)
    ctx = http.get("/v1/sessions/s1/context", params={"user_id": "u"}).json()
    assert ctx["version"] == version and len(ctx["messages"]) == 2  # nothing stored


def test_request_errors_are_one_line(live: Live):
    """Kind: a malformed request (not JSON, too large, a missing field) answered with a stack
    trace or a multi-line validation dump."""
    http = live.client()
    url, q = "/v1/sessions/s1/messages", {"user_id": "u"}
    cases = [
        http.post(url, params=q, content=b"{not json", headers={"Content-Type": "application/json"}),
        http.post(url, params=q, content=b"hello", headers={"Content-Type": "text/plain"}),
        http.post(url, params=q, json={"format": "yaml", "messages": []}),
        http.post(url, json={"format": "openai", "messages": []}),  # no user_id
    ]
    for r in cases:
        assert r.status_code == 422, raw(r)
        err = r.json()["error"]
        assert "\n" not in err["message"] and "Traceback" not in raw(r), err
    assert "not JSON" in cases[0].json()["error"]["message"]
    assert "not JSON" in cases[1].json()["error"]["message"]
    assert cases[2].json()["error"]["message"].startswith("format:")
    assert "user_id" in cases[3].json()["error"]["message"]
    big = http.post(url, params=q, content=b"x" * (16 * 2**20 + 1), headers={"Content-Type": "application/json"})
    assert big.status_code == 413 and big.json()["error"]["type"] == "RequestTooLarge"
    missing = http.get("/v1/nothing-here")
    assert missing.status_code == 404 and missing.json()["error"]["message"] == "Not Found"


def test_expected_version_makes_a_retry_safe_and_a_race_is_409(live: Live):
    """Kind: a retried append stored twice, or a lost update between two writers. A client that
    resends with the version it read gets 409 when the first attempt went through."""
    http = live.client()
    q = {"user_id": "u"}
    first = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    v1 = http.post("/v1/sessions/r/messages", params=q, json={"format": "openai", "messages": first,
                                                              "expected_version": 0}).json()["version"]
    assert v1 == 1
    reply = {"format": "openai", "messages": [{"role": "assistant", "content": "hello"}], "expected_version": v1}
    assert http.post("/v1/sessions/r/messages", params=q, json=reply).status_code == 200
    again = http.post("/v1/sessions/r/messages", params=q, json=reply)  # the retry of an append that went through
    assert again.status_code == 409 and again.json()["error"]["type"] == "SessionConflict"
    assert again.headers["retry-after"] == "1"
    ctx = http.get("/v1/sessions/r/context", params=q).json()
    assert [m["role"] for m in ctx["messages"]] == ["system", "user", "assistant"]  # stored once
    stale = http.post("/v1/sessions/r/prepare", params=q, json={"expected_version": v1})
    assert stale.status_code == 409


def test_session_list_is_paged_filtered_and_tenant_scoped(live: Live):
    a, b = live.client("a"), live.client("b")
    for i in range(5):
        user = "u1" if i % 2 else "u2"
        assert a.post(f"/v1/sessions/s{i}/messages", params={"user_id": user},
                      json={"format": "openai", "messages": [{"role": "user", "content": f"hi {i}"}]}).status_code == 200
    assert b.post("/v1/sessions/s0/messages", params={"user_id": "u2"},
                  json={"format": "openai", "messages": [{"role": "user", "content": "other tenant"}]}).status_code == 200
    page1 = a.get("/v1/sessions", params={"limit": 3}).json()["sessions"]
    page2 = a.get("/v1/sessions", params={"limit": 3, "offset": 3}).json()["sessions"]
    assert [s["session_id"] for s in page1 + page2] == ["s4", "s3", "s2", "s1", "s0"]
    assert {s["user_id"] for s in page1 + page2} == {"u1", "u2"}
    assert [s["session_id"] for s in a.get("/v1/sessions", params={"user_id": "u1"}).json()["sessions"]] == ["s3", "s1"]
    theirs = b.get("/v1/sessions").json()["sessions"]
    assert [(s["user_id"], s["session_id"]) for s in theirs] == [("u2", "s0")]


def test_user_memory_add_list_forget_clear(live: Live):
    http = live.client()
    added = http.post("/v1/users/alice/memory", json={"text": "prefers over-ear headphones"})
    assert added.status_code == 201, raw(added)
    entry = added.json()["entry"]
    assert http.post("/v1/users/alice/memory", json={"text": "lives in Lisbon", "kind": "profile"}).status_code == 201
    listed = http.get("/v1/users/alice/memory").json()["entries"]
    assert [e["text"] for e in listed] == ["prefers over-ear headphones", "lives in Lisbon"]
    assert http.delete(f"/v1/users/alice/memory/{entry['id']}").status_code == 200
    gone = http.delete(f"/v1/users/alice/memory/{entry['id']}")
    assert gone.status_code == 404 and gone.json()["error"]["type"] == "MemoryEntryNotFound"
    assert http.delete("/v1/users/alice/memory").json()["retracted"] == 1
    assert http.get("/v1/users/alice/memory").json()["entries"] == []


def test_health_readiness_and_openapi(live: Live):
    anon = live.client(None)
    assert anon.get("/healthz").json() == {"status": "ok"}
    assert anon.get("/readyz").json() == {"status": "ready"}
    spec = anon.get("/openapi.json").json()
    paths = set(spec["paths"])
    for p in ("/v1/sessions/{session_id}/messages", "/v1/sessions/{session_id}/prepare",
              "/v1/sessions/{session_id}/transcript", "/v1/sessions/{session_id}/context",
              "/v1/sessions/{session_id}/events", "/v1/sessions/{session_id}/tool-results/{tool_use_id}",
              "/v1/sessions/{session_id}/messages/last", "/v1/sessions", "/v1/users/{user_id}/memory"):
        assert p in paths, p
    assert anon.get("/docs").status_code == 200
    http = live.client()
    r = http.post("/v1/sessions/t/messages", params={"user_id": "u"},
                  json={"format": "openai", "messages": [{"role": "user", "content": "hi"}]})
    steps = [part.split(";")[0] for part in r.headers["server-timing"].split(", ")]
    assert steps == ["auth", "open", "append", "total", "cache"]  # where a request's time goes
    assert 'cache;desc="miss"' in r.headers["server-timing"]  # a new session: nothing cached yet
    p = http.post("/v1/sessions/t/prepare", params={"user_id": "u"})
    parts = p.headers["server-timing"].split(", ")
    assert [part.split(";")[0] for part in parts] == ["auth", "open", "prepare", "total", "cache"]
    assert all(float(part.split("dur=")[1]) >= 0 for part in parts if "dur=" in part)
    assert parts[-1] == 'cache;desc="hit"'  # the session the append opened, checked and kept


@pytest.mark.parametrize("key", ["a2"])
def test_two_keys_of_one_tenant_see_the_same_sessions(live: Live, key: str):
    a, other = live.client("a"), live.client(key)
    assert a.post("/v1/sessions/shared/messages", params={"user_id": "u"},
                  json={"format": "openai", "messages": [{"role": "user", "content": "hi"}]}).status_code == 200
    assert other.get("/v1/sessions/shared/context", params={"user_id": "u"}).status_code == 200


def test_delete_last_message_retracts_it_and_a_retry_with_the_old_version_is_409(live: Live):
    """Kind: an undo that is not durable or not exactly once (DELETE retried after a timeout
    must not retract a second message)."""
    http = live.client()
    q = {"user_id": "u"}
    v = http.post("/v1/sessions/p/messages", params=q, json={"format": "openai", "messages": [
        {"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"}]}).json()["version"]
    r = http.delete("/v1/sessions/p/messages/last", params={**q, "expected_version": v})
    assert r.status_code == 200, raw(r)
    assert r.json()["message"]["role"] == "assistant" and r.json()["version"] == v + 1
    again = http.delete("/v1/sessions/p/messages/last", params={**q, "expected_version": v})
    assert again.status_code == 409
    ctx = http.get("/v1/sessions/p/context", params=q).json()
    assert [m["role"] for m in ctx["messages"]] == ["system", "user"]
    rows = http.get("/v1/sessions/p/transcript", params=q).json()["rows"]
    assert rows[-1]["status"] == "retracted" and rows[-1]["text"] == "hello"  # the transcript keeps it, marked
    assert [e["stage"] for e in http.get("/v1/sessions/p/events", params=q).json()["events"]] == ["popped"]


def test_a_server_with_another_policy_serves_old_sessions_with_their_stored_policy(live: Live, tmp_path):
    """Kind: a restarted server (new policy file) that cannot serve the sessions it stored, or
    serves them under the new policy without a word."""
    from .conftest import start_server, stop_server

    http = live.client()
    conv = load(RETAIL)[0]
    msgs = to_openai(conv.messages, extras=False)
    batches = model_calls(msgs)
    http.post("/v1/sessions/old/messages", params={"user_id": "u"}, json={"format": "openai", "messages": batches[0]})
    other = POLICY.with_(budget=9000, provider="deepseek")
    server, thread, url = start_server(live.store_url, other)
    try:
        import httpx

        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {live.keys['a']}"}, timeout=60) as h2:
            p = h2.post("/v1/sessions/old/prepare", params={"user_id": "u"})
            assert p.status_code == 200, raw(p)
            assert p.json()["provider"] == POLICY.provider  # the stored one, not deepseek
            with ContextManager(f"sqlite:///{tmp_path / 'lib.db'}", POLICY) as cm:
                lib = cm.session("u", "old")
                lib.append_openai(batches[0])
                assert canonical_json(p.json()["payload"]) == canonical_json(lib.prepare().payload)
            assert h2.post("/v1/sessions/new/messages", params={"user_id": "u"},
                           json={"format": "openai", "messages": batches[0]}).status_code == 200
            assert h2.get("/v1/sessions/new/context", params={"user_id": "u"}).json()["provider"] == "deepseek"
    finally:
        stop_server(server, thread)


def test_a_reused_call_id_recalls_the_body_the_placeholder_names(live: Live):
    """Kind: a session that reuses a tool call id (tau-bench recordings do): the placeholder
    names ``"call_0, message_id m"``; the HTTP recall takes that key as it is (URL-encoded), or
    the id with ``?message_id=``, and returns that message's body, never the other call's."""
    from urllib.parse import quote

    http = live.client()
    batch: list[dict] = [{"role": "system", "content": "agent"}]
    for k in range(2):
        batch += [{"role": "user", "content": f"order {k}?"},
                  {"role": "assistant", "content": None, "tool_calls": [
                      {"id": "call_0", "type": "function", "function": {"name": "get_order", "arguments": "{}"}}]},
                  {"role": "tool", "tool_call_id": "call_0", "content": f"BODY-{k} " + "x" * 50},
                  {"role": "assistant", "content": f"order {k} ok"}]
    r = http.post("/v1/sessions/reuse/messages", params={"user_id": "u"}, json={"format": "openai", "messages": batch})
    assert r.status_code == 200, raw(r)
    ctx = http.get("/v1/sessions/reuse/context", params={"user_id": "u"}).json()["messages"]
    tool_ids = [m["id"] for m in ctx if m["role"] == "tool"]
    assert len(tool_ids) == 2
    for k, mid in enumerate(tool_ids):
        for path, q in ((f"call_0, message_id {mid}", {}), ("call_0", {"message_id": mid})):
            got = http.get(f"/v1/sessions/reuse/tool-results/{quote(path, safe='')}", params={"user_id": "u", **q})
            assert got.status_code == 200, raw(got)
            body = got.json()
            assert body["message_id"] == mid and f"BODY-{k}" in json.dumps(body["message"]), body
    wrong = http.get("/v1/sessions/reuse/tool-results/call_0", params={"user_id": "u", "message_id": "no-such"})
    assert wrong.status_code == 404
    other = http.get("/v1/sessions/reuse/tool-results/call_9", params={"user_id": "u", "message_id": tool_ids[0]})
    assert other.status_code == 404  # the message holds no result of call_9
    # a call id with a slash (any id the store takes), URL-encoded as the README says
    r = http.post("/v1/sessions/reuse/messages", params={"user_id": "u"}, json={"format": "openai", "messages": [
        {"role": "user", "content": "one more"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "fn/a/b", "type": "function", "function": {"name": "get_order", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "fn/a/b", "content": "BODY-SLASH"}]})
    assert r.status_code == 200, raw(r)
    got = http.get(f"/v1/sessions/reuse/tool-results/{quote('fn/a/b', safe='')}", params={"user_id": "u"})
    assert got.status_code == 200 and got.json()["tool_use_id"] == "fn/a/b", raw(got)
    assert "BODY-SLASH" in json.dumps(got.json()["message"])


def test_prepare_says_when_the_payload_needs_anthropics_beta_api(live: Live):
    """Kind: a REST client holding MCP connector blocks gets a payload the standard Messages API
    refuses with no word of it. ``beta`` names the feature, its header names and the messages
    (the library's ``Prepared.beta``); a session without such blocks gets ``[]``."""
    from .conftest import start_server, stop_server

    server, thread, url = start_server(live.store_url, POLICY.with_(provider="anthropic", budget=60_000))
    try:
        import httpx

        http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {live.keys['a']}"}, timeout=60)
        use = {"type": "mcp_tool_use", "id": "mcptoolu_01", "name": "lookup", "server_name": "crm", "input": {"q": 1}}
        res = {"type": "mcp_tool_result", "tool_use_id": "mcptoolu_01", "content": [{"type": "text", "text": "ok"}]}
        first = {"format": "anthropic", "system": "Be brief.", "messages": [{"role": "user", "content": "Find A1."}]}
        assert http.post("/v1/sessions/b/messages", params={"user_id": "u"}, json=first).status_code == 200
        p = http.post("/v1/sessions/b/prepare", params={"user_id": "u"})
        assert p.status_code == 200, raw(p)
        assert p.json()["beta"] == []
        more = {"format": "anthropic", "messages": [{"role": "assistant", "content": [use, res]},
                                                    {"role": "user", "content": "Thanks."}]}
        assert http.post("/v1/sessions/b/messages", params={"user_id": "u"}, json=more).status_code == 200
        p = http.post("/v1/sessions/b/prepare", params={"user_id": "u"})
        assert p.status_code == 200, raw(p)
        [need] = p.json()["beta"]
        assert need["feature"] == "mcp-client" and need["block_types"] == ["mcp_tool_use", "mcp_tool_result"]
        assert "mcp-client-2025-11-20" in need["headers"] and len(need["message_ids"]) == 1
        http.close()
    finally:
        stop_server(server, thread)
