"""Key values of a tool result: what a placeholder keeps inline and a summary lists as findings.

The seeds' layered truncator keeps a ticket's "number, status, owner, updated" and drops the
rest; here, for any tool-result body: identifiers, amounts, dates and e-mails (the salient
values of :mod:`ctxwise.salient`), decimal numbers, and the values of keys that name an id,
a status, a name, an amount or a date (:data:`KEY_FIELDS`). Pure functions, deterministic:
the same body always gives the same text (placeholders are byte-stable once written).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from typing import Any

from .nesting import loads
from .salient import salient_values

KEY_FIELDS = re.compile(
    r"(?:^|_)(?:id|ids|number|no|status|name|amount|price|total|cost|fee|balance|refund|date|time|"
    r"email|phone|brand|last_four|reservation|flight|origin|destination|cabin|tracking|quantity|count)$",
    re.IGNORECASE,
)
"""Keys whose scalar values a placeholder keeps even when the value itself is not salient
(``"status": "pending"``, ``"first_name": "Isabella"``, ``"item_id": "7751905257"``)."""


def _scalar(v: Any) -> str | None:
    if v is None or isinstance(v, (dict, list)):
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    return v if isinstance(v, str) else json.dumps(v)


REFERENCE_KEYS = re.compile(r"(?:^|_)(?:id|ids|number|numbers|no|code|codes)$", re.IGNORECASE)
"""Keys whose values name a record (``order_id``, ``flight_number``): what the next tool call
in a loop over records is made with, so a placeholder keeps them before other salient values."""

STATE_KEYS = re.compile(r"(?:^|_)(?:status|state)$", re.IGNORECASE)
"""Keys whose short value says where a record stands (``"status": "pending"``): kept next."""


def _walk(node: Any, key: str, out: list[tuple[int, str, str]], listed: bool = False) -> None:
    if isinstance(node, dict):
        for k, v in node.items():
            _walk(v, str(k), out)
        return
    if isinstance(node, list):
        for v in node:
            _walk(v, key, out, True)
        return
    text = _scalar(node)
    if text is None or not text.strip():
        return
    text = " ".join(text.split())
    if len(text) > 60:  # a long free text: keep only its salient values
        out.extend((2, key, v) for v in salient_values(text))
        return
    salient = bool(salient_values(text))
    ref = bool(key and REFERENCE_KEYS.search(key))
    if (ref or listed) and salient:
        # a reference: under an id-like key, or one of a list of salient scalars (a user's
        # reservations): the work queue of the calls that follow
        out.append((0, key, text))
    elif key and STATE_KEYS.search(key):
        out.append((1, key, text))
    elif salient or isinstance(node, float):
        out.append((2, key, text))
    elif key and KEY_FIELDS.search(key):
        out.append((3, key, text))


def key_items(body: str) -> list[tuple[int, str, str]]:
    """The key values of a tool-result body as ``(rank, key, value)``, in order of appearance,
    without repeats. Rank 0: a reference (a value under a :data:`REFERENCE_KEYS` key, or a
    salient scalar in a list: the records the next calls work through); 1: a state
    (:data:`STATE_KEYS`); 2: another salient value (:func:`ctxwise.salient.salient_values`:
    ids with a digit, e-mails, amounts, dates) or a decimal number; 3: a value kept for its key
    alone (:data:`KEY_FIELDS`: a name). A JSON body gives each leaf with its own key, at any
    depth; any other text gives its salient values (rank 2) with the key ``""``. A new list
    each call (the items are kept per body: placeholders read the same results again at every
    edit)."""
    return list(_key_items(body))


@functools.lru_cache(maxsize=2048)
def _key_items(body: str) -> tuple[tuple[int, str, str], ...]:
    """:func:`key_items`, computed (bounded, least recently used dropped)."""
    try:
        data = loads(body)  # JSON nested too deep (TooDeep, a ValueError) is read as text
    except (ValueError, TypeError):
        data = None
    out: list[tuple[int, str, str]] = []
    if isinstance(data, (dict, list)):
        _walk(data, "", out)
    else:
        out = [(2, "", v) for v in salient_values(body)]
    seen: set[tuple[str, str]] = set()
    unique = []
    for r, k, v in out:
        if (k, v) not in seen:
            seen.add((k, v))
            unique.append((r, k, v))
    return tuple(unique)


def key_values(body: str) -> list[tuple[int, str]]:
    """:func:`key_items` as ``(rank, "key=value")`` (``(rank, value)`` for a value with no key)."""
    return [(r, f"{k}={v}" if k else v) for r, k, v in key_items(body)]


_SEPARATORS = (", ", "; ", "=", '"', "[", "]", "…")


def shown(value: str) -> str:
    """``value`` as :func:`render_values` writes it: as is, or JSON-quoted when it holds a
    character of the list's own syntax (``", "``, ``"; "``, ``=``, a quote, a bracket), so
    ``"A1, B2"`` reads as one value and nothing in a value can end the placeholder."""
    return json.dumps(value, ensure_ascii=False) if any(c in value for c in _SEPARATORS) else value


def render_values(items: list[tuple[str, str]]) -> str:
    """``(key, value)`` pairs grouped by key, in order of each key's first appearance: the
    values of one key joined by ``", "`` after ``key=``, the groups by ``"; "``
    (``flight_number=HAT294, HAT013; date=2024-05-16``); a value holding one of those
    separators is quoted (:func:`shown`). A key is written once however many records repeat
    it, which is what makes a list of records cheap to keep; values with no key form a group
    of their own."""
    groups: dict[str, list[str]] = {}
    for k, v in items:
        groups.setdefault(k, []).append(shown(v))
    return "; ".join((f"{shown(k)}=" if k else "") + ", ".join(vs) for k, vs in groups.items())


def distill(body: str, limit: int, exclude: Callable[[str], bool] | None = None) -> str:
    """The body's :func:`key_items` that fit in ``limit`` characters as
    :func:`render_values` writes them, chosen by rank (references, states, other salient
    values, names) and written in the body's order, grouped by key; ``"; …"`` ends the text when some did not
    fit (``"…"`` alone when none did). Values for which ``exclude`` is true are left out.
    ``""`` when there are none or ``limit`` is 0."""
    if limit <= 0:
        return ""
    items = [(r, k, v) for r, k, v in key_items(body) if exclude is None or not exclude(v)]
    chosen: set[int] = set()
    keys: set[str] = set()
    used = 0
    dropped = False
    for rank in range(4):
        for i, (r, k, v) in enumerate(items):
            if r != rank:
                continue
            if k in keys:
                extra = len(shown(v)) + 2
            else:
                extra = (len(shown(k)) + 1 if k else 0) + len(shown(v)) + (2 if keys else 0)
            if used + extra > limit - 3:
                dropped = True
                continue
            chosen.add(i)
            keys.add(k)
            used += extra
    if not chosen:
        return "…" if dropped else ""  # values there were, none short enough: say so
    return render_values([(k, v) for i, (_, k, v) in enumerate(items) if i in chosen]) + ("; …" if dropped else "")
