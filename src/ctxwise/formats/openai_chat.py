"""OpenAI Chat Completions messages (and DeepSeek's ``reasoning_content``) ↔ canonical.

Shape (https://platform.openai.com/docs/api-reference/chat/create): a list of
``{"role", "content", "name"?, "tool_calls"?, "tool_call_id"?}``. ``content`` is a string,
``null`` or a list of parts (``{"type": "text", "text"}``, ``{"type": "image_url",
"image_url": {"url", "detail"?}}``, ``input_audio`` ↔ :class:`AudioBlock`, ``file`` ↔
:class:`DocumentBlock`, ``refusal`` parts and the assistant ``refusal`` key ↔ :class:`RefusalBlock`). A call is ``{"id", "type": "function", "function":
{"name", "arguments": <JSON string>}}``; each ``tool`` message answers one call. DeepSeek
thinking mode adds ``reasoning_content`` on assistant messages
(https://api-docs.deepseek.com/guides/thinking_mode); it must be passed back on assistant
messages of a user-to-user span with tool calls.

Mapping:

* ``reasoning_content`` (or ``reasoning``) → a :class:`ThinkingBlock` (no signature) first in
  the assistant message; text/image parts next; ``tool_calls`` → :class:`ToolUseBlock` last.
* One ``tool`` message → one canonical ``tool`` message with one :class:`ToolResultBlock`.
  Pairing is positional: the result answers the nearest earlier assistant message with
  ``tool_calls``, with only ``tool`` messages between (tau-bench reuses call ids). Its ``name``
  comes from the call when the message has none (noted so the writer does not add it).
* ``content: null`` / ``""`` / absent / a one-part list, the exact ``arguments`` string when
  ``json.dumps`` would not reproduce it, key order and unknown keys are all kept.
* A ``developer`` message reads as a ``system`` message (noted, written back as ``developer``).
"""

from __future__ import annotations

import json
from typing import Any, cast

from .. import nesting
from ..errors import FormatError
from ..messages import (
    AudioBlock,
    DocumentBlock,
    ImageBlock,
    Message,
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
    unknown_block,
    with_book,
    without,
)

BOOK = book_key("openai")
PART_TYPES = ("text", "image_url", "input_audio", "file", "refusal")
_NATURAL = ["id", "role", "name", "content", "tool_calls", "reasoning_content", "thinking_blocks"]
_NATURAL_TOOL = ["id", "role", "tool_call_id", "name", "content"]
_KNOWN = {"id", "role", "name", "content", "tool_calls", "tool_call_id"}
_ROLES: dict[str, Role] = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool"}


# -- content ------------------------------------------------------------------------------


def _read_part(p: dict[str, Any], place: str) -> Any:
    """An ``input_audio``, ``file`` or ``refusal`` part (``openai/types/chat/``
    ``chat_completion_content_part_input_audio_param.py``, ``chat_completion_content_part_param.File``,
    ``chat_completion_content_part_refusal_param.py``) as its block; FormatError when malformed."""
    t = p["type"]
    if t == "refusal":
        if not isinstance(p.get("refusal"), str):
            raise FormatError(place, "a refusal part needs a string 'refusal'")
        return RefusalBlock(text=p["refusal"], extra=split_known(p, ("type", "refusal")))
    key = "input_audio" if t == "input_audio" else "file"
    inner = need_dict(p.get(key), place, f"an {key} object")
    extra = split_known(p, ("type", key))
    if t == "input_audio":
        if not isinstance(inner.get("data"), str) or not isinstance(inner.get("format"), str):
            raise FormatError(place, "input_audio needs string 'data' and 'format'")
        more = split_known(inner, ("data", "format"))
        if more:
            extra[key] = more
        return AudioBlock(data=inner["data"], format=inner["format"], extra=extra)
    more = split_known(inner, ("file_data", "file_id", "filename"))
    if more:
        extra[key] = more
    data, fid, name = inner.get("file_data"), inner.get("file_id"), inner.get("filename")
    if isinstance(data, str):
        parsed = parse_data_url(data)
        media, b64 = parsed if parsed else (None, data)
        return DocumentBlock(source_type="base64", media_type=media, data=b64, file_id=fid, filename=name, extra=extra)
    if isinstance(fid, str):
        return DocumentBlock(source_type="file", file_id=fid, filename=name, extra=extra)
    raise FormatError(place, "a file part needs file_data or file_id")


def _read_parts(content: Any, place: str) -> tuple[list[Any], str]:
    """Blocks of a ``content`` value and its form: absent/null/empty/str/list."""
    if content is _ABSENT:
        return [], "absent"
    if content is None:
        return [], "null"
    if isinstance(content, str):
        return ([TextBlock(text=content)], "str") if content else ([], "empty")
    if not isinstance(content, list):
        raise FormatError(place, f"content must be a string, null or a list of parts, got {type(content).__name__}")
    blocks: list[Any] = []
    for j, part in enumerate(content):
        p = need_dict(part, f"{place}, part {j}", "a content part object")
        t = p.get("type")
        if t == "text":
            blocks.append(TextBlock(text=p.get("text", ""), extra=split_known(p, ("type", "text"))))
        elif t == "image_url":
            iu = p.get("image_url")
            iu = {"url": iu} if isinstance(iu, str) else need_dict(iu, f"{place}, part {j}", "an image_url object")
            extra = split_known(p, ("type", "image_url"))
            detail = iu.get("detail") if iu.get("detail") in ("low", "high", "auto") else None
            more = split_known(iu, ("url", "detail") if detail else ("url",))
            if more:
                extra["image_url"] = more
            url = iu.get("url")
            if not isinstance(url, str) or not url:
                raise FormatError(f"{place}, part {j}", "an image_url part needs a non-empty string image_url.url "
                                  "(an http(s) URL or a data: URL; openai/types/chat/"
                                  "chat_completion_content_part_image_param.py)")
            parsed = parse_data_url(url)
            if parsed:
                blocks.append(image_from_b64(parsed[0], parsed[1], extra).model_copy(update={"detail": detail}))
            else:
                blocks.append(ImageBlock(url=url, detail=detail, extra=extra))
        elif t in ("input_audio", "file", "refusal"):
            blocks.append(_read_part(p, f"{place}, part {j}"))
        else:
            raise unknown_block(f"{place}, part {j}", t, PART_TYPES)
    return blocks, "list"


def _default_form(blocks: list[Any], none_when_empty: bool) -> str:
    if not blocks:
        return "null" if none_when_empty else "empty"
    if len(blocks) == 1 and isinstance(blocks[0], TextBlock) and not blocks[0].extra and blocks[0].text:
        return "str"
    return "list"


def _write_parts(blocks: list[Any], form: str) -> Any:
    if form == "null" and not blocks:
        return None
    if form in ("empty", "null", "absent") and not blocks:
        return ""
    if form in ("str", "empty", "null", "absent") and all(isinstance(b, TextBlock) for b in blocks) and len(blocks) == 1:
        return blocks[0].text
    parts = []
    for b in blocks:
        p: dict[str, Any]
        if isinstance(b, TextBlock):
            p = {"type": "text", "text": b.text}
            spread(p, b.extra)
        elif isinstance(b, ImageBlock):
            extra = dict(b.extra)
            url = b.url if b.data is None else f"data:{b.media_type or 'image/png'};base64,{b.data}"
            iu: dict[str, Any] = {"url": url, **({"detail": b.detail} if b.detail else {})}
            p = {"type": "image_url", "image_url": {**iu, **(extra.pop("image_url", None) or {})}}
            spread(p, extra)
        else:
            p = _write_part(b)
        parts.append(p)
    return parts


def _write_part(b: Any) -> dict[str, Any]:
    """An audio, document or refusal block as its chat content part (as read)."""
    extra = dict(b.extra)
    p: dict[str, Any]
    if isinstance(b, RefusalBlock):
        p = {"type": "refusal", "refusal": b.text}
    elif isinstance(b, AudioBlock):
        p = {"type": "input_audio", "input_audio": {"data": b.data, "format": b.format, **(extra.pop("input_audio", None) or {})}}
    else:
        f: dict[str, Any] = {}
        if b.data is not None:
            f["file_data"] = f"data:{b.media_type};base64,{b.data}" if b.media_type else b.data
        if b.file_id is not None:
            f["file_id"] = b.file_id
        if b.filename is not None:
            f["filename"] = b.filename
        p = {"type": "file", "file": {**f, **(extra.pop("file", None) or {})}}
    spread(p, extra)
    return p


class _Absent:
    pass


_ABSENT: Any = _Absent()


# -- reading ------------------------------------------------------------------------------


def _read_call(raw: Any, place: str) -> ToolUseBlock:
    c = need_dict(raw, place, "a tool call object")
    fn = need_dict(c.get("function"), place, "a 'function' object")
    extra = split_known(c, ("id", "type", "function"))
    book: dict[str, Any] = {}
    if c.get("type", _ABSENT) != "function":
        book["type"] = c.get("type", None) if "type" in c else "absent"
    order, forder = order_note(c, ["id", "type", "function"]), order_note(fn, ["name", "arguments"])
    if order:
        book["order"] = order
    if forder:
        book["forder"] = forder
    fmore = split_known(fn, ("name", "arguments"))
    if fmore:
        book["function"] = fmore
    args = fn.get("arguments", "")
    inp: dict[str, Any] = {}
    if isinstance(args, dict):
        why = nesting.too_deep(args)
        if why is not None:
            raise FormatError(place, f"tool call arguments are {why}")
        inp, book["arguments_object"] = args, True
    else:
        try:
            parsed = nesting.loads(args) if isinstance(args, str) and args.strip() else {}
        except nesting.TooDeep as e:
            raise FormatError(place, f"tool call arguments are {e}") from None
        except json.JSONDecodeError:
            parsed = None
        if isinstance(parsed, dict):
            inp = parsed
        if not isinstance(parsed, dict) or json.dumps(parsed) != args:
            book["arguments"] = args
    return ToolUseBlock(id=str(c.get("id", "")), name=str(fn.get("name", "")), input=inp, extra=with_book(extra, BOOK, book))


def _read_result(raw: dict[str, Any], place: str, carry: Any, chain: dict[str, str] | None,
                 strict: bool) -> ToolResultBlock:
    """A ``tool`` message's result; raises (``strict``) when its ``tool_call_id`` is not a call
    of ``chain`` (the nearest earlier assistant message with ``tool_calls``)."""
    tcid = raw.get("tool_call_id")
    if chain is None or tcid not in chain:
        if strict:
            detail = ("is not among the tool_calls of the assistant message before it"
                      if chain is not None else "follows no assistant message with tool_calls")
            raise no_call(place, tcid, detail)
    output, form = _read_parts(raw.get("content", _ABSENT), place)
    bbook: dict[str, Any] = {}
    if form != _default_form(output, False):
        bbook["content"] = form
    name = raw.get("name")
    if "name" not in raw:
        name = (chain or {}).get(cast(str, tcid))
        if name is not None:
            bbook["no_name"] = True
    rextra = (carry or {}).get("result") or {}
    return ToolResultBlock(
        tool_use_id=str(tcid), name=name, output=output,
        extra=with_book(dict(rextra), BOOK, bbook),
    )


def _read_thinking_blocks(raw: Any, place: str) -> list[ThinkingBlock]:
    """LiteLLM's ``thinking_blocks`` on an assistant message (its Anthropic thinking, signed:
    ``[{"type": "thinking", "thinking", "signature"}, {"type": "redacted_thinking", "data"}]``,
    https://docs.litellm.ai/docs/reasoning_content) as :class:`ThinkingBlock` s, signatures kept;
    FormatError naming the block for any other shape."""
    if not isinstance(raw, list):
        raise FormatError(place, f"thinking_blocks must be a list of thinking blocks, got {type(raw).__name__}")
    out: list[ThinkingBlock] = []
    for j, tb in enumerate(raw):
        where = f"{place}, thinking block {j}"
        d = need_dict(tb, where, "a thinking block object")
        t = d.get("type")
        if t == "redacted_thinking":
            if not isinstance(d.get("data"), str) or not d["data"]:
                raise FormatError(where, "a redacted_thinking block needs its string 'data'")
            out.append(ThinkingBlock(thinking=d["data"], redacted=True, extra=split_known(d, ("type", "data"))))
        elif t == "thinking":
            sig = d.get("signature")
            if not isinstance(d.get("thinking"), str) or not (sig is None or isinstance(sig, str)):
                raise FormatError(where, "a thinking block needs a string 'thinking' and a string 'signature'")
            out.append(ThinkingBlock(thinking=d["thinking"], signature=sig,
                                     extra=split_known(d, ("type", "thinking", "signature"))))
        else:
            raise unknown_block(where, t, ("thinking", "redacted_thinking"))
    return out


def _write_thinking_blocks(thinking: list[ThinkingBlock]) -> list[dict[str, Any]]:
    """The inverse of :func:`_read_thinking_blocks`."""
    out: list[dict[str, Any]] = []
    for t in thinking:
        d: dict[str, Any] = ({"type": "redacted_thinking", "data": t.thinking} if t.redacted
                             else {"type": "thinking", "thinking": t.thinking, "signature": t.signature})
        spread(d, t.extra)
        out.append(d)
    return out


def _read_chat_blocks(raw: dict[str, Any], place: str, role: str,
                      book: dict[str, Any]) -> tuple[list[Any], str | None, dict[str, str] | None]:
    """A system, user or assistant message's blocks (reasoning, content, calls), the key its
    reasoning was read from, and its calls (id → name; None when it calls no tool)."""
    blocks: list[Any] = []
    rkey = next((k for k in ("reasoning_content", "reasoning") if isinstance(raw.get(k), str)), None)
    signed = _read_thinking_blocks(raw.get("thinking_blocks"), place) if "thinking_blocks" in raw else None
    if signed is not None:
        if role != "assistant":
            raise FormatError(place, f"thinking_blocks on a {role} message; only assistant messages carry thinking")
        blocks.extend(signed)
        book["thinking_blocks"] = True
        if rkey is not None:  # LiteLLM's plain-text view of the same thinking: kept, not a second block
            book["reasoning_text"] = [rkey, raw[rkey]]
    elif rkey is not None and role == "assistant":
        blocks.append(ThinkingBlock(thinking=raw[rkey]))
    if rkey is not None and rkey != "reasoning_content" and role == "assistant":
        book["reasoning_key"] = rkey
    content, form = _read_parts(raw.get("content", _ABSENT), place)
    blocks.extend(content)
    if role == "assistant" and isinstance(raw.get("refusal"), str):
        blocks.append(RefusalBlock(text=raw["refusal"], extra={BOOK: {"key": True}}))
    calls = raw.get("tool_calls", _ABSENT)
    chain: dict[str, str] | None = None
    if isinstance(calls, list) and calls:
        if role != "assistant":
            raise FormatError(place, f"tool_calls on a {role} message; only assistant messages call tools")
        uses = [_read_call(c, f"{place}, tool call {j}") for j, c in enumerate(calls)]
        blocks.extend(uses)
        chain = {u.id: u.name for u in uses}
    elif calls is not _ABSENT:
        book["tool_calls"] = calls
    if form != _default_form(content, bool(isinstance(calls, list) and calls)):
        book["content"] = form
    return blocks, rkey, chain


def _read(raw_msgs: Any, strict: bool) -> list[Message]:
    if not isinstance(raw_msgs, list):
        raise FormatError("messages", f"expected a list of messages, got {type(raw_msgs).__name__}")
    out: list[Message] = []
    fixes = Fixes()
    chain: dict[str, str] | None = None  # call id -> name of the nearest assistant with tool_calls
    for i, raw in enumerate(raw_msgs):
        place = f"message {i}"
        raw = dict(need_dict(raw, place, "a message object"))
        carry = raw.pop(CARRY, None)
        role = raw.get("role")
        if "images" in raw:  # Ollama's native chat API; its images would not be read
            raise FormatError(place, "'images' (Ollama's native chat message) is not a key ctxwise reads: the images "
                                     "would be lost", hint="give each image as an image_url content part "
                                     "(Ollama's OpenAI-compatible /v1/chat/completions takes them), e.g. "
                                     "{'type': 'image_url', 'image_url': {'url': 'data:image/png;base64,...'}}")
        if role not in _ROLES:
            raise FormatError(place, f"unknown role {role!r}; expected one of {', '.join(_ROLES)}")
        book: dict[str, Any] = {}
        order = order_note(raw, _NATURAL_TOOL if role == "tool" else _NATURAL)
        if order:
            book["order"] = order
        if role == "developer":
            book["role"] = "developer"
        if role == "tool":
            block = _read_result(raw, place, carry, chain, strict)
            if carry and carry.get("cont") and out and out[-1].role == "tool":
                out[-1] = out[-1].model_copy(update={"blocks": [*out[-1].blocks, block]})
                continue
            meta = split_known(raw, _KNOWN)
            fixes.take(carry, len(out))
            out.append(Message(
                id=str(raw.get("id") or default_id(len(out))), role="tool",
                blocks=[block], metadata=with_book(meta, BOOK, book),
            ))
            continue
        blocks, rkey, chain = _read_chat_blocks(raw, place, role, book)
        known = set(_KNOWN) | ({rkey} if rkey and role == "assistant" else set()) | {"thinking_blocks"}
        if role == "assistant" and isinstance(raw.get("refusal"), str):
            known.add("refusal")
        meta = split_known(raw, known)
        fixes.take(carry, len(out))
        out.append(Message(
            id=str(raw.get("id") or default_id(len(out))), role=_ROLES[role], name=raw.get("name"),
            blocks=blocks, metadata=with_book(meta, BOOK, book),
        ))
    return fixes.apply(out)


def from_openai(messages: list[dict[str, Any]], *, strict: bool = True) -> list[Message]:
    """Read an OpenAI chat message list into canonical messages.

    Ids are ``m0000``-style (index) unless a message has an ``id`` key. Raises
    :class:`~ctxwise.errors.FormatError` naming the message index for: a non-list input, an
    unknown role, an unknown content part type, ``tool_calls`` on a non-assistant message, or
    a ``tool`` message whose ``tool_call_id`` is not a call of the nearest earlier assistant
    message with ``tool_calls`` (OpenAI: "messages with role 'tool' must be a response to a
    preceding message with 'tool_calls'").

    With ``strict=False`` a result that answers no call is read as it stands (the provider
    validator reports it) instead of raising.
    """
    return _read(messages, strict=strict)


# -- writing ------------------------------------------------------------------------------


def _write_call(u: ToolUseBlock) -> dict[str, Any]:
    book = u.extra.get(BOOK) or {}
    raw_args = book.get("arguments")
    if book.get("arguments_object"):
        args: Any = u.input
    elif isinstance(raw_args, str) and _same_args(raw_args, u.input):
        args = raw_args
    else:
        args = json.dumps(u.input)
    c: dict[str, Any] = {"id": u.id}
    t = book.get("type", "function")
    if t != "absent":
        c["type"] = t
    c["function"] = reorder({"name": u.name, "arguments": args, **(book.get("function") or {})}, book.get("forder"))
    spread(c, u.extra, skip=BOOK)
    return reorder(c, book.get("order"))


def _same_args(raw: str, inp: dict[str, Any]) -> bool:
    try:
        parsed = nesting.loads(raw) if raw.strip() else {}
    except ValueError:  # not JSON, or nested too deep to be the input read from it
        return inp == {}
    return parsed == inp if isinstance(parsed, dict) else inp == {}


def _write_results(m: Message, head: dict[str, Any], extras: bool) -> list[dict[str, Any]]:
    """A ``tool`` message as one chat ``tool`` message per result (the later ones noted as
    continuing it)."""
    book = m.metadata.get(BOOK) or {}
    units = []
    for k, r in enumerate(m.tool_results):
        rb = r.extra.get(BOOK) or {}
        d: dict[str, Any] = {**(head if k == 0 else {}), "role": "tool", "tool_call_id": r.tool_use_id}
        if r.name is not None and not rb.get("no_name"):
            d["name"] = r.name
        form = rb.get("content") or _default_form(r.output, False)
        if form != "absent" or r.output:
            d["content"] = _write_parts(r.output, form)
        if extras:
            rest = without(r.extra, BOOK)
            carry: dict[str, Any] = {}
            if rest:
                carry["result"] = rest
            if k:
                carry["cont"] = True
            if k == 0:
                spread(d, m.metadata, skip=BOOK)
                d = reorder(d, book.get("order"))
            if carry:
                d[CARRY] = carry
        units.append(d)
    return units


def _write_message(m: Message, head: dict[str, Any], reasoning_field: str | None, extras: bool) -> dict[str, Any]:
    """A system, user or assistant message (or a tool message without results) as one chat message."""
    book = m.metadata.get(BOOK) or {}
    d = {**head, "role": book.get("role", m.role)}
    if m.name is not None:
        d["name"] = m.name
    thinking = [b for b in m.blocks if isinstance(b, ThinkingBlock)]
    keyed = [b for b in m.blocks if isinstance(b, RefusalBlock) and (b.extra.get(BOOK) or {}).get("key")]
    content = [b for b in m.blocks if isinstance(b, (TextBlock, ImageBlock, AudioBlock, DocumentBlock))
               or (isinstance(b, RefusalBlock) and b not in keyed)]
    calls = [b for b in m.blocks if isinstance(b, ToolUseBlock)]
    form = book.get("content") or _default_form(content, bool(calls))
    if form != "absent" or content:
        d["content"] = _write_parts(content, form)
    if calls:
        d["tool_calls"] = [_write_call(u) for u in calls]
    elif "tool_calls" in book:
        d["tool_calls"] = book["tool_calls"]
    if book.get("thinking_blocks") and m.role == "assistant":
        if thinking and book.get("reasoning_text"):
            d[book["reasoning_text"][0]] = book["reasoning_text"][1]
        d["thinking_blocks"] = _write_thinking_blocks(thinking)
    elif thinking and reasoning_field and m.role == "assistant":
        d[book.get("reasoning_key", reasoning_field)] = thinking[0].thinking
    if keyed:
        d["refusal"] = keyed[0].text
    if extras:
        spread(d, m.metadata, skip=BOOK)
        d = reorder(d, book.get("order"))
    return d


def to_openai(
    messages: list[Message],
    *,
    reasoning_field: str | None = "reasoning_content",
    extras: bool = True,
) -> list[dict[str, Any]]:
    """Write canonical messages as an OpenAI chat message list.

    ``reasoning_field``: the key that carries the thinking text of an assistant message
    (``"reasoning_content"`` for DeepSeek, None to omit reasoning). A tool message with several
    results becomes several ``tool`` messages. With ``extras=True`` (the default) metadata and
    block extras are written as extra keys, non-default ids as ``id``, and whatever chat cannot
    hold (signatures, redacted or several thinking blocks, an ``error`` state, tool results
    outside tool messages, block order) travels in a ``"_ctxwise"`` key, so
    ``from_openai(to_openai(m)) == m``. ``extras=False`` leaves those out (block extras
    are still written; for the request a provider receives use
    :func:`ctxwise.providers.render`). Never raises for a valid canonical list.
    """
    units: list[dict[str, Any]] = []
    first_of: list[int] = []
    for i, m in enumerate(messages):
        first_of.append(len(units))
        head: dict[str, Any] = {}
        if extras and m.id != default_id(i):
            head["id"] = m.id
        if m.role == "tool" and m.tool_results:
            units.extend(_write_results(m, head, extras))
        else:
            units.append(_write_message(m, head, reasoning_field, extras))
    if extras:
        seal(messages, units, first_of, lambda u: _read(u, strict=False))
    return units
