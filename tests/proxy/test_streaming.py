"""Streamed calls through the proxy: SSE passed on as the upstream sends it, the reply assembled
from the stream and recorded, a client that leaves mid-stream leaving a valid session."""
from __future__ import annotations

import threading
from typing import Any

from .conftest import Live
from .stub import Reply
from .test_routes import ANTH_TOOLS, CHAT_TOOLS, RESP_TOOLS, anthropic_client, openai_client, session_messages


def test_openai_chat_stream_tool_loop(live: Live) -> None:
    live.stub.queue("chat", Reply(calls=[("call_s", "get_weather", {"city": "Lima"})]), Reply(text="Mild and grey."))
    client = openai_client(live, **{"X-Ctxwise-Session": "s-chat"})
    msgs: list[Any] = [{"role": "user", "content": "Lima?"}]
    chunks = list(client.chat.completions.create(model="gpt-4o", messages=msgs, tools=CHAT_TOOLS, stream=True))
    calls = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
    args = "".join(tc.function.arguments or "" for tc in calls if tc.function)
    assert calls[0].id == "call_s" and args == '{"city": "Lima"}'
    msgs += [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_s", "type": "function", "function": {"name": "get_weather", "arguments": args}}]},
        {"role": "tool", "tool_call_id": "call_s", "content": "17C"}]
    text = "".join(c.choices[0].delta.content or "" for c in
                   client.chat.completions.create(model="gpt-4o", messages=msgs, tools=CHAT_TOOLS, stream=True))
    assert text == "Mild and grey."
    assert live.stub.invalid == []
    stored = session_messages(live, "acme", "proxy", "s-chat")
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[-1].blocks[0].text == "Mild and grey."


def test_openai_responses_stream(live: Live) -> None:
    live.stub.queue("responses", Reply(text="Streaming works."))
    client = openai_client(live, **{"X-Ctxwise-Session": "s-resp"})
    with client.responses.stream(model="gpt-5", input=[{"role": "user", "content": "go"}], tools=RESP_TOOLS) as st:
        deltas = [e.delta for e in st if e.type == "response.output_text.delta"]
        final = st.get_final_response()
    assert "".join(deltas) == "Streaming works." == final.output_text
    assert [m.role for m in session_messages(live, "acme", "proxy", "s-resp")] == ["user", "assistant"]


def test_anthropic_stream_with_thinking_and_tool_use(live: Live) -> None:
    live.stub.queue("messages", Reply(thinking="Think first.", calls=[("toolu_s", "get_weather", {"city": "Bonn"})]),
                    Reply(text="Rainy."))
    client = anthropic_client(live, **{"X-Ctxwise-Session": "s-anth"})
    msgs: list[Any] = [{"role": "user", "content": "Bonn?"}]
    with client.messages.stream(model="claude-sonnet-4-5", max_tokens=2048, messages=msgs, tools=ANTH_TOOLS,
                                thinking={"type": "enabled", "budget_tokens": 1024}) as st:
        first = st.get_final_message()
    assert [b.type for b in first.content] == ["thinking", "tool_use"]
    msgs += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_s", "content": "9C"}]}]
    with client.messages.stream(model="claude-sonnet-4-5", max_tokens=2048, messages=msgs, tools=ANTH_TOOLS,
                                thinking={"type": "enabled", "budget_tokens": 1024}) as st:
        assert st.get_final_text() == "Rainy."
    assert live.stub.invalid == []
    sent = live.stub.of("messages")[1].json["messages"]
    assert sent[1]["content"][0] == {"type": "thinking", "thinking": "Think first.",
                                     "signature": first.content[0].signature}  # type: ignore[union-attr]
    stored = session_messages(live, "acme", "proxy", "s-anth")
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]


def test_first_byte_reaches_the_client_before_the_upstream_finishes(live: Live) -> None:
    live.stub.gate = threading.Event()
    live.stub.queue("messages", Reply(text="Slow but sure."))
    client = anthropic_client(live, **{"X-Ctxwise-Session": "s-gate"})
    with client.messages.stream(model="m", max_tokens=64, messages=[{"role": "user", "content": "hi"}]) as st:
        it = iter(st)
        first = next(it)  # the stub is still held after its first event: this is not a buffered stream
        assert first.type == "message_start" and not live.stub.gate.is_set()
        live.stub.gate.set()
        assert "".join(e.delta.text for e in it if e.type == "content_block_delta"  # type: ignore[union-attr]
                       and e.delta.type == "text_delta") == "Slow but sure."


def test_client_leaving_mid_stream_leaves_a_valid_session(live: Live) -> None:
    live.stub.gate = threading.Event()
    live.stub.queue("messages", Reply(text="never seen"), Reply(text="Second try."))
    client = anthropic_client(live, **{"X-Ctxwise-Session": "s-left"})
    msgs = [{"role": "user", "content": "hi"}]
    with client.messages.stream(model="m", max_tokens=64, messages=msgs) as st:
        next(iter(st))  # the client leaves after the first event; the upstream is still held
    r = client.messages.create(model="m", max_tokens=64, messages=msgs)  # the client retries
    assert r.content[0].text == "Second try."  # type: ignore[union-attr]
    stored = session_messages(live, "acme", "proxy", "s-left")
    assert [m.role for m in stored] == ["user", "assistant"]
    assert stored[-1].blocks[0].text == "Second try."  # type: ignore[union-attr]
    live.stub.gate.set()
    assert live.stub.invalid == []


def test_responses_stream_with_previous_response_id(live: Live) -> None:
    live.stub.queue("responses", Reply(text="First."), Reply(text="Second."))
    client = openai_client(live, **{"X-Ctxwise-Session": "s-prev"})
    with client.responses.stream(model="gpt-5", input=[{"role": "user", "content": "one"}]) as st:
        first = st.get_final_response()
    with client.responses.stream(model="gpt-5", input="two", previous_response_id=first.id) as st:
        assert st.get_final_response().output_text == "Second."
    sent = live.stub.of("responses")[1].json
    assert "previous_response_id" not in sent and [i.get("role") for i in sent["input"]] == ["user", "assistant", "user"]
    assert [m.role for m in session_messages(live, "acme", "proxy", "s-prev")] == ["user", "assistant", "user", "assistant"]
