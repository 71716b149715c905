"""Sendability per target, not per wire shape (issue 25 item 5): three providers share the
Chat Completions wire but take different blocks. Each rule of a profile's ``unsendable`` list
(and its ``images=False`` conversion) has a fixture test here with the rule's source in its
docstring; a refused block names the message index and ``block-not-sendable``."""

from __future__ import annotations

import pytest

from ctxwise import AudioBlock, ContextManager, DocumentBlock, ImageBlock, Message, Policy, TextBlock
from ctxwise.errors import PayloadInvalid
from ctxwise.providers import PROFILES, check, check_wire, render
from ctxwise.providers.render import conversions
from ctxwise.providers.profiles import BLOCK_NOT_SENDABLE, IMAGE_NOTE

AUDIO = AudioBlock(data="UklGRg==", format="wav")
PDF = DocumentBlock(source_type="base64", media_type="application/pdf", data="JVBERi0=")
FILE_DOC = DocumentBlock(source_type="file", file_id="file-abc")
IMAGE = ImageBlock(media_type="image/png", data="iVBORw0KGgo=")


def _conv(*blocks) -> list[Message]:
    """System, a user message holding ``blocks`` (index 1), an answer, a follow-up."""
    return [Message(id="s", role="system", blocks=[TextBlock(text="Be brief.")]),
            Message(id="u1", role="user", blocks=[TextBlock(text="What is in this?"), *blocks]),
            Message(id="a1", role="assistant", blocks=[TextBlock(text="A recording.")]),
            Message(id="u2", role="user", blocks=[TextBlock(text="Thanks.")])]


def _rules(msgs, provider) -> list[tuple[int, str]]:
    return [(v.index, v.rule) for v in check(msgs, provider)]


@pytest.mark.parametrize("block", [AUDIO, PDF, FILE_DOC], ids=["audio", "pdf", "file"])
def test_deepseek_takes_no_audio_or_file(block) -> None:
    """Source: https://api-docs.deepseek.com/api/create-chat-completion (user content is a
    string or text parts); the API answers any other part with "unknown variant `image_url`,
    expected `text`" (quoted in Zoo-Code-Org/Zoo-Code#1106). OpenAI, same wire, takes them."""
    msgs = _conv(block)
    found = check(msgs, "deepseek")
    assert [(v.index, v.rule) for v in found] == [(1, BLOCK_NOT_SENDABLE)]
    assert "DeepSeek" in found[0].message and "api-docs.deepseek.com" in found[0].message
    assert _rules(msgs, "openai") == []
    # the rendered payload is caught by the wire check too, at its payload index
    assert (1, BLOCK_NOT_SENDABLE) in [(v.index, v.rule) for v in check_wire(render(msgs, "openai"), "deepseek")]


@pytest.mark.parametrize("block", [AUDIO, PDF], ids=["audio", "pdf"])
def test_qwen3_text_models_take_no_audio_or_file(block) -> None:
    """Source: the Qwen3 chat_template.jinja renders text content only; vLLM serving
    Qwen/Qwen3-8B answers a media part with "... is not a multimodal model"
    (vllm-project/vllm#19144)."""
    found = check(_conv(block), "qwen")
    assert [(v.index, v.rule) for v in found] == [(1, BLOCK_NOT_SENDABLE)]
    assert "vllm-project/vllm#19144" in found[0].message


@pytest.mark.parametrize("provider", ["qwen", "deepseek"])
def test_text_only_targets_get_an_image_as_a_reported_note(provider) -> None:
    """Sources: as above (DeepSeek: create-chat-completion; Qwen3: vllm-project/vllm#19144). An
    image is not refused but sent as the text IMAGE_NOTE, reported as an ``image-not-supported``
    conversion at its index; the payload passes the wire check, and a payload that still holds
    the image part does not."""
    msgs = _conv(IMAGE)
    assert _rules(msgs, provider) == []
    payload = render(msgs, provider)
    assert payload[1]["content"] == [{"type": "text", "text": "What is in this?"}, {"type": "text", "text": IMAGE_NOTE}]
    assert [(c.index, c.rule) for c in conversions(msgs, provider)] == [(1, "image-not-supported")]
    assert check_wire(payload, provider) == []
    assert [(v.index, v.rule) for v in check_wire(render(msgs, "openai"), provider)] == [(1, "image-not-supported")]


def test_gemini_openai_endpoint_takes_audio_and_images_but_no_file() -> None:
    """Source: https://ai.google.dev/gemini-api/docs/openai (user parts documented: text,
    image_url under "Image understanding", input_audio under "Audio understanding"; no file
    part, and a file_id names a file of OpenAI's Files API)."""
    assert _rules(_conv(AUDIO), "gemini") == []
    assert _rules(_conv(IMAGE), "gemini") == []
    for doc in (PDF, FILE_DOC):
        found = check(_conv(doc), "gemini")
        assert [(v.index, v.rule) for v in found] == [(1, BLOCK_NOT_SENDABLE)]
        assert "ai.google.dev/gemini-api/docs/openai" in found[0].message


def test_every_unsendable_rule_names_its_source() -> None:
    """Every entry of a profile's ``unsendable`` list carries its source, and a profile with
    such a list names a source for ``block-not-sendable``."""
    listed = {name: dict(p.unsendable) for name, p in PROFILES.items() if p.unsendable}
    assert set(listed) == {"deepseek", "qwen", "gemini"}
    for name, rules in listed.items():
        assert all(src.strip() for src in rules.values()), name
        assert PROFILES[name].sources.get(BLOCK_NOT_SENDABLE), name


def test_append_refuses_an_unsendable_block_naming_its_index(tmp_path) -> None:
    """Source: DeepSeek create-chat-completion (above). A DeepSeek session whose user sent an
    audio clip: append() raises PayloadInvalid naming message 1 and the rule, a user mistake
    (no stack trace needed), and nothing is stored (stored, the block would make every later
    prepare() fail: issue 25); the session still prepares."""
    with ContextManager(f"sqlite:///{tmp_path / 's.db'}", Policy.preset("default", provider="deepseek")) as cm:
        s = cm.session("u", "s")
        s.append(_conv(AUDIO)[:1])
        version = s.version
        with pytest.raises(PayloadInvalid) as err:
            s.append(_conv(AUDIO)[1:2])
        assert [(v.index, v.rule) for v in err.value.violations] == [(1, BLOCK_NOT_SENDABLE)]
        assert "message 1" in str(err.value)
        assert s.version == version and not any(isinstance(b, AudioBlock) for m in s.messages for b in m.blocks)
        s.append(_conv()[1:2])
        s.prepare()
