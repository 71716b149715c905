"""The pipeline: thinking pruning → oversized replies → tool-result clearing → summarizing → hard trim.

A :class:`Pipeline` is an ordered list of :class:`~ctxwise.compaction.stage.Stage` objects.
Each runs on the context the earlier ones left, and the list runs again while a round changes
something (at most :attr:`Pipeline.max_rounds`), so the output is a fixed point: compacting it
again, with the failed-summary keys it reports, changes nothing. The pipeline applies the typed
changes it returns (:func:`ctxwise.changes.apply_changes`), re-measures the size from the
messages those changes touched, and runs the provider validator on the whole list against the
input as reference (an invalid result is a bug and raises
:class:`~ctxwise.errors.PayloadInvalid` rather than being sent). The input itself is validated
first, so a call that fires no stage still refuses an invalid context. The
:class:`PipelineResult` carries every change in order: the engine hands exactly that list to
the store.

The default stages (:meth:`Pipeline.default`) each fire only above their watermark (identity
when the context fits: nothing is edited below ``clear_at``). Above the hard limit, before
whole old turns are dropped, the old turns' results that ``keep_recent_cycles`` protected are
cleared too (a placeholder loses less than a dropped turn). When the hard trim still leaves
the context over the hard limit, completed cycles of the current turn are cleared, the summary
is shortened or dropped, the current turn's completed cycles are dropped whole, as a last
resort (the in-flight cycle never), and finally the in-flight results are cut to fit (``truncate_in_flight``, with a note saying where the full text is);
when even that is not enough (the system prompt and the user's input alone are too big),
:class:`~ctxwise.errors.ContextBudgetExceeded` is raised with the sizes (never a loop, never a
silent over-budget request; case B19).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from ..changes import Change, Hide, InsertSummary, Replace, apply_changes
from ..errors import ContextBudgetExceeded
from ..messages import Message
from ..summarizers.base import Summarizer
from .clearing import ClearingStage
from .context import Budgeting, in_flight_start, pinned_indices
from .oversize import OversizedReplyStage
from .reasoning_gap import ReasoningGapStage
from .events import CompactionEvent
from .exceeded import budget_exceeded
from .stage import Stage, StageInput
from .summarizing import SummarizingStage
from .summary_fit import SummaryFitStage
from .thinking import ThinkingStage
from .trimming import TrimCurrentTurnStage, TrimOldTurnsStage, TruncateInFlightStage


def irreducible_size(messages: list[Message], b: Budgeting) -> int:
    """The size no stage can reduce (policy unit, overhead included): the system prompt, the
    current user input and the in-flight cycle (its fresh results only when
    ``truncate_in_flight`` is off). A summary is left out, as rolling it into a new one may
    shrink it. Above the hard limit it means ContextBudgetExceeded, whatever the stages do."""
    flight = in_flight_start(messages)
    total = b.overhead
    for i in pinned_indices(messages):
        m = messages[i]
        if m.kind == "summary" or (b.policy.truncate_in_flight and i > flight and m.role == "tool"):
            continue
        total += b.size_of(m)
    return total


FROZEN_HINT = ("the open tool loop's reasoning is bound to its prefix (Anthropic preserved thinking): nothing "
               "before its latest reply may change until the turn ends; raise Policy.budget, let the provider "
               "compact the loop (its own compaction keeps bound thinking valid), or set "
               "Policy.bound_reasoning='off' for a model without preserved thinking")
"""The hint of a ContextBudgetExceeded raised while bound reasoning freezes the open turn."""


def frozen_size(messages: list[Message], b: Budgeting, frozen: frozenset[str]) -> int:
    """The size of the ``frozen`` messages that :func:`irreducible_size` does not count
    already (policy unit)."""
    if not frozen:
        return 0
    pinned = pinned_indices(messages)
    return sum(b.size_of(m) for i, m in enumerate(messages) if m.id in frozen and i not in pinned)


def touches(changes: Sequence[Change], frozen: frozenset[str]) -> bool:
    """Whether any of ``changes`` replaces or hides a ``frozen`` message or anchors a summary
    at one."""
    for ch in changes:
        if isinstance(ch, Replace) and ch.message_id in frozen:
            return True
        if isinstance(ch, Hide) and frozen.intersection(ch.message_ids):
            return True
        if isinstance(ch, InsertSummary) and ch.anchor_message_id in frozen:
            return True
    return False


@dataclass
class PipelineResult:
    """The compacted context, the typed changes that produced it from the input (in order: the
    engine persists exactly these), the events of this call, and sizes in the policy unit."""

    messages: list[Message]
    events: list[CompactionEvent] = field(default_factory=list)
    size_before: int = 0
    size_after: int = 0
    changes: list[Change] = field(default_factory=list)
    failed_summaries: frozenset[str] = frozenset()
    """Keys of summary ranges known to fail (the ``skip_summaries`` given plus this call's):
    pass them to the next call, as the engine does, so no range is sent to the summarizer twice."""


def _resize(before: list[Message], changes: list[Change], b: Budgeting, size: int) -> int:
    """``size`` after ``changes`` (applied to ``before``), counting only the messages they touch."""
    by_id = {m.id: m for m in before}
    for ch in changes:
        if isinstance(ch, Replace):
            size += b.size_of(ch.current) - b.size_of(by_id[ch.message_id])
            by_id[ch.message_id] = ch.current
        elif isinstance(ch, Hide):
            size -= sum(b.size_of(by_id.pop(i)) for i in ch.message_ids)
        elif isinstance(ch, InsertSummary):
            size += b.size_of(ch.summary)
            by_id[ch.summary.id] = ch.summary
    return size


class Pipeline:
    """An ordered list of stages, run in rounds until one changes nothing (see :attr:`max_rounds`).

    ``Pipeline(stages=[...])`` takes any objects with the
    :class:`~ctxwise.compaction.stage.Stage` shape; :meth:`default` is the order ctxwise
    ships (thinking → clearing → summarizing → over-hard clearing → hard trim → the last
    resorts). Raises ``TypeError`` for an item that is not a stage.
    """

    max_rounds = 4
    """Rounds of the whole list per :meth:`run`: a round that changed something is followed by
    another, so the result is a fixed point (compacting it again changes nothing: a hard trim
    can leave a context that a later summary would still act on). Every change shrinks the
    context, so rounds end; the cap bounds the work."""

    def __init__(self, stages: Sequence[Stage], repairs: Sequence[Stage] | None = None) -> None:
        """``repairs`` run once, before the context is validated, for contexts that became
        unsendable through no edit of ours (default: :class:`ReasoningGapStage`, reasoning
        switched on mid-session); each must leave a context the provider accepts."""
        repairs = [ReasoningGapStage()] if repairs is None else repairs
        for s in [*stages, *repairs]:
            if not isinstance(s, Stage):
                raise TypeError(f"Pipeline stages need a name and run(StageInput); got {type(s).__name__}")
        self.stages: list[Stage] = list(stages)
        self.repairs: list[Stage] = list(repairs)

    @classmethod
    def default(cls) -> "Pipeline":
        """The default order: thinking pruning, oversized replies cut head-and-tail (above the
        hard limit, :mod:`~ctxwise.compaction.oversize`), clearing, summarizing, clearing above the hard
        limit, hard trim, then the last resorts (clear the current turn's completed cycles;
        shorten, then drop, the summary; drop the current turn's completed cycles; cut the
        in-flight results)."""
        return cls([
            ThinkingStage(),
            OversizedReplyStage(),
            ClearingStage(),
            SummarizingStage(),
            ClearingStage("over_hard"),
            TrimOldTurnsStage(),
            ClearingStage("last_resort"),
            SummaryFitStage(),
            TrimCurrentTurnStage(),
            TruncateInFlightStage(),
        ])

    def run(
        self,
        messages: list[Message],
        b: Budgeting,
        summarizer: Summarizer,
        *,
        size: int | None = None,
        facts: Sequence[str] = (),
        thinking_mode: bool | None = None,
        skip_summaries: frozenset[str] = frozenset(),
        frozen: frozenset[str] = frozenset(),
    ) -> PipelineResult:
        """Run the stages over ``messages`` (the context about to be sent) under ``b.policy``.

        ``frozen``: ids of messages no change may touch (replace, hide, or anchor a summary
        at): the prefix of reasoning bound to it that may not be dropped (the current turn's,
        :func:`ctxwise.providers.binding.frozen_end`). A stage whose changes touch one is held
        back for this call (its result and events are left out), so the stages after it, such
        as the in-flight cut, act instead; frozen messages count as irreducible.

        ``size`` may be passed when the caller keeps it incrementally (policy unit, overhead
        included). ``skip_summaries``: keys of ranges whose summary already failed (see
        :func:`~ctxwise.compaction.summarizing.summarize_old_turns`). Raises
        :class:`~ctxwise.errors.PayloadInvalid` when ``messages`` is not a payload the
        provider accepts (before any stage runs) or a stage produced one,
        ContextBudgetExceeded when the context cannot be brought under the hard limit, and
        ``ValueError`` when a stage returns a change naming a message it was not given.
        """
        from ..providers import validate

        p = b.policy
        size = b.size(messages) if size is None else size
        size_in = size
        events: list[CompactionEvent] = []
        changes: list[Change] = []
        if p.enabled:
            messages, size = self._repair(StageInput(messages, b, size, summarizer, facts, frozenset(skip_summaries),
                                                     messages, thinking_mode), events, changes)
        validate(messages, p.provider, reference=messages, thinking=thinking_mode, binding=False)
        if not p.enabled:
            return PipelineResult(messages, [], size, size, [], frozenset(skip_summaries))
        hard = b.level(p.hard_limit)
        if size > hard:
            floor = irreducible_size(messages, b) + frozen_size(messages, b, frozen)
            if floor > hard:
                # No stage can help: fail before any summarizer call or edit (case B19), so a
                # caller retrying on the same context does not pay for the same futile work.
                raise _exceeded(messages, b, frozen, pinned=floor, total=size, reference=messages,
                                details={"hard_limit": hard, "events": [], "messages": len(messages), "early": True})
        ctx, now, skip = self._rounds(StageInput(messages, b, size, summarizer, facts, frozenset(skip_summaries),
                                                 messages, thinking_mode), frozen, events, changes)
        if now > hard:
            pinned_size = b.overhead + sum(b.size_of(ctx[i]) for i in pinned_indices(ctx))
            raise _exceeded(ctx, b, frozen, pinned=pinned_size, total=now, reference=messages,
                            details={"hard_limit": hard, "events": [e.stage for e in events], "messages": len(ctx)})
        return PipelineResult(ctx, events, size_in, now, changes, skip)

    def _repair(self, inp: StageInput, events: list[CompactionEvent],
                changes: list[Change]) -> tuple[list[Message], int]:
        """Run the repairs over ``inp.messages`` in order, adding their events and changes to
        ``events`` and ``changes``; the repaired context and its size."""
        messages, size = inp.messages, inp.size
        for repair in self.repairs:
            res = repair.run(StageInput(messages, inp.budgeting, size, inp.summarizer, inp.facts, inp.skip_summaries,
                                        messages, inp.thinking))
            events.extend(res.events)
            if res.changes:
                after = apply_changes(messages, res.changes)
                size = _resize(messages, res.changes, inp.budgeting, size)
                messages = after
                changes.extend(res.changes)
        return messages, size

    def _rounds(self, inp: StageInput, frozen: frozenset[str], events: list[CompactionEvent],
                changes: list[Change]) -> tuple[list[Message], int, frozenset[str]]:
        """Run the stages in rounds (at most :attr:`max_rounds`, until a round changes nothing)
        over ``inp.messages``, holding back a stage whose changes touch a ``frozen`` id; adds
        events and changes; the context, its size and the failed-summary keys."""
        from ..providers import validate

        p, messages = inp.budgeting.policy, inp.reference
        ctx, now, skip = inp.messages, inp.size, inp.skip_summaries
        for _ in range(self.max_rounds):
            changed = False
            for stage in self.stages:
                res = stage.run(StageInput(ctx, inp.budgeting, now, inp.summarizer, inp.facts, skip, messages))
                if frozen and touches(res.changes, frozen):
                    continue
                events.extend(res.events)
                skip |= {e.detail["key"] for e in res.events if e.stage == "summarizer_failed" and "key" in e.detail}
                if not res.changes:
                    continue
                after = apply_changes(ctx, res.changes)
                validate(after, p.provider, reference=messages, thinking=inp.thinking, binding=False)
                now = _resize(ctx, res.changes, inp.budgeting, now)
                ctx = after
                changes.extend(res.changes)
                changed = True
            if not changed:
                break
        return ctx, now, skip


def _exceeded(ctx: list[Message], b: Budgeting, frozen: frozenset[str], *, pinned: int, total: int,
              reference: list[Message], details: dict[str, Any]) -> ContextBudgetExceeded:
    """:func:`budget_exceeded` for the pipeline, naming the frozen bound reasoning when there is
    some (its count in the details, :data:`FROZEN_HINT` before the hint)."""
    extra = {"bound_reasoning_frozen": len(frozen)} if frozen else {}
    return budget_exceeded(ctx, b, pinned=pinned, total=total, reference=reference, details={**details, **extra},
                           hint=FROZEN_HINT if frozen else None)


def compact(
    messages: list[Message],
    b: Budgeting,
    summarizer: Summarizer,
    *,
    size: int | None = None,
    facts: Sequence[str] = (),
    thinking_mode: bool | None = None,
    skip_summaries: frozenset[str] = frozenset(),
    pipeline: Pipeline | None = None,
    frozen: frozenset[str] = frozenset(),
) -> PipelineResult:
    """Run ``pipeline`` (default: :meth:`Pipeline.default`) over ``messages``; see
    :meth:`Pipeline.run` for the arguments, the result and the errors raised."""
    return (pipeline or Pipeline.default()).run(messages, b, summarizer, size=size, facts=facts,
                                                thinking_mode=thinking_mode, skip_summaries=skip_summaries,
                                                frozen=frozen)
