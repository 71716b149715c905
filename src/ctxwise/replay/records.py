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
    task: tuple[int, int] = (0, 0)
    """``(supported, needed)`` task lines of the instruction in force
    (:func:`~ctxwise.replay.metrics.task_recall` of this call)."""
    anchors: tuple[int, int] = (0, 0)
    """``(supported, needed)`` edit anchors of the recorded output
    (:func:`~ctxwise.replay.metrics.edit_anchor_recall` of this call)."""
    fresh: tuple[int, int] = (0, 0)
    """``(supported, needed)`` edited files whose latest view was sent whole
    (:func:`~ctxwise.replay.metrics.working_file_freshness` of this call)."""
    rebilled: int | None = None
    """None when the payload is the previous call's plus new messages; else this call broke the
    prompt cache and re-bills these o200k tokens (:func:`~ctxwise.replay.metrics.call_break`)."""
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
    reference_fb: float = 0.0
    """The reference F(B) at the flat ratio (what an append-only context kept full to the
    budget would cost; not a floor: a run that keeps less can cost less);
    ``reference_fb_priced`` under the provider's price model."""
    reference_fb_priced: float = 0.0
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
    task_supported: int = 0
    task_needed: int = 0
    """Task recall: the instruction's task lines present, of those in force, summed over calls."""
    anchors_supported: int = 0
    anchors_needed: int = 0
    """Edit-anchor recall: edit anchors the payload held, of those the full history held."""
    fresh_supported: int = 0
    fresh_needed: int = 0
    """Working-file freshness: edits whose file's latest view was sent whole, of the edits of a
    file viewed before."""
    bought: list[int] = field(default_factory=list)
    """Per prompt-cache break, the calls it bought (to the next break of its session)."""
    rebilled: int = 0
    """o200k tokens re-billed by the breaks (sent again uncached)."""

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
        return self.cost / self.reference_fb if self.reference_fb else 0.0

    @property
    def priced_ratio(self) -> float:
        """Provider-priced cost / F(B) under the same prices (0.0 without a reference)."""
        return self.priced / self.reference_fb_priced if self.reference_fb_priced else 0.0

    @property
    def task_recall(self) -> float:
        """task_supported / task_needed (1.0 when no call had a task line)."""
        return metrics.Recall(self.task_supported, self.task_needed).value

    @property
    def anchor_recall(self) -> float:
        """anchors_supported / anchors_needed (1.0 with no edit)."""
        return metrics.Recall(self.anchors_supported, self.anchors_needed).value

    @property
    def freshness(self) -> float:
        """fresh_supported / fresh_needed (1.0 with no edit of a viewed file)."""
        return metrics.Recall(self.fresh_supported, self.fresh_needed).value

    @property
    def calls_per_break(self) -> float:
        """The median calls a prompt-cache break bought (0.0 with no break)."""
        return metrics.percentile(self.bought, 50) if self.bought else 0.0

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
        self.task_supported += call.task[0]
        self.task_needed += call.task[1]
        self.anchors_supported += call.anchors[0]
        self.anchors_needed += call.anchors[1]
        self.fresh_supported += call.fresh[0]
        self.fresh_needed += call.fresh[1]
        self.rebilled += call.rebilled or 0
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
        self.reference_fb += other.reference_fb
        self.reference_fb_priced += other.reference_fb_priced
        self.task_supported += other.task_supported
        self.task_needed += other.task_needed
        self.anchors_supported += other.anchors_supported
        self.anchors_needed += other.anchors_needed
        self.fresh_supported += other.fresh_supported
        self.fresh_needed += other.fresh_needed
        self.bought.extend(other.bought)
        self.rebilled += other.rebilled
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
            "reference_fb": round(self.reference_fb, 1), "reference_fb_priced": round(self.reference_fb_priced, 1),
            "cost_over_reference_fb": round(self.cost_ratio, 4),
            "priced_over_reference_fb": round(self.priced_ratio, 4),
            "task_recall": round(self.task_recall, 4), "task_supported": self.task_supported,
            "task_needed": self.task_needed,
            "edit_anchor_recall": round(self.anchor_recall, 4), "anchors_supported": self.anchors_supported,
            "anchors_needed": self.anchors_needed,
            "working_file_freshness": round(self.freshness, 4), "fresh_supported": self.fresh_supported,
            "fresh_needed": self.fresh_needed,
            "cache_breaks": len(self.bought), "calls_per_break_median": round(self.calls_per_break, 1),
            "calls_per_break": list(self.bought), "rebilled_tokens": self.rebilled,
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


