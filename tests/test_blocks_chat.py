"""Chat Completions parts beyond text and image URLs: audio input, files, refusals and image
``detail``: each read, stored, rendered and checked, and written back exactly as read.

Sources: ``openai`` 3.63 ``openai/types/chat/`` (the module named in each test).
"""

from __future__ import annotations

import copy
from typing import Any

import openai  # noqa: F401  importing the SDK turns the SDK half of the wire check on
import pytest

from ctxwise import AudioBlock, DocumentBlock, ImageBlock, Message, RefusalBlock, get_counter
from ctxwise.formats import from_openai, to_openai
from ctxwise.messages import canonical_json
from ctxwise.providers import check, check_wire, render


def _exact(msgs: list[dict[str, Any]], provider: str = "openai") -> list[Message]:
    """Read ``msgs``; the file writer and the renderer give them back exactly, the wire check
    (own and SDK types) and the rules pass, the stored form round-trips, each block counts."""
    read = from_openai(copy.deepcopy(msgs))
    assert to_openai(read, extras=False) == msgs
    assert from_openai(to_openai(read)) == read
    sent = render(read, provider)
    assert sent == msgs
    assert check_wire(sent, provider) == []
    counter = get_counter("chars")
    for m in read:
        assert canonical_json(Message.model_validate_json(m.model_dump_json())) == canonical_json(m)
        assert counter.count_message(m) > 0
    return read


def _user(*parts: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"type": "text", "text": "look"}, *parts]},
            {"role": "assistant", "content": "seen"}]


def test_input_audio_part():
    """Source: openai/types/chat/chat_completion_content_part_input_audio_param.py."""
    read = _exact(_user({"type": "input_audio", "input_audio": {"data": "UklGRiQAAABXQVZF", "format": "wav"}}))
    assert read[0].blocks[1] == AudioBlock(data="UklGRiQAAABXQVZF", format="wav")


@pytest.mark.parametrize("file", [
    {"file_data": "data:application/pdf;base64,JVBERi0xLjQK", "filename": "a.pdf"},
    {"file_id": "file-abc123"},
], ids=["file_data", "file_id"])
def test_file_part(file):
    """Source: openai/types/chat/chat_completion_content_part_param.py (``File``, ``FileFile``)."""
    read = _exact(_user({"type": "file", "file": file}))
    doc = read[0].blocks[1]
    assert isinstance(doc, DocumentBlock) and doc.source_type == ("base64" if "file_data" in file else "file")


def test_image_detail():
    """Source: openai/types/chat/chat_completion_content_part_image_param.py (``ImageURL.detail``),
    which was dropped on the way to the wire."""
    read = _exact(_user({"type": "image_url", "image_url": {"url": "https://e.x/i.png", "detail": "low"}}))
    assert read[0].blocks[1] == ImageBlock(url="https://e.x/i.png", detail="low")


def test_assistant_refusal():
    """Source: openai/types/chat/chat_completion_assistant_message_param.py (``refusal``) and
    chat_completion_content_part_refusal_param.py (a refusal part, kept as a part in files)."""
    msgs = [{"role": "user", "content": "do the bad thing"},
            {"role": "assistant", "content": None, "refusal": "I can't help with that."},
            {"role": "user", "content": "fine"}]
    read = _exact(msgs)
    assert read[1].blocks == [RefusalBlock(text="I can't help with that.", extra=read[1].blocks[0].extra)]
    part = [{"role": "user", "content": "x"}, {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]}]
    assert to_openai(from_openai(copy.deepcopy(part)), extras=False) == part


def test_audio_to_anthropic_is_refused_naming_the_message():
    """Source: anthropic/types/message_content_param.py (no audio block): the rule
    block-not-sendable, at the message that holds it."""
    read = from_openai(_user({"type": "input_audio", "input_audio": {"data": "UklG", "format": "mp3"}}))
    found = check(read, "anthropic")
    assert [(v.index, v.rule) for v in found] == [(0, "block-not-sendable")]
    assert "audio" in found[0].message
