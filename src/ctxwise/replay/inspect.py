"""``ctxwise inspect``: how big each conversation is and where the size goes.

Per conversation: the message count and the size by category (see
:mod:`ctxwise.replay.breakdown`) in characters (Ragent's rule) and o200k tokens, like the
seeds' breakdown of an 8-round session into dialogue, tool results and thinking.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..tokens import get_counter
from .breakdown import CATEGORIES, breakdown
from .sources import conversation_label

SHOWN: tuple[str, ...] = ("system", "dialogue", "tool calls", "tool results", "thinking")
"""Columns of the inspect table; ``summary`` (ctxwise's own messages) is folded into dialogue
since recorded sessions rarely hold one."""


def inspect_rows(conversations: Sequence[Any]) -> list[dict[str, Any]]:
    """One row per conversation (``name``, ``messages``, ``categories`` as ``{cat: (chars,
    tokens)}``, ``total``), plus a ``total`` row when there are several."""
    chars, tokens = get_counter("chars"), get_counter("o200k_base")
    rows: list[dict[str, Any]] = []
    for conv in conversations:
        c = breakdown(conv.messages, chars)
        t = breakdown(conv.messages, tokens)
        for part in (c, t):
            part["dialogue"] += part.pop("summary")
        cats = {k: (c[k], t[k]) for k in SHOWN}
        rows.append({"name": conversation_label(conv), "messages": len(conv.messages), "categories": cats,
                     "total": (sum(c.values()), sum(t.values()))})
    if len(rows) > 1:
        cats = {k: (sum(r["categories"][k][0] for r in rows), sum(r["categories"][k][1] for r in rows))
                for k in SHOWN}
        rows.append({"name": "total", "messages": sum(r["messages"] for r in rows), "categories": cats,
                     "total": (sum(r["total"][0] for r in rows), sum(r["total"][1] for r in rows))})
    return rows


__all__ = ["CATEGORIES", "SHOWN", "inspect_rows"]
