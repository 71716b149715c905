"""Format quirks each adapter must keep (small hand-written inputs in the providers' shapes)."""

from __future__ import annotations

import base64
import json

from ctxwise.formats import (
    dump, from_agentscope, from_anthropic, from_openai, from_responses, load, to_agentscope,
    to_anthropic, to_openai, to_responses,
)
from ctxwise.messages import ImageBlock, Message, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 40).decode()


def _call(cid, name, args):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


def test_openai_content_forms_arguments_and_names_round_trip_exactly():
    chat = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": [{"type": "text", "text": "look"},
                                     {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}", "detail": "low"}}]},
        {"role": "assistant", "content": None, "reasoning_content": "think", "tool_calls": [
            _call("c1", "f", '{"a":1}'), _call("c2", "g", "{\"b\": [1, 2]}")]},
        {"role": "tool", "tool_call_id": "c1", "content": "one"},
        {"role": "tool", "tool_call_id": "c2", "name": "g", "content": ""},
        {"role": "assistant", "content": "", "x_vendor": {"k": 1}},
        {"role": "user", "content": [{"type": "text", "text": "only part"}], "name": "ann"},
        {"role": "developer", "content": "dev"},
    ]
    msgs = from_openai(chat)
    assert isinstance(msgs[2].blocks[0], ThinkingBlock) and msgs[2].blocks[0].signature is None
    img = msgs[1].blocks[1]
    assert isinstance(img, ImageBlock) and img.media_type == "image/png" and img.byte_size == 48
    assert msgs[2].tool_uses[0].input == {"a": 1}
    assert msgs[3].blocks[0].name == "f"  # from the call; not written back
    assert msgs[5].metadata["x_vendor"] == {"k": 1} and msgs[6].name == "ann" and msgs[7].role == "system"
    assert to_openai(msgs) == chat
    assert json.dumps(to_openai(msgs)) == json.dumps(chat)
    clean = to_openai(msgs, extras=False)
    assert "x_vendor" not in clean[5] and clean[3] == chat[3]


def test_openai_tool_message_with_several_results_round_trips():
    m = [Message(id="m0000", role="assistant", blocks=[ToolUseBlock(id="a", name="f"), ToolUseBlock(id="b", name="f")]),
         Message(id="m0001", role="tool", blocks=[ToolResultBlock(tool_use_id="a", name="f", output=[TextBlock(text="1")]),
                                                  ToolResultBlock(tool_use_id="b", name="f", state="error")])]
    out = to_openai(m)
    assert [d["role"] for d in out] == ["assistant", "tool", "tool"]
    assert from_openai(out) == m
    assert [d["role"] for d in to_openai(m, extras=False)] == ["assistant", "tool", "tool"]


def test_anthropic_mixed_user_message_redacted_thinking_errors_images():
    payload = {
        "system": [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "t", "signature": "S1"},
                {"type": "redacted_thinking", "data": "OPAQUE"},
                {"type": "tool_use", "id": "u1", "name": "shot", "input": {}},
                {"type": "tool_use", "id": "u2", "name": "run", "input": {"x": 1}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "u1", "content": [
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}]},
                {"type": "tool_result", "tool_use_id": "u2", "content": "boom", "is_error": True},
                {"type": "text", "text": "and also this"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
        ],
    }
    msgs = from_anthropic(payload)
    assert [m.role for m in msgs] == ["system", "user", "assistant", "tool", "user", "assistant"]
    t = msgs[2].thinking
    assert t[0].signature == "S1" and t[1].redacted and t[1].thinking == "OPAQUE"
    r1, r2 = msgs[3].tool_results
    assert r1.name == "shot" and isinstance(r1.output[0], ImageBlock) and r1.output[0].byte_size == 48
    assert r2.state == "error" and r2.text == "boom" and r2.name == "run"
    assert msgs[4].text == "and also this"
    assert to_anthropic(msgs) == payload
    # through OpenAI chat and AgentScope and back, nothing lost
    assert from_openai(to_openai(msgs)) == msgs
    assert from_agentscope(to_agentscope(msgs)) == msgs


def test_anthropic_merges_consecutive_tool_messages_and_reads_them_back():
    m = [Message(id="m0000", role="user", blocks=[TextBlock(text="q")]),
         Message(id="m0001", role="assistant", blocks=[ToolUseBlock(id="a", name="f"), ToolUseBlock(id="b", name="f")]),
         Message(id="m0002", role="tool", blocks=[ToolResultBlock(tool_use_id="a", name="f")], metadata={"t": 1}),
         Message(id="m0003", role="tool", blocks=[ToolResultBlock(tool_use_id="b", name="f")], metadata={"t": 2})]
    out = to_anthropic(m)
    assert len(out["messages"]) == 3 and [b["tool_use_id"] for b in out["messages"][2]["content"]] == ["a", "b"]
    assert from_anthropic(out) == m
    clean = to_anthropic(m, extras=False)
    assert "_ctxwise" not in json.dumps(clean)
    assert [x.role for x in from_anthropic(clean)] == ["user", "assistant", "tool"]  # documented: one tool message


def test_responses_reasoning_item_kept_and_regrouped():
    items = [
        {"role": "user", "content": "hi"},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "a"},
                                                         {"type": "summary_text", "text": "b"}],
         "encrypted_content": "ENC"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "x", "annotations": []}]},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": [{"type": "input_text", "text": "r"}]},
    ]
    msgs = from_responses(items)
    assert [m.role for m in msgs] == ["user", "assistant", "tool"]
    assert msgs[1].blocks[0].thinking == "a\n\nb"
    assert to_responses(msgs) == items
    edited = msgs[1].model_copy(update={"blocks": [ThinkingBlock(thinking="new"), *msgs[1].blocks[1:]]})
    assert to_responses([msgs[0], edited, msgs[2]], extras=False)[1] == {
        "type": "reasoning", "summary": [{"type": "summary_text", "text": "new"}]}


def test_load_variants_and_dump_wrappers(tmp_path):
    chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    p = tmp_path / "w.json"
    p.write_text(json.dumps({"model": "m", "messages": chat, "temperature": 0}))
    (conv,) = load(p)
    assert conv.format == "openai" and conv.id == "w" and dump(conv, "openai") == json.loads(p.read_text())
    j = tmp_path / "c.jsonl"
    j.write_text("\n".join(json.dumps(x) for x in ({"messages": chat}, chat)) + "\n")
    convs = load(j)
    assert [c.id for c in convs] == ["c#0", "c#1"] and all(c.messages[1].text == "yo" for c in convs)
    a = tmp_path / "a.json"
    a.write_text(json.dumps({"session_id": "s", "context": [{"role": "USER", "content": [{"type": "text", "text": "x"}]}]}))
    (ac,) = load(a)
    assert ac.format == "agentscope" and dump(ac, "agentscope") == json.loads(a.read_text())
    assert dump(ac.messages, "openai") == [{"role": "user", "content": "x"}]


def test_responses_function_call_without_call_id_or_with_non_json_arguments_is_refused():
    # kind: a function_call the provider cannot take back (no call_id to pair its output with, or
    # arguments that are not JSON) was stored and later sent as '{}' or left unpaired; now it is
    # a FormatError naming the item, before anything is stored.
    import pytest

    from ctxwise.errors import FormatError
    from ctxwise.formats import from_responses

    user = {"role": "user", "content": "hi"}
    bad = [{"type": "function_call", "name": "lookup", "arguments": "{}"},
           {"type": "function_call", "call_id": "", "name": "lookup", "arguments": "{}"},
           {"type": "function_call", "call_id": "c1", "arguments": "{}"},
           {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{not json"}]
    for item in bad:
        with pytest.raises(FormatError) as e:
            from_responses([user, item])
        assert "item 1" in str(e.value), str(e.value)
    ok = from_responses([user, {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": ""}])
    assert ok[1].tool_uses[0].input == {}
