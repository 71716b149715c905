"""Stage 4, hard trim: the last resort above ``hard_limit``.

Drops the oldest whole turns after the pinned head and the summary, never a turn holding a
pinned item (the system prompt, facts, the summary, the current user input, the in-flight
cycle). Whole turns, so no tool result is ever orphaned and the kept window starts on a user
message (cases B01, B04, B05). The one exception is the newest old turn: when dropping just
its completed tool cycles (whole, a parallel batch is one) makes the call fit, its question
and final answer stay (case B14).
"""

from __future__ import annotations

import time

from ..changes import Hide, Replace
from ..messages import Message, TextBlock, ToolResultBlock
from ..units import ToolCycle, Turn, tool_cycles
from .context import (
    Budgeting,
    StageResult,
    body_turns,
    current_turn_start,
    in_flight_start,
    pinned_indices,
    splittable,
)
from .stage import StageInput


def trim_old_turns(messages: list[Message], b: Budgeting, size: int) -> StageResult:
    """Drop oldest unpinned whole turns until the size is at or under the hard limit.
    Returns a ``trimming`` event (none when nothing could be dropped)."""
    p = b.policy
    hard = b.level(p.hard_limit)
    if size <= hard:
        return StageResult(messages)
    t0 = time.perf_counter()
    pinned = pinned_indices(messages)
    drop: set[int] = set()
    now = size
    spans = []
    for t in body_turns(messages):
        if messages[t.start].kind == "summary" and t.end - t.start > 1 and t.end < len(messages):
            # a summary cut between the cycles of a turn leaves that turn's tail after it: the
            # summary stays pinned, the tail (whole cycles and answers) is trimmable on its own
            t = Turn(t.start + 1, t.end)
        if not any(i in pinned for i in range(t.start, t.end)):
            spans.append(t)
    for k, t in enumerate(spans):
        if now <= hard:
            break
        idx = range(t.start, t.end)
        if k == len(spans) - 1:
            # The newest old turn is the one the current input most likely refers to: when
            # dropping its completed tool cycles is enough, keep its question and final answer
            # (case B14: [0, 4, 5, 6] rather than nothing but the current input).
            cycles = _answered_cycles(messages, t, b.policy.provider)
            saved = sum(b.size_of(messages[i]) for c in cycles for i in range(c.start, c.end))
            if cycles and now - saved <= hard:
                for c in cycles:
                    if now <= hard:
                        break
                    drop.update(range(c.start, c.end))
                    now -= sum(b.size_of(messages[i]) for i in range(c.start, c.end))
                continue
        drop.update(idx)
        now -= sum(b.size_of(messages[i]) for i in idx)
    return _without(messages, drop, b, b.trigger(size, "hard_limit", p.hard_limit), size, now, t0)


def _answered_cycles(messages: list[Message], t: Turn, provider: str) -> list[ToolCycle]:
    """The completed tool cycles of turn ``t`` that are followed, in the turn, by an assistant
    message without tool calls (the turn's answer survives them), oldest first; none when the
    turn may not be split (a DeepSeek tool span with reasoning goes whole)."""
    if not splittable(messages, t, provider):
        return []
    answers = [i for i in range(t.start, t.end) if messages[i].role == "assistant" and not messages[i].tool_uses]
    if not answers:
        return []
    return [c for c in tool_cycles(messages) if c.complete and t.start < c.start and c.end <= answers[-1]]


def trim_current_turn_cycles(messages: list[Message], b: Budgeting, size: int) -> StageResult:
    """Last resort inside one long turn (case B06): drop the oldest *completed* tool cycles
    after the current user input, whole (call and results together), never the in-flight
    cycle, until the size is at or under the hard limit. Returns a ``trimming`` event."""
    p = b.policy
    hard = b.level(p.hard_limit)
    if size <= hard:
        return StageResult(messages)
    t0 = time.perf_counter()
    start, flight = current_turn_start(messages), in_flight_start(messages)
    drop: set[int] = set()
    now = size
    for c in tool_cycles(messages):
        if now <= hard:
            break
        if c.start <= start or c.end > flight or not c.complete:
            continue
        idx = range(c.start, c.end)
        drop.update(idx)
        now -= sum(b.size_of(messages[i]) for i in idx)
    return _without(messages, drop, b, f"last resort: size {size} > hard_limit {hard} within the current turn",
                    size, now, t0, current_turn=True)


def _without(messages: list[Message], drop: set[int], b: Budgeting, trigger: str, size: int, now: int,
             t0: float, **detail: object) -> StageResult:
    """``messages`` less the ``drop`` positions, with their ``trimming`` event (none if empty)."""
    if not drop:
        return StageResult(messages)
    ids = [messages[i].id for i in sorted(drop)]
    ev = b.event("trimming", trigger, size, now, ids, t0, detail={"dropped_messages": len(drop), **detail})
    return StageResult(messages, [ev], [Hide(ids, "trimmed")])


TRUNCATION_NOTE = (
    "\n[ctxwise cut {omitted} of {total} characters of this tool result to fit the context "
    "budget; the full result is kept under tool_use_id {id}]"
)


def truncate_in_flight(messages: list[Message], b: Budgeting, size: int) -> StageResult:
    """The very last resort (``truncate_in_flight``): when even the in-flight cycle's fresh
    results do not fit next to the other pinned content, keep the head of each result and
    say how much was cut and where the full text is. Pairing, ids, names and states stay;
    the system prompt and the user's input are never cut. Every result gets a share of the
    room left, proportional to its size. Returns a ``trimming`` event (detail ``truncated``)."""
    p = b.policy
    hard = b.level(p.hard_limit)
    if size <= hard or not p.truncate_in_flight:
        return StageResult(messages)
    t0 = time.perf_counter()
    start = in_flight_start(messages)
    idx = [i for i in range(start + 1, len(messages)) if messages[i].role == "tool"]
    fresh = sum(b.size_of(messages[i]) for i in idx)
    room = hard - (size - fresh)
    if not idx or room <= 0:
        return StageResult(messages)
    out = list(messages)
    now = size
    affected: list[str] = []
    changes: list[Replace] = []
    for i in idx:
        m = out[i]
        share = room * b.size_of(m) / max(fresh, 1)
        new = _cut_message(m, b, share)
        if new is not None:
            now += b.size_of(new) - b.size_of(m)
            out[i] = new
            affected.append(m.id)
            changes.append(Replace(m.id, new, "cleared"))
    if not affected:
        return StageResult(messages)
    ev = b.event(
        "trimming",
        f"last resort: size {size} > hard_limit {hard} with only pinned content left",
        size,
        now,
        affected,
        t0,
        detail={"truncated": len(affected), "in_flight": True},
    )
    return StageResult(messages, [ev], list(changes))


def _cut_message(m: Message, b: Budgeting, share: float) -> Message | None:
    """``m`` with its tool-result texts cut so the message size is at most ``share``."""
    if b.size_of(m) <= share:
        return None
    blocks = list(m.blocks)
    ratio = share / max(b.size_of(m), 1)
    for _ in range(8):  # shrink until it fits (counts are not linear in characters)
        new_blocks = []
        for blk in blocks:
            if isinstance(blk, ToolResultBlock) and blk.text:
                total = len(blk.text)
                keep = max(int(total * ratio) - 160, 0)
                note = TRUNCATION_NOTE.format(omitted=total - keep, total=total, id=blk.tool_use_id)
                new_blocks.append(blk.model_copy(update={"output": [TextBlock(text=blk.text[:keep] + note)]}))
            else:
                new_blocks.append(blk)
        md = dict(m.metadata)
        md["ctxwise"] = {**(md.get("ctxwise") or {}), "truncated": True}
        new = m.model_copy(update={"blocks": new_blocks, "metadata": md})
        if b.size_of(new) <= share or ratio <= 0:
            return new if b.size_of(new) < b.size_of(m) else None
        ratio *= 0.8
    return new if b.size_of(new) < b.size_of(m) else None


class TrimOldTurnsStage:
    """Stage 4 of the default pipeline, the hard trim: :func:`trim_old_turns`."""

    name = "trimming"

    def run(self, inp: StageInput) -> StageResult:
        return trim_old_turns(inp.messages, inp.budgeting, inp.size)


class TrimCurrentTurnStage:
    """Last resort: :func:`trim_current_turn_cycles`."""

    name = "trimming_current_turn"

    def run(self, inp: StageInput) -> StageResult:
        return trim_current_turn_cycles(inp.messages, inp.budgeting, inp.size)


class TruncateInFlightStage:
    """The very last resort: :func:`truncate_in_flight`."""

    name = "truncate_in_flight"

    def run(self, inp: StageInput) -> StageResult:
        return truncate_in_flight(inp.messages, inp.budgeting, inp.size)
