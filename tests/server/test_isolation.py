"""Tenant isolation over HTTP, against a real server (SQLite and PostgreSQL).

Every endpoint is called with another tenant's key, a revoked key, no key, a malformed key,
and with guessed session and tool_use ids: 401 or 404, and no response text carries the other
tenant's content, user ids or tenant name. Another tenant's session is 404 with the same text as
a session that never existed.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from .conftest import Live, raw

SECRET = "SECRET-A-4471"
USER = "alice-private"
SID = "sess-a-9d2f"
CALL = "call_secret_77"


def seed(live: Live) -> dict[str, Any]:
    """Tenant acme's session with a tool cycle and a memory entry."""
    a = live.client("a")
    batch = [{"role": "system", "content": "You are the acme agent."},
             {"role": "user", "content": f"my code is {SECRET}"},
             {"role": "assistant", "content": None, "tool_calls": [
                 {"id": CALL, "type": "function", "function": {"name": "lookup", "arguments": '{"code": "x"}'}}]},
             {"role": "tool", "tool_call_id": CALL, "content": f"record {SECRET}: balance 12.00"},
             {"role": "assistant", "content": f"Your record {SECRET} is fine."}]
    r = a.post(f"/v1/sessions/{SID}/messages", params={"user_id": USER}, json={"format": "openai", "messages": batch})
    assert r.status_code == 200, raw(r)
    m = a.post(f"/v1/users/{USER}/memory", json={"text": f"prefers code {SECRET}"})
    assert m.status_code == 201, raw(m)
    assert a.get(f"/v1/sessions/{SID}/tool-results/{CALL}", params={"user_id": USER}).status_code == 200
    return {"entry": m.json()["entry"]["id"], "version": r.json()["version"]}


def endpoints(sid: str, user: str, call: str, entry: Any) -> list[tuple[str, str, dict[str, Any], Any]]:
    """Every /v1 route: (method, path, query, json body)."""
    q = {"user_id": user}
    return [
        ("POST", f"/v1/sessions/{sid}/prepare", q, {}),
        ("GET", f"/v1/sessions/{sid}/transcript", q, None),
        ("GET", f"/v1/sessions/{sid}/context", q, None),
        ("GET", f"/v1/sessions/{sid}/events", q, None),
        ("GET", f"/v1/sessions/{sid}/tool-results/{call}", q, None),
        ("DELETE", f"/v1/sessions/{sid}/messages/last", q, None),
        ("POST", f"/v1/sessions/{sid}/messages", q, {"format": "openai", "messages": [{"role": "user", "content": "x"}],
                                                     "expected_version": 3}),
        ("GET", "/v1/sessions", {}, None),
        ("GET", "/v1/sessions", q, None),
        ("GET", f"/v1/users/{user}/memory", {"include_inactive": "true"}, None),
        ("POST", f"/v1/users/{user}/memory", {}, {"text": "a note"}),
        ("DELETE", f"/v1/users/{user}/memory/{entry}", {}, None),
        ("DELETE", f"/v1/users/{user}/memory", {}, None),
    ]


def call(client, method: str, path: str, params: dict[str, Any], body: Any):
    return client.request(method, path, params=params, json=body)


def no_leak(r, *, own: tuple[str, ...] = ()) -> None:
    text = raw(r)
    for secret in (SECRET, "acme", CALL, "You are the acme agent", *own):
        assert secret not in text, (r.request.method, r.request.url.path, text)
    assert "Traceback" not in text and 'File "' not in text


@pytest.mark.parametrize("who", ["revoked", "none", "malformed", "unknown"])
def test_every_endpoint_refuses_a_bad_key_with_401_and_no_leak(live: Live, who: str):
    seeded = seed(live)
    client = {"revoked": lambda: live.client("revoked"), "none": lambda: live.client(None),
              "malformed": lambda: live.client("not-a-key"),
              "unknown": lambda: live.client("ctxw_000000000000_" + "A" * 43)}[who]()
    for method, path, params, body in endpoints(SID, USER, CALL, seeded["entry"]):
        r = call(client, method, path, params, body)
        assert r.status_code == 401, (method, path, raw(r))
        assert r.json()["error"]["type"] == "Unauthorized" and r.headers["www-authenticate"] == "Bearer"
        no_leak(r, own=(USER, SID))
    x = live.client("revoked", **{"X-API-Key": live.keys["a"]})  # two different keys: neither is trusted
    assert x.get("/v1/sessions").status_code == 401
    # the session is untouched by all of the above
    ctx = live.client("a").get(f"/v1/sessions/{SID}/context", params={"user_id": USER}).json()
    assert ctx["version"] == seeded["version"]


def test_another_tenants_key_gets_404_or_its_own_empty_records(live: Live):
    """Kind: a tenant reaching another tenant's session, tool result or memory by guessing or
    knowing its ids (403 would confirm they exist; 404 and the same text as a missing one)."""
    seeded = seed(live)
    b = live.client("b")
    for method, path, params, body in endpoints(SID, USER, CALL, seeded["entry"]):
        r = call(b, method, path, params, body)
        no_leak(r)
        if path == "/v1/sessions":
            assert r.status_code == 200 and r.json()["sessions"] == [], raw(r)
        elif path.endswith("/memory") and method == "GET":
            assert r.status_code == 200 and r.json()["entries"] == []
        elif path.endswith("/memory") and method == "POST":
            assert r.status_code == 201  # globex's own user of that name
        elif path.endswith("/memory") and method == "DELETE":
            assert r.status_code == 200 and r.json()["retracted"] == 1  # only the note globex just added
        else:
            assert r.status_code == 404, (method, path, raw(r))
            # the same text as for a session that never existed
            missing = call(b, method, path.replace(SID, "never-was-" + SID[7:]), params, body)
            assert missing.status_code == 404
            assert r.json()["error"]["message"] == missing.json()["error"]["message"].replace("never-was-" + SID[7:], SID)
    # acme's records are all still there and unchanged
    a = live.client("a")
    ctx = a.get(f"/v1/sessions/{SID}/context", params={"user_id": USER}).json()
    assert ctx["version"] == seeded["version"] and len(ctx["messages"]) == 5
    assert [e["text"] for e in a.get(f"/v1/users/{USER}/memory").json()["entries"]] == [f"prefers code {SECRET}"]
    assert [s["session_id"] for s in a.get("/v1/sessions").json()["sessions"]] == [SID]


def test_guessed_session_and_tool_use_ids_are_404_with_no_leak(live: Live):
    seed(live)
    a = live.client("a")
    guesses = [
        ("GET", f"/v1/sessions/{SID}x/context", {"user_id": USER}),
        ("GET", f"/v1/sessions/{SID}/context", {"user_id": USER + "x"}),  # right session, wrong user
        ("GET", f"/v1/sessions/{SID}/tool-results/call_secret_78", {"user_id": USER}),
        ("GET", f"/v1/sessions/{SID}/tool-results/{CALL}", {"user_id": "bob"}),
        ("GET", f"/v1/sessions/sess-a-9d2e/tool-results/{CALL}", {"user_id": USER}),
        ("POST", f"/v1/sessions/{SID}x/prepare", {"user_id": USER}),
        ("GET", f"/v1/sessions/{SID}%25/events", {"user_id": USER}),
        ("DELETE", f"/v1/users/{USER}/memory/999999", {}),
        ("DELETE", f"/v1/users/{USER}/memory/not-an-id", {}),
    ]
    for method, path, params in guesses:
        r = a.request(method, path, params=params)
        assert r.status_code == 404, (path, raw(r))
        text = raw(r)
        assert SECRET not in text and "acme" not in text and "Traceback" not in text, text
        assert not re.search(r"balance|You are the", text)


def test_revoking_a_key_takes_effect_on_the_next_request(live: Live):
    """Kind: a revoked key still accepted from a cache (another process revoked it)."""
    from typer.testing import CliRunner

    from ctxwise.cli import app

    a2 = live.client("a2")
    assert a2.get("/v1/sessions").status_code == 200
    r = CliRunner().invoke(app, ["keys", "revoke", live.key_ids["a2"], "--db", live.store_url])
    assert r.exit_code == 0, r.output
    assert a2.get("/v1/sessions").status_code == 401
    assert live.client("a").get("/v1/sessions").status_code == 200
