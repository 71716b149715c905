"""Anthropic Messages payloads ↔ canonical.

Shape (https://docs.anthropic.com/en/api/messages): ``{"system"?: str | [text blocks],
"messages": [{"role": "user" | "assistant", "content": str | [blocks]}]}``. Blocks: ``text``,
``image`` (``source`` base64 or url), ``thinking`` (``thinking``, ``signature``),
``redacted_thinking`` (``data``), ``tool_use`` (``id``, ``name``, ``input``) and, in user
messages, ``tool_result`` (``tool_use_id``, ``content`` str | blocks, ``is_error``). The
provider rules: a ``tool_result`` must answer a ``tool_use`` of the immediately preceding
assistant message; thinking blocks go back byte-identical (signature checked).

Mapping:

* The top-level ``system`` → a canonical ``system`` message first. The cases' shape (a list
  whose element 0 is ``{"role": "system", ...}``) is accepted too and written back that way.
* A user message's ``tool_result`` blocks → one canonical ``tool`` message (``name`` from the
  matching ``tool_use``); its other blocks → a canonical ``user`` message right after, noted
  so the writer merges them back in the original block order. Consecutive canonical tool
  messages are written as one user message (as the API wants); with ``extras`` the split is
  noted in ``"_ctxwise": {"parts": [...]}`` so it reads back the same.
* ``is_error: true`` ↔ ``state="error"``; ``redacted_thinking`` ↔ ``ThinkingBlock(redacted=True,
  thinking=data)``; string content vs a block list, key order and unknown keys are kept.
* ``text.citations`` ↔ ``TextBlock.citations``; an image ``source.type == "file"`` ↔
  ``ImageBlock.file_id``; ``document`` ↔ :class:`DocumentBlock` (every source type);
  ``search_result`` ↔ :class:`SearchResultBlock` (both also inside ``tool_result`` content);
  ``server_tool_use``, the server-tool results (web search, web fetch, code execution, bash,
  text editor, tool search), ``mcp_tool_use`` / ``mcp_tool_result`` and ``container_upload`` ↔
  :class:`ProviderBlock` holding the block verbatim (``call_id`` = its ``id`` / ``tool_use_id``).
"""

from __future__ import annotations

import functools
import json
from typing import Any, Sequence

from .. import nesting
from ..errors import FormatError
from ..messages import (
    AudioBlock,
    DocumentBlock,
    ImageBlock,
    Message,
    memo_on,
    ProviderBlock,
    RefusalBlock,
    SearchResultBlock,
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
    without,
)

BOOK = book_key("anthropic")
FILE_ISSUER = "file_issuer"
"""The key of this format's book on an image or document read with a Files-API ``file_id``:
the family that issued the id (``anthropic``); an id is valid only at that provider."""
PROVIDER_CALLS = ("server_tool_use", "mcp_tool_use")
"""Anthropic block types that are a call the provider runs (``id`` pairs it with its result)."""
PROVIDER_RESULTS = (
    "web_search_tool_result", "web_fetch_tool_result", "code_execution_tool_result",
    "bash_code_execution_tool_result", "text_editor_code_execution_tool_result",
    "tool_search_tool_result", "mcp_tool_result",
)
"""Anthropic block types that answer a provider-run call (``tool_use_id``)."""
PROVIDER_KINDS = PROVIDER_CALLS + PROVIDER_RESULTS + ("container_upload", "compaction")
"""Anthropic block types read as :class:`~ctxwise.messages.ProviderBlock`, kept verbatim
(``anthropic/types/content_block_param.py``; MCP: ``anthropic/types/beta/beta_mcp_tool_use_block_param.py``,
``beta_request_mcp_tool_result_block_param.py``; server-side compaction's signed summary:
``anthropic/types/beta/beta_compaction_block_param.py``)."""
BLOCK_TYPES = ("text", "image", "thinking", "redacted_thinking", "tool_use", "tool_result", "document",
               "search_result") + PROVIDER_KINDS
_NATURAL_BLOCK = {
    "text": ["type", "text", "citations"],
    "document": ["type", "source", "title", "context", "citations"],
    "search_result": ["type", "source", "title", "content", "citations"],
    "image": ["type", "source"],
    "thinking": ["type", "thinking", "signature"],
    "redacted_thinking": ["type", "data"],
    "tool_use": ["type", "id", "name", "input"],
    "tool_result": ["type", "tool_use_id", "content", "is_error"],
}
_NATURAL_MSG = ["id", "role", "name", "content"]
_ABSENT: Any = object()


# -- reading ------------------------------------------------------------------------------


def _read_image(b: dict[str, Any], place: str, extra: dict[str, Any]) -> ImageBlock:
    src = need_dict(b.get("source"), place, "an image 'source' object")
    _need_source_value(src, place, "image")
    more = split_known(src, ("type", "media_type", "data", "url"))
    if src.get("type") == "base64":
        if more:
            extra = {**extra, BOOK: {**extra.get(BOOK, {}), "source": more}}
        return image_from_b64(src.get("media_type"), src.get("data", ""), extra)
    if src.get("type") == "url":
        if more:
            extra = {**extra, BOOK: {**extra.get(BOOK, {}), "source": more}}
        return ImageBlock(url=src.get("url"), extra=extra)
    if src.get("type") == "file" and isinstance(src.get("file_id"), str):
        more = split_known(src, ("type", "file_id"))
        book = {**extra.get(BOOK, {}), FILE_ISSUER: "anthropic"}
        if more:
            book["source"] = more
        return ImageBlock(file_id=src["file_id"], extra={**extra, BOOK: book})
    return ImageBlock(extra={**extra, BOOK: {**extra.get(BOOK, {}), "raw_source": src}})


_SOURCE_VALUE = {"base64": "data", "text": "data", "url": "url", "file": "file_id"}
"""The key each source type must hold a non-empty string in (``anthropic/types/beta/
beta_base64_image_source_param.py``, ``beta_url_image_source_param.py``, ``beta_file_image_source_param.py``,
``beta_base64_pdf_source_param.py``, ``beta_plain_text_source_param.py``: each ``Required``)."""


def _need_source_value(src: dict[str, Any], place: str, what: str) -> None:
    """Raise FormatError when an image / document source lacks the value its type names (a
    ``file`` source without ``file_id``, a ``base64`` one without ``data``): sent, the API
    refuses the request; an empty string is no source."""
    key = _SOURCE_VALUE.get(src.get("type"))  # type: ignore[arg-type]
    if key is None:
        if what == "image":
            raise FormatError(place, f"unknown image source type {src.get('type')!r}; expected base64, url or file")
        return
    v = src.get(key)
    if not isinstance(v, str) or (not v and src["type"] != "text"):  # an empty plain-text document is text
        raise FormatError(place, f"a {what} source of type {src['type']!r} needs a non-empty string {key!r}, "
                                 f"got {v!r}")


def _content_form(blocks: list[Any], raw: Any, empty: str) -> str | None:
    """The book entry for a content value, or None when the writer's default reproduces it."""
    if raw is _ABSENT:
        form = "absent"
    elif isinstance(raw, str):
        form = "str" if raw else "empty"
    else:
        form = "list"
    return None if form == _default_form(blocks, empty) else form


def _default_form(blocks: list[Any], empty: str) -> str:
    if not blocks:
        return empty
    b = blocks[0]
    if len(blocks) == 1 and isinstance(b, TextBlock) and b.text and not b.extra:
        return "str"
    return "list"


def _tool_input(raw: Any, place: str) -> dict[str, Any]:
    """A tool_use ``input``: an object as given, a JSON text of an object parsed (as the OpenAI
    reader parses ``arguments``), none at all as ``{}``. Anything else is a FormatError: it was
    stored as ``{}`` and the call's arguments were lost without a word."""
    if isinstance(raw, dict):
        why = nesting.too_deep(raw)
        if why is not None:
            raise FormatError(place, f"tool_use input is {why}")
        return raw
    if raw is _ABSENT or raw is None:
        return {}
    if isinstance(raw, str):
        try:
            parsed = nesting.loads(raw)
        except nesting.TooDeep as e:
            raise FormatError(place, f"tool_use input is {e}") from None
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            return parsed
        raise FormatError(place, f"tool_use input must be a JSON object; got the text {raw[:60]!r}")
    raise FormatError(place, f"tool_use input must be a JSON object, got {type(raw).__name__}")


_DOC_SOURCES: dict[str, tuple[str, ...]] = {
    "base64": ("type", "media_type", "data"), "text": ("type", "media_type", "data"),
    "url": ("type", "url"), "file": ("type", "file_id"), "content": ("type", "content"),
}


def _natural(b: dict[str, Any], t: str) -> list[str]:
    """The keys of block ``b`` (type ``t``) read into canonical fields: the optional ones
    (``citations``, ``title``, ``context``) only when they hold a value (an explicit ``null``
    stays an extra key, so it is written back as it was)."""
    def known(k: str) -> bool:
        v = b.get(k)
        if k == "citations":
            return isinstance(v, list) if t == "text" else isinstance(v, dict)
        return isinstance(v, str) if k in ("title", "context") and t == "document" else True

    return [k for k in _NATURAL_BLOCK[t] if known(k)]


def _read_document(b: dict[str, Any], place: str, extra: dict[str, Any], book: dict[str, Any]) -> DocumentBlock:
    """A ``document`` block (``anthropic/types/document_block_param.py``); raises FormatError
    for a source of an unknown type."""
    src = need_dict(b.get("source"), place, "a document 'source' object")
    st = src.get("type")
    if st not in _DOC_SOURCES:
        raise FormatError(place, f"unknown document source type {st!r}; expected one of {', '.join(_DOC_SOURCES)}")
    _need_source_value(src, place, "document")
    more = split_known(src, _DOC_SOURCES[st])
    if more:
        book["source"] = more
    content = None
    if st == "content":
        raw = src.get("content")
        content = _read_content(raw, f"{place}, source", None, True, inner=True)
        form = _content_form(content, raw, "list")
        if form:
            book["content"] = form
    if isinstance(src.get("file_id"), str):
        book[FILE_ISSUER] = "anthropic"
    return DocumentBlock(
        source_type=st, media_type=src.get("media_type"), data=src.get("data"), url=src.get("url"),
        file_id=src.get("file_id"), content=content, title=None if "title" in extra else b.get("title"),
        context=None if "context" in extra else b.get("context"),
        citations=b.get("citations") if "citations" not in extra else None, extra=with_book(extra, BOOK, book))


def _read_search_result(b: dict[str, Any], place: str, extra: dict[str, Any], book: dict[str, Any]) -> SearchResultBlock:
    """A ``search_result`` block (``anthropic/types/search_result_block_param.py``)."""
    for k in ("source", "title"):
        if not isinstance(b.get(k), str):
            raise FormatError(place, f"a search_result needs a string {k!r}, got {b.get(k)!r}")
    raw = b.get("content")
    if not isinstance(raw, list):
        raise FormatError(place, f"search_result content must be a list of text blocks, got {type(raw).__name__}")
    content = [_read_block(x, f"{place}, content {k}", None, True, inner=True) for k, x in enumerate(raw)]
    if not all(isinstance(x, TextBlock) for x in content):
        raise FormatError(place, "search_result content holds text blocks only")
    return SearchResultBlock(source=b["source"], title=b["title"], content=content,
                             citations=b.get("citations") if "citations" not in extra else None,
                             extra=with_book(extra, BOOK, book))


def _read_provider(b: dict[str, Any], place: str) -> ProviderBlock:
    """A server-tool / MCP / container block kept verbatim, paired by ``id`` / ``tool_use_id``."""
    t = b["type"]
    key = "id" if t in PROVIDER_CALLS else "tool_use_id" if t in PROVIDER_RESULTS else None
    cid = b.get(key) if key else None
    if key and not isinstance(cid, str):
        raise FormatError(place, f"a {t} block needs a string {key!r}, got {cid!r}")
    return ProviderBlock(provider="anthropic", kind=t, raw=b, call_id=cid)


_RESULT_CONTENT = ("text", "image", "document", "search_result")
"""The blocks a ``tool_result``'s content holds (``anthropic/types/tool_result_block_param.py``)."""


def _read_block(b: Any, place: str, uses: dict[str, str] | None, strict: bool,
                inner: bool | tuple[str, ...] = False) -> Any:
    b = need_dict(b, place, "a content block object")
    t = b.get("type")
    allowed = inner if isinstance(inner, tuple) else ("text", "image") if inner else BLOCK_TYPES
    if t not in allowed:
        raise unknown_block(place, t, allowed)
    if t in PROVIDER_KINDS:
        return _read_provider(b, place)
    book: dict[str, Any] = {}
    natural = _natural(b, t)
    order = order_note(b, natural)
    if order:
        book["order"] = order
    extra = split_known(b, natural)
    if t == "text":
        if b.get("citations") is not None and not isinstance(b.get("citations"), list):
            raise FormatError(place, f"text citations must be a list of citation objects, got "
                                     f"{type(b.get('citations')).__name__}")
        cites = b.get("citations") if "citations" in natural else None
        return TextBlock(text=b.get("text", ""), citations=cites, extra=with_book(extra, BOOK, book))
    if t == "document":
        return _read_document(b, place, extra, book)
    if t == "search_result":
        return _read_search_result(b, place, extra, book)
    if t == "image":
        return _read_image(b, place, with_book(extra, BOOK, book))
    if t == "thinking":
        return ThinkingBlock(thinking=b.get("thinking", ""), signature=b.get("signature"), extra=with_book(extra, BOOK, book))
    if t == "redacted_thinking":
        return ThinkingBlock(thinking=b.get("data", ""), redacted=True, extra=with_book(extra, BOOK, book))
    if t == "tool_use":
        return ToolUseBlock(id=str(b.get("id", "")), name=str(b.get("name", "")),
                            input=_tool_input(b.get("input", _ABSENT), place), extra=with_book(extra, BOOK, book))
    return _read_result(b, place, uses, strict, extra, book)


def _read_result(b: dict[str, Any], place: str, uses: dict[str, str] | None, strict: bool,
                 extra: dict[str, Any], book: dict[str, Any]) -> ToolResultBlock:
    """A ``tool_result`` block; raises (``strict``) when its ``tool_use_id`` is not a call
    of ``uses`` (the immediately preceding assistant message's, id → name)."""
    tid: Any = b.get("tool_use_id")  # any JSON value, looked up among the call ids as it is
    if strict and (uses is None or tid not in uses):
        raise no_call(place, tid, "matches no tool_use of the immediately preceding assistant message")
    raw = b.get("content", _ABSENT)
    if isinstance(raw, list):
        output = [_read_block(x, f"{place}, content {k}", None, strict, inner=_RESULT_CONTENT) for k, x in enumerate(raw)]
    elif isinstance(raw, str) and raw:
        output = [TextBlock(text=raw)]
    elif raw is _ABSENT or isinstance(raw, str):
        output = []
    else:
        raise FormatError(place, f"tool_result content must be a string or a list of blocks, got {type(raw).__name__}")
    form = _content_form(output, raw, "absent")
    if form:
        book["content"] = form
    if "is_error" in b and b["is_error"] is not True:
        book["is_error"] = b["is_error"]
    return ToolResultBlock(
        tool_use_id=str(tid), name=(uses or {}).get(tid), state="error" if b.get("is_error") is True else "success",
        output=output, extra=with_book(extra, BOOK, book),
    )


def _read_content(raw: Any, place: str, uses: dict[str, str] | None, strict: bool, inner: bool = False) -> list[Any]:
    if isinstance(raw, str):
        return [TextBlock(text=raw)] if raw else []
    if raw is _ABSENT or raw is None:
        return []
    if not isinstance(raw, list):
        raise FormatError(place, f"content must be a string or a list of blocks, got {type(raw).__name__}")
    return [_read_block(b, f"{place}, block {k}", uses, strict, inner) for k, b in enumerate(raw)]


def _read_system(system: Any, strict: bool) -> Message:
    """The top-level ``system`` as a canonical ``system`` message."""
    blocks = _read_content(system, "system", None, strict)
    form = _content_form(blocks, system, "empty")
    return Message(id=default_id(0), role="system", blocks=blocks,
                   metadata={BOOK: {"content": form}} if form else {})


def _chunks(results: list[Any], counts: list[int]) -> list[list[Any]]:
    """``results`` cut into runs of ``counts`` blocks (what is left over goes to the last run)."""
    chunks: list[list[Any]] = []
    k = 0
    for c in counts:
        chunks.append(results[k:k + c])
        k += c
    if k < len(results):
        chunks[-1] = chunks[-1] + results[k:]
    return chunks


def _split_results(raw: dict[str, Any], blocks: list[Any], carry: Any, meta: dict[str, Any],
                   book: dict[str, Any], base: int) -> list[Message]:
    """A user message holding ``tool_result`` blocks as canonical ``tool`` messages (split as
    ``carry["parts"]`` says, one by default) and a ``user`` message of its other blocks, noted
    so the writer merges them back in the original order."""
    results = [b for b in blocks if isinstance(b, ToolResultBlock)]
    others = [b for b in blocks if not isinstance(b, ToolResultBlock)]
    mid = raw.get("id")
    chunks = _chunks(results, (carry or {}).get("parts") or [len(results)])
    last: dict[str, Any] = {}
    if others:
        layout = "".join("r" if isinstance(b, ToolResultBlock) else "o" for b in blocks)
        plain = "r" * len(results) + "o" * len(others)
        last["with_next"] = True if layout == plain else layout
    out: list[Message] = []
    for n, chunk in enumerate(chunks):
        md: dict[str, Any] = dict(meta) if n == 0 else {}
        bk: dict[str, Any] = dict(book) if n == 0 else {}
        if n == len(chunks) - 1:
            bk.update(last)
        out.append(Message(id=str(mid) if (mid and n == 0) else default_id(base + len(out)), role="tool",
                           name=raw.get("name") if n == 0 else None,
                           blocks=chunk, metadata=with_book(md, BOOK, bk)))
    if others:
        out.append(Message(id=default_id(base + len(out)), role="user", blocks=others))
    return out


def _read_message(raw: dict[str, Any], place: str, uses: dict[str, str] | None, strict: bool,
                  carry: Any, base: int) -> list[Message]:
    """One Anthropic message as canonical messages (one, or several for a user message with
    tool results); ``base`` is the index of the first."""
    role = raw.get("role")
    if role not in ("user", "assistant", "system"):
        raise FormatError(place, f"unknown role {role!r}; expected user, assistant (or system first)")
    content = raw.get("content", _ABSENT)
    blocks = _read_content(content, place, uses if role == "user" else None, strict)
    book: dict[str, Any] = {}
    order = order_note(raw, _NATURAL_MSG)
    if order:
        book["order"] = order
    meta = split_known(raw, _NATURAL_MSG)
    if role == "system":
        book["in_list"] = True
    if role == "user" and any(isinstance(b, ToolResultBlock) for b in blocks):
        return _split_results(raw, blocks, carry, meta, book, base)
    form = _content_form(blocks, content, "list")
    if form:
        book["content"] = form
    mid = raw.get("id")
    return [Message(id=str(mid or default_id(base)), role=role, name=raw.get("name"),
                    blocks=blocks, metadata=with_book(meta, BOOK, book))]


def _read_memo(raw: dict[str, Any], place: str, uses: dict[str, str] | None, strict: bool,
               carry: Any, base: int) -> list[Message]:
    """:func:`_read_message` through :func:`_read_text` (keyed by the JSON text of its
    arguments); input that is not JSON-native, or that raises, is read uncached (the error then
    names ``place``)."""
    try:
        key = json.dumps([raw, uses, carry], ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return _read_message(raw, place, uses, strict, carry, base)
    try:
        return list(_read_text(key, strict, base))
    except FormatError:
        return _read_message(raw, place, uses, strict, carry, base)


@functools.lru_cache(maxsize=8192)
def _read_text(key: str, strict: bool, base: int) -> tuple[Message, ...]:
    raw, uses, carry = json.loads(key)
    return tuple(_read_message(raw, "message", uses, strict, carry, base))


def _read_sourced(raw: dict[str, Any], i: int, prev: Message | None, strict: bool, base: int,
                  src: tuple[Message, ...]) -> tuple[Message, ...]:
    """:func:`_read_message` of entry ``i``, rendered from ``src`` (no carried fields), kept
    in the memo of those messages (:func:`ctxwise.messages.memo_on`) by position and by the
    preceding assistant message read (``prev``, whose calls a result answers)."""

    def read() -> tuple[Message, ...]:
        uses = {u.id: u.name for u in prev.blocks if isinstance(u, ToolUseBlock)} if prev is not None else None
        return tuple(_read_message(dict(raw), f"message {i}", uses, strict, None, base))

    return memo_on((*src, prev), "anthropic/read-back", (strict, base), read)


def _read(payload: Any, strict: bool, memo: bool = False,
          sources: Sequence[tuple[Message, ...]] | None = None) -> list[Message]:
    fixes = Fixes()
    out: list[Message] = []
    if isinstance(payload, list):
        raw_msgs, system = payload, _ABSENT
    else:
        payload = need_dict(payload, "payload", "an object with 'messages' (or a list of messages)")
        raw_msgs, system = payload.get("messages"), payload.get("system", _ABSENT)
        if not isinstance(raw_msgs, list):
            raise FormatError("payload", "expected a 'messages' list")
    skip = int(system is not _ABSENT)
    if sources is not None and len(sources) != skip + len(raw_msgs):
        sources = None
    if system is not _ABSENT:
        system_message = (_read_system(system, strict) if sources is None or not memo or not sources[0]
                          else memo_on(sources[0], "anthropic/read-system", strict, lambda: _read_system(system, strict)))
        fixes.take(payload.get(CARRY), 0)
        out.append(system_message)
    prev: Message | None = None  # the immediately preceding assistant message, as read
    for i, raw in enumerate(raw_msgs):
        if memo and sources is not None and sources[skip + i] and isinstance(raw, dict) and CARRY not in raw:
            read: Sequence[Message] = _read_sourced(raw, i, prev, strict, len(out), sources[skip + i])
            out.extend(read)
            prev = read[0] if raw.get("role") == "assistant" else None
            continue
        place = f"message {i}"
        raw = dict(need_dict(raw, place, "a message object"))
        carry = raw.pop(CARRY, None)
        base = len(out)
        # the calls of the immediately preceding assistant message
        uses = {u.id: u.name for u in prev.blocks if isinstance(u, ToolUseBlock)} if prev is not None else None
        read = (_read_memo(raw, place, uses, strict, carry, base) if memo
                else _read_message(raw, place, uses, strict, carry, base))
        out.extend(read)
        fixes.take(carry, base)
        prev = read[0] if raw["role"] == "assistant" else None
    return fixes.apply(out)


def from_anthropic(payload: dict[str, Any] | list[dict[str, Any]], *, strict: bool = True,
                   memo: bool = False, sources: Sequence[tuple[Message, ...]] | None = None) -> list[Message]:
    """Read an Anthropic ``{"system"?, "messages"}`` payload (or a message list whose first
    element may be a system message) into canonical messages.

    Other top-level keys (``model``, ``tools``, ...) are not read. Raises
    :class:`~ctxwise.errors.FormatError` naming the message/block for: a missing ``messages``
    list, an unknown role or block type, or a ``tool_result`` whose ``tool_use_id`` matches no
    ``tool_use`` of the immediately preceding assistant message (Anthropic: "unexpected
    tool_use_id found in tool_result blocks").

    With ``strict=False`` a result that answers no call is read as it stands (the provider
    validator reports it) instead of raising.

    ``memo=True`` (for payloads of JSON values only, such as ctxwise's own renders, read again
    at every call by the wire check): a message read before with the same JSON text, position
    and preceding calls is taken from a bounded process-wide cache (8,192 messages); the
    messages returned are then shared, frozen objects. With ``sources`` too (for a payload
    :func:`ctxwise.providers.render_converted` rendered, as it filled ``sources``: the messages
    each entry was rendered from, ``system`` first when present), an entry's read is kept in
    the memo of its messages instead (no JSON text is made); ``sources`` of another length is
    ignored.
    """
    return _read(payload, strict=strict, memo=memo, sources=sources)


# -- writing ------------------------------------------------------------------------------


def _image_source(b: ImageBlock, book: dict[str, Any]) -> Any:
    """An image's ``source``: as read when it was of an unknown type, else base64 or url."""
    if "raw_source" in book:
        return book["raw_source"]
    if b.data is not None:
        return {"type": "base64", "media_type": b.media_type, "data": b.data, **(book.get("source") or {})}
    if b.file_id is not None and b.url is None:
        return {"type": "file", "file_id": b.file_id, **(book.get("source") or {})}
    return {"type": "url", "url": b.url, **(book.get("source") or {})}


def _document_source(b: DocumentBlock, book: dict[str, Any]) -> dict[str, Any]:
    """A document's ``source`` object, in the form it was read."""
    src: dict[str, Any] = {"type": b.source_type}
    if b.source_type in ("base64", "text"):
        src.update(media_type=b.media_type, data=b.data)
    elif b.source_type == "url":
        src["url"] = b.url
    elif b.source_type == "file":
        src["file_id"] = b.file_id
    else:
        c = _write_content(list(b.content or []), book.get("content"), "list")
        src["content"] = [] if c is _ABSENT else c
    src.update(book.get("source") or {})
    return src


def _write_result(b: ToolResultBlock, book: dict[str, Any]) -> dict[str, Any]:
    """A tool result as a ``tool_result`` block (its content in the form it was read)."""
    d: dict[str, Any] = {"type": "tool_result", "tool_use_id": b.tool_use_id}
    form = book.get("content") or _default_form(b.output, "absent")
    if form == "str" and len(b.output) == 1 and isinstance(b.output[0], TextBlock):
        d["content"] = b.output[0].text
    elif form in ("empty", "str") and not b.output:
        d["content"] = ""
    elif form != "absent" or b.output:
        d["content"] = _write_blocks(b.output)
    if b.state == "error":
        d["is_error"] = True
    elif "is_error" in book:
        d["is_error"] = book["is_error"]
    return d


def _writable(b: Any) -> bool:
    """Whether the Anthropic format holds block ``b`` (audio, refusals and other providers'
    blocks it does not: with ``extras=True`` they travel in the carry)."""
    if isinstance(b, ProviderBlock):
        return b.provider == "anthropic"
    return not isinstance(b, (AudioBlock, RefusalBlock))


def _write_blocks(blocks: list[Any]) -> list[dict[str, Any]]:
    return [_write_block(b) for b in blocks if _writable(b)]


def _write_block(b: Any) -> dict[str, Any]:
    book = b.extra.get(BOOK) or {}
    d: dict[str, Any]
    if isinstance(b, ProviderBlock):
        d = dict(b.raw)
        spread(d, b.extra, skip=BOOK)
        return d
    if isinstance(b, TextBlock):
        d = {"type": "text", "text": b.text}
        if b.citations is not None:
            d["citations"] = b.citations
    elif isinstance(b, DocumentBlock):
        d = {"type": "document", "source": _document_source(b, book)}
        for k in ("title", "context", "citations"):
            if getattr(b, k) is not None:
                d[k] = getattr(b, k)
    elif isinstance(b, SearchResultBlock):
        d = {"type": "search_result", "source": b.source, "title": b.title, "content": _write_blocks(b.content)}
        if b.citations is not None:
            d["citations"] = b.citations
    elif isinstance(b, ImageBlock):
        d = {"type": "image", "source": _image_source(b, book)}
    elif isinstance(b, ThinkingBlock):
        if b.redacted:
            d = {"type": "redacted_thinking", "data": b.thinking}
        else:
            d = {"type": "thinking", "thinking": b.thinking}
            if b.signature is not None:
                d["signature"] = b.signature
    elif isinstance(b, ToolUseBlock):
        d = {"type": "tool_use", "id": b.id, "name": b.name, "input": b.input}
    else:
        d = _write_result(b, book)
    spread(d, b.extra, skip=BOOK)
    return reorder(d, book.get("order"))


def _write_content(blocks: list[Any], form: str | None, empty: str) -> Any:
    form = form or _default_form(blocks, empty)
    if form == "absent" and not blocks:
        return _ABSENT
    if form in ("str", "empty") and not blocks:
        return ""
    if form == "str" and len(blocks) == 1 and isinstance(blocks[0], TextBlock):
        return blocks[0].text
    return _write_blocks(blocks)


def _merge_tool_run(messages: list[Message], i: int) -> tuple[list[Any], list[int], int]:
    """The run of ``tool`` messages from ``i`` as the blocks of one user message (with the
    next user message merged back when the reader split it off, in its noted order), the
    block count of each tool message, and the index after the run."""
    n = len(messages)
    j, counts, blocks = i, [], []
    while j < n and messages[j].role == "tool":
        counts.append(len(messages[j].blocks))
        blocks.extend(messages[j].blocks)
        j += 1
    wn = (messages[j - 1].metadata.get(BOOK) or {}).get("with_next")
    if wn and j < n and messages[j].role == "user":
        others = list(messages[j].blocks)
        j += 1
        if isinstance(wn, str) and wn.count("r") == len(blocks) and wn.count("o") == len(others):
            rs, os_ = iter(blocks), iter(others)
            blocks = [next(rs) if c == "r" else next(os_) for c in wn]
        else:
            blocks = blocks + others
    return blocks, counts, j


def _write_message(messages: list[Message], i: int, extras: bool) -> tuple[dict[str, Any], int]:
    """Message ``i`` (with the tool messages and user message written with it) as one
    Anthropic message, and the index of the next message to write."""
    m = messages[i]
    book = m.metadata.get(BOOK) or {}
    d: dict[str, Any] = {}
    if extras and m.id != default_id(i):
        d["id"] = m.id
    if m.role == "tool":
        blocks, counts, j = _merge_tool_run(messages, i)
        d["role"] = "user"
        if m.name is not None and extras:
            d["name"] = m.name
        d["content"] = _write_blocks(blocks)
        if extras and len(counts) > 1:
            d[CARRY] = {"parts": counts}
    else:
        j = i + 1
        d["role"] = m.role
        if m.name is not None and extras:
            d["name"] = m.name
        c = _write_content(m.blocks, book.get("content"), "list")
        if c is not _ABSENT:
            d["content"] = c
    if extras:
        spread(d, m.metadata, skip=BOOK)
        d = reorder(d, book.get("order"))
    return d, j


def to_anthropic(messages: list[Message], *, extras: bool = True) -> dict[str, Any]:
    """Write canonical messages as an Anthropic ``{"system"?, "messages"}`` payload.

    A first ``system`` message becomes the top-level ``system`` (unless, with ``extras=True``,
    it was read from a list with the system inside: then it stays there for a lossless round
    trip; a provider payload, ``extras=False``, always has it top-level); a later system message stays in the list (the
    API would reject it: the provider validator reports that). Consecutive ``tool`` messages
    become one user message of ``tool_result`` blocks. Tool-result ``name`` is not written (the
    reader takes it from the ``tool_use``). With ``extras=True`` metadata, block extras and
    non-default ids are written as extra keys and what the format cannot hold travels in
    ``"_ctxwise"``, so ``from_anthropic(to_anthropic(m)) == m``; ``extras=False`` drops them (block extras are
    still written; for the request a provider receives use :func:`ctxwise.providers.render`).
    """
    payload: dict[str, Any] = {}
    units: list[dict[str, Any]] = []
    first_of: list[int] = []
    has_system = False
    i, n = 0, len(messages)
    while i < n:
        m = messages[i]
        book = m.metadata.get(BOOK) or {}
        if i == 0 and m.role == "system" and not (extras and book.get("in_list")):
            payload["system"] = _write_content(m.blocks, book.get("content"), "empty")
            has_system = True
            units.append({})
            first_of.append(0)
            i += 1
            continue
        d, j = _write_message(messages, i, extras)
        first_of.extend([len(units)] * (j - i))
        units.append(d)
        i = j
    payload["messages"] = units[1:] if has_system else units
    if extras:
        def back(us: list[dict[str, Any]]) -> list[Message]:
            p = {"system": payload["system"], "messages": us[1:]} if has_system else {"messages": us}
            return _read(p, strict=False)

        seal(messages, units, first_of, back)
        if has_system and units[0].get(CARRY):
            payload[CARRY] = units[0][CARRY]
    return payload
