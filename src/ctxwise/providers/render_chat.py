"""Chat Completions renderer (OpenAI, DeepSeek, Qwen on vLLM, Gemini's OpenAI endpoint).

Shape (https://platform.openai.com/docs/api-reference/chat/create): a list of
``{"role": "system", "content"}``, ``{"role": "user", "content", "name"?}``,
``{"role": "assistant", "content", "name"?, "tool_calls"?, "<reasoning_field>"?}`` and
``{"role": "tool", "tool_call_id", "content"}``. ``content`` is a string when the message is
one text block, else a list of ``text`` / ``image_url`` parts (images only in user
messages: the API takes none elsewhere; also ``input_audio`` and ``file`` parts for audio and
base64 / Files-API documents; an assistant refusal is the message's ``refusal``; image
``detail`` is kept; a tool result's images are named in its text, see
:func:`_tool_text`, so the model knows it did not get them). One canonical tool message with several results
becomes several ``tool`` messages. DeepSeek thinking mode passes reasoning back as
``reasoning_content`` (https://api-docs.deepseek.com/guides/thinking_mode).
"""

from __future__ import annotations

from typing import Any

from ..messages import (
    AudioBlock,
    DocumentBlock,
    ImageBlock,
    Message,
    RefusalBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from .arguments import call_arguments


def thinking_text(blocks: list[ThinkingBlock]) -> str:
    """The joined text of non-redacted thinking blocks (what the reasoning field carries)."""
    return "\n".join(b.thinking for b in blocks if not b.redacted)


def _image(b: ImageBlock) -> dict[str, Any]:
    url = b.url if b.data is None else f"data:{b.media_type or 'image/png'};base64,{b.data}"
    iu: dict[str, Any] = {"url": url or ""}
    if b.detail in ("low", "high", "auto"):
        iu["detail"] = b.detail
    return {"type": "image_url", "image_url": iu}


def _part(b: Any) -> dict[str, Any]:
    """A user content part: text, ``image_url``, ``input_audio``
    (``chat_completion_content_part_input_audio_param.py``) or ``file``
    (``chat_completion_content_part_param.File``: a data URL or a Files-API id)."""
    if isinstance(b, TextBlock):
        return {"type": "text", "text": b.text}
    if isinstance(b, ImageBlock):
        return _image(b)
    if isinstance(b, AudioBlock):
        return {"type": "input_audio", "input_audio": {"data": b.data, "format": b.format}}
    f: dict[str, Any] = {}
    if b.source_type == "base64":
        f["file_data"] = f"data:{b.media_type or 'application/pdf'};base64,{b.data or ''}"
    else:
        f["file_id"] = b.file_id or ""
    if b.filename is not None:
        f["filename"] = b.filename
    return {"type": "file", "file": f}


def _sendable(b: Any, user: bool) -> bool:
    if isinstance(b, TextBlock):
        return True
    if not user:
        return False
    if isinstance(b, ImageBlock):
        return b.data is not None or b.url is not None
    if isinstance(b, DocumentBlock):
        return b.source_type in ("base64", "file")
    return isinstance(b, AudioBlock)


def _content(blocks: list[Any], user: bool) -> Any:
    parts = [b for b in blocks if _sendable(b, user)]
    if len(parts) == 1 and isinstance(parts[0], TextBlock):
        return parts[0].text
    if not parts:
        return ""
    return [_part(b) for b in parts]


def _tool_text(r: ToolResultBlock) -> str:
    """A tool result's text for a ``tool`` message (text only on this wire): its text, and a
    note naming the images it held, which are not sent (they are still counted in the context
    size, so the size is never under what is sent)."""
    images = sum(1 for b in r.output if isinstance(b, ImageBlock))
    if not images:
        return r.text
    note = (f"(the tool returned {images} image{'s' if images > 1 else ''}, not sent: "
            "this API's tool messages carry text only)")
    return f"{r.text}\n{note}" if r.text else note


def _call(b: ToolUseBlock, extensions: bool) -> dict[str, Any]:
    d: dict[str, Any] = {"id": b.id, "type": "function", "function": {"name": b.name, "arguments": call_arguments(b)}}
    sig = thought_signature(b) if extensions else None
    if sig is not None:
        d["extra_content"] = {"google": {"thought_signature": sig}}
    return d


def thought_signature(b: ToolUseBlock) -> str | None:
    """The Gemini thought signature a tool call was received with
    (``extra_content.google.thought_signature`` on the OpenAI-compatible endpoint, kept in the
    block's ``extra``), or None."""
    extra = b.extra.get("extra_content") if isinstance(b.extra, dict) else None
    google = extra.get("google") if isinstance(extra, dict) else None
    sig = google.get("thought_signature") if isinstance(google, dict) else None
    return sig if isinstance(sig, str) else None


def _tool_message(r: ToolResultBlock, names: dict[str, str], tool_names: bool) -> dict[str, Any]:
    """One ``tool`` message; with ``tool_names``, ``name`` is the function answered (the
    result's own name, else its call's in ``names``)."""
    d: dict[str, Any] = {"role": "tool", "tool_call_id": r.tool_use_id, "content": _tool_text(r)}
    name = r.name or names.get(r.tool_use_id)
    if tool_names and name:
        d["name"] = name
    return d


def _assistant(m: Message, reasoning_field: str | None, extensions: bool) -> dict[str, Any]:
    """An assistant message's keys but ``role`` and ``name``."""
    d: dict[str, Any] = {}
    calls = m.tool_uses
    texts = [b for b in m.blocks if isinstance(b, TextBlock)]
    refusals = [b.text for b in m.blocks if isinstance(b, RefusalBlock)]
    d["content"] = _content(texts, False) if texts or not (calls or refusals) else None
    if refusals:  # chat_completion_assistant_message_param.py ``refusal``
        d["refusal"] = "\n".join(refusals)
    if calls:
        d["tool_calls"] = [_call(b, extensions) for b in calls]
    if reasoning_field and m.thinking:
        d[reasoning_field] = thinking_text(m.thinking)
    return d


DEVELOPER_BOOKS = ("_openai", "_responses")
"""The metadata keys of the OpenAI chat and Responses readers' notes, where a message read
from role ``developer`` has ``{"role": "developer"}`` (canonically a ``system`` message)."""


def is_developer(m: Message) -> bool:
    """Whether system message ``m`` was given with role ``developer`` (OpenAI chat or Responses)."""
    return m.role == "system" and any(isinstance(m.metadata.get(k), dict) and m.metadata[k].get("role") == "developer"
                                      for k in DEVELOPER_BOOKS)


def render(messages: list[Message], *, reasoning_field: str | None, tool_names: bool = False,
           extensions: bool = False, developer: bool = False) -> list[dict[str, Any]]:
    """The Chat Completions ``messages`` list for ``messages``.

    ``reasoning_field`` names the key that carries an assistant message's reasoning (the
    joined text of its non-redacted thinking blocks); None sends no reasoning. ``tool_names``
    gives each ``tool`` message ``name``: the function it answers (Gemini,
    https://ai.google.dev/gemini-api/docs/openai). ``extensions`` sends each tool call's
    Gemini thought signature back as ``extra_content.google.thought_signature``, as received
    (https://ai.google.dev/gemini-api/docs/thought-signatures). ``developer``: a system message
    given as ``developer`` is sent as ``developer`` (OpenAI: ``openai/types/chat/
    chat_completion_developer_message_param.py``), else as ``system``.
    """
    out: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for m in messages:
        if m.role == "tool":
            out += [_tool_message(r, names, tool_names) for r in m.tool_results]
            continue
        d: dict[str, Any] = {"role": "developer" if developer and is_developer(m) else m.role}
        if m.role == "assistant":
            d.update(_assistant(m, reasoning_field, extensions))
            names = {b.id: b.name for b in m.tool_uses} or names
        else:
            d["content"] = _content(m.blocks, m.role == "user")
        if m.name is not None and m.role in ("user", "assistant", "system"):
            d["name"] = m.name
        out.append(d)
    return out
