"""Salient values: the exact strings a task cannot lose (ARCHITECTURE.md, "Measures": support recall).

Identifiers containing a digit (order ``#W2378156``, user ``mia_li_3668``, reservation
``8JX2WO``), e-mail addresses, money amounts (``$1,200.50``, ``1,200 EUR``, ``5000元``) and
dates (``2025-03-14``, ``May 5``, ``2026年8月25日``). Used by the digest summarizer to keep
what tool results found, and by the replay to measure support recall.
"""

from __future__ import annotations

import functools
import re

__all__ = ["salient_values"]

# Every pattern here runs on user text and tool results of any size, so each is linear in the
# text: a repeat either starts only where a run of its own characters starts (a lookbehind
# refuses every other start) or has a small bound, so no start re-scans a long run (a 64 KB
# hash or base64 line used to cost seconds).
_W = "A-Za-z0-9_\\-"
_EMAIL = r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){0,8}\.[A-Za-z]{2,24}"
_DATE = (
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?"
    r"|\d{4}年\d{1,2}月\d{1,2}日"
    r"|(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]{0,6}\.? \d{1,2}(?:, \d{4})?"
)
_AMOUNT = (
    r"[$€£¥]\s?(?<![\d,])\d[\d,]{0,30}(?:\.\d{1,12})?"
    r"|(?<![\d,])\d[\d,]{0,30}(?:\.\d{1,12})?\s?(?:USD|EUR|GBP|CNY|RMB|dollars|euros|元|块)"
    r"|(?<![\d,])\b\d[\d,]{0,30}\.\d{2}\b"
)
_IDENT = rf"(?:(?<!#)#|(?<![A-Za-z0-9#]))[A-Za-z0-9][{_W}]{{0,127}}(?![{_W}])"
_PATTERN = re.compile(f"(?P<email>{_EMAIL})|(?P<date>{_DATE})|(?P<amount>{_AMOUNT})|(?P<ident>{_IDENT})")
_PURE_NUMBER = re.compile(r"^[\d,.]{1,256}$")
_IDENT_SHAPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_\-]{0,127}\d|\d[A-Za-z]")


def salient_values(text: str) -> list[str]:
    """The salient values in ``text``, in order of first appearance, without repeats.

    Identifiers must contain a digit and at least one letter or ``#``/``_``/``-`` (a bare
    number like ``3`` is not an identifier; amounts and dates are matched on their own).
    A new list each call (the values are kept per text: placeholders and summaries read the
    same results again at every edit).
    """
    return list(_salient(text))


@functools.lru_cache(maxsize=4096)
def _salient(text: str) -> tuple[str, ...]:
    """:func:`salient_values`, kept per text (bounded, least recently used dropped)."""
    seen: dict[str, None] = {}
    for m in _PATTERN.finditer(text):
        v = m.group(0).strip().rstrip(".,")
        if m.lastgroup == "ident":
            # a whole run (at most 128 characters): an identifier when it holds a digit after an
            # alphanumeric start, or a digit followed by a letter (``#W2378156``, ``8JX2WO``)
            if not _IDENT_SHAPE.search(v):
                continue
            if _PURE_NUMBER.match(v) or len(v) < 3 or not re.search(r"[A-Za-z#_\-]", v):
                continue
            v = v.lstrip("#") if v.startswith("#") and len(v) > 1 else v
        if v and v not in seen:
            seen[v] = None
    return tuple(seen)
