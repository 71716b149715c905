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

Reasoning is sent only for thinking blocks read from Responses items (they carry the
``rs_...`` id the API looks up, and ``encrypted_content``); reasoning from other providers
cannot be verified by OpenAI and is not sent.
"""

from __future__ import annotations

from typing import Any

from ..messages import ImageBlock, Message, TextBlock, ThinkingBlock, ToolUseBlock
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
            url = b.url if b.data is None else f"data:{b.media_type or 'image/png'};base64,{b.data}"
            out.append({"type": "input_image", "image_url": url, "detail": "auto"})
    return out


def _reasoning(b: ThinkingBlock) -> dict[str, Any] | None:
    note = _item_note(b)
    rid = note.get("id") or b.extra.get("id")
    if not isinstance(rid, str) or not rid:
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


def _assistant(m: Message) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    run: list[TextBlock] = []

    def flush() -> None:
        if not run:
            return
        text = "".join(b.text for b in run) if len(run) > 1 else run[0].text
        mid = _item_note(run[0]).get("id")
        if isinstance(mid, str) and mid:
            items.append({"type": "message", "role": "assistant", "id": mid, "status": "completed",
                          "content": [{"type": "output_text", "text": b.text, "annotations": []} for b in run]})
        else:
            items.append({"type": "message", "role": "assistant", "content": text})
        run.clear()

    for b in m.blocks:
        if isinstance(b, TextBlock):
            if run and (b.extra.get(_BOOK) or {}).get("start"):
                flush()
            run.append(b)
            continue
        flush()
        if isinstance(b, ThinkingBlock):
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
                imgs = any(isinstance(o, ImageBlock) for o in r.output)
                output = _parts(r.output) if imgs else r.text
                out.append({"type": "function_call_output", "call_id": r.tool_use_id, "output": output})
        else:
            out.append({"type": "message", "role": m.role, "content": _parts(m.blocks)})
    return out
