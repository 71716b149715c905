"""Typed changes to a session's context: what compaction stages return and stores apply.

Stages never call the store; they return a list of these, in order, and the engine hands that
list to :meth:`SessionStore.apply` unchanged (DESIGN.md: "the engine persists what stages
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
