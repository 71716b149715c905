"""The hot path (:mod:`ctxwise.server.hot`) answers appends and prepares exactly as the FastAPI
routes do: two real servers on one store, one with it and one without, get the same requests,
ordinary and odd, and give the same status, headers that matter and body."""

from __future__ import annotations

import json
from typing import Any

import httpx

from ctxwise.server.keys import KeyStore

from .conftest import make_keys, start_server, stop_server

HEADERS = ("content-type", "www-authenticate", "retry-after")

TOOL_TURN = [
    {"role": "system", "content": "You are a support agent."},
    {"role": "user", "content": "Where is order 1234? I prefer e-mail updates."},
    {"role": "assistant", "content": None,
     "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "order", "arguments": "{\"id\": 1234}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "shipped 2026-11-30"},
]


def _requests(sid: str, uid: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(name, key, request kwargs) in order, on the session ``sid`` of user ``uid``."""
    base = f"/v1/sessions/{sid}"
    q = {"user_id": uid}
    canonical = [{"id": "m1", "role": "user", "blocks": [{"type": "text", "text": "Hello"}]}]
    return [
        ("first append", "a", dict(method="POST", url=base + "/messages", params=q,
                                   json={"format": "openai", "messages": TOOL_TURN, "expected_version": 0})),
        ("prepare", "a", dict(method="POST", url=base + "/prepare", params=q, json={})),
        ("prepare with tools", "a", dict(method="POST", url=base + "/prepare", params=q, json={"tools": [
            {"type": "function", "function": {"name": "order", "parameters": {"type": "object"}}}]})),
        ("stale version", "a", dict(method="POST", url=base + "/messages", params=q,
                                    json={"format": "canonical", "messages": canonical, "expected_version": 0})),
        ("canonical append", "a", dict(method="POST", url=base + "/messages", params=q,
                                       json={"format": "canonical", "messages": canonical})),
        ("duplicate id", "a", dict(method="POST", url=base + "/messages", params=q,
                                   json={"format": "canonical", "messages": canonical})),
        ("orphan tool result", "a", dict(method="POST", url=base + "/messages", params=q, json={
            "format": "openai", "messages": [{"role": "tool", "tool_call_id": "nope", "content": "x"}]})),
        ("prepare stale expected", "a", dict(method="POST", url=base + "/prepare", params=q,
                                             json={"expected_version": 1})),
        ("prepare, empty body", "a", dict(method="POST", url=base + "/prepare", params=q)),
        ("unknown key", "ctxw_0123456789ab_" + "x" * 43, dict(method="POST", url=base + "/prepare", params=q, json={})),
        ("revoked key", "revoked", dict(method="POST", url=base + "/prepare", params=q, json={})),
        ("malformed key", "not-a-key", dict(method="POST", url=base + "/prepare", params=q, json={})),
        ("no key", None, dict(method="POST", url=base + "/messages", params=q,
                              json={"format": "canonical", "messages": canonical})),
        ("another tenant", "b", dict(method="POST", url=base + "/prepare", params=q, json={})),
        ("missing session", "a", dict(method="POST", url=base + "-none/prepare", params=q, json={})),
        ("extra field", "a", dict(method="POST", url=base + "/messages", params=q,
                                  json={"format": "canonical", "messages": [], "more": 1})),
        ("bad format", "a", dict(method="POST", url=base + "/messages", params=q,
                                 json={"format": "xml", "messages": []})),
        ("not JSON", "a", dict(method="POST", url=base + "/messages", params=q, content=b"{nope",
                               headers={"Content-Type": "application/json"})),
        ("JSON null", "a", dict(method="POST", url=base + "/prepare", params=q, content=b"null",
                                headers={"Content-Type": "application/json"})),
        ("text/plain", "a", dict(method="POST", url=base + "/prepare", params=q, content=b"{}",
                                 headers={"Content-Type": "text/plain"})),
        ("no user_id", "a", dict(method="POST", url=base + "/prepare", json={})),
        ("user_id twice", "a", dict(method="POST", url=base + "/prepare", params=[("user_id", uid), ("user_id", "u2")],
                                    json={})),
        ("control character", "a", dict(method="POST", url=base + "/prepare", params={"user_id": "u\x01"}, json={})),
        ("user_id too long", "a", dict(method="POST", url=base + "/prepare", params={"user_id": "u" * 191}, json={})),
        ("GET", "a", dict(method="GET", url=base + "/prepare", params=q)),
        ("empty batch", "a", dict(method="POST", url=base + "/messages", params=q,
                                  json={"format": "canonical", "messages": []})),
        ("last prepare", "a", dict(method="POST", url=base + "/prepare", params=q, json={})),
    ]


def _answer(r: httpx.Response, sid: str, uid: str) -> tuple[int, dict[str, str | None], Any]:
    body = r.content.decode().replace(sid, "SID").replace(uid, "UID")
    try:
        parsed: Any = json.loads(body)
    except ValueError:
        parsed = body
    if isinstance(parsed, dict) and "latency_ms" in parsed:
        parsed["latency_ms"] = "..."
    return r.status_code, {h: r.headers.get(h) for h in HEADERS}, parsed


def test_the_hot_path_answers_as_the_routes_do(store_url: str) -> None:
    hot_server, hot_thread, hot_url = start_server(store_url)
    cold_server, cold_thread, cold_url = start_server(store_url, hot=False)
    keys, _ids = make_keys(store_url)
    try:
        answers: dict[str, list[Any]] = {}
        # a user each: the user's long-term memory (from the first append) shows in the other's payload
        for url, sid, uid in ((hot_url, "s-hot", "u-hot"), (cold_url, "s-cold", "u-cold")):
            for name, key, kw in _requests(sid, uid):
                headers = dict(kw.pop("headers", {}))
                if key is not None:
                    headers["Authorization"] = f"Bearer {keys.get(key, key)}"
                with httpx.Client(base_url=url, timeout=60) as c:
                    r = c.request(headers=headers, **kw)
                answers.setdefault(name, []).append(_answer(r, sid, uid))
        for name, (hot, cold) in answers.items():
            assert hot == cold, name
        # the cases that are ordinary were answered by the hot path, the others by FastAPI
        hot_app = hot_server.config.app
        assert cold_server.config.app.hot is None
        assert hot_app.hot.answered == 14, hot_app.hot.answered  # the 14 well-formed, keyed, valid requests
        statuses = {name: a[0][0] for name, a in answers.items()}
        assert statuses["first append"] == statuses["prepare"] == statuses["last prepare"] == 200
        assert statuses["stale version"] == 409 and statuses["revoked key"] == 401
    finally:
        stop_server(hot_server, hot_thread)
        stop_server(cold_server, cold_thread)
        KeyStore(store_url).close()
