"""Persistence: sessions, context rows, transcript, compaction events (SQLite or PostgreSQL).

>>> store = Store("sqlite:///ctxwise.db")
>>> state = store.open_session("u1", "s1", provider="openai", policy={})
>>> v = store.append("u1", "s1", [msg], expected_version=state.version)

See :class:`Store` for the calls and the errors they raise, :mod:`.schema` for the tables.
"""

from .store import Store
from .types import (
    HIDDEN_STATES,
    STATES,
    VISIBLE_STATES,
    Change,
    ContextRow,
    Hide,
    InsertSummary,
    Replace,
    SessionState,
    TranscriptRow,
)

__all__ = [
    "Store", "SessionState", "ContextRow", "TranscriptRow", "Change", "Replace", "Hide",
    "InsertSummary", "STATES", "VISIBLE_STATES", "HIDDEN_STATES",
]
