"""The SDK round trip: ``prepare().payload`` handed to the real ``anthropic`` / ``openai``
clients (over ``httpx.MockTransport``, ``httpx2.MockTransport`` for anthropic 2.x, no network) goes on the wire unchanged and holds only
keys the API documents; agent loops feed the SDK's reply objects straight back with
``append_anthropic`` / ``append_openai``.

Kinds of fault covered: a payload the SDK rewrites or rejects before sending (a key it does
not know, a wrong shape), and an agent loop that has to convert SDK objects by hand (or
breaks when tool results arrive in their own batch).
"""

from __future__ import annotations

import json

import anthropic
import httpx
import httpx2  # the anthropic SDK's own fork of httpx (its http_client must come from it)
import openai
import pytest

from ctxwise import ContextManager, Policy
from ctxwise.providers import PROFILES, check_wire

TOOL = "get_order"


def _anthropic_reply(n: int) -> dict:
    """A Messages API response: a tool call first, then a final answer."""
    if n == 0:
        content = [{"type": "text", "text": "Let me look."},
                   {"type": "tool_use", "id": "toolu_01", "name": TOOL, "input": {"order_id": "W123"}}]
        stop = "tool_use"
    else:
        content = [{"type": "text", "text": "Order W123 was delivered on 2024-05-02."}]
        stop = "end_turn"
    return {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": "claude-x", "content": content,
            "stop_reason": stop, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 5}}


def _chat_reply(n: int) -> dict:
    if n == 0:
        msg = {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_01", "type": "function", "function": {"name": TOOL, "arguments": "{\"order_id\": \"W123\"}"}}]}
        reason = "tool_calls"
    else:
        msg = {"role": "assistant", "content": "Order W123 was delivered on 2024-05-02."}
        reason = "stop"
    return {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": 0, "model": "gpt-x",
            "choices": [{"index": 0, "message": msg, "finish_reason": reason}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


def _responses_reply(n: int) -> dict:
    if n == 0:
        output = [{"type": "function_call", "id": "fc_01", "call_id": "call_01", "name": TOOL,
                   "arguments": "{\"order_id\": \"W123\"}", "status": "completed"}]
    else:
        output = [{"type": "message", "id": "msg_01", "role": "assistant", "status": "completed",
                   "content": [{"type": "output_text", "text": "Delivered.", "annotations": []}]}]
    return {"id": f"resp_{n}", "object": "response", "created_at": 0, "model": "gpt-x", "output": output,
            "status": "completed", "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}


class Wire:
    """A MockTransport that records every request body and answers with scripted replies."""

    def __init__(self, reply):
        self.bodies: list[dict] = []
        self.reply = reply

    def __call__(self, request):
        self.bodies.append(json.loads(request.content))
        return self.http.Response(200, json=self.reply(len(self.bodies) - 1))

    def client(self, http=httpx):
        """An http client of module ``http`` (``httpx`` for openai, ``httpx2`` for anthropic)."""
        self.http = http
        return http.Client(transport=http.MockTransport(self))


def _session(tmp_path, provider):
    cm = ContextManager(f"sqlite:///{tmp_path}/s.db", Policy.preset("default", provider=provider))
    return cm, cm.session("u", "s")


def _documented(body_part, provider):
    assert check_wire(body_part, provider) == []


def test_anthropic_loop_with_sdk_objects_round_trips_on_the_wire(tmp_path):
    """``client.messages.create(**prepare().payload)``: the body on the wire is the payload
    plus model / max_tokens; the SDK ``Message`` reply and a tool-result batch of its own are
    appended with ``append_anthropic`` and the next request pairs them."""
    wire = Wire(_anthropic_reply)
    client = anthropic.Anthropic(api_key="x", http_client=wire.client(httpx2))
    cm, s = _session(tmp_path, "anthropic")
    s.append_anthropic({"system": "You are a support agent.", "messages": [{"role": "user", "content": "Where is W123?"}]})
    for turn in range(2):
        payload = s.prepare().payload
        reply = client.messages.create(model="claude-x", max_tokens=512, **payload)
        assert wire.bodies[-1] == {"model": "claude-x", "max_tokens": 512, **payload}
        _documented({k: v for k, v in wire.bodies[-1].items() if k in ("system", "messages")}, "anthropic")
        assert isinstance(reply, anthropic.types.Message)
        s.append_anthropic(reply)  # the SDK object itself
        if reply.stop_reason == "tool_use":
            call = next(b for b in reply.content if b.type == "tool_use")
            s.append_anthropic([{"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": call.id, "content": "delivered 2024-05-02"}]}])
    last = wire.bodies[-1]["messages"]
    assert [m["role"] for m in last] == ["user", "assistant", "user"]
    assert last[2]["content"][0]["tool_use_id"] == last[1]["content"][1]["id"] == "toolu_01"
    assert [m.id for m in s.messages] == [f"msg-{k:06d}" for k in range(1, 6)]  # the session's own numbering
    # reply.content alone is one assistant message
    s.append_anthropic([{"role": "user", "content": "Thanks"}])
    s.append_anthropic(anthropic.types.Message.model_validate(_anthropic_reply(1)).content)
    assert s.messages[-1].role == "assistant" and "W123" in s.messages[-1].text
    cm.close()


@pytest.mark.parametrize("provider", [p for p, prof in PROFILES.items() if prof.wire == "chat"])
def test_chat_loop_with_sdk_objects_round_trips_on_the_wire(tmp_path, provider):
    """``client.chat.completions.create(messages=prepare().payload)`` sends the payload
    unchanged; ``append_openai`` takes ``ChatCompletionMessage`` objects."""
    wire = Wire(_chat_reply)
    client = openai.OpenAI(api_key="x", http_client=wire.client())
    cm, s = _session(tmp_path, provider)
    s.append_openai([{"role": "system", "content": "You are a support agent."}, {"role": "user", "content": "Where is W123?"}])
    for turn in range(2):
        payload = s.prepare().payload
        reply = client.chat.completions.create(model="gpt-x", messages=payload)
        assert wire.bodies[-1] == {"model": "gpt-x", "messages": payload}
        _documented(wire.bodies[-1]["messages"], provider)
        msg = reply.choices[0].message
        s.append_openai(msg)  # a ChatCompletionMessage, not a dict
        for call in msg.tool_calls or []:
            s.append_openai([{"role": "tool", "tool_call_id": call.id, "content": "delivered 2024-05-02"}])
    sent = wire.bodies[-1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool"]
    assert sent[3]["tool_call_id"] == sent[2]["tool_calls"][0]["id"] == "call_01"
    cm.close()


def test_responses_payload_round_trips_on_the_wire(tmp_path):
    """``client.responses.create(input=prepare().payload)`` sends the items unchanged."""
    wire = Wire(_responses_reply)
    client = openai.OpenAI(api_key="x", http_client=wire.client())
    cm, s = _session(tmp_path, "openai_responses")
    from ctxwise.formats import from_responses

    s.append([m.model_copy(update={"id": f"in-{k}"}) for k, m in enumerate(from_responses(
        [{"type": "message", "role": "system", "content": "You are a support agent."},
         {"type": "message", "role": "user", "content": "Where is W123?"}]))])
    for turn in range(2):
        payload = s.prepare().payload
        reply = client.responses.create(model="gpt-x", input=payload)
        assert wire.bodies[-1] == {"model": "gpt-x", "input": payload}
        _documented(wire.bodies[-1]["input"], "openai_responses")
        items = [o.model_dump(mode="json", exclude_none=True) for o in reply.output]
        read = from_responses(items)
        s.append([m.model_copy(update={"id": f"out-{turn}-{k}"}) for k, m in enumerate(read)])
        if turn == 0:
            out = from_responses(items + [{"type": "function_call_output", "call_id": "call_01", "output": "delivered"}])[-1]
            s.append([out.model_copy(update={"id": "result-0"})])
    sent = wire.bodies[-1]["input"]
    assert [it["type"] for it in sent] == ["message", "message", "function_call", "function_call_output"]
    assert sent[2]["call_id"] == sent[3]["call_id"] == "call_01" and sent[2]["id"] == "fc_01"
    cm.close()


def test_append_anthropic_refuses_a_result_without_its_call_and_stores_nothing(tmp_path):
    """Kind: a tool_result answering no tool_use of the message before it (Anthropic: "unexpected
    tool_use_id found in tool_result blocks"): FormatError naming the message, nothing stored,
    the session's id numbering not advanced."""
    from ctxwise.errors import FormatError

    cm, s = _session(tmp_path, "anthropic")
    s.append_anthropic([{"role": "user", "content": "Where is W123?"}])
    before = (s.version, s.messages)
    with pytest.raises(FormatError) as e:
        s.append_anthropic([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "x"}]}])
    assert "item 0 of this append" in str(e.value) and "[orphan-tool-result]" in str(e.value)
    assert (s.version, s.messages) == before
    s.append_anthropic(anthropic.types.Message.model_validate(_anthropic_reply(1)))
    assert [m.id for m in s.messages] == ["msg-000001", "msg-000002"]
    cm.close()


def test_anthropic_cache_control_marks_reach_the_wire_and_stay_within_four(tmp_path):
    """Kind: a documented request key the caller set that the renderer dropped without a word
    (Anthropic ``cache_control``: without it nothing is cached). Marks on the system prompt,
    user text, tool_use and tool_result blocks go out on the wire; an agent marking its newest
    message on every turn never sends more than Anthropic's 4 per request (the system mark
    and the newest ones are kept); thinking is never marked."""
    wire = Wire(_anthropic_reply)
    client = anthropic.Anthropic(api_key="x", http_client=wire.client(httpx2))
    cm, s = _session(tmp_path, "anthropic")
    eph = {"type": "ephemeral"}
    s.append_anthropic({"system": [{"type": "text", "text": "You are a support agent.", "cache_control": eph}],
                        "messages": [{"role": "user", "content": [{"type": "text", "text": "Where is W123?",
                                                                   "cache_control": eph}]}]})
    for turn in range(4):
        payload = s.prepare().payload
        client.messages.create(model="claude-x", max_tokens=512, **payload)
        body = wire.bodies[-1]
        assert body["system"] == payload["system"] and body["messages"] == payload["messages"]
        _documented({k: v for k, v in body.items() if k in ("system", "messages")}, "anthropic")
        text = json.dumps(body)
        assert 1 <= text.count('"cache_control"') <= 4, text
        assert body["system"][0]["cache_control"] == eph  # the static prefix keeps its mark
        s.append_anthropic([
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "look it up", "signature": "sig"},
                {"type": "tool_use", "id": f"toolu_{turn}", "name": "track", "input": {"order": "W123"},
                 "cache_control": eph}]},
        ])
        s.append_anthropic([{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{turn}", "content": "in transit", "cache_control": eph}]}])
    last = s.prepare().payload
    marks = [b for m in last["messages"] if isinstance(m["content"], list) for b in m["content"] if "cache_control" in b]
    assert len(marks) == 3 and marks[-1]["type"] == "tool_result" and marks[-1]["tool_use_id"] == "toolu_3"
    assert all("cache_control" not in b for m in last["messages"] if isinstance(m["content"], list)
               for b in m["content"] if b["type"] == "thinking")
    cm.close()
