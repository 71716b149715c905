"""AgentScope state payloads (the seeds' ``t_agent_state.payload``) ↔ canonical.

Shape: ``{"context": [{"role": "USER" | "ASSISTANT" | "TOOL" | "SYSTEM", "content": [blocks],
...}], ...}``. Blocks: ``text`` (``text``), ``thinking`` (``thinking``), ``tool_use`` (``id``,
``name``, ``input``), ``tool_result`` (``id`` = the call id, ``name``, ``state``, ``output``: a
list of text/image blocks or a string), ``image`` (``source`` base64 or url). Calls and results
pair by ``id``. Message keys other than ``role``/``content``/``id``/``name`` (``timestamp``,
``metadata``, ...) go to ``Message.metadata``; unknown block keys to the block's ``extra``. A
thinking block's ``signature`` / ``redacted`` are written as keys of the same names. Other
top-level payload keys (``session_id``, ``summary``, ...) are not part of the message list:
:func:`ctxwise.formats.load` keeps them in ``Conversation.metadata["payload"]``.
"""

from __future__ import annotations

from typing import Any

from ..errors import FormatError
from ..messages import (
    ImageBlock,
    Message,
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
    reorder,
    seal,
    split_known,
    spread,
    unknown_block,
    with_book,
)

BOOK = book_key("agentscope")
BLOCK_TYPES = ("text", "thinking", "tool_use", "tool_result", "image")
ROLE_IN: dict[str, Role] = {"USER": "user", "ASSISTANT": "assistant", "TOOL": "tool", "SYSTEM": "system"}
ROLE_OUT = {v: k for k, v in ROLE_IN.items()}
_NATURAL_MSG = ["id", "name", "role", "content"]
_NATURAL_BLOCK = {
    "text": ["type", "text"],
    "thinking": ["type", "thinking", "signature", "redacted"],
    "tool_use": ["type", "id", "name", "input"],
    "tool_result": ["type", "id", "name", "state", "output"],
    "image": ["type", "source"],
}


def _read_block(b: Any, place: str, calls: dict[str, str], strict: bool, inner: bool = False) -> Any:
    b = need_dict(b, place, "a content block object")
    t = b.get("type")
    allowed = ("text", "image") if inner else BLOCK_TYPES
    if t not in allowed:
        raise unknown_block(place, t, allowed)
    book: dict[str, Any] = {}
    order = order_note(b, _NATURAL_BLOCK[t])
    if order:
        book["order"] = order
    extra = split_known(b, _NATURAL_BLOCK[t])
    if t == "text":
        return TextBlock(text=b.get("text", ""), extra=with_book(extra, BOOK, book))
    if t == "image":
        src = need_dict(b.get("source"), place, "an image 'source' object")
        if src.get("type") == "base64" and set(src) <= {"type", "media_type", "data"}:
            return image_from_b64(src.get("media_type"), src.get("data", ""), with_book(extra, BOOK, book))
        if src.get("type") == "url" and set(src) <= {"type", "url"}:
            return ImageBlock(url=src.get("url"), extra=with_book(extra, BOOK, book))
        return ImageBlock(extra=with_book(extra, BOOK, {**book, "raw_source": src}))
    if t == "thinking":
        return ThinkingBlock(thinking=b.get("thinking", ""), signature=b.get("signature"),
                             redacted=bool(b.get("redacted", False)), extra=with_book(extra, BOOK, book))
    if t == "tool_use":
        inp = b.get("input")
        return ToolUseBlock(id=str(b.get("id", "")), name=str(b.get("name", "")),
                            input=inp if isinstance(inp, dict) else {}, extra=with_book(extra, BOOK, book))
    cid = b.get("id")
    if strict and cid not in calls:
        raise no_call(place, cid, "matches no earlier tool_use id")
    raw = b.get("output", [])
    output: list[Any]
    if isinstance(raw, str):
        output = [TextBlock(text=raw)]
        book["output"] = "str"
    elif isinstance(raw, list):
        output = [_read_block(x, f"{place}, output {k}", calls, strict, inner=True) for k, x in enumerate(raw)]
    else:
        raise FormatError(place, f"tool_result output must be a list of blocks or a string, got {type(raw).__name__}")
    state = b.get("state", "success")
    if state not in ("success", "error"):
        book["state"] = state
    elif "state" not in b:
        book["state"] = None
    if "name" not in b:
        book["no_name"] = True
    return ToolResultBlock(tool_use_id=str(cid), name=b.get("name"), state="error" if state == "error" else "success",
                           output=output, extra=with_book(extra, BOOK, book))


def _read(payload: Any, strict: bool) -> list[Message]:
    payload = need_dict(payload, "payload", "an object with a 'context' list")
    ctx = payload.get("context")
    if not isinstance(ctx, list):
        raise FormatError("payload", "expected a 'context' list of messages")
    out: list[Message] = []
    fixes = Fixes()
    calls: dict[str, str] = {}
    for i, raw in enumerate(ctx):
        place = f"message {i}"
        raw = dict(need_dict(raw, place, "a message object"))
        fixes.take(raw.pop(CARRY, None), i)
        role = raw.get("role")
        if role not in ROLE_IN:
            raise FormatError(place, f"unknown role {role!r}; expected one of {', '.join(ROLE_IN)}")
        content = raw.get("content", [])
        book: dict[str, Any] = {}
        if isinstance(content, str):
            blocks: list[Any] = [TextBlock(text=content)]
            book["content"] = "str"
        elif isinstance(content, list):
            blocks = [_read_block(b, f"{place}, block {k}", calls, strict) for k, b in enumerate(content)]
        else:
            raise FormatError(place, f"content must be a list of blocks or a string, got {type(content).__name__}")
        calls.update((b.id, b.name) for b in blocks if isinstance(b, ToolUseBlock))
        order = order_note(raw, _NATURAL_MSG)
        if order:
            book["order"] = order
        meta = split_known(raw, _NATURAL_MSG)
        out.append(Message(id=str(raw.get("id") or default_id(i)), role=ROLE_IN[role], name=raw.get("name"),
                           blocks=blocks, metadata=with_book(meta, BOOK, book)))
    return fixes.apply(out)


def from_agentscope(payload: dict[str, Any]) -> list[Message]:
    """Read an AgentScope ``{"context": [...]}`` payload into canonical messages.

    Raises :class:`~ctxwise.errors.FormatError` naming the message/block for: no ``context``
    list, an unknown role or block type, or a ``tool_result`` whose ``id`` matches no earlier
    ``tool_use``.
    """
    return _read(payload, strict=True)


_WRITABLE = (TextBlock, ThinkingBlock, ToolUseBlock, ImageBlock, ToolResultBlock)
"""The blocks AgentScope's format holds; others (documents, provider blocks, ...) travel in the
carry with ``extras=True`` and are left out with ``extras=False``."""


def _write_block(b: Any) -> dict[str, Any]:
    book = b.extra.get(BOOK) or {}
    if isinstance(b, TextBlock):
        d: dict[str, Any] = {"type": "text", "text": b.text}
    elif isinstance(b, ThinkingBlock):
        d = {"type": "thinking", "thinking": b.thinking}
        if b.signature is not None:
            d["signature"] = b.signature
        if b.redacted:
            d["redacted"] = True
    elif isinstance(b, ToolUseBlock):
        d = {"type": "tool_use", "id": b.id, "name": b.name, "input": b.input}
    elif isinstance(b, ImageBlock):
        if "raw_source" in book:
            src = book["raw_source"]
        elif b.data is not None:
            src = {"type": "base64", "media_type": b.media_type, "data": b.data}
        else:
            src = {"type": "url", "url": b.url}
        d = {"type": "image", "source": src}
    else:
        d = {"type": "tool_result", "id": b.tool_use_id}
        if b.name is not None or not book.get("no_name"):
            d["name"] = b.name
        state = book.get("state", b.state) if b.state == "success" else b.state
        if state is not None:
            d["state"] = state
        if book.get("output") == "str" and len(b.output) == 1 and isinstance(b.output[0], TextBlock):
            d["output"] = b.output[0].text
        else:
            d["output"] = [_write_block(x) for x in b.output if isinstance(x, (TextBlock, ImageBlock))]
    spread(d, b.extra, skip=BOOK)
    return reorder(d, book.get("order"))


def to_agentscope(messages: list[Message], *, extras: bool = True) -> dict[str, Any]:
    """Write canonical messages as an AgentScope ``{"context": [...]}`` payload.

    One canonical message is one AgentScope message (roles upper-cased). With ``extras=True``
    metadata and block extras are written back as keys and non-default ids as ``id``;
    AgentScope holds every canonical field, so the ``"_ctxwise"`` carry is only needed for odd
    inputs (a metadata key named like a message field). ``extras=False`` drops metadata.
    """
    units: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        book = m.metadata.get(BOOK) or {}
        d: dict[str, Any] = {}
        if extras and m.id != default_id(i):
            d["id"] = m.id
        if m.name is not None:
            d["name"] = m.name
        d["role"] = ROLE_OUT[m.role]
        if book.get("content") == "str" and len(m.blocks) == 1 and isinstance(m.blocks[0], TextBlock):
            d["content"] = m.blocks[0].text
        else:
            d["content"] = [_write_block(b) for b in m.blocks if isinstance(b, _WRITABLE)]
        if extras:
            spread(d, m.metadata, skip=BOOK)
            d = reorder(d, book.get("order"))
        units.append(d)
    if extras:
        seal(messages, units, list(range(len(units))), lambda u: _read({"context": u}, strict=False))
    return {"context": units}
