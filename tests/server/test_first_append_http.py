"""Kind: a refused first append over HTTP that leaves an empty session behind (issue 28, the
low items): a 422 on a new session's first batch, then the session listed and readable. The
session is stored by its first successful write, so nothing is left (SQLite and PostgreSQL)."""

from __future__ import annotations

from .conftest import Live


def test_a_refused_first_append_leaves_no_session(live: Live) -> None:
    http = live.client()
    bad = http.post("/v1/sessions/new1/messages", params={"user_id": "u"},
                    json={"format": "canonical", "messages": [
                        {"id": "x1", "role": "user", "blocks": [{"type": "text", "text": "hi"}]},
                        {"id": "x2", "role": "user", "blocks": [{"type": "text", "text": "   "}]}]})
    assert bad.status_code == 422, bad.text
    assert http.get("/v1/sessions/new1/context", params={"user_id": "u"}).status_code == 404
    listed = http.get("/v1/sessions", params={"user_id": "u"})
    assert listed.status_code == 200 and "new1" not in listed.text, listed.text
    ok = http.post("/v1/sessions/new1/messages", params={"user_id": "u"},
                   json={"format": "openai", "messages": [{"role": "user", "content": "hi"}]})
    assert ok.status_code == 200 and ok.json()["version"] == 1, ok.text
    assert http.get("/v1/sessions/new1/context", params={"user_id": "u"}).status_code == 200
