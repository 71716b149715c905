"""Persistence behind two protocols: :class:`SessionStore` (sessions, context rows,
transcript, events) and :class:`MemoryStore` (long-term user memory and its claim).

Implementations: :class:`SqlStore` (SQLite or PostgreSQL; ``Store`` is its old name) and
:class:`InMemoryStore` (one process, tests and demos), both :class:`BaseStore` subclasses:
the semantics live once in :mod:`.base`, over eight primitives each backend writes.
:func:`ctxwise.testing.validate_store` is the suite every implementation passes.

>>> store = SqlStore("sqlite:///ctxwise.db")
>>> state = store.open_session("u1", "s1", provider="openai", policy={})
>>> v = store.append("u1", "s1", [msg], expected_version=state.version)

See :mod:`.protocols` for the calls and the errors they raise, :mod:`.contract` for the
primitives' values, :mod:`.schema` for the tables. ``SqlStore`` (and SQLAlchemy) load on first
use: importing this package or using :class:`InMemoryStore` does not import SQLAlchemy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..changes import Change, Hide, InsertSummary, Replace
from .base import BaseStore
from .memory import InMemoryStore
from .protocols import MemoryStore, SessionStore
from .types import (
    HIDDEN_STATES,
    REMOVED_STATES,
    STATES,
    VISIBLE_STATES,
    ContextRow,
    SessionInfo,
    SessionState,
    TranscriptRow,
)

if TYPE_CHECKING:
    from .sql import QuickRead
    from .store import SqlStore, Store


def __getattr__(name: str) -> Any:
    if name in ("SqlStore", "Store"):
        from . import store

        value = getattr(store, name)
        globals()[name] = value
        return value
    if name == "QuickRead":
        from .sql import QuickRead

        globals()[name] = QuickRead
        return QuickRead
    raise AttributeError(f"module 'ctxwise.store' has no attribute {name!r}")


def open_store(url_or_store: str | SessionStore = "sqlite:///ctxwise.db", **kwargs: Any) -> SessionStore:
    """A store from a URL (``memory://`` for an :class:`InMemoryStore`, else a SQLite or
    PostgreSQL URL for :class:`SqlStore`, given ``kwargs``), or the store itself when one is
    given. Raises :class:`~ctxwise.errors.StoreUnavailable` for a URL ctxwise cannot open (an
    unsupported scheme names the supported ones), :class:`~ctxwise.errors.StoreSchemaError`."""
    if not isinstance(url_or_store, str):
        return url_or_store
    if url_or_store.startswith("memory:"):
        return InMemoryStore()
    from .store import SqlStore

    return SqlStore(url_or_store, **kwargs)


__all__ = [
    "SessionStore", "MemoryStore", "BaseStore", "SqlStore", "Store", "InMemoryStore", "open_store",
    "SessionState", "SessionInfo", "ContextRow", "TranscriptRow", "Change", "Replace", "Hide",
    "InsertSummary", "STATES", "VISIBLE_STATES", "HIDDEN_STATES", "REMOVED_STATES", "QuickRead",
]
