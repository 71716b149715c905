"""The replay's measures, as pure functions over plain message lists.

Definitions are in ARCHITECTURE.md ("Measures"). Every function takes what any context strategy
produces, one ``list[Message]`` per model call, so the benchmarks can score other libraries'
outputs with the same code:

* :func:`input_tokens`: the sum over calls of the tokens sent;
* :func:`cache_adjusted_cost`: per call, the tokens of the longest run of leading messages
  identical to the previous call's payload count at ``cache_ratio``, the rest at 1;
  :func:`priced_cost` prices the same calls under a provider's own
  :class:`~ctxwise.prices.PriceModel` (cache write, read, miss, minimum prefix);
* :func:`floor_cost`: the reference F(B) at budget B (these four, :func:`call_costs` and
  :func:`common_prefix` are :mod:`ctxwise.prices`' own, the cost model the compaction stages
  decide with, re-exported here);
* :func:`support_recall`: the salient values (identifiers with a digit, e-mails, amounts,
  dates) of each recorded output that the full history held must still be in the prepared
  context; :func:`recall_figures` gives it exact (the old figure), with amounts and dates
  normalized (``$466.75`` = ``466.75``, ``$39`` = ``$39.00``, ``May 5, 2024`` =
  ``2024-05-05``), and the *recoverable* share (missing values whose original a placeholder
  in the context names, so the recall tool can fetch it);
* :func:`validator_errors`: provider rule violations over all payloads;
* :func:`events_by_stage`, :func:`percentile`: counts and latency quantiles.

Counters follow :class:`ctxwise.tokens.Counter`.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter as Tally
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import Counter, Message, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from ..prices import (
    CallCost,
    Payloads,
    cache_adjusted_cost,
    call_costs,
    common_prefix,
    floor_cost,
    priced_cost,
)
from ..salient import salient_values

__all__ = [
    "CallCost", "CallSupport", "Payloads", "Recall", "RecallFigures", "as_sent", "cache_adjusted_cost",
    "call_costs", "call_support", "common_prefix", "context_keys", "context_text", "events_by_stage",
    "floor_cost", "input_tokens", "message_text", "percentile", "placeholder_originals", "priced_cost",
    "recall_figures", "support_recall", "text_keys", "validator_errors", "value_key",
]


# --------------------------------------------------------------------------- tokens and cost


def as_sent(messages: Sequence[Message], provider: str) -> list[Message]:
    """``messages`` as the provider receives them: without reasoning for providers that take
    none back (OpenAI Chat Completions, Gemini), unchanged otherwise. Measure this, not the
    canonical list: reasoning that is never sent costs no tokens and breaks no cache."""
    from ..compaction import sent_view
    from ..providers import get_profile

    if get_profile(provider).sends_reasoning:
        return list(messages)
    return [sent_view(m) for m in messages]


def input_tokens(payloads: Payloads, counter: Counter) -> int:
    """The sum over calls of ``counter.count(payload)``: what the model was made to read."""
    return sum(counter.count(p) for p in payloads)


# --------------------------------------------------------------------------- support recall


def message_text(m: Message) -> str:
    """Everything a reader of ``m`` can see, as one string: text, thinking, tool names and
    inputs (JSON), tool result text. Used to look salient values up."""
    parts: list[str] = []
    for b in m.blocks:
        if isinstance(b, TextBlock):
            parts.append(b.text)
        elif isinstance(b, ThinkingBlock):
            if not b.redacted:
                parts.append(b.thinking)
        elif isinstance(b, ToolUseBlock):
            parts.append(b.name)
            parts.append(json.dumps(b.input, ensure_ascii=False))
        elif isinstance(b, ToolResultBlock):
            parts.append(b.text)
    return "\n".join(parts)


def context_text(messages: Iterable[Message]) -> str:
    """:func:`message_text` of every message, joined (memoised per message object)."""
    out = []
    for m in messages:
        memo = m.memo()
        t = memo.get("replay/text")
        if t is None:
            t = memo["replay/text"] = message_text(m)
        out.append(t)
    return "\n".join(out)


# -- normalized comparison of amounts and dates (the fair measure) ---------------------------

_MONTHS = {m: i + 1 for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct",
                                           "nov", "dec"))}
_ISO = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_CJK_DATE = re.compile(r"(\d{4})年(\d{1,2})月(\d{1,2})日")
_MONTH_DATE = re.compile(r"\b(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]{0,6}\.? (\d{1,2})(?:, (\d{4}))?\b")
_NUMBER = re.compile(r"(?<![A-Za-z0-9_.])\d[\d,]{0,40}(?:\.\d{1,20})?(?![0-9A-Za-z_])")
_CURRENCY = re.compile(r"^[$€£¥]\s?|\s?(?:USD|EUR|GBP|CNY|RMB|dollars|euros|元|块)$")
_PLAIN_AMOUNT = re.compile(r"^\d[\d,]{0,40}(?:\.\d{1,20})?$")


def _number_key(digits: str) -> str | None:
    """``1,200.50`` -> ``1200.5``; ``39.00`` -> ``39``: the value, whatever its spelling."""
    try:
        x = float(digits.replace(",", ""))
    except ValueError:
        return None
    return f"{x:.6f}".rstrip("0").rstrip(".")


def value_key(value: str) -> str:
    """The key a salient value is compared by in the normalized measure: ``amount:<number>``
    for money (currency sign or word dropped, ``$39`` = ``39.00``), ``date:Y-M-D`` or
    ``date:M-D`` (no year given) for dates, the value itself otherwise (identifiers, e-mails)."""
    core = _CURRENCY.sub("", value.strip())
    if core != value.strip() or re.fullmatch(r"\d[\d,]*\.\d{2}", value.strip()):
        if _PLAIN_AMOUNT.match(core):
            k = _number_key(core)
            if k is not None:
                return "amount:" + k
    for m in (_ISO.fullmatch(value[:10]) if len(value) >= 10 else None, _CJK_DATE.fullmatch(value)):
        if m:
            return f"date:{int(m.group(1))}-{int(m.group(2))}-{int(m.group(3))}"
    m = _MONTH_DATE.fullmatch(value)
    if m:
        md = f"{_MONTHS[m.group(1).lower()]}-{int(m.group(2))}"
        return f"date:{int(m.group(3))}-{md}" if m.group(3) else f"date:{md}"
    return value


def text_keys(text: str) -> frozenset[str]:
    """Every amount and date key (see :func:`value_key`) ``text`` holds: each number as
    ``amount:<number>`` (a JSON ``"price": 39`` supports ``$39.00``), each date as
    ``date:Y-M-D`` and ``date:M-D``."""
    keys: set[str] = set()
    for m in _NUMBER.finditer(text):
        k = _number_key(m.group(0))
        if k is not None:
            keys.add("amount:" + k)
    for rx in (_ISO, _CJK_DATE):
        for m in rx.finditer(text):
            y, mo, d = int(m.group(1)), int(m.group(2)), int(m.group(3))
            keys.update((f"date:{y}-{mo}-{d}", f"date:{mo}-{d}"))
    for m in _MONTH_DATE.finditer(text):
        md = f"{_MONTHS[m.group(1).lower()]}-{int(m.group(2))}"
        keys.add(f"date:{md}")
        if m.group(3):
            keys.add(f"date:{int(m.group(3))}-{md}")
    return frozenset(keys)


def _message_keys(m: Message) -> frozenset[str]:
    memo = m.memo()
    k = memo.get("replay/keys")
    if k is None:
        k = memo["replay/keys"] = text_keys(context_text([m]))
    return k


def context_keys(messages: Iterable[Message]) -> set[str]:
    """The union of :func:`text_keys` over ``messages`` (memoised per message object)."""
    out: set[str] = set()
    for m in messages:
        out |= _message_keys(m)
    return out


def _holds(key: str, value: str, text: str, keys: "set[str] | frozenset[str]") -> bool:
    return key in keys if key.startswith(("amount:", "date:")) else value in text


def placeholder_originals(history: Sequence[Message], prepared: Sequence[Message]) -> dict[str, str]:
    """The tool results of ``prepared`` that are placeholders naming their ``tool_use_id`` (the
    id is in the result's text, and the text differs from the original): id -> the original
    body's text, taken from ``history``. What a recall tool could fetch back."""
    named: set[str] = set()
    for m in prepared:
        for b in m.blocks:
            if isinstance(b, ToolResultBlock) and b.tool_use_id and b.tool_use_id in b.text:
                named.add(b.tool_use_id)
    if not named:
        return {}
    out: dict[str, str] = {}
    for m in history:
        for b in m.blocks:
            if isinstance(b, ToolResultBlock) and b.tool_use_id in named:
                out[b.tool_use_id] = b.text
    for m in prepared:  # a body that is still whole is no placeholder
        for b in m.blocks:
            if isinstance(b, ToolResultBlock) and out.get(b.tool_use_id) == b.text:
                out.pop(b.tool_use_id)
    return out


@dataclass
class CallSupport:
    """Support of one call: the salient values it ``needed`` (in its output and in the full
    history before it) and those ``missing`` from its prepared context, compared exactly (the
    old figure); the same with amounts and dates normalized (``needed_norm``, ``missing_norm``),
    and of those missing the ``recoverable`` ones (a placeholder in the context names the
    original that holds them)."""

    needed: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    needed_norm: list[str] = field(default_factory=list)
    missing_norm: list[str] = field(default_factory=list)
    recoverable: list[str] = field(default_factory=list)

    @property
    def supported(self) -> int:
        """How many needed values the prepared context held (exact comparison)."""
        return len(self.needed) - len(self.missing)

    @property
    def supported_norm(self) -> int:
        """How many needed values the prepared context held (amounts and dates normalized)."""
        return len(self.needed_norm) - len(self.missing_norm)


def call_support(history: Sequence[Message], prepared: Sequence[Message], output: Message) -> CallSupport:
    """The support of one call: which salient values of ``output`` were in ``history`` (the
    full, uncompacted record before the call) and which of those ``prepared`` lost, exactly
    and normalized (see :class:`CallSupport`)."""
    full = context_text(history)
    sent = context_text(prepared)
    s = CallSupport()
    values = salient_values(message_text(output))
    for v in values:
        if v in full:
            s.needed.append(v)
            if v not in sent:
                s.missing.append(v)
    full_keys: set[str] = set()
    sent_keys: set[str] = set()
    keyed = False
    originals: list[tuple[str, frozenset[str]]] | None = None
    seen: set[str] = set()
    for v in values:
        key = value_key(v)
        if key in seen:
            continue
        seen.add(key)
        if key.startswith(("amount:", "date:")) and not keyed:
            full_keys, sent_keys, keyed = context_keys(history), context_keys(prepared), True
        if not _holds(key, v, full, full_keys):
            continue
        s.needed_norm.append(v)
        if _holds(key, v, sent, sent_keys):
            continue
        s.missing_norm.append(v)
        if originals is None:
            originals = [(body, text_keys(body)) for body in placeholder_originals(history, prepared).values()]
        if any(_holds(key, v, body, keys) for body, keys in originals):
            s.recoverable.append(v)
    return s


@dataclass(frozen=True)
class Recall:
    """``supported`` of ``needed`` salient values over all calls; ``value`` is 1.0 when
    nothing was needed."""

    supported: int
    needed: int

    @property
    def value(self) -> float:
        """supported / needed (1.0 when nothing was needed)."""
        return self.supported / self.needed if self.needed else 1.0


def support_recall(
    histories: Sequence[Sequence[Message]], payloads: Payloads, outputs: Sequence[Message]
) -> Recall:
    """Recall over calls, exact comparison (the old figure): ``histories[i]`` is the full record
    before call ``i``, ``payloads[i]`` what was sent, ``outputs[i]`` the recorded assistant
    message. Raises ``ValueError`` when the three do not have one entry per call."""
    return recall_figures(histories, payloads, outputs).exact


@dataclass(frozen=True)
class RecallFigures:
    """The three recall figures over the same calls: ``exact`` (values compared as strings, the
    old figure), ``normalized`` (amounts and dates compared by value) and ``recoverable``
    (normalized, counting as supported the missing values a placeholder's original holds)."""

    exact: Recall
    normalized: Recall
    recoverable: Recall


def recall_figures(
    histories: Sequence[Sequence[Message]], payloads: Payloads, outputs: Sequence[Message]
) -> RecallFigures:
    """:class:`RecallFigures` over calls (arguments as :func:`support_recall`)."""
    if not (len(histories) == len(payloads) == len(outputs)):
        raise ValueError(
            f"histories, payloads and outputs must have one entry per call, got "
            f"{len(histories)}, {len(payloads)}, {len(outputs)}"
        )
    sup = need = sup_n = need_n = rec = 0
    for h, p, o in zip(histories, payloads, outputs):
        s = call_support(h, p, o)
        sup += s.supported
        need += len(s.needed)
        sup_n += s.supported_norm
        need_n += len(s.needed_norm)
        rec += len(s.recoverable)
    return RecallFigures(Recall(sup, need), Recall(sup_n, need_n), Recall(sup_n + rec, need_n))


# --------------------------------------------------------------------------- validity, events, latency


def validator_errors(payloads: Payloads, provider: str, references: Payloads | None = None) -> list[tuple[int, Any]]:
    """Every provider rule violation over all payloads, as ``(call index, Violation)``.

    ``references[i]`` (optional) is the full record payload ``i`` was built from; with it the
    checker also catches removed or edited reasoning.
    """
    from ..providers import check

    out: list[tuple[int, Any]] = []
    for i, p in enumerate(payloads):
        ref = list(references[i]) if references is not None else None
        out.extend((i, v) for v in check(list(p), provider, reference=ref))
    return out


def events_by_stage(events: Iterable[Any]) -> dict[str, int]:
    """How many events of each stage (objects or dicts with a ``stage``), in first-seen order."""
    c: Tally[str] = Tally()
    for e in events:
        c[e["stage"] if isinstance(e, dict) else e.stage] += 1
    return dict(c)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation; 0.0 for no values."""
    if not values:
        return 0.0
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be between 0 and 100, got {q}")
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)
