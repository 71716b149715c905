"""The transcript: the record a person sees, derived from the context messages as they arrive.

One :class:`Entry` per user input and one per final assistant reply (Ragent's
``t_agent_message``). A reply entry carries the ordered timeline of everything the agent did
since the user's message, across all its model calls::

    [{"kind": "reasoning", "text": str},
     {"kind": "tool", "id": str, "name": str, "input": dict,
      "status": "success" | "error" | "no_result", "result": str | None},
     {"kind": "answer", "text": str}]

A reply is *final* when an assistant message has no ``tool_use`` blocks. When the next user
input arrives while the agent's work is still open (a tool call without a final reply), the
open work is closed as a reply with ``status="interrupted"``. System messages and ctxwise's
own messages (summaries, facts, user memory) are not part of the transcript.

Derivation is pure and incremental: :func:`derive` takes the *open* messages (those after the
last transcript entry that have not been folded into a reply yet) plus the new ones, and
returns the finished entries and the messages that stay open. Compaction never touches any of
this: the store derives from the messages as appended, before any stage edits them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .messages import Message, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from .units import is_user_input


@dataclass
class Entry:
    """One transcript row before it is stored.

    ``role`` is ``user`` or ``assistant``; ``status`` ``normal`` or ``interrupted``;
    ``message_ids`` the context messages it was derived from, in order.
    """

    role: str
    text: str
    blocks: list[dict[str, Any]] = field(default_factory=list)
    status: str = "normal"
    message_ids: list[str] = field(default_factory=list)


def _skipped(m: Message) -> bool:
    return m.role == "system" or m.kind is not None


def _result_text(r: ToolResultBlock) -> str:
    return "".join(b.text if isinstance(b, TextBlock) else f"[{b.type}]" for b in r.output)


def timeline(messages: list[Message]) -> list[dict[str, Any]]:
    """The reasoning / tool / answer blocks of ``messages`` (the agent's work of one turn), in
    order; each tool block gets the result that answers it (latest unanswered call with that
    id, since some recordings reuse call ids)."""
    blocks: list[dict[str, Any]] = []
    open_calls: dict[str, list[dict[str, Any]]] = {}
    for m in messages:
        for b in m.blocks:
            if isinstance(b, ThinkingBlock):
                if not b.redacted and b.thinking:
                    blocks.append({"kind": "reasoning", "text": b.thinking})
            elif isinstance(b, ToolUseBlock):
                tool = {"kind": "tool", "id": b.id, "name": b.name, "input": dict(b.input),
                        "status": "no_result", "result": None}
                blocks.append(tool)
                open_calls.setdefault(b.id, []).append(tool)
            elif isinstance(b, ToolResultBlock):
                waiting = open_calls.get(b.tool_use_id)
                if waiting:
                    tool = waiting.pop(0)
                    tool["status"] = b.state
                    tool["result"] = _result_text(b)
                else:  # a result without a call in this turn: keep it visible
                    blocks.append({"kind": "tool", "id": b.tool_use_id, "name": b.name or "",
                                   "input": {}, "status": b.state, "result": _result_text(b)})
            elif isinstance(b, TextBlock) and m.role == "assistant" and b.text:
                blocks.append({"kind": "answer", "text": b.text})
    return blocks


def _reply(work: list[Message], status: str) -> Entry:
    last = work[-1]
    text = last.text if last.role == "assistant" and not last.tool_uses else ""
    return Entry("assistant", text, timeline(work), status, [m.id for m in work])


def derive(open_messages: list[Message], new: list[Message]) -> tuple[list[Entry], list[Message]]:
    """Fold ``new`` messages into transcript entries.

    ``open_messages``: the messages of the current turn not yet folded into a reply (as
    returned by the previous call). Returns ``(entries, still_open)``; ``still_open`` is the
    agent work still waiting for its final reply (empty when the turn is closed). O(len(open)
    + len(new)).
    """
    entries: list[Entry] = []
    work = [m for m in open_messages if not _skipped(m)]
    for m in new:
        if _skipped(m):
            continue
        if is_user_input(m):
            if work:
                entries.append(_reply(work, "interrupted"))
                work = []
            entries.append(Entry("user", m.text, [], "normal", [m.id]))
        else:
            work.append(m)
            if m.role == "assistant" and not m.tool_uses:
                entries.append(_reply(work, "normal"))
                work = []
    return entries, work
