"""The replay's measures, as pure functions over plain message lists.

Definitions are in DESIGN.md ("Measures"). Every function takes what any context strategy
produces, one ``list[Message]`` per model call, so the benchmarks can score other libraries'
outputs with the same code:

* :func:`input_tokens`: the sum over calls of the tokens sent;
* :func:`cache_adjusted_cost`: per call, the tokens of the longest run of leading messages
  identical to the previous call's payload count at ``cache_ratio``, the rest at 1;
* :func:`support_recall`: the salient values (identifiers with a digit, e-mails, amounts,
  dates) of each recorded output that the full history held must still be in the prepared
  context;
* :func:`validator_errors`: provider rule violations over all payloads;
* :func:`events_by_stage`, :func:`percentile`: counts and latency quantiles.

Counters are any object with ``count_message(m)`` and ``count(messages)`` (see
:mod:`ctxwise.tokens`).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..messages import Message, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from ..salient import salient_values


class MessageCounter(Protocol):
    """What the measures need from a token counter."""

    def count_message(self, message: Message) -> int: ...

    def count(self, messages: Iterable[Message]) -> int: ...


Payloads = Sequence[Sequence[Message]]
"""One prepared message list per model call, in call order."""


# --------------------------------------------------------------------------- tokens and cost


def as_sent(messages: Sequence[Message], provider: str) -> list[Message]:
    """``messages`` as the provider receives them: without reasoning for providers that take
    none back (OpenAI Chat Completions, Gemini), unchanged otherwise. Measure this, not the
    canonical list: reasoning that is never sent costs no tokens and breaks no cache."""
    from ..compaction.context import sent_view
    from ..providers import get_profile

    if get_profile(provider).sends_reasoning:
        return list(messages)
    return [sent_view(m) for m in messages]


def input_tokens(payloads: Payloads, counter: MessageCounter) -> int:
    """The sum over calls of ``counter.count(payload)``: what the model was made to read."""
    return sum(counter.count(p) for p in payloads)


def common_prefix(previous: Sequence[Message], current: Sequence[Message]) -> int:
    """How many leading messages of ``current`` are identical to ``previous``'s (same id and
    same content, i.e. equal canonical JSON). A prompt cache can serve exactly these."""
    n = 0
    for a, b in zip(previous, current):
        if a is not b and a.fingerprint() != b.fingerprint():
            break
        n += 1
    return n


@dataclass(frozen=True)
class CallCost:
    """The cost of one call: ``tokens`` sent, of which ``cached`` in the reused prefix, and
    ``cost`` = ``cached * ratio + (tokens - cached)``."""

    tokens: int
    cached: int
    cost: float


def call_costs(payloads: Payloads, counter: MessageCounter, cache_ratio: float = 0.1) -> list[CallCost]:
    """The :class:`CallCost` of every call. The first call has nothing cached."""
    if not 0 <= cache_ratio <= 1:
        raise ValueError(f"cache_ratio must be between 0 and 1, got {cache_ratio}")
    out: list[CallCost] = []
    previous: Sequence[Message] = ()
    for p in payloads:
        tokens = counter.count(p)
        k = common_prefix(previous, p)
        cached = sum(counter.count_message(m) for m in p[:k])
        out.append(CallCost(tokens, cached, cached * cache_ratio + (tokens - cached)))
        previous = p
    return out


def cache_adjusted_cost(payloads: Payloads, counter: MessageCounter, cache_ratio: float = 0.1) -> float:
    """Input tokens priced with a prompt cache: cached prefix tokens at ``cache_ratio``."""
    return sum(c.cost for c in call_costs(payloads, counter, cache_ratio))


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


@dataclass
class CallSupport:
    """Support of one call: the salient values it ``needed`` (in its output and in the full
    history before it) and those ``missing`` from its prepared context."""

    needed: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    @property
    def supported(self) -> int:
        """How many needed values the prepared context held."""
        return len(self.needed) - len(self.missing)


def call_support(history: Sequence[Message], prepared: Sequence[Message], output: Message) -> CallSupport:
    """The support of one call: which salient values of ``output`` were in ``history`` (the
    full, uncompacted record before the call) and which of those ``prepared`` lost."""
    full = context_text(history)
    sent = context_text(prepared)
    s = CallSupport()
    for v in salient_values(message_text(output)):
        if v in full:
            s.needed.append(v)
            if v not in sent:
                s.missing.append(v)
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
    """Recall over calls: ``histories[i]`` is the full record before call ``i``,
    ``payloads[i]`` what was sent, ``outputs[i]`` the recorded assistant message."""
    if not (len(histories) == len(payloads) == len(outputs)):
        raise ValueError(
            f"histories, payloads and outputs must have one entry per call, got "
            f"{len(histories)}, {len(payloads)}, {len(outputs)}"
        )
    supported = needed = 0
    for h, p, o in zip(histories, payloads, outputs):
        s = call_support(h, p, o)
        supported += s.supported
        needed += len(s.needed)
    return Recall(supported, needed)


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
    c: Counter[str] = Counter()
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
