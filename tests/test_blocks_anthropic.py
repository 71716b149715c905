"""Anthropic blocks beyond text / image / thinking / tool use: each read, stored, counted,
rendered and checked, and written back exactly as it was read.

One test per block kind; each docstring names the SDK request type (``anthropic`` 2.17,
``anthropic/types/...``) the fixture follows.
"""

from __future__ import annotations

import copy
from typing import Any

import anthropic  # noqa: F401  importing the SDK turns the SDK half of the wire check on
import pytest

from ctxwise import (
    DocumentBlock,
    ImageBlock,
    Message,
    ProviderBlock,
    SearchResultBlock,
    TextBlock,
    get_counter,
)
from ctxwise.formats import from_anthropic, to_anthropic
from ctxwise.messages import canonical_json
from ctxwise.providers import check, check_wire, render


def _payload(blocks: list[dict[str, Any]], role: str = "assistant") -> dict[str, Any]:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "find it"}]
    if role == "user":
        msgs = [{"role": "user", "content": blocks}]
    else:
        msgs.append({"role": "assistant", "content": blocks})
        msgs.append({"role": "user", "content": "thanks"})
    return {"system": "be brief", "messages": msgs}


def _exact(blocks: list[dict[str, Any]], role: str = "assistant", sent_as: list[dict[str, Any]] | None = None) -> list[Message]:
    """Read ``blocks`` in a message of ``role``; assert the file writer gives them back byte
    for byte and the renderer too (or as ``sent_as``, the API's equivalent form), the wire
    check (own types and SDK types) passes, the stored form round-trips and every block adds
    tokens. Returns the canonical messages."""
    payload = _payload(copy.deepcopy(blocks), role)
    msgs = from_anthropic(copy.deepcopy(payload))
    assert to_anthropic(msgs, extras=False) == payload
    assert from_anthropic(to_anthropic(msgs)) == msgs
    sent = render(msgs, "anthropic")
    assert sent == (payload if sent_as is None else _payload(sent_as, role))
    assert check_wire(sent, "anthropic") == []
    for m in msgs:
        back = Message.model_validate_json(m.model_dump_json())
        assert canonical_json(back) == canonical_json(m)
    counter = get_counter("chars")
    target = next(m for m in msgs if m.role == role and len(m.blocks) == len(blocks))
    for k in range(len(target.blocks)):
        fewer = target.model_copy(update={"blocks": target.blocks[:k] + target.blocks[k + 1:]})
        assert counter.count_message(target) > counter.count_message(fewer), target.blocks[k].type
    return msgs


def _assistant(msgs: list[Message]) -> Message:
    return next(m for m in msgs if m.role == "assistant")


SEARCH_USE = {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": {"query": "ctxwise"}}


def test_server_tool_use_and_web_search_tool_result():
    """Source: anthropic/types/server_tool_use_block_param.py, web_search_tool_result_block_param.py,
    web_search_result_block_param.py (docs: agents-and-tools/tool-use/web-search-tool)."""
    result = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01", "content": [
        {"type": "web_search_result", "url": "https://e.x/a", "title": "A", "encrypted_content": "EqgfCioI",
         "page_age": "April 30, 2025"}]}
    cited = {"type": "text", "text": "It keeps context small.", "citations": [
        {"type": "web_search_result_location", "url": "https://e.x/a", "title": "A",
         "encrypted_index": "Eo8BCioI", "cited_text": "keeps the context small"}]}
    a = _assistant(_exact([SEARCH_USE, result, cited]))
    use, res, text = a.blocks
    assert isinstance(use, ProviderBlock) and use.kind == "server_tool_use" and use.call_id == "srvtoolu_01"
    assert isinstance(res, ProviderBlock) and res.call_id == "srvtoolu_01" and res.raw == result
    assert isinstance(text, TextBlock) and text.citations == cited["citations"]
    assert a.tool_uses == []  # a server tool is run by the provider: no client result is owed


def test_web_search_tool_result_error():
    """Source: anthropic/types/web_search_tool_request_error_param.py (an error object as content)."""
    err = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01",
           "content": {"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"}}
    _exact([SEARCH_USE, err])


def test_web_fetch_tool_result():
    """Source: anthropic/types/web_fetch_tool_result_block_param.py, web_fetch_block_param.py
    (a fetched document inside the result)."""
    use = {"type": "server_tool_use", "id": "srvtoolu_02", "name": "web_fetch", "input": {"url": "https://e.x/p"}}
    res = {"type": "web_fetch_tool_result", "tool_use_id": "srvtoolu_02", "content": {
        "type": "web_fetch_result", "url": "https://e.x/p", "retrieved_at": "2026-01-02T03:04:05Z",
        "content": {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "page"},
                    "title": "P"}}}
    _exact([use, res])


def test_code_execution_tool_result():
    """Source: anthropic/types/code_execution_tool_result_block_param.py,
    code_execution_result_block_param.py."""
    use = {"type": "server_tool_use", "id": "srvtoolu_03", "name": "code_execution", "input": {"code": "print(1)"}}
    res = {"type": "code_execution_tool_result", "tool_use_id": "srvtoolu_03", "content": {
        "type": "code_execution_result", "stdout": "1\n", "stderr": "", "return_code": 0, "content": []}}
    _exact([use, res])


def test_bash_code_execution_tool_result():
    """Source: anthropic/types/bash_code_execution_tool_result_block_param.py,
    bash_code_execution_result_block_param.py."""
    use = {"type": "server_tool_use", "id": "srvtoolu_04", "name": "bash_code_execution", "input": {"command": "ls"}}
    res = {"type": "bash_code_execution_tool_result", "tool_use_id": "srvtoolu_04", "content": {
        "type": "bash_code_execution_result", "stdout": "a.txt\n", "stderr": "", "return_code": 0, "content": []}}
    _exact([use, res])


def test_text_editor_code_execution_tool_result():
    """Source: anthropic/types/text_editor_code_execution_tool_result_block_param.py,
    text_editor_code_execution_view_result_block_param.py."""
    use = {"type": "server_tool_use", "id": "srvtoolu_05", "name": "text_editor_code_execution",
           "input": {"command": "view", "path": "/tmp/a.txt"}}
    res = {"type": "text_editor_code_execution_tool_result", "tool_use_id": "srvtoolu_05", "content": {
        "type": "text_editor_code_execution_view_result", "content": "hello", "file_type": "text",
        "num_lines": 1, "start_line": 1, "total_lines": 1}}
    _exact([use, res])


def test_mcp_tool_use_and_result_checked_against_the_beta_types():
    """Source: anthropic/types/beta/beta_mcp_tool_use_block_param.py,
    beta_request_mcp_tool_result_block_param.py (docs: agents-and-tools/mcp-connector)."""
    use = {"type": "mcp_tool_use", "id": "mcptoolu_01", "name": "lookup", "server_name": "crm", "input": {"q": 1}}
    res = {"type": "mcp_tool_result", "tool_use_id": "mcptoolu_01", "is_error": False,
           "content": [{"type": "text", "text": "found"}]}
    a = _assistant(_exact([use, res]))
    assert [b.kind for b in a.blocks] == ["mcp_tool_use", "mcp_tool_result"]  # type: ignore[union-attr]
    bad = render(from_anthropic(_payload([use, {**res, "content": 3}])), "anthropic")
    assert any(v.rule == "wire-schema" and v.index == 1 for v in check_wire(bad, "anthropic"))


def test_container_upload():
    """Source: anthropic/types/container_upload_block_param.py."""
    msgs = _exact([{"type": "container_upload", "file_id": "file_011"}, {"type": "text", "text": "analyse it"}], "user")
    assert isinstance(msgs[1].blocks[0], ProviderBlock) and msgs[1].blocks[0].call_id is None


@pytest.mark.parametrize("source", [
    {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjQK"},
    {"type": "text", "media_type": "text/plain", "data": "plain words"},
    {"type": "url", "url": "https://e.x/doc.pdf"},
    {"type": "file", "file_id": "file_011CNha8iCJcU1wXNR6q4V8w"},
    {"type": "content", "content": [{"type": "text", "text": "chunk one"}, {"type": "text", "text": "chunk two"}]},
    {"type": "content", "content": "one string"},
], ids=["base64", "text", "url", "file", "content", "content-str"])
def test_document(source):
    """Source: anthropic/types/document_block_param.py with each source type
    (base64_pdf_source_param.py, plain_text_source_param.py, url_pdf_source_param.py,
    file_document_source_param.py, content_block_source_param.py) and citations_config_param.py."""
    doc = {"type": "document", "source": source, "title": "Doc", "context": "from the wiki",
           "citations": {"enabled": True}, "cache_control": {"type": "ephemeral"}}
    sent_as = None
    if source["content"] == "one string" if source["type"] == "content" else False:
        sent_as = [{**doc, "source": {"type": "content", "content": [{"type": "text", "text": "one string"}]}},
                   {"type": "text", "text": "summarise"}]
    msgs = _exact([doc, {"type": "text", "text": "summarise"}], "user", sent_as)
    d = msgs[1].blocks[0]
    assert isinstance(d, DocumentBlock) and d.source_type == source["type"] and d.title == "Doc"


def test_search_result():
    """Source: anthropic/types/search_result_block_param.py, and the citation it yields,
    citation_search_result_location_param.py (docs: build-with-claude/search-results)."""
    sr = {"type": "search_result", "source": "https://kb.e.x/1", "title": "KB 1",
          "content": [{"type": "text", "text": "Refunds take 5 days."}], "citations": {"enabled": True}}
    msgs = _exact([sr, {"type": "text", "text": "how long?"}], "user")
    assert isinstance(msgs[1].blocks[0], SearchResultBlock)
    cited = {"type": "text", "text": "Five days.", "citations": [
        {"type": "search_result_location", "source": "https://kb.e.x/1", "title": "KB 1", "cited_text": "5 days",
         "search_result_index": 0, "start_block_index": 0, "end_block_index": 0}]}
    _exact([cited])


def test_files_api_image_is_sent_as_a_file_source():
    """Source: anthropic/types/file_image_source_param.py. A ``source.type == "file"`` image was
    sent as ``{"type": "url", "url": ""}``."""
    img = {"type": "image", "source": {"type": "file", "file_id": "file_abc"}}
    msgs = _exact([img, {"type": "text", "text": "what is it?"}], "user")
    assert msgs[1].blocks[0] == ImageBlock(file_id="file_abc", extra={"_anthropic": {"file_issuer": "anthropic"}})
    from ctxwise.providers.rules import file_issuer

    assert file_issuer(msgs[1].blocks[0]) == "anthropic"  # the id is valid at Anthropic only
    sent = render([Message(id="u", role="user", blocks=[ImageBlock(file_id="file_abc", detail="low")])], "anthropic")
    assert sent["messages"][0]["content"][0]["source"] == {"type": "file", "file_id": "file_abc"}


def test_a_bad_server_tool_block_is_reported_by_the_wire_check():
    """Source: anthropic/types/server_tool_use_block_param.py (``name`` is one of the server
    tools). A block kept verbatim is still checked: a name Anthropic does not run is a
    wire-schema violation at its message."""
    sent = render(from_anthropic(_payload([{**SEARCH_USE, "name": "telepathy"}])), "anthropic")
    found = check_wire(sent, "anthropic")
    assert found and all(v.index == 1 for v in found if v.rule == "wire-schema")


def test_tool_result_with_search_results_and_a_document():
    """Source: anthropic/types/tool_result_block_param.py (``content`` may hold
    ``search_result`` and ``document`` blocks; docs: build-with-claude/search-results, "from
    tool calls")."""
    p = {"system": "s", "messages": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "kb", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [
            {"type": "search_result", "source": "https://kb", "title": "KB", "citations": {"enabled": True},
             "content": [{"type": "text", "text": "5 days"}]},
            {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "doc"}}]}]},
        {"role": "assistant", "content": [{"type": "text", "text": "ok"}]}]}
    msgs = from_anthropic(copy.deepcopy(p))
    assert to_anthropic(msgs, extras=False) == p
    sent = render(msgs, "anthropic")
    assert sent == p and check_wire(sent, "anthropic") == []
    out = msgs[3].tool_results[0].output
    assert [type(o) for o in out] == [SearchResultBlock, DocumentBlock]
    assert [(v.index, v.rule) for v in check(msgs, "openai")] == [(3, "block-not-sendable")] * 2
