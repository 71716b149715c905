"""OpenAI Responses API input items ↔ canonical.

Shape (https://platform.openai.com/docs/api-reference/responses/create, ``input`` as a list):
``{"type": "message", "role", "content": str | [parts]}`` (``type`` may be omitted),
``{"type": "reasoning", "id", "summary": [{"type": "summary_text", "text"}],
"encrypted_content"?}``, ``{"type": "function_call", "id"?, "call_id", "name", "arguments":
<JSON string>}`` and ``{"type": "function_call_output", "call_id", "output"}``. The provider
rules: an output needs an earlier call with its ``call_id``; a reasoning item travels with the
item that follows it ("Item of type 'reasoning' was provided without its required following
item").

Mapping: consecutive assistant-side items (reasoning, assistant ``message``, ``function_call``)
form one canonical assistant message, in order: reasoning → :class:`ThinkingBlock` (text = the
summary texts joined by a blank line; the item itself, ``id`` and ``encrypted_content``
included, kept in the block's ``extra``), message parts → text blocks, function_call →
:class:`ToolUseBlock` (``id`` = ``call_id``). Each ``function_call_output`` → one canonical
``tool`` message. User / system / developer messages → their own messages. Item skeletons are
kept only where they differ from the writer's default, so the round trip is exact.

Other items are kept verbatim as :class:`ProviderBlock`: hosted and client-run tool calls and
their outputs, and ``compaction``, join the assistant message being read (:data:`MODEL_ITEMS`);
``compaction_trigger``, ``configuration_update``, ``additional_tools`` and ``item_reference``
are each a ``user`` message of one block (:data:`CLIENT_ITEMS`). Parts: ``input_image`` keeps
``file_id`` and ``detail``; ``input_file`` ↔ :class:`DocumentBlock`; ``refusal`` ↔
:class:`RefusalBlock`; ``output_text.annotations`` ↔ ``TextBlock.citations``.
"""

from __future__ import annotations

import json
from typing import Any, cast

from .. import nesting
from ..errors import FormatError
from ..messages import (
    PROVIDER_CALL_KINDS,
    PROVIDER_RESULT_KINDS,
    DocumentBlock,
    ImageBlock,
    Message,
    ProviderBlock,
    RefusalBlock,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from ._common import (
    CARRY,
    Fixes,
    book_key,
    default_id,
    image_from_b64,
    need_dict,
    no_call,
    order_note,
    parse_data_url,
    reorder,
    seal,
    split_known,
    spread,
    with_book,
)

BOOK = book_key("responses")
MODEL_ITEMS = (
    "compaction", "web_search_call", "file_search_call", "computer_call", "code_interpreter_call",
    "image_generation_call", "local_shell_call", "shell_call", "apply_patch_call", "mcp_call", "mcp_list_tools",
    "mcp_approval_request", "custom_tool_call", "tool_search_call", "program",
    "computer_call_output", "local_shell_call_output", "shell_call_output", "apply_patch_call_output",
    "custom_tool_call_output", "mcp_approval_response", "tool_search_output", "program_output",
)
"""Responses items read as :class:`~ctxwise.messages.ProviderBlock` into the assistant message
being read (a hosted or client-run tool loop stays one unit with the reasoning around it):
``openai/types/responses/response_input_item_param.py``."""
CLIENT_ITEMS = ("compaction_trigger", "configuration_update", "additional_tools", "item_reference")
"""Responses items the client adds between turns, each read as a ``user`` message holding one
:class:`~ctxwise.messages.ProviderBlock` (``compaction_trigger`` must be the last input item)."""
PROVIDER_ITEMS = MODEL_ITEMS + CLIENT_ITEMS
ITEM_TYPES = ("message", "reasoning", "function_call", "function_call_output") + PROVIDER_ITEMS
PART_TYPES = ("input_text", "output_text", "input_image", "input_file", "refusal")
_ROLES: dict[str, Role] = {"user": "user", "system": "system", "developer": "system", "assistant": "assistant"}
_SKEL = {
    "message": {"type": "message", "role": "assistant", "content": None},
    "reasoning": {"type": "reasoning", "summary": None},
    "function_call": {"type": "function_call", "call_id": None, "name": None, "arguments": None},
}
_NATURAL_MSG = ["type", "role", "content"]
_ITEM_KEYS = {
    "message": ("type", "id", "role", "content", "status"),
    "reasoning": ("type", "id", "summary", "encrypted_content", "content", "status"),
    "function_call": ("type", "id", "call_id", "name", "arguments", "status"),
}
_NATURAL_OUT = ["type", "call_id", "output"]


def _skeleton(raw: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any] | None:
    """``raw`` with ``fields`` blanked, or None when that equals the default skeleton."""
    sk = {k: (None if k in fields else v) for k, v in raw.items()}
    default = _SKEL[raw.get("type", "message")]
    return None if list(sk.items()) == list(default.items()) else sk


def _read_parts(content: Any, place: str, default_type: str) -> tuple[list[Any], str | None]:
    if isinstance(content, str):
        return ([TextBlock(text=content)] if content else []), ("str" if content else "empty")
    if not isinstance(content, list):
        raise FormatError(place, f"content must be a string or a list of parts, got {type(content).__name__}")
    blocks: list[Any] = []
    for j, p in enumerate(content):
        p = need_dict(p, f"{place}, part {j}", "a content part object")
        t = p.get("type")
        if t in ("input_text", "output_text"):
            notes = p.get("annotations")
            cites = notes if t == "output_text" and isinstance(notes, list) and notes else None
            rest = {k: (None if k == "text" or (k == "annotations" and cites) else v) for k, v in p.items()}
            dflt = {"type": default_type, "text": None}
            extra = {} if list(rest.items()) == list(dflt.items()) else {BOOK: {"part": rest}}
            blocks.append(TextBlock(text=p.get("text", ""), citations=cites, extra=extra))
        elif t == "input_image":
            blocks.append(_read_image_part(p, f"{place}, part {j}"))
        elif t == "input_file":
            blocks.append(_read_file_part(p, f"{place}, part {j}"))
        elif t == "refusal":
            rest = {k: (None if k == "refusal" else v) for k, v in p.items()}
            extra = {} if list(rest.items()) == [("type", "refusal"), ("refusal", None)] else {BOOK: {"part": rest}}
            blocks.append(RefusalBlock(text=str(p.get("refusal", "")), extra=extra))
        else:
            raise FormatError(f"{place}, part {j}", f"unknown block type {t!r}; expected one of {', '.join(PART_TYPES)}")
    return blocks, None


_IMAGE_KEYS = ("image_url", "file_id", "detail")
_FILE_KEYS = ("file_data", "file_id", "file_url", "filename")


def _read_image_part(p: dict[str, Any], place: str) -> ImageBlock:
    """An ``input_image`` part (``openai/types/responses/response_input_image_param.py``: an
    ``image_url`` (a URL or a data URL) or a Files-API ``file_id``, and ``detail``)."""
    url = p.get("image_url")
    if not (isinstance(url, str) and url) and not (isinstance(p.get("file_id"), str) and p["file_id"]):
        raise FormatError(place, "an input_image needs a non-empty image_url or file_id "
                                 "(openai/types/responses/response_input_image_param.py); an empty one is no image")
    parsed = parse_data_url(url) if isinstance(url, str) else None
    rest = {k: (None if k in _IMAGE_KEYS else v) for k, v in p.items()}
    extra = {BOOK: {"part": rest}}
    fid = p.get("file_id") if isinstance(p.get("file_id"), str) else None
    detail = p.get("detail") if p.get("detail") in ("low", "high", "auto", "original") else None
    if detail is None and "detail" in p:
        rest["detail"] = p["detail"]
    if fid is None and "file_id" in p:
        rest["file_id"] = p["file_id"]
    if parsed:
        img = image_from_b64(parsed[0], parsed[1], extra)
        return img.model_copy(update={"file_id": fid, "detail": detail})
    return ImageBlock(url=url, file_id=fid, detail=detail, extra=extra)


def _read_file_part(p: dict[str, Any], place: str) -> DocumentBlock:
    """An ``input_file`` part (``openai/types/responses/response_input_file_param.py``:
    ``file_data`` (a data URL), ``file_url`` or ``file_id``, and ``filename``) as a document."""
    rest = {k: (None if k in _FILE_KEYS else v) for k, v in p.items()}
    extra = {BOOK: {"part": rest}}
    name = p.get("filename") if isinstance(p.get("filename"), str) else None
    data = p.get("file_data")
    if isinstance(data, str):
        parsed = parse_data_url(data)
        if parsed is None:
            raise FormatError(place, "input_file file_data must be a data URL (data:<type>;base64,<data>)")
        return DocumentBlock(source_type="base64", media_type=parsed[0], data=parsed[1], filename=name,
                             file_id=p.get("file_id"), url=p.get("file_url"), extra=extra)
    if isinstance(p.get("file_url"), str):
        return DocumentBlock(source_type="url", url=p["file_url"], filename=name, file_id=p.get("file_id"), extra=extra)
    if isinstance(p.get("file_id"), str):
        return DocumentBlock(source_type="file", file_id=p["file_id"], filename=name, extra=extra)
    raise FormatError(place, "an input_file needs file_data, file_url or file_id")


def _item_type(raw: dict[str, Any], place: str) -> str:
    """The item's type (``message`` when it has a ``role`` and no ``type``); raises
    FormatError for an unknown type or message role."""
    t = raw.get("type", "message" if "role" in raw else "item_reference" if list(raw) == ["id"] else None)
    if t is None and "type" in raw and list(raw) == ["id", "type"]:
        t = "item_reference"  # ItemReference.type is Optional
    if t not in ITEM_TYPES:
        raise FormatError(place, f"unknown item type {t!r}; expected one of {', '.join(ITEM_TYPES)}")
    if t == "message" and raw.get("role") not in _ROLES:
        raise FormatError(place, f"unknown role {raw.get('role')!r}; expected one of {', '.join(_ROLES)}")
    return str(t)


def _call_key(t: str) -> str | None:
    """The key of a provider item that pairs a call with its output (None: not paired)."""
    if t == "local_shell_call_output":
        return "id"  # LocalShellCallOutput.id is the call's id
    if t == "mcp_approval_request":
        return "id"
    if t == "mcp_approval_response":
        return "approval_request_id"
    fam = "openai_responses"
    return "call_id" if t in PROVIDER_CALL_KINDS[fam] or t in PROVIDER_RESULT_KINDS[fam] else None


def _read_provider(raw: dict[str, Any], t: str) -> ProviderBlock:
    """A provider item kept verbatim (``call_id`` per :func:`_call_key`)."""
    key = _call_key(t)
    cid = raw.get(key) if key else None
    return ProviderBlock(provider="openai_responses", kind=t, raw=raw, call_id=cid if isinstance(cid, str) else None)


def _read_reasoning(raw: dict[str, Any], loose: dict[str, Any]) -> ThinkingBlock:
    """A ``reasoning`` item as a thinking block (text = its summary texts joined by a blank line)."""
    summary = raw.get("summary") or []
    texts = [s.get("text", "") for s in summary if isinstance(s, dict)]
    text = "\n\n".join(texts)
    book: dict[str, Any] = {}
    sk = _skeleton(raw, ("summary",))
    if sk:
        book["item"] = sk
    if summary != ([{"type": "summary_text", "text": text}] if text else []):
        book["summary"] = summary
    if "summary" not in raw:  # required on a request item: the renderer adds [] and reports it
        book["no_summary"] = True
    return ThinkingBlock(thinking=text, extra=with_book(loose, BOOK, book))


def _read_function_call(raw: dict[str, Any], loose: dict[str, Any], place: str) -> ToolUseBlock:
    """A ``function_call`` item as a tool use (``id`` = ``call_id``); raises FormatError for a
    missing ``call_id`` / ``name`` or ``arguments`` that are not JSON."""
    for k in ("call_id", "name"):
        if not isinstance(raw.get(k), str) or not raw.get(k):
            raise FormatError(place, f"a function_call needs a non-empty string {k!r} "
                                     f"(got {raw.get(k)!r}); its output is matched by call_id")
    args = raw.get("arguments", "")
    try:
        inp = nesting.loads(args) if isinstance(args, str) and args.strip() else {}
    except nesting.TooDeep as e:
        raise FormatError(place, f"function_call arguments are {e}") from None
    except json.JSONDecodeError as e:
        raise FormatError(place, f"function_call arguments are not JSON ({e.msg} at character {e.pos}); "
                                 "the model's call cannot be sent back as it is") from None
    book: dict[str, Any] = {}
    sk = _skeleton(raw, ("call_id", "name", "arguments"))
    if sk:
        book["item"] = sk
    if not isinstance(inp, dict) or json.dumps(inp) != args:
        book["arguments"] = args
    return ToolUseBlock(id=str(raw.get("call_id", "")), name=str(raw.get("name", "")),
                        input=inp if isinstance(inp, dict) else {}, extra=with_book(loose, BOOK, book))


def _read_assistant_parts(raw: dict[str, Any], loose: dict[str, Any], place: str, pending: list[Any]) -> list[Any]:
    """An assistant ``message`` item's parts as blocks, the first one noting the item (and
    that it starts a new item when it follows text in ``pending``)."""
    blocks, form = _read_parts(raw.get("content", []), place, "output_text")
    sk = _skeleton(raw, ("content",))
    follows = bool(pending) and isinstance(pending[-1], (TextBlock, ImageBlock, RefusalBlock))
    head: dict[str, Any] = {"start": True} if follows else {}
    if sk:
        head["item"] = sk
    if form:
        head["content"] = form
    if blocks:
        b0 = blocks[0]
        blocks[0] = b0.model_copy(update={"extra": with_book({**loose, **b0.extra}, BOOK, {**b0.extra.get(BOOK, {}), **head})})
    return blocks


def _read_assistant_item(raw: dict[str, Any], t: str, place: str, pending: list[Any],
                         calls: dict[str, str]) -> list[Any]:
    """The blocks an assistant-side item (reasoning, function_call, assistant message) adds to
    the assistant message being read; a call's name is noted in ``calls`` by its ``call_id``."""
    loose = split_known(raw, _ITEM_KEYS[t])
    raw = {k: v for k, v in raw.items() if k not in loose}
    if t == "reasoning":
        return [_read_reasoning(raw, loose)]
    if t == "function_call":
        u = _read_function_call(raw, loose, place)
        calls[u.id] = u.name
        return [u]
    return _read_assistant_parts(raw, loose, place, pending)


def _read_output(raw: dict[str, Any], place: str, strict: bool, calls: dict[str, str], mid: str,
                 book: dict[str, Any]) -> Message:
    """A ``function_call_output`` item as a canonical ``tool`` message; raises FormatError
    (``strict``) when its ``call_id`` matches no earlier call."""
    cid = raw.get("call_id")
    if strict and cid not in calls:
        raise no_call(place, cid, "matches no earlier function_call call_id")
    outv = raw.get("output", "")
    output: list[Any]
    if isinstance(outv, str):
        output, form = ([TextBlock(text=outv)] if outv else []), None
    else:
        output, form = _read_parts(outv, place, "input_text")
    order = order_note(raw, _NATURAL_OUT)
    if order:
        book["order"] = order
    if form is None and isinstance(outv, list):
        book["content"] = "list"
    meta = split_known(raw, _NATURAL_OUT)
    return Message(id=mid, role="tool", metadata=with_book(meta, BOOK, book), blocks=[
        ToolResultBlock(tool_use_id=str(cid), name=calls.get(cid) if isinstance(cid, str) else None, output=output)])


def _read_message(raw: dict[str, Any], place: str, mid: str, book: dict[str, Any]) -> Message:
    """A user, system or developer ``message`` item as a canonical message."""
    role = raw["role"]
    if role == "developer":
        book["role"] = "developer"
    blocks, form = _read_parts(raw.get("content", ""), place, "input_text")
    if form is None:
        book["content"] = "list"
    elif form == "empty":
        book["content"] = "empty"
    order = order_note(raw, _NATURAL_MSG)
    if order:
        book["order"] = order
    meta = split_known(raw, _NATURAL_MSG)
    return Message(id=mid, role=_ROLES[role], blocks=blocks, metadata=with_book(meta, BOOK, book))


def _read(items: Any, strict: bool, start: int = 0) -> list[Message]:
    if not isinstance(items, list):
        raise FormatError("items", f"expected a list of Responses input items, got {type(items).__name__}")
    out: list[Message] = []
    fixes = Fixes()
    pending: list[Any] | None = None  # the blocks of the assistant message being read
    calls: dict[str, str] = {}
    for i, raw in enumerate(items):
        place = f"item {i}"
        raw = dict(need_dict(raw, place, "an item object"))
        carry = raw.pop(CARRY, None)
        t = _item_type(raw, place)
        if t in ("reasoning", "function_call") + MODEL_ITEMS or (t == "message" and raw["role"] == "assistant"):
            if pending is None:
                pending = []
                fixes.take(carry, len(out))
            if t in MODEL_ITEMS:
                pending.append(_read_provider(raw, t))
            else:
                pending.extend(_read_assistant_item(raw, t, place, pending, calls))
            continue
        if pending is not None:
            out.append(Message(id=default_id(start + len(out)), role="assistant", blocks=pending))
            pending = None
        base = len(out)
        fixes.take(carry, base)
        book: dict[str, Any] = {"no_type": True} if "type" not in raw else {}
        if t in CLIENT_ITEMS:
            out.append(Message(id=default_id(start + base), role="user", blocks=[_read_provider(raw, t)]))
        elif t == "function_call_output":
            out.append(_read_output(raw, place, strict, calls, default_id(start + base), book))
        else:
            out.append(_read_message(raw, place, default_id(start + base), book))
    if pending is not None:
        out.append(Message(id=default_id(start + len(out)), role="assistant", blocks=pending))
    return fixes.apply(out)


def from_responses(items: list[dict[str, Any]], *, strict: bool = True, start: int = 0) -> list[Message]:
    """Read Responses API input items into canonical messages, with ids ``m0000``-style
    numbered from ``start`` (items carry item ids, ``rs_...`` / ``msg_...`` / ``fc_...``, not
    message ids, and one assistant message gathers several items). A session holds each id
    once: a second batch of the same session read with the default ``start=0`` gets the ids
    of the first and is refused (``duplicate-message-id``), so pass as ``start`` how many messages the earlier
    batches read (the sum of the lengths returned) or, simpler, append with :meth:`ctxwise.Session.append_responses`, which numbers the
    messages as the session numbers its own (``msg-000001``, ...). Raises ValueError for a
    negative ``start``.

    Raises :class:`~ctxwise.errors.FormatError` naming the item for: a non-list input, an
    unknown item type, role or content part type, or a ``function_call_output`` whose
    ``call_id`` has no earlier ``function_call`` ("No tool call found for function call output
    with call_id").

    With ``strict=False`` a result that answers no call is read as it stands (the provider
    validator reports it) instead of raising.
    """
    if isinstance(start, bool) or not isinstance(start, int) or start < 0:
        raise ValueError(f"start: expected a whole number >= 0, got {start!r}")
    return _read(items, strict=strict, start=start)


def _write_parts(blocks: list[Any], default_type: str) -> list[dict[str, Any]]:
    parts = []
    for b in blocks:
        part = (b.extra.get(BOOK) or {}).get("part")
        if isinstance(b, ImageBlock):
            url = b.url if b.data is None else f"data:{b.media_type or 'image/png'};base64,{b.data}"
            vals: dict[str, Any] = {"image_url": url, "file_id": b.file_id, "detail": b.detail}
            p = _fill(part or {"type": "input_image", "image_url": None}, vals)
        elif isinstance(b, DocumentBlock):
            data = f"data:{b.media_type or 'application/pdf'};base64,{b.data}" if b.source_type == "base64" else None
            vals = {"file_data": data, "file_id": b.file_id, "file_url": b.url, "filename": b.filename}
            p = _fill(part or {"type": "input_file", **{k: None for k, v in vals.items() if v is not None}}, vals)
        elif isinstance(b, RefusalBlock):
            p = {**(part or {"type": "refusal", "refusal": None}), "refusal": b.text}
        else:
            p = _fill(part or {"type": default_type, "text": None},
                      {"text": getattr(b, "text", ""), "annotations": getattr(b, "citations", None)})
        parts.append(p)
    return parts


def _fill(part: dict[str, Any], vals: dict[str, Any]) -> dict[str, Any]:
    """``part`` with its ``None`` placeholders for ``vals``' keys filled in (a key the part
    does not have is added when its value is set)."""
    out = {k: (vals[k] if k in vals and v is None else v) for k, v in part.items()}
    out.update((k, v) for k, v in vals.items() if k not in out and v is not None)
    return out


def _plain(blocks: list[Any]) -> bool:
    return len(blocks) == 1 and isinstance(blocks[0], TextBlock) and not blocks[0].extra and bool(blocks[0].text)


def _write_reasoning(b: ThinkingBlock, bk: dict[str, Any]) -> dict[str, Any]:
    """A thinking block as a ``reasoning`` item: its kept item when the text still matches
    the kept summary, a new summary item otherwise."""
    kept = bk.get("summary")
    if kept is not None and "\n\n".join(s.get("text", "") for s in kept if isinstance(s, dict)) == b.thinking:
        summary = kept
    else:
        summary = [{"type": "summary_text", "text": b.thinking}] if b.thinking else []
    it = {**(bk.get("item") or _SKEL["reasoning"]), "summary": summary}
    if bk.get("no_summary") and not b.thinking:  # written back as it was given
        del it["summary"]
    spread(it, b.extra, skip=BOOK)
    return it


def _write_function_call(b: ToolUseBlock, bk: dict[str, Any]) -> dict[str, Any]:
    """A tool use as a ``function_call`` item (the ``arguments`` string read, when it still
    holds the input)."""
    raw = bk.get("arguments")
    try:
        same = isinstance(raw, str) and nesting.loads(raw) == b.input
    except ValueError:  # not JSON, or nested too deep to be the input read from it
        same = b.input == {}
    args = raw if same else json.dumps(b.input)
    it = {**(bk.get("item") or _SKEL["function_call"]), "call_id": b.id, "name": b.name, "arguments": args}
    spread(it, b.extra, skip=BOOK)
    return it


def _write_assistant(m: Message) -> list[dict[str, Any]]:
    """One assistant message as its items, in block order (consecutive text and image blocks
    in one ``message`` item unless a block starts a new one)."""
    units: list[dict[str, Any]] = []
    cur: dict[str, Any] | None = None
    for b in m.blocks:
        bk = b.extra.get(BOOK) or {}
        if isinstance(b, ProviderBlock):
            if b.provider == "openai_responses":
                units.append(dict(b.raw))
            cur = None
        elif isinstance(b, ThinkingBlock):
            units.append(_write_reasoning(b, bk))
            cur = None
        elif isinstance(b, ToolUseBlock):
            units.append(_write_function_call(b, bk))
            cur = None
        elif isinstance(b, (TextBlock, ImageBlock, RefusalBlock)):
            if cur is None or bk.get("start"):
                cur = {**(bk.get("item") or _SKEL["message"]), "content": []}
                spread(cur, b.extra, skip=BOOK)
                if bk.get("content") == "str":
                    cur["_str"] = True
                units.append(cur)
            cur["content"].extend(_write_parts([b], "output_text"))
    if not m.blocks:
        units.append({**_SKEL["message"], "content": []})
    for u in units:
        if u.pop("_str", False) and len(u["content"]) == 1:
            u["content"] = u["content"][0].get("text", "")
    return units


def _write_item(m: Message, extras: bool) -> dict[str, Any]:
    """A user, system or tool message as one item (a ``tool`` message as its
    ``function_call_output``)."""
    book = m.metadata.get(BOOK) or {}
    if len(m.blocks) == 1 and isinstance(m.blocks[0], ProviderBlock) and m.blocks[0].provider == "openai_responses":
        return dict(m.blocks[0].raw)
    if m.role == "tool":
        r = m.tool_results[0] if m.tool_results else None
        d: dict[str, Any] = {"type": "function_call_output", "call_id": r.tool_use_id if r else ""}
        outb = r.output if r else []
        d["output"] = _write_parts(outb, "input_text") if book.get("content") == "list" or not (
            _plain(outb) or not outb) else (cast(TextBlock, outb[0]).text if outb else "")
    else:
        d = {"type": "message", "role": book.get("role", m.role)}
        if book.get("content") == "list" or not (_plain(m.blocks) or not m.blocks):
            d["content"] = _write_parts(m.blocks, "input_text")
        else:
            d["content"] = cast(TextBlock, m.blocks[0]).text if m.blocks else ""
        if book.get("no_type"):
            del d["type"]
    if extras:
        spread(d, m.metadata, skip=BOOK)
    return reorder(d, book.get("order"))


def to_responses(messages: list[Message], *, extras: bool = True) -> list[dict[str, Any]]:
    """Write canonical messages as Responses API input items.

    Thinking blocks become ``reasoning`` items (their kept item, ``encrypted_content``
    included, when the text still matches; a new summary item otherwise). With
    ``extras=True`` unknown keys are written back and what items cannot hold (signatures,
    non-default ids, states) travels in ``"_ctxwise"`` so ``from_responses(to_responses(m)) ==
    m``; ``extras=False`` drops it.
    """
    units: list[dict[str, Any]] = []
    first_of: list[int] = []
    for m in messages:
        first_of.append(len(units))
        if m.role == "assistant":
            units.extend(_write_assistant(m))
        else:
            units.append(_write_item(m, extras))
    if extras:
        seal(messages, units, first_of, lambda u: _read(u, strict=False))
    return units
