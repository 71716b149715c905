"""Drive one recorded conversation through the engine, as the agent ran it.

Before each recorded model call (each assistant message after the first user input) the
session receives what arrived since the last call and ``prepare()``s; then the recorded output
is appended. Assistant messages before the first user input (tau2-bench's fixed greeting) are
not model calls: they are appended with the next batch.

The result keeps, per call, the prepared messages' measures (sizes, tokens, cache reuse,
support, validity, latency) and, per round (user turn), what the seeds' table shows.
Nothing here prints: :mod:`ctxwise.replay.render` and :mod:`ctxwise.replay.report` do.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import ContextManager, Message
from ..prices import PriceModel
from ..providers import check, check_wire
from ..tokens import get_counter
from ..units import is_user_input
from . import metrics
from .breakdown import breakdown

MEASURE_TOKENIZER = "o200k_base"
"""Input tokens and cost are always measured with o200k, whatever the policy's unit."""


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
    """H_t: the o200k tokens of the full, uncompacted history as sent (for the floor F(B))."""
    needed_norm: int = 0
    missing_norm: list[str] = field(default_factory=list)
    """Support with amounts and dates normalized: values needed, and those missing."""
    recoverable: list[str] = field(default_factory=list)
    """Of ``missing_norm``, the values a placeholder in the context names the original of."""
    wire: list[str] = field(default_factory=list)


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
        """Flat cost / F(B) (0.0 without a floor)."""
        return self.cost / self.floor if self.floor else 0.0

    @property
    def priced_ratio(self) -> float:
        """Provider-priced cost / F(B) under the same prices (0.0 without a floor)."""
        return self.priced / self.floor_priced if self.floor_priced else 0.0

    @property
    def p50_ms(self) -> float:
        return metrics.percentile(self.latencies_ms, 50)

    @property
    def p95_ms(self) -> float:
        return metrics.percentile(self.latencies_ms, 95)

    def add(self, other: "Measures") -> None:
        """Fold ``other`` into this one (for totals over sessions)."""
        self.calls += other.calls
        self.input_tokens += other.input_tokens
        self.cost += other.cost
        self.supported += other.supported
        self.needed += other.needed
        self.priced += other.priced
        self.prices = self.prices or other.prices
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

    @property
    def last_call(self) -> CallRecord | None:
        """The session's last model call (None when it made none)."""
        return self.calls[-1] if self.calls else None

    def as_dict(self) -> dict[str, Any]:
        """JSON-able: rounds, calls (with their events) and measures."""
        return {
            "name": self.name, "source": self.source, "format": self.format, "messages": self.messages,
            "start": self.start,
            "measures": self.measures.as_dict(),
            "baseline": self.baseline.as_dict() if self.baseline else None,
            "rounds": [{k: v for k, v in vars(r).items() if k != "events"} for r in self.rounds],
            "calls": [vars(c) for c in self.calls],
        }


def _span(event: dict[str, Any], round_of: dict[str, int]) -> list[int]:
    """``[first, last]`` round the event's affected messages belong to; ``[0, 0]`` when they all
    came before round 1 (the opening: system prompt, greeting); ``[]`` when none is known."""
    known = {round_of[i] for i in event.get("affected_ids") or [] if i in round_of}
    rounds = sorted(r for r in known if r > 0) or sorted(known)
    return [rounds[0], rounds[-1]] if rounds else []


def rounds_text(rounds: Sequence[int]) -> str:
    """``round 3``, ``rounds 2–3``, ``rounds 1–2, 5``; round 0 is the opening (what came before
    round 1): ``the opening (before round 1)``, ``the opening and round 1``; no round is ``""``."""
    nums = sorted(set(rounds))
    if not nums:
        return ""
    if nums == [0]:
        return "the opening (before round 1)"
    opening = "the opening and " if nums[0] == 0 else ""
    nums = [x for x in nums if x > 0]
    runs: list[list[int]] = []
    for x in nums:
        if runs and x == runs[-1][1] + 1:
            runs[-1][1] = x
        else:
            runs.append([x, x])
    parts = [f"{a}" if a == b else f"{a}–{b}" for a, b in runs]
    return f"{opening}round{'s' if len(nums) > 1 else ''} {', '.join(parts)}"


def describe(events: Sequence[dict[str, Any]]) -> list[str]:
    """The action column for a round's events, merged by stage: ``pruned thinking (5)``,
    ``cleared 4 results``, ``summarized rounds 1–7``, ``trimmed rounds 2–3``.

    Every summary and trim names the rounds it touched (``rounds`` of the event): trims in one
    round are merged into one line; a trim whose messages are unknown says how many it dropped.
    """
    cleared = pruned = 0
    out: list[str] = []
    trimmed: set[int] = set()
    trimmed_unknown = 0
    for e in events:
        stage = e["stage"]
        span = e.get("rounds") or []
        covered = list(range(span[0], span[1] + 1)) if span else []
        if stage == "clearing":
            cleared += e.get("detail", {}).get("cleared", len(e.get("affected_ids") or []))
        elif stage == "thinking":
            pruned += len(e.get("affected_ids") or [])
        elif stage == "summarizing":
            out.append(f"summarized {rounds_text(covered) or 'earlier rounds'}")
        elif stage == "trimming":
            if covered:
                trimmed.update(covered)
            else:
                trimmed_unknown += len(e.get("affected_ids") or []) or 1
        elif stage == "summarizer_failed":
            out.append("summarizer failed")
        else:
            out.append(stage.replace("_", " "))
    if trimmed:
        out.append(f"trimmed {rounds_text(sorted(trimmed))}")
    if trimmed_unknown:
        out.append(f"trimmed {trimmed_unknown} message{'s' if trimmed_unknown != 1 else ''}")
    head = []
    if pruned:
        head.append(f"pruned thinking ({pruned})")
    if cleared:
        head.append(f"cleared {cleared} result{'s' if cleared != 1 else ''}")
    return head + out


def replay_conversation(
    manager: ContextManager,
    user_id: str,
    session_id: str,
    messages: Sequence[Message],
    *,
    name: str,
    source: str,
    format: str,
    cache_ratio: float = 0.1,
    measure: bool = True,
) -> SessionResult:
    """Replay ``messages`` in a fresh session ``(user_id, session_id)`` of ``manager``.

    ``measure=False`` skips support recall and the validator and wire checks (left empty and
    0), for a caller that scores the payloads itself (``bench/compare.py``).

    Returns the :class:`SessionResult`. Raises whatever the engine raises (a
    :class:`~ctxwise.errors.CtxwiseError` for a broken session or an impossible budget); the
    caller reports it and moves on.
    """
    policy = manager.policy
    unit_counter = get_counter(policy.counter_name)
    tok = get_counter(MEASURE_TOKENIZER)
    prices = policy.prices
    flat = PriceModel("flat", read=cache_ratio)
    session = manager.session(user_id, session_id)
    res = SessionResult(name=name, source=source, format=format, messages=len(messages))
    m_ = res.measures

    history: list[Message] = []
    pending: list[Message] = []
    round_of: dict[str, int] = {}
    previous: list[Message] = []
    current: RoundRecord | None = None
    full_size = 0
    seen_user = False
    call_slot: dict[str, tuple[RoundRecord, int]] = {}
    floor_budget: list[float] = [0.0]
    floor_calls: list[tuple[int, float]] = []
    m_.prices = prices.name

    def take(m: Message) -> None:
        nonlocal full_size
        history.append(m)
        size = unit_counter.count_message(m)
        full_size += size
        round_of[m.id] = current.round if current else 0
        if current is None:
            res.start += size
        else:
            current.growth += size
            current.full = full_size
            for r in m.tool_results:
                where = call_slot.get(r.tool_use_id)
                if r.state == "error" and where is not None and where[0] is current:
                    current.tools[where[1]] += "!"

    for m in messages:
        if is_user_input(m):
            seen_user = True
            current = RoundRecord(round=len(res.rounds) + 1, user_text=m.text)
            res.rounds.append(current)
        if m.role == "assistant" and seen_user and current is not None:
            if pending:
                session.append(pending)
                pending = []
            t0 = time.perf_counter()
            p = session.prepare()
            latency = (time.perf_counter() - t0) * 1000
            sent = list(p.messages)  # the engine may hand out its live list: freeze this call's payload
            events = [e.model_dump(mode="json") for e in p.events]
            for e in events:
                e["rounds"] = _span(e, round_of)
            for event in p.events:
                if event.summary_id:
                    ids = [i for i in event.affected_ids if i in round_of]
                    round_of[event.summary_id] = min((round_of[i] for i in ids), default=0)
            view = metrics.as_sent(sent, policy.provider)  # what the provider receives
            tokens = tok.count(view)
            k = metrics.common_prefix(previous, view)
            cached = sum(tok.count_message(x) for x in view[:k])
            if measure:
                support = metrics.call_support(history, view, m)
                violations = [str(v) for v in check(sent, policy.provider, reference=history)]
                wire = [str(v) for v in check_wire(p.payload, policy.provider)]  # what is sent
            else:
                support, violations, wire = metrics.CallSupport(), [], []
            over = p.size > policy.effective_budget
            full_view = metrics.as_sent(history, policy.provider)
            call = CallRecord(
                round=current.round, size_before=p.size_before, size=p.size, chars=p.chars,
                tokens=tokens, cached=cached, cost=cached * cache_ratio + (tokens - cached),
                needed=len(support.needed), missing=support.missing, violations=violations,
                latency_ms=latency, over_budget=over, events=events, wire=wire,
                priced=prices.call_cost(tokens, cached), full_tokens=tok.count(full_view),
                needed_norm=len(support.needed_norm), missing_norm=support.missing_norm,
                recoverable=support.recoverable,
            )
            if policy.unit == "tokens":
                floor_budget[0] = policy.effective_budget
            else:  # a chars budget: the share of the history it holds, in tokens
                chars = unit_counter.count(full_view)
                floor_budget[0] = call.full_tokens * min(1.0, policy.effective_budget / chars) if chars else 0
            res.calls.append(call)
            previous = view
            current.calls += 1
            current.size_before = max(current.size_before or 0, p.size_before)
            current.size, current.chars = p.size, p.chars
            current.events.extend(events)
            current.actions = describe(current.events)
            current.categories = breakdown(sent, unit_counter)
            for b in m.tool_uses:
                call_slot[b.id] = (current, len(current.tools))
                current.tools.append(b.name)
            m_.calls += 1
            m_.input_tokens += tokens
            m_.cost += call.cost
            m_.supported += support.supported
            m_.needed += len(support.needed)
            m_.priced += call.priced
            m_.supported_norm += support.supported_norm
            m_.needed_norm += len(support.needed_norm)
            m_.recoverable += len(support.recoverable)
            floor_calls.append((call.full_tokens, floor_budget[0]))
            m_.validator_errors += len(violations)
            m_.wire_errors += len(wire)
            m_.over_budget += int(over)
            m_.peak_size = max(m_.peak_size, p.size)
            m_.latencies_ms.append(latency)
            for e in events:
                m_.events[e["stage"]] = m_.events.get(e["stage"], 0) + 1
            session.append([m])
            take(m)
            continue
        pending.append(m)
        take(m)
    if pending:
        session.append(pending)
    m_.floor, m_.floor_priced = (floor_of(floor_calls, model) for model in (flat, prices))
    return res


def floor_of(calls: Sequence[tuple[int, float]], prices: PriceModel) -> float:
    """F(B) of one conversation from its calls' ``(H_t, B_t)`` (B is constant for a tokens
    budget; for a chars budget it is the tokens share of the history the budget holds)."""
    return metrics.floor_cost([h for h, _ in calls], [b for _, b in calls], prices)

