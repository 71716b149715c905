"""Anthropic Messages renderer: ``{"system"?, "messages"}``.

Shape (https://docs.anthropic.com/en/api/messages): a first system message becomes the
top-level ``system`` (a string, or a list of text blocks); ``tool`` messages in a row become
one user message of ``tool_result`` blocks (``content`` a string or text / image blocks,
``is_error: true`` for an error state); assistant content is a list of ``thinking``
(with its ``signature``), ``redacted_thinking``, ``text``, ``image`` and ``tool_use`` blocks.

Thinking blocks without a signature (DeepSeek / OpenAI-compatible reasoning read from another
provider's record) are not sent: Anthropic verifies every thinking block's signature
("Invalid `signature` in `thinking` block") and ignores the thinking of earlier turns
(https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking).
A later system message is written with role ``system`` so that the wire check reports it.
"""

from __future__ import annotations

from typing import Any

from ..messages import ImageBlock, Message, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock


def _image(b: ImageBlock) -> dict[str, Any]:
    if b.data is not None:
        src = {"type": "base64", "media_type": b.media_type or "image/png", "data": b.data}
    else:
        src = {"type": "url", "url": b.url or ""}
    return {"type": "image", "source": src}


def _block(b: Any) -> dict[str, Any] | None:
    if isinstance(b, TextBlock):
        return {"type": "text", "text": b.text}
    if isinstance(b, ImageBlock):
        return _image(b)
    if isinstance(b, ThinkingBlock):
        if b.redacted:
            return {"type": "redacted_thinking", "data": b.thinking}
        if b.signature is None:
            return None
        return {"type": "thinking", "thinking": b.thinking, "signature": b.signature}
    if isinstance(b, ToolUseBlock):
        return {"type": "tool_use", "id": b.id, "name": b.name, "input": b.input}
    assert isinstance(b, ToolResultBlock)
    d: dict[str, Any] = {"type": "tool_result", "tool_use_id": b.tool_use_id}
    if len(b.output) == 1 and isinstance(b.output[0], TextBlock):
        d["content"] = b.output[0].text
    elif b.output:
        d["content"] = [_block(x) for x in b.output]
    if b.state == "error":
        d["is_error"] = True
    return d


def _blocks(blocks: list[Any]) -> list[dict[str, Any]]:
    return [d for d in (_block(b) for b in blocks) if d is not None]


def render(messages: list[Message]) -> dict[str, Any]:
    """The ``{"system"?, "messages"}`` payload for ``messages`` (pass it as
    ``client.messages.create(model=..., max_tokens=..., **payload)``)."""
    payload: dict[str, Any] = {}
    msgs: list[dict[str, Any]] = []
    i, n = 0, len(messages)
    if n and messages[0].role == "system":
        blocks = messages[0].blocks
        if len(blocks) == 1 and isinstance(blocks[0], TextBlock):
            payload["system"] = blocks[0].text
        else:
            payload["system"] = [{"type": "text", "text": b.text} for b in blocks if isinstance(b, TextBlock)]
        i = 1
    while i < n:
        m = messages[i]
        if m.role == "tool":
            results: list[Any] = []
            while i < n and messages[i].role == "tool":
                results.extend(messages[i].blocks)
                i += 1
            msgs.append({"role": "user", "content": _blocks(results)})
            continue
        if m.role == "user" and len(m.blocks) == 1 and isinstance(m.blocks[0], TextBlock):
            msgs.append({"role": "user", "content": m.blocks[0].text})
        else:
            msgs.append({"role": m.role, "content": _blocks(m.blocks)})
        i += 1
    payload["messages"] = msgs
    return payload
