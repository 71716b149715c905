"""Request shapes a fresh-user check found mishandled (issue 27): each is passed through as the
client sent it or refused with a 400 in the provider's error shape that names the message and
says what to send; never a 500, never a silent drop."""
from __future__ import annotations

from typing import Any

import httpx

from .conftest import PROVIDER_KEY, Live
from .stub import Reply
from .test_routes import session_messages


def _post(live: Live, path: str, raw: bytes, **headers: str) -> httpx.Response:
    return httpx.post(live.openai_base + path, content=raw, headers={
        "content-type": "application/json", "x-ctxwise-key": live.keys["a"],
        "authorization": f"Bearer {PROVIDER_KEY}", "x-api-key": PROVIDER_KEY,
        "anthropic-version": "2023-06-01", **headers})


def test_a_lone_surrogate_is_a_400_naming_the_message_and_stores_nothing(live: Live) -> None:
    """``"\\ud83d"`` alone is valid JSON but no Unicode text (no UTF-8 form): refused, naming the field."""
    chat = b'{"model":"m","messages":[{"role":"user","content":"ok"},{"role":"assistant","content":"a"},' \
           b'{"role":"user","content":"cut emoji \\ud83d"}]}'
    r = _post(live, "/chat/completions", chat, **{"X-Ctxwise-Session": "sur"})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error" and "messages[2].content" in err["message"]
    assert "U+D83D" in err["message"]
    msgs = b'{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"x\\uDE00"}]}]}'
    r2 = _post(live, "/messages", msgs)
    assert r2.status_code == 400 and r2.json()["type"] == "error"
    assert "messages[0].content[0].text" in r2.json()["error"]["message"]
    assert live.stub.requests == []
    # a whole character written as its escaped pair is text: it goes through and is stored
    live.stub.queue("chat", Reply(text="fine"))
    ok = _post(live, "/chat/completions",
               b'{"model":"m","messages":[{"role":"user","content":"emoji \\ud83d\\ude00"}]}',
               **{"X-Ctxwise-Session": "sur"})
    assert ok.status_code == 200, ok.text
    assert [m.blocks[0].text for m in session_messages(live, "acme", "proxy", "sur")] == ["emoji \U0001F600", "fine"]


