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




def test_chat_cache_marks_and_unknown_keys_reach_the_upstream_as_sent(live: Live) -> None:
    """OpenRouter / LiteLLM ``cache_control`` and the SDK's ``prompt_cache_breakpoint`` on a chat
    text part, and a message key ctxwise does not know, pass through on the messages that stand
    unchanged; the next call's marks are that call's own (a moved mark leaves none behind)."""
    live.stub.queue("chat", Reply(text="a1"), Reply(text="a2"))
    cc = {"type": "ephemeral"}
    bp = {"mode": "explicit", "ttl": "30m"}
    h: list[Any] = [{"role": "system", "content": [{"type": "text", "text": "S", "cache_control": cc}]},
                    {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": " there",
                                                                                   "prompt_cache_breakpoint": bp}],
                     "x_meta": {"a": 1}}]
    r = httpx.post(live.openai_base + "/chat/completions", json={"model": "m", "messages": h}, headers={
        "x-ctxwise-key": live.keys["a"], "authorization": f"Bearer {PROVIDER_KEY}", "X-Ctxwise-Session": "cc"})
    assert r.status_code == 200, r.text
    assert live.stub.of("chat")[0].json["messages"] == h
    h = [{"role": "system", "content": "S"},
         {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": " there"}]},
         {"role": "assistant", "content": "a1"},
         {"role": "user", "content": [{"type": "text", "text": "more", "cache_control": cc}]}]
    r2 = httpx.post(live.openai_base + "/chat/completions", json={"model": "m", "messages": h}, headers={
        "x-ctxwise-key": live.keys["a"], "authorization": f"Bearer {PROVIDER_KEY}", "X-Ctxwise-Session": "cc"})
    assert r2.status_code == 200 and r2.headers["x-ctxwise-session"] == "cc"  # the marks are not history
    assert live.stub.of("chat")[1].json["messages"] == h
    assert [m.blocks[0].text for m in session_messages(live, "acme", "proxy", "cc")] == \
        ["S", "hi", "a1", "more", "a2"]
    assert live.stub.invalid == []


def test_the_legacy_function_role_is_refused_with_what_to_send_instead(live: Live) -> None:
    """The deprecated functions API has no call ids to pair a result with its call: a 400 that
    names the message and says what to send, nothing stored, nothing sent upstream."""
    msgs = [{"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}},
            {"role": "function", "name": "f", "content": "res"}]
    r = httpx.post(live.openai_base + "/chat/completions", json={"model": "m", "messages": msgs}, headers={
        "x-ctxwise-key": live.keys["a"], "authorization": f"Bearer {PROVIDER_KEY}", "X-Ctxwise-Session": "fn"})
    assert r.status_code == 400, r.text
    message = r.json()["error"]["message"]
    assert message.startswith("ctxwise: messages[1]: the deprecated functions API ('function_call')")
    assert "'tool' message with that 'tool_call_id'" in message
    r2 = httpx.post(live.openai_base + "/chat/completions", json={"model": "m", "messages": [msgs[0], msgs[2]]},
                    headers={"x-ctxwise-key": live.keys["a"], "authorization": f"Bearer {PROVIDER_KEY}"})
    assert r2.status_code == 400 and "messages[1]: the deprecated functions API (role 'function')" in r2.text
    assert live.stub.requests == []


def test_a_reply_id_two_sessions_hold_continues_the_one_it_is_newest_in(live: Live) -> None:
    """Reply ids are the upstream's (a restarted upstream, or two, can repeat one): a call with
    ``previous_response_id`` continues the session holding that reply as its newest, even when
    another session holds the same id followed by the same next input (a longer prefix there)."""
    from .test_routes import openai_client

    live.stub.queue("responses", Reply(text="r0", response_id="resp_0"), Reply(text="r1", response_id="resp_1"),
                    Reply(text="r0 again", response_id="resp_0"), Reply(text="r1 again", response_id="resp_9"))
    client = openai_client(live)

    def run() -> tuple[str, str]:
        r = client.responses.with_raw_response.create(model="m", input="hello resp", instructions="be nice")
        r2 = client.responses.with_raw_response.create(model="m", input="next", previous_response_id=r.parse().id)
        assert r2.status_code == 200
        return r.headers["x-ctxwise-session"], r2.headers["x-ctxwise-session"]

    a0, a1 = run()
    b0, b1 = run()
    assert a0 == a1 and b0 == b1 and a0 != b0
    assert [i.get("role") for i in live.stub.of("responses")[3].json["input"]] == ["user", "assistant", "user"]
    assert [m.role for m in session_messages(live, "acme", "proxy", b0)] == ["user", "assistant", "user", "assistant"]
    assert [m.role for m in session_messages(live, "acme", "proxy", a0)] == ["user", "assistant", "user", "assistant"]
    assert live.stub.invalid == []
