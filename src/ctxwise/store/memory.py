"""The :class:`InMemoryStore`: the whole store in one process's memory, for tests and demos.

The eight primitives of :class:`~ctxwise.store.base.BaseStore` over dicts; the semantics (and
so the errors) are the base class's, the same as :class:`~ctxwise.store.SqlStore`'s.
Thread-safe (one lock around every primitive); nothing survives the process. Bodies are kept
as JSON dicts, as a database keeps them, so a caller that mutates a message after appending it
does not change what was stored. Imports no database library.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from ..errors import SessionConflict, SessionNotFound
from ..memory.user import MemoryEntry
from .base import BaseStore, busy, utc_now
from .contract import (
    AddEntry,
    ClaimAction,
    ClearEntries,
    Head,
    MemoryChange,
    MemoryQuery,
    RetractEntry,
    RowQuery,
    Snapshot,
    StoredRow,
    SupersedeEntry,
    Write,
)
from .types import VISIBLE_STATES, SessionInfo, TranscriptRow


@dataclass
class _Session:
    head: Head
    order: int
    rows: dict[str, StoredRow] = field(default_factory=dict)
    transcript: list[TranscriptRow] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)


def _matches(r: StoredRow, q: RowQuery, open_from: int | None) -> bool:
    """Whether ``q``'s filters (all but ``message_ids`` and ``newest``) keep row ``r``."""
    if q.open_turn and (open_from is None or r.seq < open_from):
        return False
    if q.states is not None and r.state not in q.states:
        return False
    if q.appended and r.generation != 0:
        return False
    return q.tool_use_id is None or q.tool_use_id in r.tool_use_ids


def _select(s: _Session, q: RowQuery) -> tuple[StoredRow, ...]:
    """The rows of ``s`` that ``q`` selects."""
    rows: list[StoredRow] = list(s.rows.values()) if q.message_ids is None else [
        s.rows[m] for m in dict.fromkeys(q.message_ids) if m in s.rows]
    rows = [r for r in rows if _matches(r, q, s.head.open_from_seq)]
    if q.newest and rows:
        rows = [max(rows, key=lambda r: r.seq)]
    if not q.bodies:
        return tuple(replace(r, current=None, original=None) for r in rows)
    return tuple(r if q.originals or r.current is None else replace(r, original=None) for r in rows)


class InMemoryStore(BaseStore):
    """Sessions and user memory in dicts: a :class:`~ctxwise.store.SessionStore` and
    :class:`~ctxwise.store.MemoryStore` (see there for each call). ``wait`` has
    :class:`~ctxwise.store.SqlStore`'s meaning (a stale append is rebased, not refused)."""

    def __init__(self, *, wait: bool = False) -> None:
        self.wait = wait
        self._lock = threading.RLock()
        self._sessions: dict[tuple[str, str], _Session] = {}
        self._memory: list[tuple[str, MemoryEntry]] = []
        self._claims: dict[str, tuple[str, datetime]] = {}
        self._next_entry = 1

    def _get(self, user_id: str, session_id: str) -> _Session:
        s = self._sessions.get((user_id, session_id))
        if s is None:
            raise SessionNotFound(f"no session {session_id!r} for user {user_id!r}")
        return s

    # -- sessions ----------------------------------------------------------------------

    def read_session(self, user_id: str, session_id: str, *queries: RowQuery) -> Snapshot:
        """The header and each query's rows, under the lock. Raises SessionNotFound."""
        with self._lock:
            s = self._get(user_id, session_id)
            return Snapshot(s.head, tuple(_select(s, q) for q in queries))

    def commit(self, user_id: str, session_id: str, write: Write) -> None:
        """Apply ``write`` under the lock. Raises SessionConflict, SessionNotFound."""
        with self._lock:
            if write.create:
                if (user_id, session_id) not in self._sessions:
                    self._sessions[(user_id, session_id)] = _Session(write.head, len(self._sessions))
                return
            s = self._get(user_id, session_id)
            if s.head.version != write.expected_version:
                raise SessionConflict(f"session {session_id!r} is at version {s.head.version}, not "
                                      f"{write.expected_version}: another writer got in first; reload and retry")
            for row in write.inserts:
                s.rows[row.message_id] = row
            for u in write.updates:
                r = s.rows[u.message_id]
                s.rows[u.message_id] = replace(
                    r, state=r.state if u.state is None else u.state, size=r.size if u.size is None else u.size,
                    current=r.current if u.current is None else u.current,
                    original=r.original if u.original is None else u.original)
            if write.reset_visible:
                for mid, r in list(s.rows.items()):
                    if r.state in VISIBLE_STATES:
                        s.rows[mid] = replace(r, state="reset")
            s.transcript.extend(write.transcript)
            s.events.extend(write.events)
            s.head = write.head

    def commit_new(self, user_id: str, session_id: str, create: Write, write: Write) -> None:
        """Create the session and apply ``write`` under the lock, as one write: when ``write``
        fails, the session just created is removed again."""
        with self._lock:
            made = (user_id, session_id) not in self._sessions
            self.commit(user_id, session_id, create)
            try:
                self.commit(user_id, session_id, write)
            except BaseException:
                if made:
                    del self._sessions[(user_id, session_id)]
                raise

    def read_events(self, user_id: str, session_id: str) -> list[dict[str, Any]]:
        """A copy of the session's events. Raises SessionNotFound."""
        with self._lock:
            return copy.deepcopy(self._get(user_id, session_id).events)

    def read_transcript(self, user_id: str, session_id: str) -> list[TranscriptRow]:
        """A copy of the session's transcript. Raises SessionNotFound."""
        with self._lock:
            return copy.deepcopy(self._get(user_id, session_id).transcript)

    def query_sessions(self, user_id: str | None, user_prefix: str | None, limit: int,
                       offset: int) -> list[SessionInfo]:
        """The sessions, most recently updated first."""
        with self._lock:
            found = [s for (u, _), s in self._sessions.items() if (user_id is None or u == user_id)
                     and (user_prefix is None or u.startswith(user_prefix))]
            found.sort(key=lambda s: (s.head.updated_at or datetime.min, s.order), reverse=True)
            keys = {id(s): k for k, s in self._sessions.items()}
            return [SessionInfo(*keys[id(s)], s.head.provider, s.head.version, s.head.created_at, s.head.updated_at)
                    for s in found[offset:offset + limit]]

    # -- user memory -------------------------------------------------------------------

    def read_memory(self, user_id: str, query: MemoryQuery) -> list[MemoryEntry]:
        """The user's entries ``query`` selects, oldest first."""
        with self._lock:
            return [e for u, e in self._memory if u == user_id
                    and (query.include_inactive or e.status == "active")
                    and (query.exclude_session is None or e.source_session_id != query.exclude_session)
                    and (query.created_before is None or e.created_at is None
                         or e.created_at <= query.created_before)]

    def write_memory(self, user_id: str, changes: Sequence[MemoryChange], owner: str | None) -> list[object]:
        """Apply ``changes`` under the lock, all or nothing. Raises MemoryBusy."""
        with self._lock:
            if owner is not None and not self.memory_claim(user_id, owner, "renew", 0.0):
                raise busy(user_id, owner)
            saved = (list(self._memory), self._next_entry)
            try:
                return [self._change(user_id, c) for c in changes]
            except BaseException:
                self._memory, self._next_entry = saved
                raise

    def _active(self, user_id: str, entry_id: int) -> int | None:
        return next((k for k, (u, e) in enumerate(self._memory)
                     if u == user_id and e.id == entry_id and e.status == "active"), None)

    def _set_status(self, k: int, status: str) -> None:
        u, e = self._memory[k]
        self._memory[k] = (u, replace(e, status=status))

    def _change(self, user_id: str, c: MemoryChange) -> object:
        if isinstance(c, AddEntry):
            entry = MemoryEntry(id=self._next_entry, text=c.text, kind=c.kind, supersedes_id=c.supersedes_id,
                                source_session_id=c.source_session_id, source_message_id=c.source_message_id,
                                created_at=utc_now())
            self._next_entry += 1
            self._memory.append((user_id, entry))
            return entry
        if isinstance(c, SupersedeEntry):
            k = self._active(user_id, c.entry_id)
            if k is None:
                return None
            self._set_status(k, "superseded")
            return self._change(user_id, AddEntry(c.text, c.kind or self._memory[k][1].kind, c.entry_id,
                                                  c.source_session_id, c.source_message_id))
        if isinstance(c, RetractEntry):
            k = self._active(user_id, c.entry_id)
            if k is not None:
                self._set_status(k, "retracted")
            return k is not None
        assert isinstance(c, ClearEntries)
        mine = [k for k, (u, e) in enumerate(self._memory) if u == user_id and (c.purge or e.status == "active")]
        if c.purge:
            self._memory = [(u, e) for u, e in self._memory if u != user_id]
        else:
            for k in mine:
                self._set_status(k, "retracted")
        return len(mine)

    def memory_claim(self, user_id: str, owner: str, action: ClaimAction, stale_after_s: float) -> bool:
        """Take, renew or release the user's claim under the lock."""
        with self._lock:
            now = utc_now()
            held = self._claims.get(user_id)
            if action == "take":
                if held is not None and held[0] != owner and held[1] >= now - timedelta(seconds=stale_after_s):
                    return False
                self._claims[user_id] = (owner, now)
                return True
            if held is None or held[0] != owner:
                return False
            if action == "renew":
                self._claims[user_id] = (owner, now)
            else:
                del self._claims[user_id]
            return True


__all__ = ["InMemoryStore"]
