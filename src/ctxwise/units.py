"""Turns and tool cycles: the whole units that compaction may move.

A **tool cycle** is an assistant message holding ``tool_use`` blocks plus the ``tool``
messages right after it that answer them (a parallel batch is one cycle). A **turn** is a
user message and everything up to the next user message ("round" in the seeds). Messages
before the first user message (system prompt, an agent greeting) form the *preamble*.

Pairing goes by position, not by id alone: tau-bench reuses call ids within a conversation,
so a ``tool_result`` belongs to the nearest earlier assistant message with ``tool_use``
blocks (with only tool messages between), which is also the rule every provider enforces.

All indices are positions in the message list (0-based); ranges are half-open ``[start, end)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .messages import Message

__all__ = ["ToolCycle", "Turn", "cycle_boundaries", "is_user_input", "last_user_index", "tool_cycles", "turns"]


def is_user_input(m: Message) -> bool:
    """True for a user message that is the person's own input (not a tool-result carrier)."""
    if m.role != "user":
        return False
    memo = m.memo()
    found = memo.get("units/user-input")
    if found is None:
        found = memo["units/user-input"] = not m.tool_results
    return bool(found)


@dataclass(frozen=True)
class ToolCycle:
    """``[start, end)``: the assistant message at ``start`` and its tool messages.

    ``complete`` is True when every ``tool_use`` id of the assistant message is answered by
    the tool messages of the cycle.
    """

    start: int
    end: int
    complete: bool


@dataclass(frozen=True)
class Turn:
    """``[start, end)``: a user input at ``start`` (or the preamble when ``preamble``)."""

    start: int
    end: int
    preamble: bool = False


def tool_cycles(messages: list[Message]) -> list[ToolCycle]:
    """Every tool cycle of ``messages``, in order. O(n)."""
    out: list[ToolCycle] = []
    i, n = 0, len(messages)
    while i < n:
        m = messages[i]
        if m.role == "assistant" and m.tool_uses:
            wanted = [b.id for b in m.tool_uses]
            j = i + 1
            got: list[str] = []
            while j < n and messages[j].role == "tool":
                got.extend(r.tool_use_id for r in messages[j].tool_results)
                j += 1
            out.append(ToolCycle(i, j, sorted(wanted) == sorted(got)))
            i = j
        else:
            i += 1
    return out


def turns(messages: list[Message]) -> list[Turn]:
    """Split ``messages`` into turns; a leading preamble (may be empty) is returned first
    only when it holds messages. O(n)."""
    starts = [i for i, m in enumerate(messages) if is_user_input(m)]
    out: list[Turn] = []
    first = starts[0] if starts else len(messages)
    if first > 0:
        out.append(Turn(0, first, preamble=True))
    for k, s in enumerate(starts):
        e = starts[k + 1] if k + 1 < len(starts) else len(messages)
        out.append(Turn(s, e))
    return out


def last_user_index(messages: list[Message]) -> int | None:
    """Index of the latest user input, or None when there is none."""
    for i in range(len(messages) - 1, -1, -1):
        if is_user_input(messages[i]):
            return i
    return None


def cycle_boundaries(messages: list[Message]) -> set[int]:
    """Indices ``i`` such that a cut between ``i-1`` and ``i`` splits no tool cycle."""
    inside: set[int] = set()
    for c in tool_cycles(messages):
        inside.update(range(c.start + 1, c.end))
    return {i for i in range(len(messages) + 1) if i not in inside}
