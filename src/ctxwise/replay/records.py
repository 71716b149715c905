"""What a replay records: per model call, per round (user turn), and the measures of a session.

:class:`CallRecord` and :class:`RoundRecord` are filled by :mod:`ctxwise.replay.runner` as it
drives a recording; :class:`Measures` sums them (and sums sessions into a run's totals);
:class:`SessionResult` holds one replayed conversation. Sizes are in the policy's unit unless a
field says tokens (always o200k); costs are in uncached-token units (see :mod:`ctxwise.prices`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..prices import PRICE_MODELS, PriceModel
from . import metrics

MIXED = "per recording"
"""``Measures.prices`` of totals over sessions priced under different providers' models."""


@dataclass
class CallRecord:
    """One model call: sizes in the policy unit (``size_before`` / ``size``), ``chars``,
    ``tokens`` (o200k) and the ``cached`` prefix tokens, its ``cost``, support, violations
    (provider rules on the canonical payload), ``wire`` (the wire check on the rendered
    payload: schema and rules, :func:`ctxwise.providers.check_wire`), latency and the events it
    fired (JSON dicts)."""

    round: int
    size_before: int
    size: int
    chars: int
    tokens: int
    cached: int
    cost: float
    needed: int
    missing: list[str]
    violations: list[str]
    latency_ms: float
    over_budget: bool
    events: list[dict[str, Any]] = field(default_factory=list)
    priced: float = 0.0
    """The call's cost under the policy's own price model (``Policy.prices``)."""
    full_tokens: int = 0
    """H_t: the o200k tokens of the full, uncompacted history as sent (for the reference F(B))."""
    needed_norm: int = 0
    missing_norm: list[str] = field(default_factory=list)
    """Support with amounts and dates normalized: values needed, and those missing."""
    recoverable: list[str] = field(default_factory=list)
    """Of ``missing_norm``, the values a placeholder in the context names the original of."""
    wire: list[str] = field(default_factory=list)
    idle: float | None = None
    """Seconds since the previous call by the recorded timestamps (None: not recorded); a
    call made after the price model's lifetime is priced with nothing served from the cache."""
    predicted_cached: int = 0
    """The o200k tokens the policy's price model says the cache serves on this call
    (:meth:`~ctxwise.prices.PriceModel.cached_tokens` of ``cached``; 0 when cold)."""
    reported: dict[str, Any] | None = None
    """What the provider reported for the recorded call, when the recording kept its usage
    (:meth:`ctxwise.usage.CacheUsage.as_dict`: ``input_tokens``, ``cached_tokens``, ...). It
    describes the call as the recording's agent made it (its own context), not the payload
    replayed here."""


@dataclass
class RoundRecord:
    """One user turn: the tools called (``"name"`` or ``"name!"`` for a failed result), the
    model calls, the largest size before compaction and the size sent at the last call (policy
    unit and chars), the size the uncompacted record would have had (``full``), the growth this
    round (policy unit), the actions taken, and the sent context's size by category.

    A round with no model call (a last user message that got no recorded answer) has
    ``calls == 0`` and ``size_before``, ``size`` and ``chars`` None: nothing was sent."""

    round: int
    user_text: str
    tools: list[str] = field(default_factory=list)
    calls: int = 0
    size_before: int | None = None
    size: int | None = None
    chars: int | None = None
    full: int = 0
    growth: int = 0
    actions: list[str] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    categories: dict[str, int] = field(default_factory=dict)


@dataclass
class Measures:
    """The numbers a replay is judged by (see ARCHITECTURE.md, "Measures")."""

    calls: int = 0
    input_tokens: int = 0
    cost: float = 0.0
    """Cache-adjusted cost at the flat ratio (cached prefix at ``cache_ratio``, the rest at 1)."""
    supported: int = 0
    needed: int = 0
    """Support recall compared exactly (the old figure, kept for one release)."""
    validator_errors: int = 0
    wire_errors: int = 0
    over_budget: int = 0
    peak_size: int = 0
    events: dict[str, int] = field(default_factory=dict)
    latencies_ms: list[float] = field(default_factory=list)
    priced: float = 0.0
    """Cost under the provider's own price model (``prices``)."""
    prices: str = ""
    """The name of that price model."""
    floor: float = 0.0
    """F(B) at the flat ratio; ``floor_priced`` under the provider's price model."""
    floor_priced: float = 0.0
    supported_norm: int = 0
    needed_norm: int = 0
    """Support recall with amounts and dates normalized (the headline figure)."""
    recoverable: int = 0
    """Missing values (normalized) whose original a placeholder in the context names."""
    usage: list[tuple[int, int]] = field(default_factory=list)
    """Per call, ``(tokens, reused)``: the o200k tokens sent and how many of them lead with
    the previous call's payload (what a prompt cache can serve): enough to price the calls
    under any :class:`~ctxwise.prices.PriceModel` (:meth:`cost_under`)."""
    idle: list[float | None] = field(default_factory=list)
    """Per call (as ``usage``), :attr:`CallRecord.idle`."""

    def cost_under(self, model: PriceModel) -> float:
        """What these calls cost under ``model``, in uncached-token units
        (:meth:`PriceModel.call_cost` per call; a call made after the model's lifetime,
        :attr:`CallRecord.idle`, has nothing served from the cache)."""
        idle = self.idle + [None] * (len(self.usage) - len(self.idle))
        return sum(model.call_cost(tokens, 0 if i is not None and model.is_cold(i) else reused)
                   for (tokens, reused), i in zip(self.usage, idle))

    def costs_by_model(self) -> dict[str, float]:
        """:meth:`cost_under` each distinct published price model
        (:data:`ctxwise.prices.PRICE_MODELS`: ``flat 0.1``, ``openai``, ``anthropic``, ...),
        keyed by the model's name."""
        models = {m.name: m for m in PRICE_MODELS.values()}
        return {name: self.cost_under(m) for name, m in models.items()}

    @property
    def recall(self) -> float:
        """Support recall, amounts and dates normalized: supported_norm / needed_norm (1.0
        when nothing was needed)."""
        return metrics.Recall(self.supported_norm, self.needed_norm).value

    @property
    def recall_exact(self) -> float:
        """Support recall compared exactly as strings (the old figure)."""
        return metrics.Recall(self.supported, self.needed).value

    @property
    def recall_recoverable(self) -> float:
        """(supported_norm + recoverable) / needed_norm: what the context holds or names."""
        return metrics.Recall(self.supported_norm + self.recoverable, self.needed_norm).value

    @property
    def cost_ratio(self) -> float:
        """Flat cost / F(B) (0.0 without a reference)."""
        return self.cost / self.floor if self.floor else 0.0

    @property
    def priced_ratio(self) -> float:
        """Provider-priced cost / F(B) under the same prices (0.0 without a reference)."""
        return self.priced / self.floor_priced if self.floor_priced else 0.0

    @property
    def p50_ms(self) -> float:
        """The median ``prepare()`` latency, in milliseconds."""
        return metrics.percentile(self.latencies_ms, 50)

    @property
    def p95_ms(self) -> float:
        """The 95th-percentile ``prepare()`` latency, in milliseconds."""
        return metrics.percentile(self.latencies_ms, 95)

    def record(self, call: CallRecord) -> None:
        """Count one model call in."""
        self.calls += 1
        self.input_tokens += call.tokens
        self.cost += call.cost
        self.supported += call.needed - len(call.missing)
        self.needed += call.needed
        self.priced += call.priced
        self.supported_norm += call.needed_norm - len(call.missing_norm)
        self.needed_norm += call.needed_norm
        self.recoverable += len(call.recoverable)
        self.validator_errors += len(call.violations)
        self.wire_errors += len(call.wire)
        self.over_budget += int(call.over_budget)
        self.peak_size = max(self.peak_size, call.size)
        self.latencies_ms.append(call.latency_ms)
        self.usage.append((call.tokens, call.cached))
        self.idle.append(call.idle)
        for e in call.events:
            self.events[e["stage"]] = self.events.get(e["stage"], 0) + 1

    def add(self, other: "Measures") -> None:
        """Fold ``other`` into this one (for totals over sessions)."""
        self.calls += other.calls
        self.input_tokens += other.input_tokens
        self.cost += other.cost
        self.supported += other.supported
        self.needed += other.needed
        self.priced += other.priced
        self.prices = other.prices if not self.prices or self.prices == other.prices else MIXED
        self.floor += other.floor
        self.floor_priced += other.floor_priced
        self.supported_norm += other.supported_norm
        self.needed_norm += other.needed_norm
        self.recoverable += other.recoverable
        self.validator_errors += other.validator_errors
        self.wire_errors += other.wire_errors
        self.over_budget += other.over_budget
        self.peak_size = max(self.peak_size, other.peak_size)
        for k, v in other.events.items():
            self.events[k] = self.events.get(k, 0) + v
        self.latencies_ms.extend(other.latencies_ms)
        self.idle.extend(other.idle + [None] * (len(other.usage) - len(other.idle)))
        self.usage.extend(other.usage)

    def as_dict(self) -> dict[str, Any]:
        """JSON-able numbers (latency samples reduced to p50/p95)."""
        return {
            "calls": self.calls, "input_tokens": self.input_tokens, "cost": round(self.cost, 1),
            "cost_priced": round(self.priced, 1), "prices": self.prices,
            "floor": round(self.floor, 1), "floor_priced": round(self.floor_priced, 1),
            "cost_over_floor": round(self.cost_ratio, 4), "priced_over_floor": round(self.priced_ratio, 4),
            "support_recall": round(self.recall, 4), "supported_norm": self.supported_norm,
            "needed_norm": self.needed_norm, "recoverable": self.recoverable,
            "recoverable_recall": round(self.recall_recoverable, 4),
            "support_recall_exact": round(self.recall_exact, 4), "supported": self.supported, "needed": self.needed,
            "validator_errors": self.validator_errors, "wire_errors": self.wire_errors,
            "over_budget": self.over_budget,
            "peak_size": self.peak_size, "events": dict(self.events),
            "prepare_p50_ms": round(self.p50_ms, 2), "prepare_p95_ms": round(self.p95_ms, 2),
            "cost_by_price_model": {k: round(v, 1) for k, v in self.costs_by_model().items()},
        }


@dataclass
class SessionResult:
    """A replayed conversation: where it came from, its rounds and calls, and its measures."""

    name: str
    source: str
    format: str
    messages: int
    start: int = 0
    """The size (policy unit) of what came before round 1: the system prompt and any opening
    message (tau2-bench's greeting). ``start`` plus every round's growth is the full record."""
    rounds: list[RoundRecord] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)
    measures: Measures = field(default_factory=Measures)
    baseline: Measures | None = None
    """The same conversation replayed with compaction off (``enabled=false``), when run."""
    provider: str = ""
    """The provider profile it was replayed (and priced) as."""
    provider_reason: str = ""
    """Why that provider: the model the recording names, its reasoning, or ``--provider``."""

    @property
    def last_call(self) -> CallRecord | None:
        """The session's last model call (None when it made none)."""
        return self.calls[-1] if self.calls else None

    def as_dict(self) -> dict[str, Any]:
        """JSON-able: rounds, calls (with their events) and measures."""
        return {
            "name": self.name, "source": self.source, "format": self.format, "messages": self.messages,
            "provider": self.provider, "provider_reason": self.provider_reason, "start": self.start,
            "measures": self.measures.as_dict(),
            "baseline": self.baseline.as_dict() if self.baseline else None,
            "rounds": [{k: v for k, v in vars(r).items() if k != "events"} for r in self.rounds],
            "calls": [vars(c) for c in self.calls],
        }


