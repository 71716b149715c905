"""Stage 3, summarizing (the first seed's 80 % stage).

Fires above ``summarize_at``, and only at a turn boundary (the last message is the user's
new input). The cut keeps the most recent turns verbatim, at least ``summary_keep_recent``
of the budget (always the current turn); everything from the first turn after the pinned
head and the earlier summary segments up to the cut is the material. The cut
falls between whole turns; when no such cut works (the keep point is inside the oldest
turn, one long tool loop), it falls between the tool cycles of that turn, never inside one
(a parallel batch is one cycle), moving past the one cycle that straddles the keep point
when keeping it would leave too little to summarize (cases B02, B08). When no turn before the
current one gives a cut (one instruction, then a long tool loop), the material is the current
turn's own completed tool cycles after its latest user input (:func:`loop_span`), the
instruction and the in-flight cycle staying verbatim, cut the same way: one summary buys many
calls where clearing the loop's results would buy one or two. A DeepSeek tool-using
span with reasoning is never split. The summary is one user-role message with a header saying it is
background, not a new instruction (a system message mid-list is rejected by some
providers); it stands exactly where the material stood. Summaries are incremental (the
fourth seed's segments of turns): a new pass appends one segment right after the earlier
ones, whose text stays byte-identical, so the prompt cache keeps serving them; only when the
segments together would outgrow ``summary_rollup_share`` of the budget are they rolled into
one summary with the new material. Skipped when the material is under
``summary_min_material`` of the compactable context. A summary that does not make the
context smaller is discarded with a ``summarizer_failed`` event (progress or stop).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from ..changes import Hide, InsertSummary
from ..errors import SummarizerError
from ..messages import Marker, Message, ProviderBlock, TextBlock
from ..policy import Policy
from ..summarizers.base import SUMMARY_HEADER, Summarizer, ToolRulesSummarizer
from ..resources import working_views
from ..tokens import get_counter
from ..units import Turn, is_user_input, tool_cycles
from .context import (Budgeting, StageResult, anchored_indices, body_turns, current_turn_start, in_flight_start,
                      inner_cuts, pinned_indices, splittable, task_end)
from .events import CompactionEvent
from .stage import StageInput


MIN_TARGET_CHARS = 200
"""The least a summary is asked for, in characters, however small the budget or its unit (a
budget counted in messages makes one unit a message): a summary that says nothing loses the
turns it stands for."""


WORKING_SHARE = 0.2
"""At most this share of the budget is kept verbatim beyond a summary's cut so the latest view of
a file the agent edits after it is not summarized (:meth:`_Cutter.keep_working`)."""

CARRY_SHARE = 0.05
"""At most this share of the budget, in whole tool cycles of working views inside the material,
is left out of a summary and kept verbatim after it (:func:`working_cycles`). On the long
recordings at 32,000 tokens (``bench/long.py``, mini-swe-agent sessions) 0.05 kept every edited
file's latest view for +1.2 % cost; 0.2 cost +3.6 %."""


def summary_id(replaced: Sequence[str]) -> str:
    """A deterministic id for the summary replacing ``replaced`` message ids."""
    return "summary-" + hashlib.sha256("\n".join(replaced).encode()).hexdigest()[:12]


def summary_due(messages: list[Message], b: Budgeting, size: int) -> bool:
    """Whether the summarizing stage looks for a cut on this call (``size`` in the policy
    unit, overhead included): with ``edit_when="pays"`` once the context is over the hard
    limit, at a turn boundary or inside a turn; with ``"watermark"`` above ``summarize_at``
    at a turn boundary (the last message is the user's new input)."""
    p = b.policy
    if not p.summarize or not messages:
        return False
    if p.edit_when == "pays":
        return size > b.level(p.hard_limit)
    return size > b.level(p.summarize_at) and is_user_input(messages[-1]) and messages[-1].kind is None


def summarize_old_turns(
    messages: list[Message],
    b: Budgeting,
    size: int,
    summarizer: Summarizer,
    *,
    facts: Sequence[str] = (),
    skip: frozenset[str] = frozenset(),
) -> StageResult:
    """Replace old whole turns by one summary message. See the module doc for the rules.

    Returns the new list and a ``summarizing`` event, a ``summarizer_failed`` event (list
    unchanged) when the summarizer raised or made no progress, or nothing at all when the
    stage does not apply. ``skip`` holds the keys (``detail["key"]`` of earlier
    ``summarizer_failed`` events) of ranges already tried without success: the same range is
    not sent to the summarizer again until the history changes (no repeated paid calls).
    """
    t0 = time.perf_counter()
    plan = plan_summary(messages, b, size)
    if plan is None:
        return StageResult(messages)
    return summarize_range(messages, b, size, summarizer, plan.start, plan.cut, plan.segments, plan.roll, facts=facts,
                           skip=skip, trigger=_trigger(b, size), t0=t0,
                           sizes=plan.sizes, kept=plan.kept)


def _trigger(b: Budgeting, size: int) -> str:
    """The rule that fired, as the event says it: above ``summarize_at``, and with
    ``edit_when="pays"`` (summaries wait for the hard limit, :func:`summary_due`) that the hard
    limit is crossed too."""
    text = b.trigger(size, "summarize_at", b.policy.summarize_at)
    return f"{text}; the hard limit is crossed" if b.policy.edit_when == "pays" else text


@dataclass(frozen=True)
class SummaryPlan:
    """Where :func:`summarize_old_turns` would cut, before any summarizer call:
    ``messages[start:cut]`` is the new material (with ``segments``, the earlier summary
    segments right before ``start``, rolled in when ``roll``); ``sizes`` are the messages'
    sizes in the policy unit."""

    start: int
    cut: int
    segments: Sequence[Message]
    roll: bool
    sizes: Sequence[int]
    kept: frozenset[str] = frozenset()
    """Ids of the material's messages kept verbatim after the summary (:func:`working_cycles`)."""

    def replaced(self, messages: Sequence[Message]) -> list[str]:
        """The message ids the summary would stand for."""
        lo = self.start - len(self.segments) if self.roll else self.start
        return [m.id for m in messages[lo:self.cut] if m.id not in self.kept]


def plan_summary(messages: list[Message], b: Budgeting, size: int) -> SummaryPlan | None:
    """The cut the summarizing stage would make on ``messages`` (``size`` in the policy unit,
    overhead included), or None when it would not summarize (not due, nothing old enough,
    too little material). Whole turns before the current one first; when they give no cut, the
    completed tool cycles of the current turn after its instruction (:func:`loop_span`). Pure:
    no summarizer call (see the module doc for the rules)."""
    if not summary_due(messages, b, size):
        return None
    spans = body_turns(messages)
    pinned = pinned_indices(messages)
    # Turns before the current one (which may be in flight), after the pinned head.
    # ... and before the user's latest own instruction when harness notices followed it: an
    # anchored instruction is never material (ctxwise.task)
    current = min([current_turn_start(messages)] + [i for i in anchored_indices(messages) if i >= task_end(messages)])
    older = [t for t in spans if t.end <= current]
    plan = _plan(messages, b, size, pinned, older) if older else None
    if plan is None:
        loop = loop_span(messages, b.policy)
        plan = None if loop is None else _plan(messages, b, size, pinned, [loop])
    return plan


def loop_span(messages: list[Message], policy: Policy) -> Turn | None:
    """The current turn's tool loop as summary material: from right after its latest user-role
    input that is not a ctxwise summary (the instruction, or a harness notice after it, both
    kept verbatim; earlier summary segments of the loop stand first in the span) to the
    in-flight cycle (:func:`~ctxwise.compaction.context.in_flight_start`, never material).
    Cuts inside it fall between whole tool cycles (:func:`~ctxwise.compaction.context.inner_cuts`).

    None when the span is empty; when the provider binds reasoning to the whole user-to-user
    span and this one holds some (DeepSeek thinking mode,
    :func:`~ctxwise.compaction.context.splittable`): summarizing its head would split it; and
    when the profile in force binds reasoning to its prefix (``policy.profile.binds_reasoning``:
    Anthropic preserved thinking, Responses ``all_turns``) and the turn holds some: such a loop
    is frozen, and closed by a note when it must shrink (:mod:`ctxwise.compaction.loop_close`),
    its cycles cleared as any old turn's."""
    current = current_turn_start(messages)
    lo = max(current + 1, task_end(messages))
    end = in_flight_start(messages)
    if lo >= end or not splittable(messages, Turn(min(current, lo), len(messages)), policy.provider):
        return None
    if policy.profile.binds_reasoning and any(m.role == "assistant" and m.thinking for m in messages[current:]):
        return None
    return Turn(lo, end)


def _plan(messages: list[Message], b: Budgeting, size: int, pinned: set[int], older: list[Turn]) -> SummaryPlan | None:
    """:func:`plan_summary` over the candidate spans ``older`` (whole turns, or the current
    turn's loop alone), oldest first."""
    # Earlier summary segments stand together right after the head; a new pass appends one
    # after them and leaves their text byte-identical (the cached prefix stays warm up to
    # there), unless together they outgrow summary_rollup_share (then all are rolled into one).
    first = older[0].start
    start = first
    while start < len(messages) and messages[start].kind == "summary":
        start += 1
    segments = messages[first:start]
    older = [t for t in older if t.end > start or t.start == start - 1]  # all but the last segment's turn go
    if not older:
        return None
    cutter = _Cutter.of(messages, b, size, pinned, first, start)
    cut = cutter.cut(messages, older)
    if cut is None:
        return None
    cut = cutter.keep_working(messages, older, cut)
    kept = working_cycles(messages, start, cut, b)
    return SummaryPlan(start, cut, segments, cutter.roll, cutter.sizes, kept)


def working_cycles(messages: list[Message], start: int, cut: int, b: Budgeting) -> frozenset[str]:
    """The ids of the whole tool cycles inside the material ``messages[start:cut]`` (never the
    first one: the summary stands where the material's first message stood) whose calls are
    working views (:func:`~ctxwise.resources.working_views` with ``by_commands``: the latest
    view or whole write of a file the agent works with or a recent command names), newest first
    while together they stay within :data:`CARRY_SHARE` of the budget (policy unit). A summary folds the rest and these follow
    it verbatim, in their order: the agent keeps the file it is about to edit, and the summary
    segments still stand together after the head (the next pass takes these as its material)."""
    working = working_views(messages, b.policy.tool_rules, by_commands=True)
    if not working:
        return frozenset()
    room = b.level(CARRY_SHARE)
    kept: set[str] = set()
    for c in reversed([c for c in tool_cycles(messages) if c.complete and start < c.start and c.end <= cut]):
        if not any(u.id in working for u in messages[c.start].tool_uses):
            continue
        ids = [m.id for m in messages[c.start:c.end]]
        need = sum(b.size_of(m) for m in messages[c.start:c.end])
        if need > room:
            continue
        room -= need
        kept.update(ids)
    return frozenset(kept)


@dataclass
class _Cutter:
    """What :func:`plan_summary` weighs a cut ``c`` with: message sizes and their suffix sums
    (``tail``), where new material starts, the range the summary replaces from (``lo``: the
    segments too when they are rolled in) and the least it can shrink to (``floor``)."""

    b: Budgeting
    size: int
    sizes: list[int]
    tail: list[int]
    start: int
    lo: int
    floor: int
    header: int
    compactable: int
    roll: bool

    @classmethod
    def of(cls, messages: list[Message], b: Budgeting, size: int, pinned: Iterable[int], first: int, start: int) -> "_Cutter":
        p = b.policy
        compactable = size - b.overhead - sum(b.size_of(messages[i]) for i in pinned)
        # A summary is never smaller than its header: a range not clearly larger than that cannot
        # shrink, and calling the summarizer would only fail again on every call.
        header = b.size_of(Message(id="summary-floor", role="user", blocks=[TextBlock(text=SUMMARY_HEADER)]))
        sizes = [b.size_of(m) for m in messages]
        tail = [0] * (len(messages) + 1)
        for i in range(len(messages) - 1, -1, -1):
            tail[i] = tail[i + 1] + sizes[i]
        seg_total = sum(sizes[first:start])
        roll = start > first and seg_total + header > b.level(p.summary_rollup_share)
        lo, floor = (first, max(header, seg_total)) if roll else (start, header)
        return cls(b, size, sizes, tail, start, lo, floor, header, compactable, roll)

    @property
    def over(self) -> bool:
        """Over the hard limit whatever is not summarized now is trimmed with no trace: fold it."""
        return self.size > self.b.level(self.b.policy.hard_limit)

    def new_material(self, c: int) -> int:
        return sum(self.sizes[self.start:c]) if c > self.start else 0

    def worth(self, c: int, margin: int = 1) -> bool:
        """Summarizing ``[start, c)`` (with the segments when they are rolled in) has enough
        material and can make the context smaller (by more than ``margin`` summary headers)."""
        material_size = self.new_material(c)
        p = self.b.policy
        if material_size == 0 or (material_size < p.summary_min_material * max(self.compactable, 1) and not self.over):
            return False
        return sum(self.sizes[self.lo:c]) - self.floor > margin * self.header

    def cut(self, messages: list[Message], older: list[Turn]) -> int | None:
        """Whole turns first: the latest turn start that keeps at least summary_keep_recent
        verbatim; else a cut between the tool cycles of the turn that holds the keep point."""
        p, size = self.b.policy, self.size
        keep_level, hard = self.b.level(p.summary_keep_recent), self.b.level(p.hard_limit)
        turn_cuts = [t.start for t in older[1:]] + [older[-1].end]
        back = [c for c in turn_cuts if self.tail[c] >= keep_level]
        if not back:
            return self.straddle_cut(messages, older[0], keep_level)  # the keep point falls inside the oldest turn (B02, B08)
        if self.worth(back[-1]):
            cut = back[-1]
            if self.over and size - self.new_material(cut) + self.b.level(p.summary_target) > hard:
                # keeping summary_keep_recent verbatim would still leave the call over the hard
                # limit, and the hard trim would drop those turns whole: fold them in too
                fits = [c for c in turn_cuts
                        if c > cut and size - self.new_material(c) + self.b.level(p.summary_target) <= hard]
                cut = fits[0] if fits else turn_cuts[-1]
            return cut
        if self.new_material(back[-1]) > 0 and back[-1] < older[-1].end:
            return self.straddle_cut(messages, next(t for t in older if t.start == back[-1]), keep_level)
        return None

    def keep_working(self, messages: list[Message], older: list[Turn], cut: int) -> int:
        """``cut`` moved back to keep the agent's working files verbatim: to the latest cut
        point (a turn start or a boundary between tool cycles) before the oldest call in the
        material whose result is a view the agent is working with
        (:func:`~ctxwise.resources.working_views`: the latest view of a file it edited after
        that view, or viewed within its last calls), oldest first, while the summary still
        pays (:meth:`worth`, three headers), the context after it (the summary counted at its
        target) stays under ``summarize_at``, and at most :data:`WORKING_SHARE` of the budget
        more is kept than ``cut`` keeps. ``cut`` itself when no such view is in the material or
        none can be kept."""
        p = self.b.policy
        working = working_views(messages, p.tool_rules)
        calls = [i for i in range(self.start, cut) if messages[i].role == "assistant"
                 and any(u.id in working for u in messages[i].tool_uses)]
        if not calls:
            return cut
        points = sorted({t.start for t in older} | set(inner_cuts(messages, older, p.provider)))
        room = self.b.level(p.summarize_at) - self.b.level(p.summary_target)
        extra = self.b.level(WORKING_SHARE)
        for call in calls:
            c = max((x for x in points if self.start < x <= call), default=None)
            if (c is not None and c < cut and self.worth(c, 3) and self.size - self.new_material(c) <= room
                    and self.new_material(cut) - self.new_material(c) <= extra):
                return c
        return cut

    def straddle_cut(self, messages: list[Message], straddle: Turn, keep_level: int) -> int | None:
        """No whole-turn cut works: cut between the tool cycles of the turn that holds the
        keep point, never inside a cycle (a parallel batch is one). When the latest such cut
        leaves too little to summarize, move past the one unit that straddles the keep point
        (B02). Nothing is cut when everything before the keep point is already the previous
        summary, so a second run on the output finds nothing new to do."""
        cands = inner_cuts(messages, [straddle], self.b.policy.provider) + [straddle.end]
        fine = [c for c in cands if self.tail[c] >= keep_level]
        c_back = fine[-1] if fine else straddle.start
        # A cut inside a turn is a fallback: it must clearly pay (3 headers' worth), as a
        # summary of a short range can come out longer than the range.
        if c_back > straddle.start and self.worth(c_back, 3):
            return int(c_back)
        if self.new_material(c_back) > 0:
            # forward only past one whole tool cycle (a parallel batch), never past plain text
            fwd = [c.end for c in tool_cycles(messages) if c.start == c_back and c.end in cands]
            return fwd[0] if fwd and self.worth(fwd[0], 3) else None
        return None


def summarize_range(
    messages: list[Message],
    b: Budgeting,
    size: int,
    summarizer: Summarizer,
    start: int,
    cut: int,
    segments: Sequence[Message] = (),
    roll: bool = False,
    *,
    facts: Sequence[str] = (),
    skip: frozenset[str] = frozenset(),
    trigger: str,
    t0: float,
    sizes: Sequence[int] | None = None,
    require_progress: bool = True,
    kept: frozenset[str] = frozenset(),
) -> StageResult:
    """Replace ``messages[start:cut]`` (whole turns or whole tool cycles) by one summary segment
    standing where they stood. ``segments`` are the earlier summary segments (right before
    ``start``): with ``roll`` they are rolled into the new one, else it is appended after them. ``size`` and the result sizes are in the policy unit. Returns
    a ``summarizing`` event with its changes, or a ``summarizer_failed`` event (list unchanged)
    when the summarizer raised or (with ``require_progress``) the summary would not make the
    context smaller, or nothing
    when the range was already tried (its key is in ``skip``). ``kept``: ids of whole tool cycles
    inside the range (:func:`working_cycles`) left out of the summary and kept verbatim after
    it; raises ``ValueError`` when the range's first message is one of them."""
    sizes = [b.size_of(m) for m in messages] if sizes is None else sizes
    seg_total = sum(b.size_of(m) for m in segments)
    material, material_size = _material(messages, sizes, start, cut, kept)
    replaced = [m.id for m in material]
    target_chars = _target_chars(b, material, material_size)
    if not roll and summary_id(replaced) in skip:
        return StageResult(messages)
    if roll:  # the segments outgrew their share: they and the material become one summary
        replaced = [m.id for m in segments] + replaced
        material_size += seg_total
        if summary_id(replaced) in skip:
            return StageResult(messages)
    result, error = _summarize(summarizer, material, segments, roll, target_chars, facts, b.policy.tool_rules)
    if result is None:
        return StageResult(messages, [_failed(b, size, replaced, error, t0, trigger)])
    native = native_blocks(result.detail.get("native"), b.policy.provider)
    at = start - len(segments) if roll else start
    if native and b.policy.provider == "anthropic" and any(m.role != "system" for m in messages[:at]):
        # Anthropic takes a compaction block only as the first block of the conversation (SDK
        # anthropic 2.17 types/compaction_block_misplaced_error.py): a summary standing after
        # the pinned task or an earlier segment is sent as its text instead
        native = None
    summary = _summary_message(replaced, result.text, _rounds(segments if roll else [], material), summarizer.name,
                               native)
    sid = summary.id
    rounds = Marker.read(summary).rounds
    new_size = size - material_size + b.size_of(summary)
    if require_progress and new_size >= size:
        return StageResult(messages, [_failed(b, size, replaced, f"no progress: summary made the context {new_size} >= {size}",
                                             t0, trigger)])
    ev = b.event(
        "summarizing",
        trigger,
        size,
        new_size,
        replaced,
        t0,
        summary_id=sid,
        usage=result.usage,
        detail={"summarizer": summarizer.name, "rounds": rounds, "rolled_previous": roll,
                "segments": 1 if roll else len(segments) + 1,
                "summary_chars": len(summary.text), "target_chars": target_chars},
    )
    # The summary stands where the material stood: inserted at its first message, which the
    # same change set hides with the rest (earlier segments rolled in are hidden too; an
    # appended segment is anchored after them, which stay as they are).
    return StageResult(messages, [ev], [InsertSummary(summary, replaced[0]), Hide(replaced, "summarized")])


def _material(messages: list[Message], sizes: Sequence[int], start: int, cut: int,
              kept: frozenset[str]) -> tuple[list[Message], int]:
    """``messages[start:cut]`` without the ``kept`` ids, and its size (policy unit). Raises
    ``ValueError`` when the range's first message is kept (the summary stands there)."""
    if start < cut and messages[start].id in kept:
        raise ValueError(f"summarize_range: message {start} starts the material and cannot be kept (the summary stands there)")
    pairs = [(m, x) for m, x in zip(messages[start:cut], sizes[start:cut]) if m.id not in kept]
    return [m for m, _ in pairs], sum(x for _, x in pairs)


def _target_chars(b: Budgeting, material: list[Message], material_size: int) -> int:
    """The summary's length target in characters: ``summary_target`` of the budget, in
    characters as sent (text, reasoning, tool names, inputs, results: the chars counter), not
    the stored JSON, whose metadata (a recording's raw copy of each message) is never sent."""
    p = b.policy
    chars = get_counter("chars")
    material_chars = sum(chars.count_message(m) for m in material) or 1
    chars_per_unit = max(material_chars / max(material_size, 1), 1.0) if p.unit == "tokens" else 1.0
    # at least one unit's worth: a target that rounds to 0 (a budget of a few messages or tokens)
    # would leave a summary that says nothing
    return max(int(max(b.level(p.summary_target), 1) * chars_per_unit), MIN_TARGET_CHARS)


def _summarize(summarizer: Summarizer, material: list[Message], segments: Sequence[Message], roll: bool,
               target_chars: int, facts: Sequence[str], rules: dict[str, str] | None = None) -> tuple[Any, str]:
    """``(the summarizer's result, "")``, or ``(None, why it failed)`` when it raised or
    returned an empty summary (the turns would go with nothing standing for them). ``rules``
    (``Policy.tool_rules``) go to a :class:`~ctxwise.summarizers.base.ToolRulesSummarizer`
    when there are any."""
    prev_text = "\n".join(_body(m) for m in segments) if roll else None
    if not roll:  # a segment quotes the facts its own material stated, not every fact again
        said = "\n".join(m.text for m in material if is_user_input(m))
        facts = [f for f in facts if f in said]
    try:
        if rules and isinstance(summarizer, ToolRulesSummarizer) and summarizer.reads_tool_rules:
            result = summarizer.summarize(material, prev_text, target_chars, facts=facts, tool_rules=rules)
        else:
            result = summarizer.summarize(material, prev_text, target_chars, facts=facts)
    except SummarizerError as e:
        return None, str(e)
    if not result.text.strip():
        return None, "the summarizer returned an empty summary"
    return result, ""


def native_blocks(native: Any, provider: str) -> list[ProviderBlock] | None:
    """The blocks of a provider's own compaction result (``SummaryResult.detail["native"]``:
    ``{"provider", "kind", "raw", "items"?}``, see :mod:`ctxwise.summarizers.anthropic_native`
    and :mod:`ctxwise.summarizers.openai_native`) when the session's ``provider`` is the one
    that wrote it: each returned item (or the one block) verbatim, a returned user message as
    its input form. None otherwise (another provider cannot read it; the summary is then the
    text)."""
    if not isinstance(native, dict) or native.get("provider") != provider:
        return None
    items = native.get("items") or [native.get("raw")]
    if not all(isinstance(i, dict) and isinstance(i.get("type"), str) for i in items):
        return None
    # a returned user message goes back as an input message: its output-only id and status are
    # not part of the input type (openai 3.63 response_input_item_param.py, Message)
    items = [{k: v for k, v in i.items() if k not in ("id", "status")} if i["type"] == "message" else i
             for i in items]
    return [ProviderBlock(provider=provider, kind=i["type"], raw=i) for i in items]  # type: ignore[arg-type]


def _summary_message(replaced: list[str], text: str, rounds: int, summarizer: str,
                     native: list[ProviderBlock] | None = None) -> Message:
    """One summary segment standing for the ``replaced`` message ids: the header and ``text``,
    or the provider's own compaction ``native`` blocks verbatim."""
    return Message(
        id=summary_id(replaced),
        role="user",
        blocks=list(native) if native else [TextBlock(text=f"{SUMMARY_HEADER}\n{text}")],
        metadata=Marker.with_({}, kind="summary", replaced=replaced, rounds=rounds, summarizer=summarizer),
    )


def _body(summary: Message) -> str:
    text = summary.text
    return text[len(SUMMARY_HEADER) + 1 :] if text.startswith(SUMMARY_HEADER) else text


def _rounds(segments: Sequence[Message], material: list[Message]) -> int:
    """How many user rounds a summary stands for: those of the ``segments`` it rolls in and
    of its material."""
    before = sum(Marker.read(m).rounds or 0 for m in segments)
    return before + sum(1 for m in material if is_user_input(m))


def _failed(b: Budgeting, size: int, replaced: list[str], why: str, t0: float, trigger: str) -> CompactionEvent:
    """A ``summarizer_failed`` event; ``detail["key"]`` names the range for ``skip``."""
    return b.event(
        "summarizer_failed",
        trigger,
        size,
        size,
        [],
        t0,
        detail={"error": why, "would_replace": len(replaced), "key": summary_id(replaced)},
    )


class SummarizingStage:
    """Stage 3 of the default pipeline: :func:`summarize_old_turns` with the session's
    summarizer, pinned facts and failed-range keys."""

    name = "summarizing"

    def run(self, inp: StageInput) -> StageResult:
        return summarize_old_turns(inp.messages, inp.budgeting, inp.size, inp.summarizer,
                                   facts=inp.facts, skip=inp.skip_summaries)
