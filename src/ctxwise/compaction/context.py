"""What every stage needs to know about a context: sizes, pinned positions, markers.

A *stage* (see :mod:`ctxwise.compaction.stage`) reads a context and returns a
:class:`StageResult`: typed changes (edited copies, never mutated originals) and events. It
never calls the store.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ..changes import Change, apply_changes
from ..messages import Message, ProviderBlock, ThinkingBlock
from ..policy import Policy
from ..providers.render_responses import reasoning_item_id
from ..tokens import Counter
from ..task import latest_instruction_run
from ..units import Turn, cycle_boundaries, is_user_input, last_user_index, turns
from .events import CompactionEvent
from .events import Stage as StageName

PINNED_KINDS = ("summary", "facts", "user_memory")


@dataclass
class Budgeting:
    """The policy plus the counter that measures its unit, and a fixed overhead
    (tool schemas) that is always part of the request."""

    policy: Policy
    counter: Counter
    overhead: int = 0
    count_reasoning: bool | None = None
    """Whether reasoning is part of the request (None: as the provider profile says)."""
    parts: dict[str, int] = field(default_factory=dict)
    """What ``overhead`` is made of, by part (``user memory``, ``pinned facts``, ``tools``),
    for the report of a :class:`~ctxwise.errors.ContextBudgetExceeded`; what it does not
    name counts as ``tools``."""
    opaque_passback: str | None = None
    """The provider profile's ``reasoning_passback`` (None: as the profile says): which opaque
    reasoning payloads the target sends back (:func:`opaque_sent`)."""
    idle: float | None = None
    """Seconds the prompt cache has gone unused at this call
    (:func:`ctxwise.compaction.cost.idle_seconds`); None: not known, taken as warm."""

    def __post_init__(self) -> None:
        if self.count_reasoning is None:
            from ..providers import get_profile

            self.count_reasoning = get_profile(self.policy.provider).sends_reasoning
        if self.opaque_passback is None:
            from ..providers import get_profile

            self.opaque_passback = get_profile(self.policy.provider).reasoning_passback

    @property
    def unit(self) -> str:
        return self.policy.unit

    def size_of(self, m: Message) -> int:
        """Size of one message in the policy unit, as sent: 0 for a system prompt not counted,
        and without its reasoning when the provider takes none back."""
        if m.role == "system" and not self.policy.count_system:
            return 0
        if not self.count_reasoning and m.role == "assistant":
            return self.counter.count_message(sent_view(m))
        if m.role == "assistant":
            return self.counter.count_message(opaque_view(m, self.opaque_passback or "none"))
        return self.counter.count_message(m)

    def size(self, messages: list[Message]) -> int:
        """Whole-request size: messages plus overhead (counts are cached per message)."""
        return self.overhead + sum(self.size_of(m) for m in messages)

    def level(self, fraction: float) -> int:
        return self.policy.level(fraction)

    def event(self, stage: StageName, trigger: str, size_before: int, size_after: int, affected: list[str],
              t0: float, **fields: Any) -> CompactionEvent:
        """A :class:`CompactionEvent` in this policy's unit, timed from ``t0``
        (``time.perf_counter()`` at the stage's start); ``fields`` are the other event fields."""
        return CompactionEvent(stage=stage, trigger=trigger, unit=self.unit, size_before=size_before,
                               size_after=size_after, affected_ids=affected,
                               duration_ms=(time.perf_counter() - t0) * 1000, **fields)

    def trigger(self, size: int, name: str, fraction: float) -> str:
        return (
            f"size {size} > {name} {self.level(fraction)} "
            f"({fraction} x {self.policy.effective_budget} {self.unit})"
        )


def sent_view(m: Message) -> Message:
    """``m`` without thinking blocks (cached on the message), or ``m`` itself when it has none."""
    if not any(isinstance(b, ThinkingBlock) for b in m.blocks):
        return m
    memo = m.memo()
    view = memo.get("ctxwise/sent_view")
    if view is None:
        view = memo["ctxwise/sent_view"] = m.model_copy(
            update={"blocks": [b for b in m.blocks if not isinstance(b, ThinkingBlock)]})
    return view


def opaque_sent(b: ThinkingBlock, passback: str) -> bool:
    """Whether a target whose profile has ``reasoning_passback`` ``passback`` sends thinking
    block ``b``'s opaque payload (:meth:`~ctxwise.messages.ThinkingBlock.opaque`): Anthropic
    ``redacted_thinking`` only to Anthropic (``"signed_blocks"``), a Responses reasoning
    item's ``encrypted_content`` only to Responses (``"reasoning_items"``); True when the
    block carries none."""
    if b.opaque() is None:
        return True
    return passback == ("signed_blocks" if b.redacted else "reasoning_items")


def thinking_sent(b: ThinkingBlock, passback: str) -> bool:
    """Whether a target with ``reasoning_passback`` ``passback`` sends thinking block ``b`` at
    all: Anthropic (``"signed_blocks"``) takes thinking only with its signature
    (``anthropic/types/thinking_block_param.py``: ``signature`` required) and
    ``redacted_thinking`` only as its own; OpenAI Responses (``"reasoning_items"``) takes
    reasoning only as the item it returned, with its ``rs_`` id
    (``openai/types/responses/response_reasoning_item_param.py``: ``id`` required); a redacted
    block goes nowhere else (it has no text). The render leaves the others out
    (:mod:`ctxwise.providers.convert`, ``block-not-sendable``), so they are not counted."""
    if b.redacted:
        return opaque_sent(b, passback)
    if passback == "signed_blocks":
        return b.signature is not None
    if passback == "reasoning_items":
        return reasoning_item_id(b) is not None
    return True


def opaque_view(m: Message, passback: str) -> Message:
    """``m`` as counted for a target with ``reasoning_passback`` ``passback``: a thinking block
    that target does not send (:func:`thinking_sent`) not at all, one whose opaque payload it
    does not send without it (an encrypted reasoning item as its summary text). ``m`` itself
    when every block is sent whole; the view is cached on the message and is never sent."""
    thinking = [b for b in m.blocks if isinstance(b, ThinkingBlock)]
    if all(opaque_sent(b, passback) and thinking_sent(b, passback) for b in thinking):
        return m
    memo = m.memo()
    key = f"ctxwise/opaque_view/{passback}"
    view = memo.get(key)
    if view is None:
        blocks = [b if not isinstance(b, ThinkingBlock) or opaque_sent(b, passback)
                  else ThinkingBlock(thinking=b.thinking, signature=b.signature)
                  for b in m.blocks if not isinstance(b, ThinkingBlock) or thinking_sent(b, passback)]
        view = memo[key] = m.model_copy(update={"blocks": blocks})
    return view


@dataclass
class StageResult:
    """What one stage did: typed ``changes`` to the context it was given, and ``events``.

    ``before`` is the context the stage ran on (not copied, never mutated). ``changes`` are
    the :mod:`ctxwise.changes` (Replace / Hide / InsertSummary) that the engine hands to the
    store unchanged; ``messages`` is ``before`` with them applied (what the pipeline goes on
    with). A stage that did nothing returns ``StageResult(before)``; one that only reports
    (``summarizer_failed``) has events and no changes.
    """

    before: list[Message]
    events: list[CompactionEvent] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)
    _after: list[Message] | None = field(default=None, repr=False, compare=False)

    @property
    def messages(self) -> list[Message]:
        """The context after this stage (``before`` itself when there are no changes)."""
        if self._after is None:
            self._after = apply_changes(self.before, self.changes)
        return self._after

    @property
    def changed(self) -> bool:
        """Whether the context changed (events alone, such as a failed summary, do not count)."""
        return bool(self.changes)


def holds_provider_compaction(m: Message) -> bool:
    """Whether ``m`` holds a provider's own compaction summary: an Anthropic ``compaction``
    block (anthropic 2.17 ``types/beta/beta_compaction_block_param.py``) or a Responses
    ``compaction`` item (openai ``types/responses/response_compaction_item_param_param.py``). Such a
    message stands for everything before it and is pinned like a ctxwise summary: no stage
    folds, trims or edits it; a later ctxwise summary stands after it."""
    return any(isinstance(b, ProviderBlock) and b.kind == "compaction" for b in m.blocks)


def head_end(messages: list[Message]) -> int:
    """Index after the pinned head: a leading system prompt, ctxwise pinned blocks and
    provider compaction messages (:func:`holds_provider_compaction`)."""
    i = 0
    while i < len(messages) and (messages[i].role == "system" or messages[i].kind in ("facts", "user_memory")
                                 or holds_provider_compaction(messages[i])):
        i += 1
    return i


def task_end(messages: list[Message]) -> int:
    """Index after the pinned head and the task anchored right after it: the user's latest run
    of own instructions (:func:`ctxwise.task.latest_instruction_run`) when it opens the body,
    only plain replies with no tool call (a fixed greeting) standing between the head and it,
    and every user-role message after it is a harness notice (a tool loop's one instruction).
    Compaction ranges (summaries, trims) start here, so the task stays verbatim in place
    however long the loop that follows; :func:`head_end` when there is no such task."""
    start = head_end(messages)
    run = latest_instruction_run(messages)
    if not run or run[0] < start:
        return start
    if any(m.role != "assistant" or m.tool_uses for m in messages[start:run[0]]):
        return start
    return run[-1] + 1


def anchored_indices(messages: list[Message]) -> set[int]:
    """Positions of the user's own instructions that no stage removes or rewrites: the latest
    run of them (:func:`ctxwise.task.latest_instruction_run`), whatever harness notices came
    after it (format errors, interruptions, repeated boilerplate: :mod:`ctxwise.task`), and
    whatever stands between the head and a task anchored at :func:`task_end`."""
    out = set(range(head_end(messages), task_end(messages)))
    out.update(latest_instruction_run(messages))
    return out


def current_turn_start(messages: list[Message]) -> int:
    """Start of the current turn (the latest user input that is not a ctxwise summary), or
    ``len`` when there is none. A summary of the current turn's own earlier tool cycles
    (:func:`ctxwise.compaction.summarizing.plan_summary`) stands inside that turn and does not
    start a new one."""
    i = last_user_index(messages)
    while i is not None and messages[i].kind == "summary":
        i = next((j for j in range(i - 1, -1, -1) if is_user_input(messages[j])), None)
    return len(messages) if i is None else i


def in_flight_start(messages: list[Message]) -> int:
    """Start of the in-flight tool cycle: the last cycle when it is the tail of the list
    (its results are not yet consumed by a model call), else ``len(messages)``. A note that
    closed the loop (marker kind ``loop_close``, :mod:`ctxwise.compaction.loop_close`) after
    that cycle does not end it: the model has not read those results yet either."""
    end = len(messages)
    while end and messages[end - 1].kind == "loop_close":
        end -= 1
    # The last cycle of messages[:end] ends at ``end`` only when it starts at the message
    # before the trailing run of tool messages (cycles consume tool messages alone, so that
    # message opens one when it is an assistant message with calls): O(tail), not O(n).
    start = end - 1
    while start >= 0 and messages[start].role == "tool":
        start -= 1
    if start >= 0 and messages[start].role == "assistant" and messages[start].tool_uses:
        return start
    return len(messages)


def pinned_indices(messages: list[Message]) -> set[int]:
    """Positions no stage may remove or rewrite: the system prompt (the leading system
    messages), ctxwise blocks (summary, facts, user memory), provider compaction messages
    (:func:`holds_provider_compaction`), the current user input, the user's
    anchored instructions (:func:`anchored_indices`) and the in-flight cycle. A system message
    after the first user input (a reminder or a mode switch) belongs to the turn it sits in
    (:func:`ctxwise.units.turns`) and goes with it."""
    head = head_end(messages)
    out = {i for i, m in enumerate(messages)
           if (m.role == "system" and i < head) or m.kind in PINNED_KINDS or holds_provider_compaction(m)}
    cur = last_user_index(messages)
    if cur is not None:
        out.add(cur)
    out |= anchored_indices(messages)
    out.update(range(in_flight_start(messages), len(messages)))
    return out


def body_turns(messages: list[Message]) -> list[Turn]:
    """The turns after the pinned head and the anchored task (:func:`task_end`), excluding
    ctxwise summary messages as turn starts.

    A summary is a user-role message, so :func:`ctxwise.units.turns` would start a turn at
    it; here it is folded into the span it stands for. The task's own turn starts after it.
    """
    start = task_end(messages)
    out: list[Turn] = []
    for t in turns(messages):
        s, e = max(t.start, start), t.end
        if s >= e:
            continue
        out.append(Turn(s, e, preamble=t.preamble))
    return out


def splittable(messages: list[Message], t: Turn, provider: str) -> bool:
    """Whether turn ``t`` may be cut between its tool cycles (a summary or trim taking its
    first part and keeping the rest).

    Not when the provider wants reasoning passed back for a whole tool-using user-to-user
    span (DeepSeek thinking mode): such a span keeps every assistant message's reasoning or
    goes whole (case B11).
    """
    from ..providers import get_profile

    if get_profile(provider).reasoning_passback != "tool_spans":
        return True
    span = messages[t.start:t.end]
    return not (any(m.role == "assistant" and m.tool_uses for m in span)
                and any(m.role == "assistant" and m.thinking for m in span))


def inner_cuts(messages: list[Message], spans: list[Turn], provider: str) -> list[int]:
    """Cut points strictly inside the turns ``spans`` that split no tool cycle (a parallel
    batch is one cycle), skipping turns that may not be split (see :func:`splittable`)."""
    ok = cycle_boundaries(messages)
    out: list[int] = []
    for t in spans:
        if splittable(messages, t, provider):
            out.extend(i for i in range(t.start + 1, t.end) if i in ok)
    return out
