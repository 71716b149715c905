"""Anthropic Messages renderer: ``{"system"?, "messages"}``.

Shape (https://docs.anthropic.com/en/api/messages): a first system message becomes the
top-level ``system`` (a string, or a list of text blocks); ``tool`` messages in a row become
one user message of ``tool_result`` blocks (``content`` a string or text / image blocks,
``is_error: true`` for an error state); assistant content is a list of ``thinking``
(with its ``signature``), ``redacted_thinking``, ``text``, ``image`` and ``tool_use`` blocks.

Other blocks: ``text`` keeps its ``citations``; an image with a Files-API ``file_id`` is sent
as a ``{"type": "file", "file_id"}`` source; :class:`~ctxwise.messages.DocumentBlock` ->
``document`` and :class:`~ctxwise.messages.SearchResultBlock` -> ``search_result``
(``anthropic/types/document_block_param.py``, ``search_result_block_param.py``); an Anthropic
:class:`~ctxwise.messages.ProviderBlock` (``server_tool_use``, ``web_search_tool_result``,
``web_fetch_tool_result``, the code-execution results, ``mcp_tool_use`` / ``mcp_tool_result``,
``container_upload``) is sent exactly as it was read. Blocks Anthropic has no form for (audio,
refusals, other providers' blocks) are not written: :func:`ctxwise.providers.check` reports
them (``block-not-sendable``, ``foreign-provider-block``) before a payload is built.

Thinking blocks without a signature (DeepSeek / OpenAI-compatible reasoning read from another
provider's record) are not sent: Anthropic verifies every thinking block's signature
("Invalid `signature` in `thinking` block") and ignores the thinking of earlier turns
(https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking).
A later system message is written with role ``system``: the native form
(``native_system``, ``Policy.native_system``; SDK 2.17 ``types/system_message_param.py``, part
of the standard ``MessageParam``); otherwise the list
was converted first (:mod:`ctxwise.providers.convert` folds it into a user turn) and one
left over is reported by the wire check.

Prompt-cache breakpoints: a ``cache_control`` the caller put on a text, image, tool_use or
tool_result block (or a system text block) is kept on that block as long as the block is in the
context (a cleared result keeps its mark; a summarized turn's marks go with it). Anthropic
accepts at most 4 per request and none on thinking blocks
(https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching): when the stored
history holds more (an agent that marks its newest message on every turn), the system
prompt's marks are kept and the newest message marks fill the rest, since clients keep a
breakpoint on their static prefix and move the other forward with the conversation.
"""

from __future__ import annotations

import copy
from typing import Any

from ..messages import (
    DocumentBlock,
    ImageBlock,
    Message,
    ProviderBlock,
    SearchResultBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)


def _image(b: ImageBlock) -> dict[str, Any]:
    src: dict[str, Any]
    if b.data is not None:
        src = {"type": "base64", "media_type": b.media_type or "image/png", "data": b.data}
    elif b.url is None and b.file_id is not None:
        src = {"type": "file", "file_id": b.file_id}  # anthropic/types/file_image_source_param.py
    else:
        src = {"type": "url", "url": b.url or ""}
    return {"type": "image", "source": src}


def _document(b: DocumentBlock) -> dict[str, Any]:
    """A ``document`` block (``anthropic/types/document_block_param.py``)."""
    src: dict[str, Any] = {"type": b.source_type}
    if b.source_type == "base64":
        src.update(media_type=b.media_type or "application/pdf", data=b.data or "")
    elif b.source_type == "text":
        src.update(media_type="text/plain", data=b.data or "")
    elif b.source_type == "url":
        src["url"] = b.url or ""
    elif b.source_type == "file":
        src["file_id"] = b.file_id or ""
    else:
        src["content"] = [d for d in (_block(x) for x in b.content or []) if d is not None]
    d: dict[str, Any] = {"type": "document", "source": src}
    for k in ("title", "context", "citations"):
        if getattr(b, k) is not None:
            d[k] = getattr(b, k)
    return d


def _text(b: TextBlock) -> dict[str, Any]:
    d: dict[str, Any] = {"type": "text", "text": b.text}
    if b.citations is not None:
        d["citations"] = b.citations
    return d


MAX_CACHE_BREAKPOINTS = 4
"""Anthropic's limit of ``cache_control`` blocks per request."""


def _cache_control(b: Any) -> dict[str, Any] | None:
    cc = b.extra.get("cache_control") if isinstance(getattr(b, "extra", None), dict) else None
    return cc if isinstance(cc, dict) and cc.get("type") == "ephemeral" else None


def _block(b: Any) -> dict[str, Any] | None:
    if type(b) is TextBlock and not b.extra:  # the common case first: no mark, no other fields
        return _text(b)
    if isinstance(b, ProviderBlock):
        # kept verbatim (its own cache_control included); another provider's block is not sent
        # (check() reports it as foreign-provider-block before anything is rendered)
        return copy.deepcopy(b.raw) if b.provider == "anthropic" else None
    d = _plain_block(b)
    if d is not None and d["type"] not in ("thinking", "redacted_thinking") and (cc := _cache_control(b)):
        d["cache_control"] = dict(cc)
    return d


def _plain_block(b: Any) -> dict[str, Any] | None:
    if isinstance(b, TextBlock):
        return _text(b)
    if isinstance(b, ToolResultBlock):
        return _tool_result(b)
    if isinstance(b, ToolUseBlock):
        return {"type": "tool_use", "id": b.id, "name": b.name, "input": b.input}
    if isinstance(b, ThinkingBlock):
        if b.redacted:
            return {"type": "redacted_thinking", "data": b.thinking}
        if b.signature is None:
            return None
        return {"type": "thinking", "thinking": b.thinking, "signature": b.signature}
    if isinstance(b, ImageBlock):
        return _image(b)
    if isinstance(b, DocumentBlock):
        return _document(b)
    if isinstance(b, SearchResultBlock):
        sr: dict[str, Any] = {"type": "search_result", "source": b.source, "title": b.title,
                              "content": [_text(x) for x in b.content]}
        if b.citations is not None:
            sr["citations"] = b.citations
        return sr
    return None  # audio, refusal: Anthropic has no such block (check(): block-not-sendable)


def _tool_result(b: ToolResultBlock) -> dict[str, Any]:
    """A ``tool_result`` block: ``content`` a string for one plain text output, else blocks."""
    d: dict[str, Any] = {"type": "tool_result", "tool_use_id": b.tool_use_id}
    if len(b.output) == 1 and isinstance(b.output[0], TextBlock) and b.output[0].citations is None:
        d["content"] = b.output[0].text
    elif b.output:
        d["content"] = [_block(x) for x in b.output]
    if b.state == "error":
        d["is_error"] = True
    return d


def _marked(m: Message) -> bool:
    """Whether a block of ``m`` (or of a tool result's output) carries a ``cache_control``
    mark (kept in the message's memo)."""
    memo = m.memo()
    found = memo.get("anthropic/cache-control")
    if found is None:
        found = memo["anthropic/cache-control"] = any(
            _cache_control(b) is not None for b in m.blocks) or any(
            _cache_control(o) is not None for r in m.tool_results for o in r.output)
    return bool(found)


def sourced(msgs: tuple[Message, ...]) -> tuple[Message, ...]:
    """``msgs``, or ``()`` when one carries a ``cache_control`` mark: whether a mark is kept
    depends on the entry's place (:func:`_keep_last_breakpoints`), so the entry is not a
    function of its messages alone."""
    return () if any(_marked(m) for m in msgs) else msgs


def _blocks(blocks: list[Any]) -> list[dict[str, Any]]:
    return [d for d in (_block(b) for b in blocks) if d is not None]


def render(messages: list[Message], native_system: bool = False,
           sources: list[tuple[Message, ...]] | None = None) -> dict[str, Any]:
    """The ``{"system"?, "messages"}`` payload for ``messages`` (pass it as
    ``client.messages.create(model=..., max_tokens=..., **payload)``). ``native_system``:
    later system messages are written as the ``{"role": "system", "content"}`` message of
    the standard ``MessageParam`` (text blocks only). ``sources``, when given, receives for ``system`` (when
    written) and then for each entry of ``messages`` the messages it was rendered from, when
    the entry is a function of those messages alone (:func:`sourced`), else ``()``."""
    payload: dict[str, Any] = {}
    msgs: list[dict[str, Any]] = []
    i, n = 0, len(messages)
    if n and messages[0].role == "system":
        if sources is not None:
            sources.append(sourced((messages[0],)))
        blocks = messages[0].blocks
        if (len(blocks) == 1 and isinstance(blocks[0], TextBlock) and _cache_control(blocks[0]) is None
                and blocks[0].citations is None):
            payload["system"] = blocks[0].text
        else:
            payload["system"] = [d for d in (_block(b) for b in blocks if isinstance(b, TextBlock)) if d]
        i = 1
    while i < n:
        m = messages[i]
        if m.role == "tool":
            results: list[Any] = []
            start = i
            while i < n and messages[i].role == "tool":
                results.extend(messages[i].blocks)
                i += 1
            msgs.append({"role": "user", "content": _blocks(results)})
            if sources is not None:
                sources.append(sourced(tuple(messages[start:i])))
            continue
        msgs.append(_message(m, native_system))
        if sources is not None:
            sources.append(() if m.role == "system" else sourced((m,)))
        i += 1
    payload["messages"] = msgs
    _keep_last_breakpoints(payload)
    return payload


def _message(m: Message, native_system: bool) -> dict[str, Any]:
    """One user, assistant or (``native_system``) system message."""
    if (m.role == "user" and len(m.blocks) == 1 and isinstance(m.blocks[0], TextBlock)
            and _cache_control(m.blocks[0]) is None and m.blocks[0].citations is None):
        return {"role": "user", "content": m.blocks[0].text}
    if m.role == "system" and native_system:
        return {"role": "system", "content": _blocks([b for b in m.blocks if isinstance(b, TextBlock)])}
    return {"role": m.role, "content": _blocks(m.blocks)}


def _keep_last_breakpoints(payload: dict[str, Any]) -> None:
    """Keep at most :data:`MAX_CACHE_BREAKPOINTS` ``cache_control`` marks: the system
    prompt's (its last ones, should it hold more than the limit), then the newest in the
    messages (request order; tool_result content included). The others are removed."""

    def walk(blocks: Any, into: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for d in blocks if isinstance(blocks, list) else []:
            if isinstance(d, dict):
                if d.get("type") == "tool_result":
                    walk(d.get("content"), into)
                if "cache_control" in d:
                    into.append(d)
        return into

    system = walk(payload.get("system"), [])
    messages: list[dict[str, Any]] = []
    for m in payload["messages"]:
        walk(m["content"], messages)
    keep_system = system[len(system) - min(len(system), MAX_CACHE_BREAKPOINTS):]
    room = MAX_CACHE_BREAKPOINTS - len(keep_system)
    keep = {id(d) for d in keep_system} | {id(d) for d in messages[len(messages) - min(len(messages), room):]}
    for d in system + messages:
        if id(d) not in keep:
            del d["cache_control"]
