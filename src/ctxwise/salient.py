"""Salient values: the exact strings a task cannot lose (DESIGN.md, "support recall").

Identifiers containing a digit (order ``#W2378156``, user ``mia_li_3668``, reservation
``8JX2WO``), e-mail addresses, money amounts (``$1,200.50``, ``1,200 EUR``, ``5000元``) and
dates (``2025-03-14``, ``May 5``, ``2026年8月25日``). Used by the digest summarizer to keep
what tool results found, and by the replay to measure support recall.
"""

from __future__ import annotations

import re

__all__ = ["salient_values"]

_EMAIL = r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}"
_DATE = (
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?"
    r"|\d{4}年\d{1,2}月\d{1,2}日"
    r"|(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.? \d{1,2}(?:, \d{4})?"
)
_AMOUNT = (
    r"[$€£¥]\s?\d[\d,]*(?:\.\d+)?"
    r"|\d[\d,]*(?:\.\d+)?\s?(?:USD|EUR|GBP|CNY|RMB|dollars|euros|元|块)"
    r"|\b\d[\d,]*\.\d{2}\b"
)
_IDENT = r"#?[A-Za-z0-9][A-Za-z0-9_\-]*\d[A-Za-z0-9_\-]*|#?[A-Za-z0-9_\-]*\d[A-Za-z][A-Za-z0-9_\-]*"
_PATTERN = re.compile(f"(?P<email>{_EMAIL})|(?P<date>{_DATE})|(?P<amount>{_AMOUNT})|(?P<ident>{_IDENT})")
_PURE_NUMBER = re.compile(r"^[\d,.]+$")


def salient_values(text: str) -> list[str]:
    """The salient values in ``text``, in order of first appearance, without repeats.

    Identifiers must contain a digit and at least one letter or ``#``/``_``/``-`` (a bare
    number like ``3`` is not an identifier; amounts and dates are matched on their own).
    """
    seen: dict[str, None] = {}
    for m in _PATTERN.finditer(text):
        v = m.group(0).strip().rstrip(".,")
        if m.lastgroup == "ident":
            if _PURE_NUMBER.match(v) or len(v) < 3 or not re.search(r"[A-Za-z#_\-]", v):
                continue
            v = v.lstrip("#") if v.startswith("#") and len(v) > 1 else v
        if v and v not in seen:
            seen[v] = None
    return list(seen)
