"""Stage 4, hard trim: the last resort above ``hard_limit``.

Drops the oldest whole turns after the pinned head and the summary, never a turn holding a
pinned item (the system prompt, facts, the summary, the current user input, the in-flight
cycle). Whole turns only, so no tool result is ever orphaned and the kept window starts on a
user message (case B01).
"""

from __future__ import annotations

import time

from ..messages import Message
from ..units import tool_cycles
from .context import Budgeting, StageResult, body_turns, current_turn_start, in_flight_start, pinned_indices
from .events import CompactionEvent


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
    for t in body_turns(messages):
        if now <= hard:
            break
        idx = range(t.start, t.end)
        if any(i in pinned for i in idx):
            continue
        drop.update(idx)
        now -= sum(b.size_of(messages[i]) for i in idx)
    if not drop:
        return StageResult(messages)
    out = [m for i, m in enumerate(messages) if i not in drop]
    ev = CompactionEvent(
        stage="trimming",
        trigger=b.trigger(size, "hard_limit", p.hard_limit),
        unit=b.unit,
        size_before=size,
        size_after=now,
        affected_ids=[messages[i].id for i in sorted(drop)],
        duration_ms=(time.perf_counter() - t0) * 1000,
        detail={"dropped_messages": len(drop)},
    )
    return StageResult(out, [ev])


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
    if not drop:
        return StageResult(messages)
    out = [m for i, m in enumerate(messages) if i not in drop]
    ev = CompactionEvent(
        stage="trimming",
        trigger=f"last resort: size {size} > hard_limit {hard} within the current turn",
        unit=b.unit,
        size_before=size,
        size_after=now,
        affected_ids=[messages[i].id for i in sorted(drop)],
        duration_ms=(time.perf_counter() - t0) * 1000,
        detail={"dropped_messages": len(drop), "current_turn": True},
    )
    return StageResult(out, [ev])
