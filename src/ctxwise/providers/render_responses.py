"""OpenAI Responses renderer: a list of input items (``client.responses.create(input=...)``).

Shape (https://platform.openai.com/docs/api-reference/responses/create):

* system / user messages -> ``{"type": "message", "role", "content"}`` (``content`` a string,
  or ``input_text`` / ``input_image`` parts);
* an assistant message -> its blocks in order: a thinking block -> a ``reasoning`` item
  (``id``, ``summary``, ``encrypted_content``), a run of text -> an assistant ``message``
  (an output message with its ``id`` when the record had one, else the short form), a
  ``tool_use`` -> a ``function_call`` (``call_id``, ``name``, ``arguments``, its ``id`` when
  known). So a reasoning item stays right before the item it preceded
  (https://platform.openai.com/docs/guides/reasoning, "Keeping reasoning items in context");
* a tool message -> one ``function_call_output`` per result.

Other blocks: a Responses :class:`~ctxwise.messages.ProviderBlock` (``compaction``,
``compaction_trigger``, ``configuration_update``, hosted and client-run tool calls and their
outputs: ``web_search_call``, ``local_shell_call(_output)``, ``shell_call(_output)``,
``apply_patch_call(_output)``, ``mcp_call``, ...) is sent exactly as it was read, where it
was read; an image keeps its ``detail`` and Files-API ``file_id``; a document from base64, a
URL or a file id is an ``input_file`` part; a refusal is a ``refusal`` part of its output
message. Other families' blocks and blocks Responses has no form for are not written:
:func:`ctxwise.providers.check` reports them first.

Reasoning is sent only for thinking blocks read from Responses items (they carry the
``rs_...`` id the API looks up, and ``encrypted_content``); reasoning from other providers
cannot be verified by OpenAI and is not sent.
"""

from __future__ import annotations

import copy
from typing import Any

from .render_chat import is_developer
from ..messages import (
    DocumentBlock,
    ImageBlock,
    Message,
    ProviderBlock,
    RefusalBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from .arguments import call_arguments

_BOOK = "_responses"


def _item_note(b: Any) -> dict[str, Any]:
    """The item skeleton :mod:`ctxwise.formats.responses` kept for block ``b`` (or {})."""
    note = (b.extra.get(_BOOK) or {}).get("item")
    return note if isinstance(note, dict) else {}


def _parts(blocks: list[Any]) -> Any:
    if not blocks:
        return ""
    if len(blocks) == 1 and isinstance(blocks[0], TextBlock):
        return blocks[0].text
    out: list[dict[str, Any]] = []
    for b in blocks:
        if isinstance(b, TextBlock):
            out.append({"type": "input_text", "text": b.text})
        elif isinstance(b, ImageBlock):
            out.append(_image(b))
        elif isinstance(b, DocumentBlock) and b.source_type in ("base64", "url", "file"):
            out.append(_file(b))
    return out


def _image(b: ImageBlock) -> dict[str, Any]:
    """An ``input_image`` part (``openai/types/responses/response_input_image_param.py``):
    a URL, a data URL or a Files-API ``file_id``; ``detail`` as stored, ``auto`` by default."""
    part: dict[str, Any] = {"type": "input_image"}
    if b.data is not None:
        part["image_url"] = f"data:{b.media_type or 'image/png'};base64,{b.data}"
    elif b.url is not None:
        part["image_url"] = b.url
    elif b.file_id is not None:
        part["file_id"] = b.file_id
    else:
        part["image_url"] = ""
    part["detail"] = b.detail or "auto"  # openai/types/responses/image_detail.py
    return part


def _file(b: DocumentBlock) -> dict[str, Any]:
    """An ``input_file`` part (``openai/types/responses/response_input_file_param.py``)."""
    part: dict[str, Any] = {"type": "input_file"}
    if b.source_type == "base64":
        part["file_data"] = f"data:{b.media_type or 'application/pdf'};base64,{b.data or ''}"
    elif b.source_type == "url":
        part["file_url"] = b.url or ""
    else:
        part["file_id"] = b.file_id or ""
    if b.filename is not None:
        part["filename"] = b.filename
    return part


def reasoning_item_id(b: ThinkingBlock) -> str | None:
    """The ``rs_...`` id of the Responses ``reasoning`` item thinking block ``b`` was read
    from, or None: thinking read from another provider (or stored without it) has none, and
    the Responses API takes a reasoning input item only with its id
    (``openai/types/responses/response_reasoning_item_param.py``: ``id: Required[str]``), so
    such a block is not sent (:mod:`ctxwise.providers.convert` reports it)."""
    rid = _item_note(b).get("id") or b.extra.get("id")
    return rid if isinstance(rid, str) and rid else None


def summary_added(b: ThinkingBlock) -> bool:
    """Whether thinking block ``b`` was read from a Responses ``reasoning`` item with no
    ``summary`` key: the request item needs one (``summary: Required[Iterable[Summary]]``,
    ``openai/types/responses/response_reasoning_item_param.py``), so ``[]`` is sent."""
    return bool((b.extra.get(_BOOK) or {}).get("no_summary")) and not b.thinking


def _reasoning(b: ThinkingBlock) -> dict[str, Any] | None:
    note = _item_note(b)
    rid = reasoning_item_id(b)
    if rid is None:
        return None
    kept = (b.extra.get(_BOOK) or {}).get("summary")
    if isinstance(kept, list) and "\n\n".join(s.get("text", "") for s in kept if isinstance(s, dict)) == b.thinking:
        summary = [{"type": "summary_text", "text": s.get("text", "")} for s in kept if isinstance(s, dict)]
    else:
        summary = [{"type": "summary_text", "text": b.thinking}] if b.thinking else []
    item: dict[str, Any] = {"type": "reasoning", "id": rid, "summary": summary}
    enc = note.get("encrypted_content", b.extra.get("encrypted_content"))
    if isinstance(enc, str):
        item["encrypted_content"] = enc
    return item


def _output_part(b: TextBlock | RefusalBlock) -> dict[str, Any]:
    if isinstance(b, RefusalBlock):
        return {"type": "refusal", "refusal": b.text}
    return {"type": "output_text", "text": b.text, "annotations": b.citations or []}


def _assistant(m: Message) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    run: list[TextBlock | RefusalBlock] = []

    def flush() -> None:
        if not run:
            return
        mid = _item_note(run[0]).get("id")
        if isinstance(mid, str) and mid:
            items.append({"type": "message", "role": "assistant", "id": mid, "status": "completed",
                          "content": [_output_part(b) for b in run]})
        else:  # the short form holds text only (a refusal needs its output message id: check())
            texts = [b.text for b in run if isinstance(b, TextBlock)]
            if texts:
                items.append({"type": "message", "role": "assistant", "content": "".join(texts)})
        run.clear()

    for b in m.blocks:
        if isinstance(b, (TextBlock, RefusalBlock)):
            if run and (b.extra.get(_BOOK) or {}).get("start"):
                flush()
            run.append(b)
            continue
        flush()
        if isinstance(b, ProviderBlock):
            if b.provider == "openai_responses":  # kept verbatim; another family's: check() refuses it
                items.append(copy.deepcopy(b.raw))
        elif isinstance(b, ThinkingBlock):
            r = _reasoning(b)
            if r is not None:
                items.append(r)
        elif isinstance(b, ToolUseBlock):
            fc: dict[str, Any] = {"type": "function_call", "call_id": b.id, "name": b.name,
                                  "arguments": call_arguments(b)}
            fid = _item_note(b).get("id")
            if isinstance(fid, str) and fid:
                fc["id"] = fid
            items.append(fc)
    flush()
    if not items:
        items.append({"type": "message", "role": "assistant", "content": ""})
    return items


def render(messages: list[Message]) -> list[dict[str, Any]]:
    """The Responses ``input`` item list for ``messages``."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "assistant":
            out.extend(_assistant(m))
        elif m.role == "tool":
            for r in m.tool_results:
                parts = any(not isinstance(o, TextBlock) for o in r.output)
                output = _parts(r.output) if parts else r.text
                out.append({"type": "function_call_output", "call_id": r.tool_use_id, "output": output})
        elif m.blocks and all(isinstance(b, ProviderBlock) for b in m.blocks):
            out.extend(copy.deepcopy(b.raw) for b in m.blocks if isinstance(b, ProviderBlock)
                       and b.provider == "openai_responses")
        else:
            role = "developer" if is_developer(m) else m.role  # EasyInputMessageParam.role takes it
            out.append({"type": "message", "role": role, "content": _parts(m.blocks)})
    return out
