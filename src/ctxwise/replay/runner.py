"""Drive one recorded conversation through the engine, as the agent ran it.

Before each recorded model call (each assistant message after the first user input) the
session receives what arrived since the last call and ``prepare()``s; then the recorded output
is appended. Assistant messages before the first user input (tau2-bench's fixed greeting) are
not model calls: they are appended with the next batch.

The result keeps, per call, the prepared messages' measures (sizes, tokens, cache reuse,
support, validity, latency) and, per round (user turn), what the seeds' table shows
(:mod:`ctxwise.replay.records`). Nothing here prints: :mod:`ctxwise.replay.render` and
:mod:`ctxwise.replay.report` do.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from .. import ContextManager, Message, Prepared
from ..prices import PriceModel, idle_seconds, message_time
from ..providers import check, check_wire
from ..tokens import get_counter
from ..units import is_user_input
from ..usage import DIAGNOSTICS_KEY, USAGE_KEY, reported_usage
from . import metrics
from .breakdown import breakdown
from .records import CallRecord, Measures, RoundRecord, SessionResult

__all__ = ["MEASURE_TOKENIZER", "CallRecord", "Measures", "RoundRecord", "SessionResult", "describe", "reference_fb_of",
           "replay_conversation", "rounds_text"]

MEASURE_TOKENIZER = "o200k_base"
"""Input tokens and cost are always measured with o200k, whatever the policy's unit."""


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


def _covered(event: dict[str, Any]) -> list[int]:
    """Every round an event's ``rounds`` span covers (``[]`` when none is known)."""
    span = event.get("rounds") or []
    return list(range(span[0], span[1] + 1)) if span else []


def _trims(events: Sequence[dict[str, Any]]) -> list[str]:
    """The trims of ``events`` merged: ``trimmed rounds 2–3`` for those whose rounds are known,
    ``trimmed 2 messages`` for the others."""
    trimmed: set[int] = set()
    unknown = 0
    for e in events:
        covered = _covered(e)
        trimmed.update(covered)
        if not covered:
            unknown += len(e.get("affected_ids") or []) or 1
    out = [f"trimmed {rounds_text(sorted(trimmed))}"] if trimmed else []
    if unknown:
        out.append(f"trimmed {unknown} message{'s' if unknown != 1 else ''}")
    return out


def _say(event: dict[str, Any]) -> str:
    """The action text of one event that is not merged with others (a summary, a failure)."""
    stage = str(event["stage"])
    if stage == "summarizing":
        return f"summarized {rounds_text(_covered(event)) or 'earlier rounds'}"
    if stage == "summarizer_failed":
        return "summarizer failed"
    return stage.replace("_", " ")


def describe(events: Sequence[dict[str, Any]]) -> list[str]:
    """The action column for a round's events, merged by stage: ``pruned thinking (5)``,
    ``cleared 4 results``, ``summarized rounds 1–7``, ``trimmed rounds 2–3``.

    Every summary and trim names the rounds it touched (``rounds`` of the event): trims in one
    round are merged into one line; a trim whose messages are unknown says how many it dropped.
    """
    merged = ("clearing", "thinking", "trimming")
    pruned = sum(len(e.get("affected_ids") or []) for e in events if e["stage"] == "thinking")
    cleared = sum(int(e.get("detail", {}).get("cleared", len(e.get("affected_ids") or [])))
                  for e in events if e["stage"] == "clearing")
    head = [f"pruned thinking ({pruned})"] if pruned else []
    if cleared:
        head.append(f"cleared {cleared} result{'s' if cleared != 1 else ''}")
    said = [_say(e) for e in events if e["stage"] not in merged]
    return head + said + _trims([e for e in events if e["stage"] == "trimming"])


class _Replay:
    """One conversation being replayed: the session, the full record so far (``history``),
    what arrived since the last call (``pending``), the round in progress and the result."""

    def __init__(self, manager: ContextManager, user_id: str, session_id: str, result: SessionResult, *,
                 cache_ratio: float, measure: bool) -> None:
        self.policy = manager.policy
        self.session = manager.session(user_id, session_id)
        self.res = result
        self.unit_counter = get_counter(self.policy.counter_name)
        self.tok = get_counter(MEASURE_TOKENIZER)
        self.prices = self.policy.prices
        self.cache_ratio = cache_ratio
        self.measure = measure
        self.history: list[Message] = []
        self.pending: list[Message] = []
        self.round_of: dict[str, int] = {}
        self.previous: list[Message] = []
        self.current: RoundRecord | None = None
        self.full_size = 0
        self.seen_user = False
        self.call_slot: dict[str, tuple[RoundRecord, int]] = {}
        self.reference_calls: list[tuple[int, float]] = []
        result.measures.prices = self.prices.name

    def feed(self, m: Message) -> None:
        """Take the next recorded message: a user input opens a round; an assistant message
        after the first input is a model call (prepare, measure, then append it)."""
        if is_user_input(m):
            self.seen_user = True
            self.current = RoundRecord(round=len(self.res.rounds) + 1, user_text=m.text)
            self.res.rounds.append(self.current)
        if m.role == "assistant" and self.seen_user and self.current is not None:
            self.model_call(m, self.current)
            self.session.append([m])
        else:
            self.pending.append(m)
        self.take(m)

    def finish(self) -> SessionResult:
        """Append what is still pending and compute the reference F(B); the result."""
        if self.pending:
            self.session.append(self.pending)
        m = self.res.measures
        flat = PriceModel("flat", read=self.cache_ratio)
        m.reference_fb, m.reference_fb_priced = (reference_fb_of(self.reference_calls, model)
                                                 for model in (flat, self.prices))
        breaks = [i for i, c in enumerate(self.res.calls) if c.rebilled is not None]
        m.bought = list(metrics.calls_bought(breaks, len(self.res.calls)))
        return self.res

    def take(self, m: Message) -> None:
        """Add ``m`` to the full record and to the size of the round it arrived in; a failed
        tool result marks its call ``name!`` in the round's tools."""
        self.history.append(m)
        size = self.unit_counter.count_message(m)
        self.full_size += size
        current = self.current
        self.round_of[m.id] = current.round if current else 0
        if current is None:
            self.res.start += size
            return
        current.growth += size
        current.full = self.full_size
        for r in m.tool_results:
            where = self.call_slot.get(r.tool_use_id)
            if r.state == "error" and where is not None and where[0] is current:
                current.tools[where[1]] += "!"

    def model_call(self, output: Message, current: RoundRecord) -> None:
        """One recorded model call: send what is pending, ``prepare()``, measure the payload
        and record it in the round and the measures."""
        if self.pending:
            self.session.append(self.pending)
            self.pending = []
        t0 = time.perf_counter()
        now = max((t for t in map(message_time, self.history) if t is not None), default=None)
        p = self.session.prepare(now=now)  # the recorded request time, where the recording has one
        latency = (time.perf_counter() - t0) * 1000
        sent = list(p.messages)  # the engine may hand out its live list: freeze this call's payload
        events = self._events(p)
        call, self.previous = self._measure(p, sent, output, current.round, events, latency)
        self.res.calls.append(call)
        current.calls += 1
        current.size_before = max(current.size_before or 0, p.size_before)
        current.size, current.chars = p.size, p.chars
        current.events.extend(events)
        current.actions = describe(current.events)
        current.categories = breakdown(sent, self.unit_counter)
        for b in output.tool_uses:
            self.call_slot[b.id] = (current, len(current.tools))
            current.tools.append(b.name)
        self.res.measures.record(call)

    def _events(self, p: Prepared) -> list[dict[str, Any]]:
        """The call's events as JSON dicts with the ``rounds`` they touched; a new summary
        takes the earliest round of what it replaced."""
        events = [e.model_dump(mode="json") for e in p.events]
        for e in events:
            e["rounds"] = _span(e, self.round_of)
        for event in p.events:
            if event.summary_id:
                ids = [i for i in event.affected_ids if i in self.round_of]
                self.round_of[event.summary_id] = min((self.round_of[i] for i in ids), default=0)
        return events

    def _checks(self, p: Prepared, sent: list[Message], view: list[Message],
                output: Message) -> tuple[metrics.CallSupport, list[str], list[str]]:
        """Support, provider-rule violations and wire errors of one call (empty when not
        measuring)."""
        if not self.measure:
            return metrics.CallSupport(), [], []
        support = metrics.call_support(self.history, view, output)
        violations = [str(v) for v in check(sent, self.policy.provider, reference=self.history)]
        wire = [str(v) for v in check_wire(p.payload, self.policy.provider)]  # what is sent
        return support, violations, wire

    def _measure(self, p: Prepared, sent: list[Message], output: Message, round_: int,
                 events: list[dict[str, Any]], latency: float) -> tuple[CallRecord, list[Message]]:
        """The :class:`CallRecord` of one call and the payload as the provider receives it."""
        view = metrics.as_sent(sent, self.policy.provider)  # what the provider receives
        tokens = self.tok.count(view)
        k = metrics.common_prefix(self.previous, view)
        cached = sum(self.tok.count_message(x) for x in view[:k])
        idle = idle_seconds(self.history)
        served = 0 if idle is not None and self.prices.is_cold(idle) else cached
        support, violations, wire = self._checks(p, sent, view, output)
        loop = self._loop(view, output)
        full_view = metrics.as_sent(self.history, self.policy.provider)
        call = CallRecord(
            round=round_, size_before=p.size_before, size=p.size, chars=p.chars,
            tokens=tokens, cached=cached, cost=cached * self.cache_ratio + (tokens - cached),
            needed=len(support.needed), missing=support.missing, violations=violations,
            latency_ms=latency, over_budget=p.size > self.policy.effective_budget, events=events, wire=wire,
            priced=self.prices.call_cost(tokens, served), full_tokens=self.tok.count(full_view),
            needed_norm=len(support.needed_norm), missing_norm=support.missing_norm,
            recoverable=support.recoverable, idle=idle, predicted_cached=self.prices.cached_tokens(tokens, served),
            reported=_reported(output), task=loop[0], anchors=loop[1], fresh=loop[2],
            rebilled=metrics.call_break(self.previous, view, self.tok),
        )
        self.reference_calls.append((call.full_tokens, self._reference_budget(call, full_view)))
        return call, view

    def _loop(self, view: list[Message], output: Message) -> tuple[tuple[int, int], ...]:
        """The long-loop measures of one call, each ``(supported, needed)``: task recall,
        edit-anchor recall, working-file freshness (:mod:`ctxwise.replay.metrics`; all
        ``(0, 0)`` when not measuring)."""
        if not self.measure:
            return (0, 0), (0, 0), (0, 0)
        h, p, o = [self.history], [view], [output]
        got = (metrics.task_recall(h, p), metrics.edit_anchor_recall(h, p, o),
               metrics.working_file_freshness(h, p, o, self.policy.tool_rules))
        return tuple((r.supported, r.needed) for r in got)

    def _reference_budget(self, call: CallRecord, full_view: list[Message]) -> float:
        """B_t of the reference F(B): the budget for a tokens budget; for a chars budget, the tokens
        share of the history the budget holds."""
        if self.policy.unit == "tokens":
            return float(self.policy.effective_budget)
        chars = self.unit_counter.count(full_view)
        return call.full_tokens * min(1.0, self.policy.effective_budget / chars) if chars else 0.0


def _reported(output: Message) -> dict[str, Any] | None:
    """The provider usage the recording kept with ``output`` (``metadata["usage"]``, read by
    :func:`ctxwise.usage.reported_usage`), or None."""
    usage = output.metadata.get(USAGE_KEY) if output.metadata else None
    found = reported_usage(usage, output.metadata.get(DIAGNOSTICS_KEY)) if usage else None
    return found.as_dict() if found else None


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
    result = SessionResult(name=name, source=source, format=format, messages=len(messages),
                           provider=manager.policy.provider)
    driver = _Replay(manager, user_id, session_id, result, cache_ratio=cache_ratio, measure=measure)
    for m in messages:
        driver.feed(m)
    return driver.finish()


def reference_fb_of(calls: Sequence[tuple[int, float]], prices: PriceModel) -> float:
    """F(B) of one conversation from its calls' ``(H_t, B_t)`` (B is constant for a tokens
    budget; for a chars budget it is the tokens share of the history the budget holds)."""
    return metrics.floor_cost([h for h, _ in calls], [b for _, b in calls], prices)
