"""Key values of a tool result: what a placeholder keeps inline and a summary lists as findings.

The seeds' layered truncator keeps a ticket's "number, status, owner, updated" and drops the
rest; here, for any tool-result body: identifiers, amounts, dates and e-mails (the salient
values of :mod:`ctxwise.salient`), decimal numbers, and the values of keys that name an id,
a status, a name, an amount or a date (:data:`KEY_FIELDS`). Pure functions, deterministic:
the same body always gives the same text (placeholders are byte-stable once written).
"""

from __future__ import annotations

import json
import re
from typing import Any

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


def _walk(node: Any, key: str, out: list[tuple[int, str]]) -> None:
    if isinstance(node, dict):
        for k, v in node.items():
            _walk(v, str(k), out)
        return
    if isinstance(node, list):
        for v in node:
            _walk(v, key, out)
        return
    text = _scalar(node)
    if text is None or not text.strip():
        return
    text = " ".join(text.split())
    if len(text) > 60:  # a long free text: keep only its salient values
        out.extend((0, f"{key}={v}" if key else v) for v in salient_values(text))
        return
    if salient_values(text) or isinstance(node, float):
        out.append((0, f"{key}={text}" if key else text))
    elif key and KEY_FIELDS.search(key):
        out.append((1, f"{key}={text}"))


def key_values(body: str) -> list[tuple[int, str]]:
    """The key values of a tool-result body as ``(rank, text)``, in order of appearance,
    without repeats. Rank 0: a salient value (:func:`ctxwise.salient.salient_values`: ids with
    a digit, e-mails, amounts, dates) or a decimal number; rank 1: a value kept for its key
    alone (:data:`KEY_FIELDS`: a status, a name). A JSON body gives ``key=value`` with the
    leaf's own key, at any depth; any other text gives its salient values."""
    try:
        data = json.loads(body)
    except (ValueError, TypeError):
        data = None
    out: list[tuple[int, str]] = []
    if isinstance(data, (dict, list)):
        _walk(data, "", out)
    else:
        out = [(0, v) for v in salient_values(body)]
    seen: set[str] = set()
    unique = []
    for r, t in out:
        if t not in seen:
            seen.add(t)
            unique.append((r, t))
    return unique


def distill(body: str, limit: int) -> str:
    """The body's :func:`key_values` that fit in ``limit`` characters, salient ones first, then
    those kept for their key, shown in their order in the body and joined by ``", "``; ``"…"``
    ends the list when some did not fit. ``""`` when there are none or ``limit`` is 0."""
    if limit <= 0:
        return ""
    values = key_values(body)
    chosen: set[int] = set()
    used = 0
    dropped = False
    for rank in (0, 1):
        for i, (r, v) in enumerate(values):
            if r != rank:
                continue
            extra = len(v) + (2 if chosen else 0)
            if used + extra > limit - 3:
                dropped = True
                continue
            chosen.add(i)
            used += extra
    kept = [v for i, (_, v) in enumerate(values) if i in chosen]
    if not kept:
        return ""
    return ", ".join(kept) + (", …" if dropped else "")


