"""The pipeline: thinking pruning → tool-result clearing → summarizing → hard trim.

Above the hard limit, before whole old turns are dropped, the old turns' results that
``keep_recent_cycles`` protected are cleared too (a placeholder loses less than a dropped turn).

Each stage runs at most once per call and only above its watermark (identity when the
context fits: nothing is edited below ``clear_at``). After every stage that changed
something, the provider validator runs on the whole list against the input as reference;
an invalid result is a bug and raises :class:`~ctxwise.errors.PayloadInvalid` rather than
being sent. When the hard trim still leaves the context over the hard limit, completed
cycles of the current turn are cleared, then dropped whole, as a last resort (the in-flight
cycle never), and finally the in-flight results are cut to fit (``truncate_in_flight``,
with a note saying where the full text is); when even that is not enough (the system prompt
and the user's input alone are too big),
:class:`~ctxwise.errors.ContextBudgetExceeded` is raised with the sizes (never a loop,
never a silent over-budget request; case B19).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from ..errors import BudgetReport, ContextBudgetExceeded
from ..messages import Message
from ..summarizers.base import Summarizer
from .clearing import clear_tool_results
from .context import Budgeting, StageResult, in_flight_start, pinned_indices
from .events import CompactionEvent
from .summarizing import summarize_old_turns
from .thinking import prune_thinking
from .trimming import trim_current_turn_cycles, trim_old_turns, truncate_in_flight


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


@dataclass
class PipelineResult:
    """The compacted context, the events of this call, and sizes in the policy unit."""

    messages: list[Message]
    events: list[CompactionEvent] = field(default_factory=list)
    size_before: int = 0
    size_after: int = 0


def compact(
    messages: list[Message],
    b: Budgeting,
    summarizer: Summarizer,
    *,
    size: int | None = None,
    facts: Sequence[str] = (),
    thinking_mode: bool | None = None,
    skip_summaries: frozenset[str] = frozenset(),
) -> PipelineResult:
    """Run the stages over ``messages`` (the context about to be sent) under ``b.policy``.

    ``size`` may be passed when the caller keeps it incrementally (policy unit, overhead
    included). ``skip_summaries``: keys of ranges whose summary already failed (see
    :func:`~ctxwise.compaction.summarizing.summarize_old_turns`). Raises ContextBudgetExceeded when pinned content alone does not fit, and
    PayloadInvalid if a stage ever produced a payload the provider would reject.
    """
    from ..providers import validate

    p = b.policy
    size = b.size(messages) if size is None else size
    if not p.enabled:
        return PipelineResult(messages, [], size, size)
    ctx, events, now = messages, [], size
    hard = b.level(p.hard_limit)
    if now > hard:
        floor = irreducible_size(ctx, b)
        if floor > hard:
            # No stage can help: fail before any summarizer call or edit (case B19), so a
            # caller retrying on the same context does not pay for the same futile work.
            raise ContextBudgetExceeded(
                BudgetReport(budget=p.effective_budget, pinned=floor, total=now, unit=p.unit,
                             details={"hard_limit": hard, "events": [], "messages": len(ctx), "early": True})
            )

    def run(res: StageResult) -> None:
        nonlocal ctx, now
        if res.events:
            events.extend(res.events)
        if res.changed and res.messages is not ctx:
            validate(res.messages, p.provider, reference=messages, thinking=thinking_mode)
            ctx = res.messages
            now = res.events[-1].size_after if res.events[-1].stage != "summarizer_failed" else now

    run(prune_thinking(ctx, b, now))
    run(clear_tool_results(ctx, b, now))
    run(summarize_old_turns(ctx, b, now, summarizer, facts=facts, skip=skip_summaries))
    if now > hard:
        run(clear_tool_results(ctx, b, now, over_hard=True))
    run(trim_old_turns(ctx, b, now))
    if now > hard:
        run(clear_tool_results(ctx, b, now, last_resort=True))
    if now > hard:
        run(trim_current_turn_cycles(ctx, b, now))
    if now > hard:
        run(truncate_in_flight(ctx, b, now))
    if now > hard:
        pinned = pinned_indices(ctx)
        pinned_size = b.overhead + sum(b.size_of(ctx[i]) for i in pinned)
        raise ContextBudgetExceeded(
            BudgetReport(
                budget=p.effective_budget,
                pinned=pinned_size,
                total=now,
                unit=p.unit,
                details={"hard_limit": hard, "events": [e.stage for e in events], "messages": len(ctx)},
            )
        )
    return PipelineResult(ctx, events, size, now)
