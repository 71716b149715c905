"""Open sessions kept between requests, checked against the store on every use.

Opening a session reads it from the store (the session row, its visible messages, the
user's memory entries, the fact book): about as much work as the call itself. A server
process therefore keeps the :class:`~ctxwise.Session` objects it opened, at most ``size`` of
them (least recently used first out), keyed by ``(tenant, user_id, session_id, tools)``.

**Nothing is served stale.** Any process may have written the session since this one last
used it, so every use is checked:

* a read, ``prepare`` and ``pop`` start with one indexed read (:meth:`SessionCache.fresh`,
  :meth:`ctxwise.SqlStore.freshness`): the session's stored ``version`` and a fingerprint of
  the user-memory entries the session shows (the active entries of the user created up to the
  session's start and not written by the session itself: their count and the sum of their ids,
  a set that only shrinks, so any change to it changes the pair). A difference from what the cached object was opened at
  drops it and the session is opened again (from the same read on), as with no cache;
* an append relies on the store's own optimistic check instead (the write is refused unless
  the session is still at the version the object holds). When a cached object's append is
  refused by ctxwise (a version conflict, or a check that a stale context failed) before
  anything was stored, the version is read: if another writer had moved the session on, the
  object is dropped, the session opened again and the append made once more, so the caller
  sees what a server without a cache would have answered. A refusal on an up-to-date object
  is the caller's answer (a 409 for the loser of a real race), and an error from the database
  itself is never retried (it may hide a commit).

An object is used by one request at a time: it is taken out of the cache for the request
and put back after a success, or after an append the library refused on an object just found
current (a refused call changes nothing); a request that finds it taken opens its own. Any
other error drops it. Policy, tools and the memory block are those of a fresh open, because a session whose
policy was migrated elsewhere has a new version, and the tools are part of the key.

Only a store with a ``freshness`` read is cached (:class:`~ctxwise.SqlStore`: SQLite,
PostgreSQL); ``memory://`` is opened per request.

**Bounded by entries and by bytes.** The objects live in one :class:`ctxwise.SessionPool`
(the same pool the LangChain and AgentScope middlewares use): at most ``size`` of them and at
most ``max_bytes`` held by their contexts, least recently used out first. An object is weighed
each time it is put back; one whose context holds more than a quarter of ``max_bytes`` (an
append of a multi-megabyte tool result not yet compacted by a prepare) is not kept: its next
request opens it from the store, so no tenant can pin the process's memory with uncompacted
results.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from .. import CtxwiseError, Session, SessionConflict, SessionPool, StoreUnavailable
from .core import timing

if TYPE_CHECKING:
    from starlette.requests import Request

    from .core import Server

T = TypeVar("T")

DEFAULT_SIZE = 1024
"""Sessions one process keeps open at most."""

DEFAULT_BYTES = 128 * 2**20
"""Bytes their contexts hold at most (:func:`ctxwise.pool.held_bytes`): 128 MiB."""


@dataclass(frozen=True)
class Freshness:
    """What one freshness read found: the stored ``version`` and the user-memory fingerprint."""

    version: int
    memory: tuple[int, int]


@dataclass
class _Entry:
    session: Session
    memory: tuple[int, int]


class SessionCache:
    """The process's open sessions (see the module docstring): at most ``size`` (0 turns the
    cache off) holding at most ``max_bytes``, in :attr:`pool`. Raises
    :class:`~ctxwise.PolicyError` for a negative bound."""

    def __init__(self, server: "Server", size: int = DEFAULT_SIZE, max_bytes: int = DEFAULT_BYTES) -> None:
        self.server = server
        self.size = size if callable(getattr(server.manager.store, "freshness", None)) else 0
        self.pool: SessionPool[tuple[Any, ...], _Entry] = SessionPool(
            self.size, max_bytes, messages=lambda entry: entry.session.messages)

    # -- the freshness read ------------------------------------------------------------

    def fresh(self, user: str, session_id: str, request: "Request | None" = None) -> Freshness | None:
        """The stored version and memory fingerprint of ``(user, session_id)`` (the store's
        user id, :meth:`~ctxwise.SqlStore.freshness`), None when there is no such session.
        With ``request``: the read its key check made of this session (:meth:`~ctxwise.server.core.Server.authenticate` with the session)
        when there was one, used once; else a read now."""
        state = getattr(request, "state", None) if request is not None else None
        made = getattr(state, "freshness", None)
        if made is not None and made[:2] == (user, session_id):
            state.freshness = None  # type: ignore[union-attr]  # a later check reads again
            found = made[2]
        else:
            found = self.server.manager.store.freshness(user, session_id)
        return None if found is None else Freshness(*found)

    # -- use ---------------------------------------------------------------------------------

    def run(self, request: "Request", tenant: str, user_id: str, session_id: str,
            op: Callable[[Session, int | None], T], *,
            create: bool = False, tools: list[dict[str, Any]] | None = None, expected: int | None = None,
            optimistic: bool = False) -> tuple[Session, T]:
        """``op(session, checked)`` on the session ``(user_id, session_id)`` of ``tenant`` (the
        request's, as :meth:`~ctxwise.server.core.Server.authenticate` returned it), served from the cache when it is current (see the module docstring); ``checked``
        is the stored version this request has just read (a prepare need not read it again:
        ``Session.prepare(checked_version=...)``), None when it read none (an append). ``expected``:
        :class:`~ctxwise.SessionConflict` unless the session is at that version.
        ``optimistic``: ``op`` is a write the store refuses on a stale version (an append), so
        no read precedes it. Returns ``(session, op's result)``; raises what ``op`` raises
        (:class:`~ctxwise.SessionNotFound` for a missing session unless ``create``).

        Records ``open`` (getting the session: the freshness read, and the store read on a
        miss) in the request's ``Server-Timing``, with ``cache`` = ``hit``, ``miss`` or
        ``stale``."""
        user = self.server.store_user(tenant, user_id)
        key = (tenant, user_id, session_id, _tools_key(tools))
        t0 = time.perf_counter()
        entry = self._take(key)
        state = "miss" if entry is None else "hit"
        found = None
        if entry is not None and not (optimistic and (expected is None or entry.session.version == expected)):
            found = self.fresh(user, session_id, request)
            if found is None or found.version != entry.session.version or found.memory != entry.memory:
                entry, state = None, "stale"
        if entry is None:
            entry, found = self._open(tenant, user, user_id, session_id, tools, create, found, request)
        timing(request, "open", t0)
        notes = request.scope.setdefault("ctxwise_timing_desc", {})
        notes["cache"] = state
        for attempt in (0, 1):
            s = entry.session
            if expected is not None and s.version != expected:
                raise SessionConflict(f"session {session_id!r} is at version {s.version}, the request expected "
                                      f"version {expected}: read it again (GET .../context) and retry")
            before = s.version
            try:
                # the version read on this request, when the object is at it (an object opened
                # after a read that another write overtook reads it again in the library)
                result = op(s, found.version if found is not None and found.version == s.version else None)
            except CtxwiseError as e:
                if attempt or state != "hit" or not optimistic or s.version != before or isinstance(e, StoreUnavailable):
                    raise
                found = self.fresh(user, session_id)
                if found is None or found.version == before:
                    if found is not None and found.memory == entry.memory and not isinstance(e, SessionConflict):
                        self._put(key, entry)  # current, and a refused call changes nothing (the library's rule)
                    raise  # the object was current: the refusal is the caller's answer
                state = notes["cache"] = "stale"
                t1 = time.perf_counter()
                entry, found = self._open(tenant, user, user_id, session_id, tools, create, found)
                timing(request, "reopen", t1)
                continue
            self._put(key, entry)
            return s, result
        raise AssertionError("unreachable")

    def _open(self, tenant: str, user: str, user_id: str, session_id: str, tools: list[dict[str, Any]] | None,
              create: bool, found: Freshness | None, request: "Request | None" = None
              ) -> tuple[_Entry, Freshness | None]:
        """Open the session from the store; returns it with the freshness read made before the
        open (None with no cache, or for a session created now). The fingerprint comes from
        that read (a memory change in between makes the next check reopen it, never the
        reverse); a session created now has none yet: (0, 0), at worst one reopen later."""
        if self.size and found is None:
            found = self.fresh(user, session_id, request)
        s = self.server.open(tenant, user_id, session_id, tools=tools, create=create)
        return _Entry(s, found.memory if found is not None else (0, 0)), found

    def keep(self, tenant: str, user_id: str, session_id: str, session: Session) -> None:
        """Hold ``session`` (no tools), just created and written by this process, as :meth:`run`
        holds one it opened with ``create``: the next request of that session starts from it
        instead of reading it again. Its memory fingerprint is not known yet ((0, 0), as for a
        session :meth:`run` creates): at worst one reopen later. Nothing when the cache is off."""
        if self.size:
            self._put((tenant, user_id, session_id, _tools_key(None)), _Entry(session, (0, 0)))

    def _take(self, key: tuple[Any, ...]) -> _Entry | None:
        return self.pool.take(key)

    def _put(self, key: tuple[Any, ...], entry: _Entry) -> None:
        # a newer object another request put back stays; this one is weighed and kept if it fits
        self.pool.put(key, entry, keep=lambda held: held.session.version > entry.session.version)

    def __len__(self) -> int:
        return len(self.pool)

    def clear(self) -> None:
        """Drop every open session."""
        self.pool.clear()


def _tools_key(tools: list[dict[str, Any]] | None) -> str:
    return json.dumps(tools, sort_keys=True, separators=(",", ":")) if tools else ""
