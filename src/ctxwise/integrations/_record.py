"""What the framework middlewares share: where a framework's message list resumes against the
ctxwise session recorded beside it (the record: ``{"version", "last", ...}`` in the framework's
own state)."""

from __future__ import annotations

from typing import Any, Sequence

from .. import Marker, SessionConflict


def resume_index(ids: Sequence[str], rec: dict[str, Any] | None, session: Any, session_id: str, *,
                 state: str, rewritten: str) -> int:
    """Index in ``ids`` (the framework's message ids, in order) of the first message the ctxwise
    session has not seen: 0 without a record, else right after ``rec["last"]``.

    Raises :class:`~ctxwise.SessionConflict` when the session is older than the record (``state``,
    e.g. "this AgentState", was saved against another store or an older copy of it), or when the
    last appended message is no longer in ``ids`` (``rewritten``: what the user should do)."""
    if rec is None:
        return 0
    if session.version < int(rec.get("version") or 0):
        raise SessionConflict(
            f"ctxwise session {session_id!r} is at version {session.version} but {state} was saved at version "
            f"{rec['version']}: the ctxwise store is not the one it was saved with (or an older copy of it); "
            "open the same store")
    last = rec.get("last")
    if last is None:
        return 0
    if last not in ids:
        raise SessionConflict(f"ctxwise session {session_id!r}: the message {last!r} it last appended is no longer "
                              f"in {state}; {rewritten}")
    at = list(ids).index(last)
    # the session went on past this record (a fork from an earlier checkpoint, an older saved
    # state restored): what the session holds after ``last`` must be what the state holds after it
    # (the interruption results ctxwise wrote for calls the framework left unanswered,
    # Session.close_pending, are ctxwise's own: no framework state holds them)
    order = [m.id for m in session.messages if m.kind is None and not _interrupted(m)]
    if last in order:
        tail = set(ids[at + 1:])
        gone = [i for i in order[order.index(last) + 1:] if i not in tail]
        if gone:
            raise SessionConflict(
                f"ctxwise session {session_id!r} holds {len(gone)} message(s) after {last!r} that {state} does not "
                f"(first: {gone[0]!r}): it was restored from an earlier point or forked; {rewritten}")
    return at + 1


def _interrupted(m: Any) -> bool:
    """Whether ``m`` is an interruption result written by ``Session.close_pending``."""
    return Marker.read(m).interrupted is True
