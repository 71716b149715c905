"""Responses API items beyond messages, reasoning and function calls: each read, stored,
counted, rendered and checked, and written back exactly as it was read.

Sources: ``openai`` 3.63 ``openai/types/responses/response_input_item_param.py`` (the
``ResponseInputItemParam`` union) and the param module named in each test.
"""

from __future__ import annotations

import copy
from typing import Any

import openai  # noqa: F401  importing the SDK turns the SDK half of the wire check on
import pytest

from ctxwise import DocumentBlock, ImageBlock, Message, ProviderBlock, RefusalBlock, TextBlock, ThinkingBlock, get_counter
from ctxwise.formats import from_responses, to_responses
from ctxwise.formats.responses import PROVIDER_ITEMS
from ctxwise.messages import canonical_json
from ctxwise.providers import check, check_wire, render
from ctxwise.providers.wire import _family_types

USER = {"role": "user", "content": "go"}
AFTER = {"role": "user", "content": "thanks"}


def _typed(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``items`` as the renderer writes them (messages always carry ``type``)."""
    return [{"type": "message", **it} if "role" in it and "type" not in it else it for it in items]


def _exact(items: list[dict[str, Any]]) -> list[Message]:
    """Read ``items``; assert the file writer gives them back byte for byte, the renderer too
    (messages with their ``type``), the wire check (own and SDK types) and the rules pass,
    the stored form round-trips and every provider block adds tokens."""
    msgs = from_responses(copy.deepcopy(items))
    assert to_responses(msgs, extras=False) == items
    assert from_responses(to_responses(msgs)) == msgs
    sent = render(msgs, "openai_responses")
    assert sent == _typed(items)
    assert check_wire(sent, "openai_responses") == []
    counter = get_counter("chars")
    for m in msgs:
        assert canonical_json(Message.model_validate_json(m.model_dump_json())) == canonical_json(m)
        for k, b in enumerate(m.blocks):
            if isinstance(b, ProviderBlock):
                fewer = m.model_copy(update={"blocks": m.blocks[:k] + m.blocks[k + 1:]})
                assert counter.count_message(m) > counter.count_message(fewer), b.kind
    return msgs


def _provider(msgs: list[Message]) -> list[ProviderBlock]:
    return [b for m in msgs for b in m.blocks if isinstance(b, ProviderBlock)]


def test_compaction_item():
    """Source: openai/types/responses/response_compaction_item_param_param.py (the item
    ``/responses/compact`` returns, sent back verbatim)."""
    msgs = _exact([{"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAAB"}, USER])
    assert msgs[0].role == "assistant" and _provider(msgs)[0].raw["encrypted_content"] == "gAAAAB"


def test_compaction_trigger_item():
    """Source: response_input_item_param.CompactionTrigger ("must be the final input item")."""
    msgs = _exact([USER, {"type": "compaction_trigger"}])
    assert msgs[-1].role == "user" and _provider(msgs)[0].kind == "compaction_trigger"


def test_configuration_update_item():
    """Source: openai/types/responses/response_configuration_update_item_param_param.py."""
    _exact([USER, {"type": "configuration_update", "id": "cu_1", "reasoning": {"effort": "low"}}, AFTER])


def test_reasoning_with_encrypted_content():
    """Source: openai/types/responses/response_reasoning_item_param.py (``encrypted_content``
    from ``include=["reasoning.encrypted_content"]``), kept with the call it precedes."""
    items = [USER, {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "plan"}],
                    "encrypted_content": "gAAAAenc"},
             {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"},
             {"type": "function_call_output", "call_id": "call_1", "output": "ok"}]
    msgs = _exact(items)
    assert isinstance(msgs[1].blocks[0], ThinkingBlock)


@pytest.mark.parametrize("call,output", [
    ({"type": "local_shell_call", "id": "lsh_1", "call_id": "call_l1", "status": "completed",
      "action": {"type": "exec", "command": ["ls"], "env": {}}},
     {"type": "local_shell_call_output", "id": "call_l1", "output": "a.txt"}),
    ({"type": "shell_call", "call_id": "call_s1", "action": {"commands": ["ls"]}, "status": "completed"},
     {"type": "shell_call_output", "call_id": "call_s1",
      "output": [{"stdout": "a", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}]}),
    ({"type": "apply_patch_call", "call_id": "call_p1", "status": "completed",
      "operation": {"type": "create_file", "path": "a.txt", "diff": "+a"}},
     {"type": "apply_patch_call_output", "call_id": "call_p1", "status": "completed"}),
    ({"type": "custom_tool_call", "call_id": "call_c1", "name": "grammar", "input": "x"},
     {"type": "custom_tool_call_output", "call_id": "call_c1", "output": "y"}),
], ids=["local_shell_call", "shell_call", "apply_patch_call", "custom_tool_call"])
def test_client_run_tool_call_and_output(call, output):
    """Sources: response_input_item_param.LocalShellCall / LocalShellCallOutput, ShellCall /
    ShellCallOutput, ApplyPatchCall / ApplyPatchCallOutput, response_custom_tool_call_param.py /
    response_custom_tool_call_output_param.py. The call and its output stay in one assistant
    unit, paired by call id; an output without its call is provider-result-without-call."""
    msgs = _exact([USER, call, output, AFTER])
    pcall, pout = _provider(msgs)
    assert pcall.call_id == pout.call_id and pcall.call_id is not None
    alone = from_responses([USER, output, AFTER])
    assert [(v.index, v.rule) for v in check(alone, "openai_responses")] == [(1, "provider-result-without-call")]


@pytest.mark.parametrize("item", [
    {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "q"}},
    {"type": "file_search_call", "id": "fs_1", "queries": ["q"], "status": "completed"},
    {"type": "code_interpreter_call", "id": "ci_1", "code": "1+1", "container_id": "cntr_1", "outputs": None,
     "status": "completed"},
    {"type": "mcp_call", "id": "mcp_1", "name": "lookup", "server_label": "crm", "arguments": "{}"},
], ids=["web_search_call", "file_search_call", "code_interpreter_call", "mcp_call"])
def test_hosted_tool_call(item):
    """Sources: response_function_web_search_param.py, response_file_search_tool_call_param.py,
    response_code_interpreter_tool_call_param.py, response_input_item_param.McpCall: run by
    OpenAI, replayed verbatim before the assistant's answer."""
    _exact([USER, item, {"role": "assistant", "content": "done"}, AFTER])


def test_input_image_file_id_detail_input_file_and_refusal():
    """Sources: response_input_image_param.py (``file_id``, ``detail``), response_input_file_param.py,
    response_output_refusal_param.py and output_text ``annotations`` (response_output_text_param.py)."""
    items = [{"role": "user", "content": [
        {"type": "input_text", "text": "read these"}, {"type": "input_image", "file_id": "file_1", "detail": "low"},
        {"type": "input_file", "file_data": "data:application/pdf;base64,JVBERi0=", "filename": "a.pdf"},
        {"type": "input_file", "file_url": "https://e.x/b.pdf"}, {"type": "input_file", "file_id": "file_2"}]},
        {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed", "content": [
            {"type": "output_text", "text": "cited", "annotations": [
                {"type": "url_citation", "url": "https://e.x", "title": "E", "start_index": 0, "end_index": 5}]}]},
        {"type": "message", "role": "assistant", "id": "msg_2", "status": "completed",
         "content": [{"type": "refusal", "refusal": "cannot"}]},
        AFTER]
    msgs = _exact(items)
    img, pdf, url, fid = msgs[0].blocks[1:]
    assert img == ImageBlock(file_id="file_1", detail="low", extra=img.extra)
    assert isinstance(pdf, DocumentBlock) and pdf.source_type == "base64" and pdf.filename == "a.pdf"
    assert (url.source_type, fid.source_type) == ("url", "file")  # type: ignore[union-attr]
    text, refusal = msgs[1].blocks
    assert isinstance(text, TextBlock) and text.citations and text.citations[0]["type"] == "url_citation"
    assert isinstance(refusal, RefusalBlock) and refusal.text == "cannot"


def test_every_kept_item_kind_has_its_sdk_type():
    """Source: ResponseInputItemParam: each item kind ctxwise keeps verbatim is checked against
    the SDK member with that ``type``."""
    sdk = _family_types("openai")
    assert sdk is not None
    assert {f"responses:item:{k}" for k in PROVIDER_ITEMS} <= set(sdk)


def test_a_malformed_kept_item_is_reported_by_the_wire_check():
    """Source: response_compaction_item_param_param.py (``encrypted_content`` is required)."""
    sent = render(from_responses([{"type": "compaction", "id": "cmp_1"}, USER]), "openai_responses")
    assert [v.index for v in check_wire(sent, "openai_responses") if v.rule == "wire-schema"] == [0]


def test_function_call_output_with_a_file():
    """Source: response_input_item_param.FunctionCallOutput (``output`` may be a list of
    ``input_text`` / ``input_image`` / ``input_file`` parts)."""
    items = [USER, {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
             {"type": "function_call_output", "call_id": "c1", "output": [{"type": "input_file", "file_id": "file_1"}]}]
    msgs = _exact(items)
    assert isinstance(msgs[2].tool_results[0].output[0], DocumentBlock)


def test_reasoning_beside_a_hosted_call_is_never_dropped():
    """Source: https://platform.openai.com/docs/guides/reasoning ("Keeping reasoning items in
    context"): reasoning beside a function call is kept; beside a hosted or shell call the docs
    say nothing, so ctxwise keeps it too (droppable_thinking)."""
    from ctxwise.providers import droppable_thinking

    items = [USER, {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "e"},
             {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "q"}},
             {"role": "assistant", "content": "found"},
             {"role": "user", "content": "next"},
             {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "e"},
             {"role": "assistant", "content": "plain"}, AFTER]
    msgs = from_responses(items)
    assert droppable_thinking(msgs, "openai_responses") == {(3, 0)}


@pytest.mark.parametrize("ref", [{"id": "msg_0"}, {"type": "item_reference", "id": "msg_0"}, {"id": "msg_0", "type": None}],
                         ids=["bare", "typed", "null-type"])
def test_item_reference(ref):
    """Source: response_input_item_param.ItemReference (``type`` is optional)."""
    items = [USER, ref, AFTER]
    msgs = from_responses(copy.deepcopy(items))
    assert to_responses(msgs, extras=False) == items
    sent = render(msgs, "openai_responses")
    assert sent[1] == ref and check_wire(sent, "openai_responses") == []
