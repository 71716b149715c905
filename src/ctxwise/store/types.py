"""The store's value types: what :class:`~ctxwise.store.Store` returns and what ``apply()`` takes.

Context message states (``ContextRow.state``):

* ``verbatim``: as appended (or a summary as inserted); visible to the model.
* ``cleared``: a tool-result body replaced by a placeholder (``current`` differs); visible.
* ``pruned``: thinking removed (``current`` differs); visible.
* ``summarized``: replaced by a summary row; hidden, ``original`` kept.
* ``trimmed``: dropped by the hard limit; hidden, ``original`` kept.
* ``popped``: retracted by ``pop()`` (the last appended message); hidden, ``original`` kept.
* ``reset``: hidden by ``clear()`` (the whole context at that moment); ``original`` kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from ..changes import Change, Hide, InsertSummary, Replace
from ..messages import Message

VISIBLE_STATES: tuple[str, ...] = ("verbatim", "cleared", "pruned")
HIDDEN_STATES: tuple[str, ...] = ("summarized", "trimmed")
REMOVED_STATES: tuple[str, ...] = ("popped", "reset")
STATES: tuple[str, ...] = VISIBLE_STATES + HIDDEN_STATES + REMOVED_STATES


@dataclass
class ContextRow:
    """One context message: ``seq`` is its insertion number (1-based, per session);
    ``current`` is what the model reads when ``state`` is visible; ``original`` is the message
    as first stored (always kept in the store; None in a row read without it, when ``current``
    already differs from it)."""

    message_id: str
    seq: int
    state: str
    current: Message
    original: Message | None
    size: int | None = None
    """The engine's size of ``current`` in the session's policy unit, as stored (None: not
    stored, count it)."""

    @property
    def visible(self) -> bool:
        """True when the model reads this row (``verbatim``, ``cleared`` or ``pruned``)."""
        return self.state in VISIBLE_STATES


@dataclass
class SessionState:
    """A loaded session: ``rows`` in context order, hidden rows included; ``version`` counts
    committed writes (0 for a new session)."""

    user_id: str
    session_id: str
    provider: str
    policy: dict[str, Any]
    version: int
    rows: list[ContextRow] = field(default_factory=list)
    created_at: datetime | None = None
    """When the session was created (UTC); the user-memory block is what existed then."""
    state: dict[str, Any] = field(default_factory=dict)
    """The engine's persisted session state (fact book, failed-summary keys, id counter, ...)."""

    def context(self) -> list[Message]:
        """The messages the model reads, in order."""
        return [r.current for r in self.rows if r.visible]


@dataclass
class TranscriptRow:
    """One transcript row (see :mod:`ctxwise.transcript` for the ``blocks`` shape).

    ``seq`` orders rows within the session (1-based); ``status`` is ``normal`` or
    ``interrupted``; ``created_at`` is UTC."""

    seq: int
    role: str
    text: str
    blocks: list[dict[str, Any]]
    status: str
    message_ids: list[str]
    created_at: datetime


@dataclass
class SessionInfo:
    """One line of :meth:`SessionStore.list_sessions`: the key, provider, version, and times (UTC)."""

    user_id: str
    session_id: str
    provider: str
    version: int
    created_at: datetime | None
    updated_at: datetime | None
