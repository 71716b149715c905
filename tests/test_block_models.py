"""The block models for documents, search results, audio, refusals and provider blocks."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ctxwise import (
    AudioBlock,
    DocumentBlock,
    ImageBlock,
    Message,
    ProviderBlock,
    RefusalBlock,
    SearchResultBlock,
    TextBlock,
)
from ctxwise.messages import canonical_json


def _roundtrip(block: object) -> Message:
    m = Message(id="m1", role="user", blocks=[block])  # type: ignore[list-item]
    back = Message.model_validate_json(m.model_dump_json())
    assert back == m
    assert canonical_json(back) == canonical_json(m)
    return back


def test_document_search_audio_refusal_round_trip() -> None:
    """Shapes from anthropic/types/document_block_param.py, search_result_block_param.py,
    openai/types/chat/chat_completion_content_part_input_audio_param.py and
    chat_completion_content_part_refusal_param.py."""
    doc = DocumentBlock(source_type="base64", media_type="application/pdf", data="JVBERi0=",
                        title="T", context="C", citations={"enabled": True})
    assert _roundtrip(doc).blocks[0] == doc
    sr = SearchResultBlock(source="https://e.x/a", title="A", content=[TextBlock(text="body")],
                           citations={"enabled": True})
    assert _roundtrip(sr).blocks[0] == sr
    assert _roundtrip(AudioBlock(data="UklG", format="wav")).blocks[0].type == "audio"
    assert _roundtrip(RefusalBlock(text="no")).blocks[0].type == "refusal"


def test_provider_block_keeps_raw_verbatim() -> None:
    """Anthropic server_tool_use (anthropic/types/server_tool_use_block_param.py) kept as-is."""
    raw = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}}
    pb = ProviderBlock(provider="anthropic", kind="server_tool_use", raw=raw, call_id="srvtoolu_1")
    assert _roundtrip(pb).blocks[0].raw == raw  # type: ignore[union-attr]
    with pytest.raises(ValidationError):
        ProviderBlock(provider="nobody", kind="x", raw={})  # type: ignore[arg-type]


def test_new_optional_fields_do_not_change_old_digests() -> None:
    """A text or image block without citations / file_id / detail dumps as before."""
    text = Message(id="a", role="user", blocks=[TextBlock(text="hi")])
    assert canonical_json(text) == (
        '{"blocks":[{"extra":{},"text":"hi","type":"text"}],"id":"a","metadata":{},"name":null,"role":"user"}'
    )
    img = ImageBlock(url="https://e.x/i.png")
    assert "file_id" not in img.model_dump() and "detail" not in img.model_dump()
    cited = TextBlock(text="x", citations=[{"type": "char_location", "start_char_index": 0}])
    assert cited.model_dump()["citations"][0]["type"] == "char_location"
    fid = ImageBlock(file_id="file_1", detail="low")
    assert _roundtrip(fid).blocks[0] == fid


def test_new_blocks_are_counted_never_zero() -> None:
    """Every new block kind adds tokens to its message (an upper bound until a per-kind rule)."""
    from ctxwise import get_counter, list_counters

    counter = get_counter(list_counters()[0])
    empty = Message(id="e", role="user", blocks=[TextBlock(text="")])
    base = counter.count_message(empty)
    for block in (RefusalBlock(text="no thanks"), AudioBlock(data="UklGRg==", format="wav"),
                  DocumentBlock(source_type="text", media_type="text/plain", data="a short doc"),
                  SearchResultBlock(source="s", title="t", content=[TextBlock(text="body")]),
                  ProviderBlock(provider="anthropic", kind="server_tool_use",
                                raw={"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {}})):
        m = Message(id="e", role="user", blocks=[TextBlock(text=""), block])
        assert counter.count_message(m) > base, block.type
