"""What every store backend refuses before writing, identically (see ``MessageNotStorable``).

PostgreSQL cannot hold U+0000 in text or ``jsonb``; no UTF-8 database can hold a lone
surrogate (Python's ``errors="surrogateescape"`` makes them); ids live in 255-character
columns. The in-memory store could hold all of these, and refuses them anyway, so a program
tested against it behaves the same in production.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .. import nesting
from ..errors import MessageNotStorable, NotStorable
from ..messages import Message

MAX_ID = 255


def dumps(obj: Any) -> str:
    """Compact JSON, non-ASCII kept, NaN refused (the text the SQL store writes)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _bad_text(dump: str) -> str | None:
    """The rule a JSON text breaks (None when it is storable). Scans the text in place (no
    UTF-8 copy of a 20 MB body just to see whether it would encode)."""
    if _SURROGATE.search(dump):
        return "lone-surrogate"
    if "\\u0000" in dump and _has_nul(json.loads(dump)):
        return "nul-character"
    return None


def _has_nul(obj: Any) -> bool:
    """Whether a string in ``obj`` (a key or a value, at any depth) holds U+0000. Iterative."""
    stack = [obj]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            if "\x00" in node:
                return True
        elif isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


_RULE_TEXT = {
    "lone-surrogate": "contains a lone surrogate (text decoded with errors='surrogateescape'?), which is not valid Unicode",
    "nul-character": "contains a NUL character (U+0000), which PostgreSQL cannot store",
}


def _check_keys(m: Message, index: int) -> None:
    """Raise :class:`MessageNotStorable` (rule ``lone-surrogate``) for a key of a free-form
    value of ``m`` holding a lone surrogate: the JSON serializer would write it as U+FFFD, so
    what is stored would differ from what was sent (values are checked in the dump itself)."""
    for where, value in nesting.json_values(m):
        bad = next((k for k in nesting.keys(value) if _SURROGATE.search(k)), None)
        if bad is not None:
            raise MessageNotStorable(index, "lone-surrogate", f"message {m.id!r}: a key of its {where} "
                                                              f"({bad!a}) {_RULE_TEXT['lone-surrogate']}")


def message_body(m: Any, index: int) -> dict[str, Any]:
    """``m`` as the JSON dict to store. Raises TypeError (not a Message) or
    :class:`MessageNotStorable` naming ``index``."""
    if not isinstance(m, Message):
        raise TypeError(f"message {index}: expected a ctxwise Message, got {type(m).__name__}")
    nesting.check_message(m, index)
    _check_keys(m, index)
    try:
        data = m.model_dump(mode="json")
        dump = dumps(data)
    except Exception as exc:  # pydantic serialization errors, NaN, ...
        raise MessageNotStorable(index, "not-json", f"id {m.id!r} cannot be stored as JSON: {exc}") from exc
    for what, ident in [("message id", m.id), *(("tool_use_id", r.tool_use_id) for r in m.tool_results)]:
        if len(ident) > MAX_ID:
            raise MessageNotStorable(index, "id-too-long",
                                     f"{what} is {len(ident)} characters; at most {MAX_ID} can be stored")
    rule = _bad_text(dump)
    if rule is not None:  # say where: the id itself, or the text of the message
        where = "its id" if _bad_text(dumps(m.id)) == rule else "its content"
        raise MessageNotStorable(index, rule, f"message {m.id!r}: {where} {_RULE_TEXT[rule]}")
    return data


def bodies(messages: list[Any]) -> list[dict[str, Any]]:
    """:func:`message_body` of each message, and no id twice in the batch."""
    out = [message_body(m, i) for i, m in enumerate(messages)]
    seen: set[str] = set()
    for i, m in enumerate(messages):
        if m.id in seen:
            raise MessageNotStorable(i, "duplicate-message-id", f"id {m.id!r} appears twice in the batch")
        seen.add(m.id)
    return out


def holdable(*ids: Any) -> bool:
    """Whether each id is one the database could hold (a string of at most MAX_ID characters,
    no NUL, valid Unicode). A read by an id that is not could match nothing: callers answer
    "not found" instead of sending it (PostgreSQL raises DataError on NUL)."""
    return all(isinstance(i, str) and len(i) <= MAX_ID and "\x00" not in i and not _SURROGATE.search(i)
               for i in ids)


def key(user_id: Any, session_id: Any) -> None:
    """A session key the store can hold: two non-empty strings of at most 255 characters,
    valid Unicode, no NUL. Raises :class:`NotStorable`."""
    for what, v in (("user_id", user_id), ("session_id", session_id)):
        if not isinstance(v, str) or not v:
            raise NotStorable(f"{what} must be a non-empty string, got {v!r}")
        if len(v) > MAX_ID:
            raise NotStorable(f"{what} is {len(v)} characters; at most {MAX_ID} can be stored")
        rule = _bad_text(dumps(v))
        if rule is not None:
            raise NotStorable(f"{what} {_RULE_TEXT[rule]}")


def json_doc(obj: Any, where: str) -> Any:
    """``obj`` as strict, storable JSON (a copy). Raises :class:`NotStorable` naming ``where``
    (also for a value nested deeper than :data:`ctxwise.nesting.MAX_DEPTH`)."""
    why = nesting.too_deep(obj)
    if why is not None:
        raise NotStorable(f"{where}: {why}")
    try:
        dump = dumps(obj)
    except (TypeError, ValueError) as exc:
        raise NotStorable(f"{where}: cannot be stored as JSON: {exc}") from exc
    rule = _bad_text(dump)
    if rule is not None:
        raise NotStorable(f"{where}: {_RULE_TEXT[rule]}")
    return json.loads(dump)
