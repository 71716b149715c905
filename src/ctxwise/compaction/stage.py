"""The ``Stage`` protocol: one compaction step, context in, typed changes and events out.

A stage reads a :class:`StageInput` (the context as the earlier stages left it, the budget,
the current size) and returns a :class:`~ctxwise.compaction.context.StageResult`: the
:mod:`ctxwise.changes` it makes (``Replace``, ``Hide``, ``InsertSummary``) and its
:class:`~ctxwise.compaction.events.CompactionEvent` records. It never calls the store and never
mutates what it is given; the :class:`~ctxwise.compaction.pipeline.Pipeline` applies its
changes, validates the result, and the engine persists exactly those changes.

Adding a stage is writing one module with a class like this and listing it in a pipeline::

    class DropEmptyAnswers:
        name = "drop_empty_answers"

        def run(self, inp: StageInput) -> StageResult:
            gone = [m.id for m in inp.messages if ...]
            ev = inp.budgeting.event("trimming", "...", inp.size, ..., gone, t0)
            return StageResult(inp.messages, [ev], [Hide(gone, "trimmed")])

    Pipeline(stages=[*Pipeline.default().stages, DropEmptyAnswers()])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence, runtime_checkable

from ..messages import Message
from ..summarizers.base import Summarizer
from .context import Budgeting, StageResult


@dataclass(frozen=True)
class StageInput:
    """What a stage gets.

    ``messages``: the context now, in send order (after the earlier stages' changes);
    ``budgeting``: the policy, the counter of its unit and the fixed overhead;
    ``size``: the whole-request size of ``messages`` in the policy unit, overhead included;
    ``summarizer``: the summarizer the session uses; ``facts``: pinned fact texts a summary
    must keep; ``skip_summaries``: keys of summary ranges that already failed;
    ``reference``: the context the pipeline was given (what the provider rules compare with);
    ``thinking``: whether the session uses reasoning, when the caller knows (None: infer it
    from the messages).
    """

    messages: list[Message]
    budgeting: Budgeting
    size: int
    summarizer: Summarizer
    facts: Sequence[str] = ()
    skip_summaries: frozenset[str] = frozenset()
    reference: list[Message] = field(default_factory=list)
    thinking: bool | None = None

    @property
    def hard(self) -> int:
        """The hard limit in the policy unit."""
        return self.budgeting.level(self.budgeting.policy.hard_limit)


@runtime_checkable
class Stage(Protocol):
    """One compaction step. ``name`` identifies it in errors; ``run`` must be pure: same
    input, same result (the pipeline's idempotence rests on it), and return
    ``StageResult(inp.messages)`` when it does nothing."""

    name: str

    def run(self, inp: StageInput) -> StageResult: ...
