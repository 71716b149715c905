"""Persistence behind two protocols: :class:`SessionStore` (sessions, context rows,
transcript, events) and :class:`MemoryStore` (long-term user memory and its claim).

Implementations: :class:`SqlStore` (SQLite or PostgreSQL; ``Store`` is its old name) and
:class:`InMemoryStore` (one process, tests and demos). ``tests/test_store_conformance.py`` is
the suite every implementation passes.

>>> store = SqlStore("sqlite:///ctxwise.db")
>>> state = store.open_session("u1", "s1", provider="openai", policy={})
>>> v = store.append("u1", "s1", [msg], expected_version=state.version)

See :mod:`.protocols` for the calls and the errors they raise, :mod:`.schema` for the tables.
"""

from .memory import InMemoryStore
from .protocols import MemoryStore, SessionStore
from .store import SqlStore, Store
from .types import (
    HIDDEN_STATES,
    REMOVED_STATES,
    STATES,
    VISIBLE_STATES,
    Change,
    ContextRow,
    Hide,
    InsertSummary,
    Replace,
    SessionInfo,
    SessionState,
    TranscriptRow,
)


def open_store(url_or_store: "str | SessionStore" = "sqlite:///ctxwise.db", **kwargs: object) -> SessionStore:
    """A store from a URL (``memory://`` for an :class:`InMemoryStore`, else an SQLAlchemy URL
    for :class:`SqlStore`), or the store itself when one is given."""
    if not isinstance(url_or_store, str):
        return url_or_store
    if url_or_store.startswith("memory:"):
        return InMemoryStore()
    return SqlStore(url_or_store, **kwargs)  # type: ignore[arg-type]


__all__ = [
    "SessionStore", "MemoryStore", "SqlStore", "Store", "InMemoryStore", "open_store",
    "SessionState", "SessionInfo", "ContextRow", "TranscriptRow", "Change", "Replace", "Hide",
    "InsertSummary", "STATES", "VISIBLE_STATES", "HIDDEN_STATES", "REMOVED_STATES",
]
