"""Typed changes to a session's context: what compaction stages return and stores apply.

Stages never call the store; they return a list of these, in order, and the engine hands that
list to :meth:`SessionStore.apply` unchanged (ARCHITECTURE.md, "Layers": "the engine persists what stages
return"). This module sits below both ``compaction`` and ``store`` so neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .messages import Message


@dataclass(frozen=True)
class Replace:
    """Swap one message's ``current`` body (clearing a tool result, pruning thinking).

    Writes one UPDATE of that row's ``current`` and ``state``; ``original`` stays.
    """

    message_id: str
    current: Message
    state: Literal["cleared", "pruned"] = "cleared"


@dataclass(frozen=True)
class Hide:
    """Take messages out of the model's view (``summarized`` or ``trimmed``); bodies stay."""

    message_ids: list[str]
    state: Literal["summarized", "trimmed"] = "summarized"


@dataclass(frozen=True)
class InsertSummary:
    """Insert ``summary`` where ``anchor_message_id`` (the first replaced message, which may
    itself be an older summary) stands. Hide the replaced messages with a :class:`Hide` in
    the same ``apply()``."""

    summary: Message
    anchor_message_id: str


Change = Replace | Hide | InsertSummary


def apply_changes(messages: list[Message], changes: list[Change]) -> list[Message]:
    """The context list after ``changes``, applied in order, exactly as a store applies them.

    ``messages`` is a context in send order (never mutated; returned as is when ``changes`` is
    empty). A :class:`Replace` swaps the message with that id in place; a :class:`Hide` removes
    the listed ids; an :class:`InsertSummary` puts the summary right after its anchor (the
    store sorts a summary after the row it is anchored to, and the same ``apply()`` normally
    hides the anchor, so the summary stands where the anchor stood).

    O(len(messages) x len(changes)). Raises ``ValueError`` naming the change when an id is
    not in the list (a stage describing a message it was not given is a bug).
    """
    if not changes:
        return messages
    out = list(messages)
    for k, ch in enumerate(changes):
        pos = {m.id: i for i, m in enumerate(out)}
        if isinstance(ch, Replace):
            if ch.message_id not in pos:
                raise ValueError(f"change {k}: Replace of {ch.message_id!r}, which is not in the context")
            if ch.current.id != ch.message_id:
                raise ValueError(f"change {k}: Replace of {ch.message_id!r} with a message whose id is {ch.current.id!r}")
            out[pos[ch.message_id]] = ch.current
        elif isinstance(ch, Hide):
            missing = [i for i in ch.message_ids if i not in pos]
            if missing:
                raise ValueError(f"change {k}: Hide of {missing}, which are not in the context")
            gone = set(ch.message_ids)
            out = [m for m in out if m.id not in gone]
        elif isinstance(ch, InsertSummary):
            if ch.anchor_message_id not in pos:
                raise ValueError(f"change {k}: InsertSummary anchored at {ch.anchor_message_id!r}, which is not in the context")
            if ch.summary.id in pos:
                raise ValueError(f"change {k}: InsertSummary of {ch.summary.id!r}, which is already in the context")
            out.insert(pos[ch.anchor_message_id] + 1, ch.summary)
        else:
            raise TypeError(f"change {k}: unknown change {type(ch).__name__}")
    return out
