"""How deep user JSON may nest, and the bounded reads every walker of it uses.

Python's parsers, serializers and recursive walkers stop at about 1,000 nested levels with a
``RecursionError`` (pydantic's serializer at about 250). A value nested deeper than that,
stored once, would make every later ``prepare()`` fail. So:

* a message's JSON values (a tool input, ``metadata``, a block's ``extra``) nest at most
  :data:`MAX_DEPTH` containers deep; deeper is refused at append
  (:class:`~ctxwise.errors.MessageNotStorable`, rule ``too-deep``, naming the message index);
* text that holds JSON (a tool result's body, tool-call arguments) is read with :func:`loads`,
  which refuses nesting deeper than :data:`MAX_DEPTH` with :class:`TooDeep` (a ``ValueError``)
  before parsing, so a reader treats such a body as plain text or refuses it by name.

Real tool inputs and results nest about a dozen levels (the recorded sessions: 13 at most).
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

from .errors import MessageNotStorable
from .messages import Message, ToolResultBlock, ToolUseBlock

MAX_DEPTH = 64
"""The deepest nesting of containers (objects and arrays) accepted in one JSON value."""

_ESCAPE = re.compile(r"\\.", re.DOTALL)
_STRING = re.compile(r'"[^"]*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class TooDeep(ValueError):
    """JSON nested deeper than the limit: ``depth`` is the nesting found (at least ``limit + 1``)."""

    def __init__(self, depth: int, limit: int) -> None:
        self.depth = depth
        self.limit = limit
        super().__init__(f"JSON nested {depth} levels deep; at most {limit} levels are read")


def depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """The nesting of containers (dicts, lists, tuples) in ``value``: 0 for a scalar, 1 for
    ``{}`` or ``[1]``. Iterative; it stops counting at ``limit + 1``."""
    best = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, (list, tuple)):
            children = node
        else:
            continue
        if level > best:
            best = level
            if best > limit:
                return best
        stack.extend((c, level + 1) for c in children if isinstance(c, (dict, list, tuple)))
    return best


def text_depth(text: str) -> int:
    """The bracket nesting of JSON ``text`` (brackets inside strings not counted): the
    :func:`depth` ``json.loads(text)`` would have, for valid JSON. Linear in ``len(text)``."""
    if "[" not in text and "{" not in text:
        return 0
    # escapes first (so every quote left delimits a string), then strings, then all but brackets:
    # three linear passes, no backtracking
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", _ESCAPE.sub("", text)))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def loads(text: str | bytes, limit: int = MAX_DEPTH, **kwargs: Any) -> Any:
    """``json.loads(text, **kwargs)`` for text nested at most ``limit`` deep. Raises
    :class:`TooDeep` for deeper text (before parsing) and whatever ``json.loads`` raises."""
    s = text.decode("utf-8", "replace") if isinstance(text, (bytes, bytearray)) else text
    found = text_depth(s)
    if found > limit:
        raise TooDeep(found, limit)
    return json.loads(text, **kwargs)


def too_deep(value: Any, limit: int = MAX_DEPTH) -> str | None:
    """Why ``value`` nests too deep to store (a sentence), or None when it fits."""
    found = depth(value, limit)
    return None if found <= limit else f"nested more than {limit} levels deep"


def json_values(m: Message) -> list[tuple[str, Any]]:
    """The free-form JSON values of ``m`` as ``(where, value)``: its ``metadata``, each block's
    ``extra``, each tool input, each tool result's blocks' ``extra``."""
    values: list[tuple[str, Any]] = [("metadata", m.metadata)]
    for j, b in enumerate(m.blocks):
        values.append((f"block {j} extra", b.extra))
        if isinstance(b, ToolUseBlock):
            values.append((f"block {j} (tool call {b.name!r}) input", b.input))
        elif isinstance(b, ToolResultBlock):
            values += [(f"block {j} output {k} extra", o.extra) for k, o in enumerate(b.output)]
    return values


def keys(value: Any) -> list[str]:
    """Every dict key in ``value`` (at any depth, iteratively), as strings."""
    out: list[str] = []
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            out.extend(str(k) for k in node)
            stack.extend(node.values())
        elif isinstance(node, (list, tuple)):
            stack.extend(node)
    return out


def check_message(m: Message, index: int) -> None:
    """Raise :class:`~ctxwise.errors.MessageNotStorable` (rule ``too-deep``, naming ``index``)
    when a value of :func:`json_values` nests deeper than :data:`MAX_DEPTH`."""
    for where, value in json_values(m):
        why = too_deep(value)
        if why is not None:
            raise MessageNotStorable(index, "too-deep", f"message {m.id!r}: its {where} is {why}; send deeper "
                                     "data as text (json.dumps) or flatten it")


__all__ = ["MAX_DEPTH", "TooDeep", "depth", "text_depth", "loads", "too_deep", "check_message", "json_values", "keys"]
