"""The wire check: rendered payloads against the SDK request types and the provider rules.

Kinds of fault covered (one test each, named in its docstring): a key the API does not
document (round-trip extras such as ``_openai`` / ``_responses`` leaking into a payload), a
missing required key, a wrong type, a tool call id repeated within one request, and ctxwise's
own schema drifting from the SDK types.
"""

from __future__ import annotations

import typing

import anthropic  # noqa: F401  importing the SDKs turns the SDK half of the wire check on
import openai  # noqa: F401
import pytest
from pydantic import ValidationError

from conftest import TRAJECTORIES
from ctxwise import ContextManager, Policy
from ctxwise.engine import mark_empty_result
from ctxwise.errors import PayloadInvalid
from ctxwise.formats import from_openai, from_responses, load
from ctxwise.providers import PROFILES, check_wire, render, validate_wire
from ctxwise.providers import wire_types as own
from ctxwise.providers.wire import _OWN, _sdk_types, sdk_available, strict_validator

PROVIDERS = tuple(PROFILES)

# (kind, a valid value, an extra key, a missing required key, a wrong type) -- nested where
# the SDK nests, so closing only the top-level type would not be enough.
SHAPES = [
    ("chat:assistant",
     {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
     {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}", "_openai": {}}}]},
     {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"arguments": "{}"}}]},
     {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": {}}}]}),
    ("chat:tool",
     {"role": "tool", "tool_call_id": "c1", "content": "ok"},
     {"role": "tool", "tool_call_id": "c1", "content": "ok", "name": "f"},
     {"role": "tool", "content": "ok"},
     {"role": "tool", "tool_call_id": "c1", "content": 3}),
    ("anthropic:user",
     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "ok"}]},
     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "ok", "_openai": {"no_name": True}}]},
     {"role": "user", "content": [{"type": "tool_result", "content": "ok"}]},
     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "is_error": "yes"}]}),
    ("anthropic:assistant",
     {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "s"},
                                       {"type": "tool_use", "id": "c1", "name": "f", "input": {}}]},
     {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "f", "input": {}, "_ctxwise": {}}]},
     {"role": "assistant", "content": [{"type": "thinking", "thinking": "t"}]},
     {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "f", "input": "{}"}]}),
    ("responses:reasoning",
     {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "t"}], "encrypted_content": "e"},
     {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "t", "_responses": {}}]},
     {"type": "reasoning", "summary": []},
     {"type": "reasoning", "id": "rs_1", "summary": "t"}),
    ("responses:function_call",
     {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
     {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}", "_responses": {"item": {}}},
     {"type": "function_call", "name": "f", "arguments": "{}"},
     {"type": "function_call", "call_id": "c1", "name": "f", "arguments": {"a": 1}}),
]


def _validators(kind: str):
    out = [("ctxwise", strict_validator(_OWN[kind]))]
    sdk = _sdk_types()
    assert sdk is not None, "the test extra installs the anthropic and openai SDKs"
    out.append(("SDK", strict_validator(sdk[kind])))
    return out


@pytest.mark.parametrize("kind,ok,extra,missing,wrong", SHAPES, ids=[s[0] for s in SHAPES])
def test_extra_missing_and_wrong_type_each_fail(kind, ok, extra, missing, wrong):
    """Kinds: an undocumented key (at any depth), a missing required key, a wrong type. Both
    ctxwise's own schema and the SDK type (closed by ctxwise) accept the valid value and
    refuse each fault with the matching pydantic error type."""
    for who, v in _validators(kind):
        v(ok)
        for bad, err in ((extra, "extra_forbidden"), (missing, "missing"), (wrong, None)):
            with pytest.raises(ValidationError) as e:
                v(bad)
            if err is not None:
                assert err in {x["type"] for x in e.value.errors()}, (who, kind, e.value.errors())


def _keys(tp) -> tuple[set[str], set[str]]:
    return set(tp.__required_keys__), set(tp.__required_keys__) | set(tp.__optional_keys__)


def test_own_types_are_a_strict_subset_of_the_sdk_types():
    """Kind: ctxwise's own schema drifting from the SDK. Every own TypedDict requires at least
    the SDK type's required keys and has no key the SDK type lacks, so what the own schema
    accepts (the check without the SDKs installed) the SDK accepts."""
    import anthropic.types as at
    import anthropic.types.beta as atb
    import openai.types.chat as oc
    import openai.types.responses as orr
    from openai.types.chat.chat_completion_content_part_image_param import ImageURL
    from openai.types.chat.chat_completion_content_part_input_audio_param import InputAudio
    from openai.types.chat.chat_completion_content_part_param import File as ChatFilePart
    from openai.types.chat.chat_completion_content_part_param import FileFile
    from openai.types.chat.chat_completion_message_function_tool_call_param import Function
    from openai.types.responses.response_input_item_param import FunctionCallOutput
    from openai.types.responses.response_reasoning_item_param import Summary

    pairs = [
        (own.ChatText, oc.ChatCompletionContentPartTextParam), (own.ChatImage, oc.ChatCompletionContentPartImageParam),
        (own.ChatImageURL, ImageURL), (own.ChatFunction, Function),
        (own.ChatToolCall, oc.ChatCompletionMessageFunctionToolCallParam),
        (own.ChatSystem, oc.ChatCompletionSystemMessageParam), (own.ChatDeveloper, oc.ChatCompletionDeveloperMessageParam),
        (own.ChatUser, oc.ChatCompletionUserMessageParam),
        (own.ChatAssistant, oc.ChatCompletionAssistantMessageParam), (own.ChatTool, oc.ChatCompletionToolMessageParam),
        (own.AText, at.TextBlockParam), (own.ABase64Source, at.Base64ImageSourceParam),
        (own.AURLSource, at.URLImageSourceParam), (own.AImage, at.ImageBlockParam),
        (own.AThinking, at.ThinkingBlockParam), (own.ARedactedThinking, at.RedactedThinkingBlockParam),
        (own.AToolUse, at.ToolUseBlockParam), (own.AToolResult, at.ToolResultBlockParam),
        (own.AUser, at.MessageParam.__args__[0]), (own.AAssistant, at.MessageParam.__args__[1]),
        (own.RInputText, orr.ResponseInputTextParam), (own.RInputImage, orr.ResponseInputImageParam),
        (own.RMessage, orr.EasyInputMessageParam), (own.ROutputText, orr.ResponseOutputTextParam),
        (own.ROutputMessage, orr.ResponseOutputMessageParam), (own.RSummary, Summary),
        (own.RReasoning, orr.ResponseReasoningItemParam), (own.RFunctionCall, orr.ResponseFunctionToolCallParam),
        (own.RFunctionCallOutput, FunctionCallOutput),
        (own.AFileSource, at.FileImageSourceParam), (own.AFileSource, at.FileDocumentSourceParam),
        (own.ABase64PDFSource, at.Base64PDFSourceParam), (own.APlainTextSource, at.PlainTextSourceParam),
        (own.AContentSource, at.ContentBlockSourceParam), (own.ACitationsConfig, at.CitationsConfigParam),
        (own.ADocument, at.DocumentBlockParam), (own.ASearchResult, at.SearchResultBlockParam),
        (own.AServerToolUse, at.ServerToolUseBlockParam), (own.AWebSearchToolResult, at.WebSearchToolResultBlockParam),
        (own.AWebFetchToolResult, at.WebFetchToolResultBlockParam),
        (own.ACodeExecutionToolResult, at.CodeExecutionToolResultBlockParam),
        (own.ABashCodeExecutionToolResult, at.BashCodeExecutionToolResultBlockParam),
        (own.ATextEditorCodeExecutionToolResult, at.TextEditorCodeExecutionToolResultBlockParam),
        (own.AToolSearchToolResult, at.ToolSearchToolResultBlockParam), (own.AContainerUpload, at.ContainerUploadBlockParam),
        (own.ChatInputAudio, oc.ChatCompletionContentPartInputAudioParam), (own.ChatInputAudioData, InputAudio),
        (own.ChatFile, ChatFilePart), (own.ChatFileData, FileFile), (own.RInputFile, orr.ResponseInputFileParam),
        (own.ROutputRefusal, orr.ResponseOutputRefusalParam),
        (own.AMCPToolUse, atb.BetaMCPToolUseBlockParam), (own.AMCPToolResult, atb.BetaRequestMCPToolResultBlockParam),
    ]
    assert at.MessageParam.__args__[0].__name__ == "UserMessageParam"
    for mine, theirs in pairs:
        req, keys = _keys(mine)
        sreq, skeys = _keys(theirs)
        assert sreq <= req, (mine.__name__, theirs.__name__, sreq - req)
        assert keys <= skeys, (mine.__name__, theirs.__name__, keys - skeys)
        assert typing.get_type_hints(mine)  # a real TypedDict with annotations


def _kinds(sdk) -> set[str]:
    """The SDK type keys, less the per-item keys of the Responses items kept verbatim (checked
    by ctxwise's own schema as objects only)."""
    return {k for k in sdk if not k.startswith("responses:item:")}


def _recorded(limit: int = 4):
    for f in sorted(TRAJECTORIES.glob("*/*.json")):
        for c in load(f)[:limit]:
            yield f.name, c


@pytest.mark.parametrize("provider", PROVIDERS)
def test_recorded_sessions_render_to_payloads_the_sdk_accepts(provider, shared_dir):
    """Kind: a renderer writing something the API does not take. Recorded sessions (their
    empty tool results marked as append() does) render, for every provider, to payloads with
    no schema or rule violation under both the own and the SDK types; no key ctxwise invented
    (``_openai``, ``_responses``, ``_ctxwise``, ...) appears anywhere."""
    assert sdk_available() and _kinds(_sdk_types()) == set(_OWN)  # both halves of the check run
    n = 0
    for name, c in _recorded():
        msgs = [mark_empty_result(m) for m in c.messages]
        payload = render(msgs, provider)
        assert check_wire(payload, provider) == [], (name, c.id)
        assert not _private_keys(payload), (name, c.id, _private_keys(payload)[:3])
        n += 1
    assert n >= 12


def _private_keys(x, path="") -> list[str]:
    if isinstance(x, dict):
        out = [f"{path}.{k}" for k in x if str(k).startswith("_")]
        for k, v in x.items():
            out += _private_keys(v, f"{path}.{k}")
        return out
    if isinstance(x, list):
        return [p for i, v in enumerate(x) for p in _private_keys(v, f"{path}[{i}]")]
    return []


@pytest.mark.parametrize("provider", PROVIDERS)
def test_append_openai_extras_never_reach_the_payload(tmp_path, provider):
    """Kind: round-trip notes leaking into a payload. ``append_openai`` keeps its ``_openai``
    notes (e.g. ``no_name`` on a tool result) in storage; the anthropic payload used to carry
    them in every tool_result block."""
    cm = ContextManager(f"sqlite:///{tmp_path}/s.db", Policy.preset("default", provider=provider))
    s = cm.session("u", "s")
    s.append_openai([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Oslo?"},
                     {"role": "assistant", "content": None, "tool_calls": [
                         {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\": \"Oslo\"}"}}]}])
    s.append_openai([{"role": "tool", "tool_call_id": "call_1", "content": "4 C, rain"}])
    assert any("_openai" in str(r.extra) for m in s.messages for r in m.tool_results)  # kept in storage
    p = s.prepare().payload
    assert not _private_keys(p)
    assert check_wire(p, provider) == []
    cm.close()


ITEMS = [
    {"type": "message", "role": "user", "content": "Refund order 7"},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "look it up"}], "encrypted_content": "gAAA1"},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_order", "arguments": "{\"id\": 7}", "status": "completed"},
    {"type": "function_call_output", "call_id": "call_1", "output": "{\"status\": \"delivered\"}"},
    {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "gAAA2"},
    {"type": "message", "id": "msg_2", "role": "assistant", "status": "completed",
     "content": [{"type": "output_text", "text": "Order 7 was delivered.", "annotations": []}]},
    {"type": "message", "role": "user", "content": "Refund it."},
]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_responses_items_extras_never_reach_any_payload(tmp_path, provider):
    """Kind: ``_responses`` notes of messages read with ``from_responses`` leaking into every
    provider's payload."""
    cm = ContextManager(f"sqlite:///{tmp_path}/s.db", Policy.preset("default", provider=provider))
    s = cm.session("u", "s")
    s.append([from_openai([{"role": "system", "content": "Be brief."}])[0].model_copy(update={"id": "sys"}),
              *from_responses(ITEMS)])
    p = s.prepare().payload
    assert not _private_keys(p)
    assert check_wire(p, provider) == []
    cm.close()


def test_openai_responses_renders_real_items_reasoning_before_its_item():
    """Kind: ``openai_responses`` returning Chat Completions messages. The items read back
    render as Responses items: each reasoning item (id and encrypted_content unchanged) right
    before the item it preceded, function calls and outputs paired by call_id; the SDK type
    accepts each item."""
    payload = render(from_responses(ITEMS), "openai_responses")
    assert [it["type"] for it in payload] == [it["type"] for it in ITEMS]
    assert payload[1] == {"type": "reasoning", "id": "rs_1", "summary": ITEMS[1]["summary"], "encrypted_content": "gAAA1"}
    assert payload[2] == {"type": "function_call", "call_id": "call_1", "name": "get_order", "arguments": "{\"id\": 7}", "id": "fc_1"}
    assert payload[4]["id"] == "rs_2" and payload[5]["id"] == "msg_2"
    assert check_wire(payload, "openai_responses") == []
    dangling = payload[:2]  # a reasoning item with nothing after it
    assert "reasoning-without-following-item" in {v.rule for v in check_wire(dangling, "openai_responses")}


def test_repeated_call_ids_are_renamed_within_one_request_keeping_the_pairing(shared_dir):
    """Kind: a tool call id used twice in one request (tau-bench reuses call ids across turns;
    Anthropic rejects a repeated tool_use id). The renderer renames the repeat in its call and
    in the result that answers it; the check reports a payload that still repeats one."""
    conv = next(c for c in load(TRAJECTORIES / "tau-bench" / "gpt-4o-airline_subset.json") if c.id == "task0-trial0")
    msgs = [mark_empty_result(m) for m in conv.messages]
    ids = [b.id for m in msgs for b in m.tool_uses]
    assert len(ids) != len(set(ids))  # the recording does reuse them
    for provider in PROVIDERS:
        payload = render(msgs, provider)
        assert check_wire(payload, provider) == [], provider
    p = render(msgs, "anthropic")
    sent = [b["id"] for m in p["messages"] if isinstance(m["content"], list) for b in m["content"] if b["type"] == "tool_use"]
    assert len(sent) == len(set(sent)) == len(ids)
    # a payload that repeats an id is refused
    blocks = [m for m in p["messages"] if isinstance(m["content"], list) and any(b["type"] == "tool_use" for b in m["content"])]
    first, second = blocks[0]["content"], blocks[1]["content"]
    old = next(b for b in second if b["type"] == "tool_use")["id"]
    new = next(b for b in first if b["type"] == "tool_use")["id"]
    for m in p["messages"]:
        for b in m["content"] if isinstance(m["content"], list) else []:
            if b.get("id") == old:
                b["id"] = new
            if b.get("tool_use_id") == old:
                b["tool_use_id"] = new
    with pytest.raises(PayloadInvalid) as e:
        validate_wire(p, "anthropic")
    assert "duplicate-tool-call-id" in {v.rule for v in e.value.violations}


def test_an_undocumented_key_in_a_rendered_payload_is_reported_with_its_place():
    """Kind: an undocumented key in what is sent: ``check_wire`` names the message and the key."""
    p = render(from_openai([{"role": "user", "content": "hi"}]), "anthropic")
    p["messages"][0]["_openai"] = {"x": 1}
    found = check_wire(p, "anthropic")
    assert found and found[0].rule == "wire-schema" and found[0].index == 0 and "_openai" in found[0].message


def test_without_the_sdks_the_own_schema_still_refuses_what_the_api_would(monkeypatch):
    """Kind: the check silently off where the SDKs are not installed (the core install has no
    ``anthropic``). With the SDK types unavailable, ctxwise's own schema alone still refuses an
    undocumented key, a missing required key and a wrong type."""
    from ctxwise.providers import wire

    monkeypatch.setattr(wire, "_sdk_types", lambda: None)
    p = render(from_openai([{"role": "user", "content": "hi"}]), "anthropic")
    assert check_wire(p, "anthropic") == []
    for bad in ({"role": "user", "content": "hi", "_openai": {}}, {"role": "user"}, {"role": "user", "content": 3}):
        found = check_wire({"messages": [bad]}, "anthropic")
        assert found and found[0].rule == "wire-schema" and "ctxwise type" in found[0].message
        assert "SDK type" not in " ".join(v.message for v in found)


def test_the_sdk_check_runs_only_where_the_application_imported_the_sdk(monkeypatch):
    """Kind: ctxwise paying seconds of SDK import inside ``prepare()``. The SDK types are used
    for the families the process has imported (an application with a client has), or all
    installed ones after ``use_sdk_types()``; otherwise the own schema alone checks."""
    import sys

    from ctxwise.providers import wire

    monkeypatch.delitem(sys.modules, "anthropic")
    assert _kinds(wire._sdk_types()) == {k for k in _OWN if not k.startswith("anthropic:")}
    monkeypatch.setattr(wire, "_always", True)
    assert _kinds(wire._sdk_types()) == set(_OWN)
