"""Read and write other shapes of agent conversations, with lossless round trips.

Formats (names used by :data:`READERS`, :data:`WRITERS`, :func:`dump`):

==============  ================================================================  ============
name            shape                                                             module
==============  ================================================================  ============
``openai``      Chat Completions message list (DeepSeek ``reasoning_content``)    openai_chat
``anthropic``   ``{"system"?, "messages"}`` with content blocks                   anthropic
``agentscope``  ``{"context": [{"role": "USER", "content": [blocks]}]}``           agentscope
``responses``   Responses API input items                                         responses
``tau2``        tau2-bench Results JSON (one conversation per simulation)         tau2
``taubench``    tau-bench trajectory list (``traj`` is OpenAI chat)               taubench
==============  ================================================================  ============

:func:`load` detects the format of a file and returns :class:`Conversation` objects;
:func:`dump` writes one back. Every reader raises :class:`~ctxwise.errors.FormatError` whose
message names the place (file, conversation, message index) and the rule broken.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

from .. import nesting
from ..errors import FormatError
from ..messages import Message
from .agentscope import from_agentscope, to_agentscope
from .anthropic import PROVIDER_KINDS as _ANTHROPIC_PROVIDER_KINDS
from .anthropic import from_anthropic, to_anthropic
from .conversation import Conversation
from .openai_chat import from_openai, to_openai
from .responses import PROVIDER_ITEMS as _RESPONSES_PROVIDER_ITEMS
from .responses import from_responses, to_responses
from .sdk import plain
from .tau2 import from_tau2, from_tau2_messages, to_tau2, to_tau2_messages, to_tau2_simulation
from .taubench import from_taubench, to_taubench, to_taubench_traj

__all__ = [
    "Conversation", "FORMATS", "MAX_FILE_BYTES", "READERS", "WRITERS", "detect", "dump", "load",
    "from_agentscope", "to_agentscope", "from_anthropic", "to_anthropic", "from_openai", "to_openai",
    "from_responses", "to_responses", "from_tau2", "to_tau2", "from_tau2_messages", "to_tau2_messages",
    "from_taubench", "to_taubench", "plain",
]

MAX_FILE_BYTES = 20 * 1024 * 1024
"""Files larger than this are refused before they are read (override with ``load(max_bytes=)``)."""

READERS: dict[str, Callable[..., list[Message]]] = {
    "openai": from_openai,
    "anthropic": from_anthropic,
    "agentscope": from_agentscope,
    "responses": from_responses,
    "tau2": from_tau2_messages,
    "taubench": from_openai,
}
"""Message-level readers by format name (tau2: one simulation's ``messages``; taubench: a ``traj``)."""

WRITERS: dict[str, Callable[..., Any]] = {
    "openai": to_openai,
    "anthropic": to_anthropic,
    "agentscope": to_agentscope,
    "responses": to_responses,
    "tau2": to_tau2_messages,
    "taubench": to_taubench_traj,
}
"""Message-level writers by format name; each takes ``list[Message]``."""

FORMATS = tuple(READERS)
_KNOWN = ("tau2 Results, tau-bench list, OpenAI chat (list, {'messages'} or JSONL), "
          "Anthropic {'system'?, 'messages'}, AgentScope {'context'}, Responses items")
_RESPONSES_TYPES = {"reasoning", "function_call", "function_call_output", "message", *_RESPONSES_PROVIDER_ITEMS}
_ANTHROPIC_BLOCKS = {"tool_use", "tool_result", "thinking", "redacted_thinking", "image", "document", "search_result",
                     *_ANTHROPIC_PROVIDER_KINDS}
_CASE_FORMATS = {"openai_chat": "openai", "anthropic_messages": "anthropic", "openai_responses_items": "responses"}


def _looks_anthropic(msgs: list[Any]) -> bool:
    for m in msgs:
        if isinstance(m, dict):
            c = m.get("content")
            if isinstance(c, list) and any(isinstance(b, dict) and b.get("type") in _ANTHROPIC_BLOCKS for b in c):
                return True
    return False


def detect(doc: Any) -> str | None:
    """The format name of a parsed JSON document, or None when it is none of them.

    tau2 (``simulations``), AgentScope (``context``), a cases file (``provider_format``),
    Anthropic (``messages`` with a top-level ``system`` or Anthropic block types), OpenAI chat,
    Responses items (``type`` of ``reasoning`` / ``function_call*`` / ``message``), tau-bench
    (records with ``traj``).
    """
    if isinstance(doc, dict):
        if isinstance(doc.get("simulations"), list):
            return "tau2"
        if isinstance(doc.get("context"), list):
            return "agentscope"
        if isinstance(doc.get("messages"), list):
            pf = str(doc.get("provider_format", "")).split(" ")[0]
            if pf in _CASE_FORMATS:
                return _CASE_FORMATS[pf]
            return "anthropic" if "system" in doc or _looks_anthropic(doc["messages"]) else "openai"
        if isinstance(doc.get("input"), list):
            return "responses"
        return None
    if isinstance(doc, list):
        if not doc:
            return "openai"
        if not all(isinstance(x, dict) for x in doc):
            return None
        if all("traj" in x for x in doc):
            return "taubench"
        if any(x.get("type") in _RESPONSES_TYPES for x in doc):
            return "responses"
        if all("role" in x for x in doc):
            return "anthropic" if _looks_anthropic(doc) else "openai"
    return None


_FILE_DEPTH = 2 * nesting.MAX_DEPTH
"""The deepest nesting read from a file: a message's own values nest at most
:data:`ctxwise.nesting.MAX_DEPTH` deep, inside the file's wrappers."""


def _parse(path: Path, text: str) -> tuple[list[Any], bool]:
    """The JSON documents of a file: ``([doc], False)`` or JSONL ``([doc, ...], True)``."""
    try:
        return [nesting.loads(text, _FILE_DEPTH)], False
    except nesting.TooDeep as e:
        raise FormatError(str(path), str(e)) from None
    except json.JSONDecodeError as e:
        if not e.msg.startswith("Extra data"):
            raise FormatError(f"{path}: line {e.lineno} column {e.colno}", f"not JSON ({e.msg})") from None
    docs = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                docs.append(nesting.loads(line, _FILE_DEPTH))
            except nesting.TooDeep as e:
                raise FormatError(f"{path}: line {n}", str(e)) from None
            except json.JSONDecodeError as e:
                raise FormatError(f"{path}: line {n} column {e.colno}", f"not JSON ({e.msg})") from None
    return docs, True


def _wrapped(doc: dict[str, Any], key: str) -> dict[str, Any]:
    return {"payload": {k: v for k, v in doc.items() if k != key}, "list_key": key, "list_at": list(doc).index(key)}


def _one(doc: Any, fmt: str, cid: str, source: str) -> Conversation:
    if fmt == "agentscope":
        return Conversation(id=cid, messages=from_agentscope(doc), format=fmt, source=source, metadata=_wrapped(doc, "context"))
    if fmt == "anthropic":
        meta = _wrapped(doc, "messages") if isinstance(doc, dict) else {}
        if meta:
            meta["payload"].pop("system", None)
            meta["payload"].pop("_ctxwise", None)
        return Conversation(id=str(doc.get("id", cid)) if isinstance(doc, dict) and "provider_format" in doc else cid,
                            messages=from_anthropic(doc), format=fmt, source=source, metadata=meta)
    key = "input" if fmt == "responses" and isinstance(doc, dict) and "input" in doc else "messages"
    msgs, meta = (doc[key], _wrapped(doc, key)) if isinstance(doc, dict) else (doc, {})
    if isinstance(doc, dict) and "provider_format" in doc:
        cid = str(doc.get("id", cid))
    reader = from_responses if fmt == "responses" else from_openai
    return Conversation(id=cid, messages=reader(msgs), format=fmt, source=source, metadata=meta)


def load(path: str | os.PathLike[str], *, max_bytes: int = MAX_FILE_BYTES) -> list[Conversation]:
    """Read a file of recorded conversations, detecting its format.

    Accepts every format in :data:`FORMATS`; OpenAI chat as a list, ``{"messages": [...]}`` or
    JSONL of those; the cases' files (``provider_format``). Messages get ``m0000``-style ids
    where the format has none.

    Raises :class:`~ctxwise.errors.FormatError` (one line, naming the file and, where it
    applies, the conversation and message index) when the file is larger than ``max_bytes``
    (checked before reading), not UTF-8, not JSON (with line and column), of an unknown shape,
    or breaks a format rule (unknown block type, a tool result with no call, ...), or holds no
    message at all.
    """
    p = Path(path)
    try:
        size = p.stat().st_size
    except OSError as e:
        raise FormatError(str(p), f"cannot read the file ({e.strerror})") from None
    if size > max_bytes:
        raise FormatError(str(p), f"file is {size} bytes, larger than the {max_bytes}-byte limit")
    with p.open("rb") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise FormatError(str(p), f"file is larger than the {max_bytes}-byte limit")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FormatError(f"{p}: byte {e.start}", "not UTF-8 text") from None
    docs, jsonl = _parse(p, text)
    src = str(p)
    out: list[Conversation] = []
    for k, doc in enumerate(docs):
        fmt = detect(doc)
        where = f"{p}: conversation {k}" if jsonl else str(p)
        if fmt is None:
            raise FormatError(where, f"not a known format: expected one of {_KNOWN}")
        cid = f"{p.stem}#{k}" if jsonl else p.stem
        try:
            if fmt == "tau2":
                out.extend(from_tau2(doc, src))
            elif fmt == "taubench":
                out.extend(from_taubench(doc, src))
            else:
                out.append(_one(doc, fmt, cid, src))
        except FormatError as e:
            raise FormatError(f"{where}{', ' if jsonl else ': '}{e.place}", e.rule) from None
    if not any(c.messages for c in out):
        raise FormatError(str(p), "holds no messages (an empty conversation list or message list)")
    return out


def dump(conversation: Conversation | list[Message], format: str, *, extras: bool = True) -> Any:
    """Write a conversation (or a message list) in ``format``; returns JSON-able data.

    For a :class:`Conversation` the record it came from is rebuilt around the messages: a tau2
    simulation dict, a tau-bench record, the AgentScope / Anthropic / ``{"messages"}`` wrapper
    with its other keys. ``extras`` is passed to the writers that take it (see each writer for
    what ``extras=False`` drops). Raises :class:`~ctxwise.errors.FormatError` for an unknown
    format name.
    """
    if format not in WRITERS:
        raise FormatError("dump", f"unknown format {format!r}; expected one of {', '.join(WRITERS)}")
    conv = conversation if isinstance(conversation, Conversation) else None
    msgs = conv.messages if conv else list(conversation)
    if conv and conv.format == format == "tau2":
        return to_tau2_simulation(conv)
    if conv and conv.format == format == "taubench":
        return to_taubench([conv])[0]
    if format in ("tau2", "taubench"):
        return WRITERS[format](msgs)
    body = WRITERS[format](msgs, extras=extras)
    meta = conv.metadata if conv and conv.format == format else {}
    if "payload" not in meta:
        return body
    key = meta.get("list_key", "messages")
    lst = body[key] if isinstance(body, dict) else body
    items = [(k, v) for k, v in meta["payload"].items()]
    at = meta.get("list_at")
    if isinstance(body, dict):
        head = [(k, v) for k, v in body.items() if k != key]
        items = head + items
        items.insert(len(head) if at is None else min(at, len(items)), (key, lst))
    else:
        items.insert(len(items) if at is None else at, (key, lst))
    return dict(items)
