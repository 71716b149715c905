"""Recall by id through the proxy (X-Ctxwise-Recall: on): the recall tool offered upstream, its
calls answered by the proxy from the session's originals; the client sees only the final reply."""
from __future__ import annotations

from typing import Any

from ctxwise import RECALL_TOOL_NAME

from .conftest import Live
from .stub import Reply
from .test_routes import anthropic_client, openai_client, session_messages

BODY = "build log: 4,812 lines; FAILED test_payment_refund at line 3301 (KeyError 'currency')\n" * 3


def test_chat_recall_is_answered_inside_the_proxy(live: Live) -> None:
    live.stub.queue("chat", Reply(calls=[("call_r1", RECALL_TOOL_NAME, {"tool_use_id": "call_log"})]),
                    Reply(text="The refund test failed on a missing currency."))
    client = openai_client(live, **{"X-Ctxwise-Session": "recall-chat", "X-Ctxwise-Recall": "on"})
    msgs: list[Any] = [{"role": "user", "content": "why did the build fail?"},
                       {"role": "assistant", "content": None, "tool_calls": [
                           {"id": "call_log", "type": "function", "function": {"name": "read_log", "arguments": "{}"}}]},
                       {"role": "tool", "tool_call_id": "call_log", "content": BODY}]
    r = client.chat.completions.create(model="m", messages=msgs, tools=[{"type": "function", "function": {
        "name": "read_log", "parameters": {"type": "object", "properties": {}}}}])
    assert r.choices[0].message.content == "The refund test failed on a missing currency."
    assert not r.choices[0].message.tool_calls  # the client never sees the recall call
    seen = live.stub.of("chat")
    assert len(seen) == 2 and live.stub.invalid == []
    assert [t["function"]["name"] for t in seen[0].json["tools"]] == ["read_log", RECALL_TOOL_NAME]
    second = seen[1].json["messages"]
    assert second[-2]["tool_calls"][0]["function"]["name"] == RECALL_TOOL_NAME
    assert second[-1]["role"] == "tool" and "FAILED test_payment_refund" in second[-1]["content"]
    roles = [m.role for m in session_messages(live, "acme", "proxy", "recall-chat")]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    # the client's next call continues the same session (its history has no recall round)
    msgs += [{"role": "assistant", "content": r.choices[0].message.content}, {"role": "user", "content": "fix it"}]
    raw = client.chat.completions.with_raw_response.create(model="m", messages=msgs)
    assert raw.headers["x-ctxwise-session"] == "recall-chat" and "x-ctxwise-branched-from" not in raw.headers


def test_anthropic_recall_then_a_client_tool(live: Live) -> None:
    live.stub.queue("messages", Reply(calls=[("toolu_r", RECALL_TOOL_NAME, {"tool_use_id": "toolu_log"})]),
                    Reply(calls=[("toolu_fix", "edit_file", {"path": "pay.py"})]))
    client = anthropic_client(live, **{"X-Ctxwise-Session": "recall-anth", "X-Ctxwise-Recall": "on"})
    msgs: list[Any] = [{"role": "user", "content": "why did the build fail?"},
                       {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_log", "name": "read_log",
                                                          "input": {}}]},
                       {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_log",
                                                     "content": BODY}]}]
    r = client.messages.create(model="m", max_tokens=256, messages=msgs,
                               tools=[{"name": "read_log", "input_schema": {"type": "object"}},
                                      {"name": "edit_file", "input_schema": {"type": "object"}}])
    assert [b.type for b in r.content] == ["tool_use"] and r.content[0].name == "edit_file"  # type: ignore[union-attr]
    seen = live.stub.of("messages")
    assert len(seen) == 2 and live.stub.invalid == []
    last = seen[1].json["messages"][-1]["content"][0]
    assert last["type"] == "tool_result" and last["tool_use_id"] == "toolu_r"


def _log_history_responses() -> list[Any]:
    return [{"role": "user", "content": "why did the build fail?"},
            {"type": "function_call", "call_id": "call_log", "name": "read_log", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_log", "output": BODY}]


def test_responses_recall_is_answered_inside_the_proxy(live: Live) -> None:
    live.stub.queue("responses", Reply(calls=[("call_r", RECALL_TOOL_NAME, {"tool_use_id": "call_log",
                                                                             "message_id": None, "offset": None})]),
                    Reply(text="A missing currency."))
    client = openai_client(live, **{"X-Ctxwise-Session": "recall-resp", "X-Ctxwise-Recall": "on"})
    r = client.responses.create(model="gpt-5", input=_log_history_responses(),
                                tools=[{"type": "function", "name": "read_log", "strict": False,
                                        "parameters": {"type": "object", "properties": {}}}])
    assert r.output_text == "A missing currency."
    assert not [o for o in r.output if o.type == "function_call"]  # the client never sees the recall call
    seen = live.stub.of("responses")
    assert len(seen) == 2 and live.stub.invalid == []
    assert [t["name"] for t in seen[0].json["tools"]] == ["read_log", RECALL_TOOL_NAME]
    answer = seen[1].json["input"][-1]
    assert answer["type"] == "function_call_output" and answer["call_id"] == "call_r"
    assert "FAILED test_payment_refund" in answer["output"]
    roles = [m.role for m in session_messages(live, "acme", "proxy", "recall-resp")]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant"]


def test_streamed_chat_recall_streams_the_answer(live: Live) -> None:
    live.stub.queue("chat", Reply(calls=[("call_r1", RECALL_TOOL_NAME, {"tool_use_id": "call_log"})]),
                    Reply(text="The refund test failed on a missing currency."))
    client = openai_client(live, **{"X-Ctxwise-Session": "recall-stream", "X-Ctxwise-Recall": "on"})
    msgs: list[Any] = [{"role": "user", "content": "why did the build fail?"},
                       {"role": "assistant", "content": None, "tool_calls": [
                           {"id": "call_log", "type": "function", "function": {"name": "read_log", "arguments": "{}"}}]},
                       {"role": "tool", "tool_call_id": "call_log", "content": BODY}]
    chunks = list(client.chat.completions.create(model="m", messages=msgs, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "The refund test failed on a missing currency."
    assert not [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]  # no recall call reaches it
    seen = live.stub.of("chat")
    assert len(seen) == 2 and live.stub.invalid == [] and all(s.json.get("stream") is True for s in seen)
    assert seen[1].json["messages"][-1]["role"] == "tool" and "FAILED" in seen[1].json["messages"][-1]["content"]
    roles = [m.role for m in session_messages(live, "acme", "proxy", "recall-stream")]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant"]


def test_streamed_anthropic_recall(live: Live) -> None:
    live.stub.queue("messages", Reply(calls=[("toolu_r", RECALL_TOOL_NAME, {"tool_use_id": "toolu_log"})]),
                    Reply(text="Currency."))
    client = anthropic_client(live, **{"X-Ctxwise-Session": "recall-anth-stream", "X-Ctxwise-Recall": "on"})
    msgs: list[Any] = [{"role": "user", "content": "why?"},
                       {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_log", "name": "read_log",
                                                          "input": {}}]},
                       {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_log",
                                                     "content": BODY}]}]
    with client.messages.stream(model="m", max_tokens=256, messages=msgs,
                                tools=[{"name": "read_log", "input_schema": {"type": "object"}}]) as st:
        final = st.get_final_message()
    assert [b.type for b in final.content] == ["text"] and final.content[0].text == "Currency."  # type: ignore[union-attr]
    assert len(live.stub.of("messages")) == 2 and live.stub.invalid == []
    last = live.stub.of("messages")[1].json["messages"][-1]["content"][0]
    assert last["type"] == "tool_result" and last["tool_use_id"] == "toolu_r"
