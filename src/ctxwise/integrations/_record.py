"""What the framework middlewares share: where a framework's message list resumes against the
ctxwise session recorded beside it (the record: ``{"version", "last", "digest", ...}`` in the
framework's own state), and when it no longer can (the framework's record changed: a new branch)."""

from __future__ import annotations

import hashlib
import json
import random
import threading
import time
import uuid
from typing import Any, Callable, Iterable, Sequence, TypeVar

from .. import ContextManager, Marker, Session, SessionConflict, SessionPool
from ..providers import from_chat_tools


T = TypeVar("T")

RACE_ATTEMPTS = 8
"""How many times in all a write that lost a race to another writer is tried."""
RACE_BACKOFF_S = 0.004
"""The first retry waits up to this many seconds (uniformly jittered); each later one up to twice the one before."""


def retry_races(fn: Callable[[], T], moved: Callable[[], bool], *, attempts: int = RACE_ATTEMPTS,
                backoff_s: float = RACE_BACKOFF_S) -> T:
    """``fn()``, tried again while it raises :class:`~ctxwise.SessionConflict` because another
    writer got in between its read and its write (``moved()`` is True: the store's version of the
    session is past the one read; nothing of the failed write was stored), after a jittered
    exponential backoff (up to ``backoff_s * 2**k`` seconds before retry ``k``), at most
    ``attempts`` times in all. ``fn`` must reload the session before it writes (the middlewares'
    session lookup does). A conflict that is not a race (``moved()`` False, e.g. a saved record
    newer than the store), or the last attempt's, is raised."""
    for k in range(attempts):
        try:
            return fn()
        except SessionConflict:
            if k == attempts - 1 or not moved():
                raise
            time.sleep(random.uniform(0, backoff_s * 2 ** k))
    raise AssertionError("unreachable: the last attempt returns or raises")


def digest(items: Iterable[str]) -> str:
    """SHA-256 (hex) of ``items`` (each message's stable JSON), in order: what the record keeps
    of the framework's messages up to its ``last``, so a message corrected or removed under it
    is noticed."""
    h = hashlib.sha256()
    for item in items:
        h.update(hashlib.sha256(item.encode("utf-8", "surrogatepass")).digest())
    return h.hexdigest()


def branch_id(session_id: str) -> str:
    """A new session id for a branch of ``session_id``: ``<base>~<12 hex digits>`` (``base``:
    ``session_id`` up to its first ``~``)."""
    return f"{session_id.split('~', 1)[0]}~{uuid.uuid4().hex[:12]}"


def follow(ids: Sequence[str], rec: dict[str, Any] | None, session: Any, session_id: str, *, state: str,
           prefix_digest: Callable[[int], str] | None = None) -> tuple[int, str | None]:
    """Where the framework's messages (``ids``, in order) resume against ``session``:
    ``(index of the first message the session has not seen, None)``, or ``(0, reason)`` when the
    framework's record no longer continues the session (then the caller appends it to a new
    branch, :meth:`ctxwise.Session.record_branch` with ``reason``).

    A branch is needed when the message appended last (``rec["last"]``) is gone from ``ids``;
    when ``prefix_digest(index of last)`` differs from ``rec["digest"]`` (a message up to it was
    corrected or removed); when the session went on past ``last`` with messages the framework
    does not hold (resumed from an earlier checkpoint); and, without a record, when the session
    holds messages the framework does not (a fresh run on a reused id). Messages the session
    holds after ``last`` that ``ids`` holds too (the store ahead of the framework's record: a
    model call failed after the append) are skipped.

    Raises :class:`~ctxwise.SessionConflict` when the session is older than the record
    (``state``, e.g. "this AgentState", was saved against another store or an older copy of it)."""
    known = [m.id for m in session.messages if m.kind is None and m.role != "system" and not _interrupted(m)]
    if rec is None or rec.get("last") is None:
        if set(known) - set(ids):
            return 0, f"{state} does not hold the {len(known)} message(s) the ctxwise session {session_id!r} holds " \
                      "(a fresh run on a reused id, or its saved record was lost)"
        return _ahead(ids, known, 0), None
    if session.version < int(rec.get("version") or 0):
        raise SessionConflict(
            f"ctxwise session {session_id!r} is at version {session.version} but {state} was saved at version "
            f"{rec['version']}: the ctxwise store is not the one it was saved with (or an older copy of it); "
            "open the same store")
    last = rec["last"]
    if last not in ids:
        return 0, f"the message {last!r} appended last is no longer in {state} (removed or replaced)"
    at = list(ids).index(last)
    if prefix_digest is not None and rec.get("digest") is not None and prefix_digest(at) != rec["digest"]:
        return 0, f"a message up to {last!r} was corrected or removed in {state}"
    if last in known:
        tail = set(ids[at + 1:])
        gone = [i for i in known[known.index(last) + 1:] if i not in tail]
        if gone:
            return 0, f"{state} resumes from before the session's {len(gone)} latest message(s) (first: {gone[0]!r}): " \
                      "an earlier checkpoint or a fork"
    return _ahead(ids, known, at + 1), None


def _ahead(ids: Sequence[str], known: Sequence[str], start: int) -> int:
    """``start`` moved past the messages of ``ids`` the session already holds (the store ahead
    of the framework's record)."""
    have = set(known)
    ahead = [i for i in range(start, len(ids)) if ids[i] in have]
    return ahead[-1] + 1 if ahead else start


def _interrupted(m: Any) -> bool:
    """Whether ``m`` is an interruption result written by ``Session.close_pending``."""
    return Marker.read(m).interrupted is True


def pool_key(user_id: str, session_id: str, tools: list[dict[str, Any]]) -> tuple[str, str, str]:
    """The pool key of a session opened with ``tools``: the ids and a digest of the schemas."""
    return user_id, session_id, hashlib.sha256(json.dumps(tools, sort_keys=True, default=str).encode()).hexdigest()


def pooled_session(manager: ContextManager, pool: SessionPool[tuple[str, str, str], Session], lock: threading.Lock,
                   user_id: str, session_id: str, tools: list[dict[str, Any]]) -> Session:
    """The session ``(user_id, session_id)`` opened with ``tools``: from ``pool`` when held (reloaded
    when another writer, e.g. another process or a resumed run, moved it on), else opened from
    ``manager``; put back (weighed) in the pool. ``lock`` guards the pool."""
    key = pool_key(user_id, session_id, tools)
    with lock:
        s = pool.get(key)
        if s is None:
            s = manager.session(user_id, session_id, tools=from_chat_tools(tools, manager.policy.provider))
        elif s.version != manager.store.version(user_id, session_id):
            s.reload()
        pool.put(key, s)
        return s
