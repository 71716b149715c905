"""The :class:`InMemoryStore`: the whole store in one process's memory, for tests and demos.

Same semantics and same errors as :class:`~ctxwise.store.SqlStore` (the conformance suite runs
both): versions, optimistic conflicts, user scoping, the refusals of
:mod:`ctxwise.store.checks`, transcript rows. Thread-safe (one lock around every call);
nothing survives the process. Messages are kept as JSON, as a database would keep them, so a
caller that mutates a message after appending it does not change what was stored.
"""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable, Sequence

from ..changes import Change, Hide, InsertSummary, Replace
from ..errors import MessageNotStorable, NotNewestMessage, SessionConflict, SessionNotFound
from ..messages import Message
from ..transcript import Entry, derive
from . import checks
from .store import _entry_id, _event_row, _open_from, _pick_original, _prepare_changes, _with_metadata
from .types import REMOVED_STATES, VISIBLE_STATES, ContextRow, SessionInfo, SessionState, TranscriptRow


def _now() -> datetime:
    return datetime.now(timezone.utc)


@dataclass
class _Row:
    seq: int
    anchor_seq: int
    generation: int
    message_id: str
    state: str
    original: dict[str, Any]
    current: dict[str, Any] | None
    size: int | None
    tool_use_ids: list[str]


@dataclass
class _Session:
    user_id: str
    session_id: str
    provider: str
    policy: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    version: int = 0
    last_seq: int = 0
    open_from_seq: int | None = None
    state: dict[str, Any] = field(default_factory=dict)
    rows: list[_Row] = field(default_factory=list)
    by_id: dict[str, _Row] = field(default_factory=dict)
    transcript: list[TranscriptRow] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)


class InMemoryStore:
    """Sessions and user memory in a dict. Implements :class:`~ctxwise.store.SessionStore`
    and :class:`~ctxwise.store.MemoryStore`; see there for each call's contract.
    ``wait`` has :class:`SqlStore`'s meaning (a stale append is rebased, not refused)."""

    def __init__(self, *, wait: bool = False) -> None:
        self.wait = wait
        self._lock = threading.RLock()
        self._sessions: dict[tuple[str, str], _Session] = {}
        self._memory: list[dict[str, Any]] = []
        self._claims: dict[str, tuple[str, datetime]] = {}
        self._next_entry = 1

    # -- plumbing ----------------------------------------------------------------------

    def _get(self, user_id: str, session_id: str) -> _Session:
        s = self._sessions.get((user_id, session_id))
        if s is None:
            raise SessionNotFound(f"no session {session_id!r} for user {user_id!r}")
        return s

    def _check(self, s: _Session, expected: int, *, rebase: bool = False) -> int:
        if s.version == expected:
            return expected
        if rebase:
            return s.version
        raise SessionConflict(f"session {s.session_id!r} is at version {s.version}, not {expected}: another "
                              "writer got in first; reload and retry")

    @staticmethod
    def _bump(s: _Session, base: int, state: dict[str, Any] | None) -> int:
        if state is not None:
            s.state = checks.json_doc(state, "session state")
        s.version = base + 1
        s.updated_at = _now()
        return s.version

    @staticmethod
    def _add_transcript(s: _Session, entries: list[Entry]) -> None:
        now = _now()
        for e in entries:
            s.transcript.append(TranscriptRow(len(s.transcript) + 1, e.role, e.text, copy.deepcopy(e.blocks),
                                              e.status, list(e.message_ids), now))

    @staticmethod
    def _ordered(s: _Session) -> list[_Row]:
        return sorted(s.rows, key=lambda r: (r.anchor_seq, r.generation))

    # -- sessions ----------------------------------------------------------------------

    def open_session(self, user_id: str, session_id: str, *, provider: str,
                     policy: dict[str, Any]) -> SessionState:
        checks.key(user_id, session_id)
        policy_json = checks.json_doc(policy, "policy")
        with self._lock:
            if (user_id, session_id) not in self._sessions:
                now = _now()
                self._sessions[(user_id, session_id)] = _Session(user_id, session_id, provider, policy_json, now, now)
            return self.load(user_id, session_id)

    def load(self, user_id: str, session_id: str, *, include_hidden: bool = False) -> SessionState:
        with self._lock:
            s = self._get(user_id, session_id)
            rows = []
            for r in self._ordered(s):
                if not include_hidden and r.state not in VISIBLE_STATES:
                    continue
                original = Message.model_validate(r.original)
                current = original if r.current is None else Message.model_validate(r.current)
                keep = include_hidden or r.current is None
                rows.append(ContextRow(r.message_id, r.seq, r.state, current, original if keep else None, r.size))
            return SessionState(user_id, session_id, s.provider, copy.deepcopy(s.policy), s.version, rows,
                                created_at=s.created_at, state=copy.deepcopy(s.state))

    def version(self, user_id: str, session_id: str) -> int:
        with self._lock:
            return self._get(user_id, session_id).version

    def list_sessions(self, user_id: str | None = None, *, limit: int = 100, offset: int = 0,
                      user_prefix: str | None = None) -> list[SessionInfo]:
        with self._lock:
            found = [s for s in self._sessions.values() if (user_id is None or s.user_id == user_id)
                     and (user_prefix is None or s.user_id.startswith(user_prefix))]
            order = {k: i for i, k in enumerate(self._sessions)}
            found.sort(key=lambda s: (s.updated_at, order[(s.user_id, s.session_id)]), reverse=True)
            page = found[max(0, int(offset)):max(0, int(offset)) + max(0, int(limit))]
            return [SessionInfo(s.user_id, s.session_id, s.provider, s.version, s.created_at, s.updated_at)
                    for s in page]

    # -- writes ------------------------------------------------------------------------

    def append(self, user_id: str, session_id: str, messages: list[Message], *, expected_version: int,
               sizes: Sequence[int] | None = None, state: dict[str, Any] | None = None) -> int:
        bodies = checks.bodies(messages)
        if sizes is not None and len(sizes) != len(messages):
            raise ValueError(f"append: {len(sizes)} sizes for {len(messages)} messages")
        with self._lock:
            s = self._get(user_id, session_id)
            base = self._check(s, expected_version, rebase=self.wait)
            self._refuse_taken(s, messages, session_id)
            if state is not None:
                checks.json_doc(state, "session state")
            self._add_rows(s, messages, bodies, sizes)
            return self._bump(s, base, state)

    @staticmethod
    def _refuse_taken(s: _Session, messages: list[Message], session_id: str) -> None:
        for i, m in enumerate(messages):
            if m.id in s.by_id:
                raise MessageNotStorable(i, "duplicate-message-id",
                                         f"id {m.id!r} is already stored in session {session_id!r}")

    def _add_rows(self, s: _Session, messages: list[Message], bodies: list[Any], sizes: Sequence[int] | None) -> None:
        """Add ``messages`` as new context rows and the transcript rows they complete (checks done)."""
        open_rows = [] if s.open_from_seq is None else [
            r for r in sorted(s.rows, key=lambda r: r.seq)
            if r.seq >= s.open_from_seq and r.generation == 0 and r.state not in REMOVED_STATES]
        open_msgs = [Message.model_validate(r.original) for r in open_rows]
        entries, still_open = derive(open_msgs, list(messages))
        first = s.last_seq + 1
        s.open_from_seq = _open_from(open_msgs, [r.seq for r in open_rows], messages, still_open, first)
        for k, (m, body) in enumerate(zip(messages, bodies)):
            row = _Row(first + k, first + k, 0, m.id, "verbatim", body, None,
                       int(sizes[k]) if sizes is not None else None, [r.tool_use_id for r in m.tool_results])
            s.rows.append(row)
            s.by_id[m.id] = row
        s.last_seq += len(messages)
        self._add_transcript(s, entries)

    def apply(self, user_id: str, session_id: str, changes: list[Change], events: list[dict[str, Any]], *,
              expected_version: int, sizes: dict[str, int] | None = None,
              state: dict[str, Any] | None = None) -> int:
        prepared = _prepare_changes(changes)
        event_rows = _checked_writes(events, state)
        with self._lock:
            s = self._get(user_id, session_id)
            self._check(s, expected_version)
            # check everything first: the write is all or nothing
            ids = set(s.by_id)
            for i, (ch, _) in enumerate(prepared):
                if isinstance(ch, Replace) and ch.message_id not in ids:
                    raise ValueError(f"change {i}: no message {ch.message_id!r} in session {session_id!r}")
                if isinstance(ch, Hide) and not set(ch.message_ids) <= ids:
                    raise ValueError(f"change {i}: some of {sorted(set(ch.message_ids))} are not in session "
                                     f"{session_id!r}")
                if isinstance(ch, InsertSummary):
                    if ch.anchor_message_id not in ids:
                        raise ValueError(f"change {i}: no anchor message {ch.anchor_message_id!r}")
                    if ch.summary.id in ids:
                        raise ValueError(f"change {i}: message id {ch.summary.id!r} already stored")
                    ids.add(ch.summary.id)
            for mid in sizes or {}:
                if mid not in ids:
                    raise ValueError(f"sizes: no message {mid!r} in session {session_id!r}")
            for ch, body in prepared:
                if isinstance(ch, Replace):
                    row = s.by_id[ch.message_id]
                    row.current, row.state = body, ch.state
                elif isinstance(ch, Hide):
                    for mid in ch.message_ids:
                        s.by_id[mid].state = ch.state
                else:
                    assert isinstance(ch, InsertSummary)
                    s.last_seq += 1
                    row = _Row(s.last_seq, s.by_id[ch.anchor_message_id].anchor_seq, s.last_seq, ch.summary.id,
                               "verbatim", body, None, None, [])
                    s.rows.append(row)
                    s.by_id[row.message_id] = row
            for mid, n in (sizes or {}).items():
                s.by_id[mid].size = int(n)
            s.events.extend(event_rows)
            return self._bump(s, expected_version, state)

    def pop(self, user_id: str, session_id: str, *, expected_version: int,
            events: list[dict[str, Any]] | None = None, state: dict[str, Any] | None = None,
            message_id: str | None = None, then_append: list[Message] | None = None,
            sizes: Sequence[int] | None = None) -> tuple[int, Message | None]:
        event_rows = _checked_writes(events, state)
        then = list(then_append or [])
        bodies = checks.bodies(then)
        if sizes is not None and len(sizes) != len(then):
            raise ValueError(f"pop: {len(sizes)} sizes for {len(then)} messages")
        with self._lock:
            s = self._get(user_id, session_id)
            self._check(s, expected_version)
            last = _newest_row(s, message_id, "pop")
            if last is None:
                return expected_version, None
            self._refuse_taken(s, then, session_id)
            msg = Message.model_validate(last.original)
            last.state = "popped"
            if s.open_from_seq is not None and s.open_from_seq >= last.seq:
                s.open_from_seq = None
            self._add_transcript(s, [Entry(msg.role, msg.text, [], "retracted", [last.message_id])])
            s.events.extend(event_rows)
            if then:
                self._add_rows(s, then, bodies, sizes)
            return self._bump(s, expected_version, state), msg

    def amend(self, user_id: str, session_id: str, *, expected_version: int, metadata: dict[str, Any],
              beside: list[Any] | None = None, message_id: str | None = None, size: int | None = None, events: list[dict[str, Any]] | None = None,
              state: dict[str, Any] | None = None) -> tuple[int, Message | None]:
        event_rows = _checked_writes(events, state)
        with self._lock:
            s = self._get(user_id, session_id)
            self._check(s, expected_version)
            last = _newest_row(s, message_id, "amend")
            if last is None:
                return expected_version, None
            msg = _with_metadata(Message.model_validate(last.original), metadata, beside)
            (body,) = checks.bodies([msg])
            current = checks.bodies([_with_metadata(Message.model_validate(last.current), metadata, beside)])[0] \
                if last.current is not None else None
            last.original, last.current = body, current
            if size is not None:
                last.size = int(size)
            s.events.extend(event_rows)
            return self._bump(s, expected_version, state), msg

    def clear(self, user_id: str, session_id: str, *, expected_version: int,
              events: list[dict[str, Any]] | None = None, state: dict[str, Any] | None = None) -> int:
        event_rows = _checked_writes(events, state)
        with self._lock:
            s = self._get(user_id, session_id)
            self._check(s, expected_version)
            for r in s.rows:
                if r.state in VISIBLE_STATES:
                    r.state = "reset"
            s.open_from_seq = None
            self._add_transcript(s, [Entry("system", "", [], "cleared", [])])
            s.events.extend(event_rows)
            return self._bump(s, expected_version, state)

    def set_policy(self, user_id: str, session_id: str, *, provider: str, policy: dict[str, Any],
                   expected_version: int, events: list[dict[str, Any]] | None = None,
                   sizes: dict[str, int] | None = None, state: dict[str, Any] | None = None) -> int:
        policy_json = checks.json_doc(policy, "policy")
        event_rows = _checked_writes(events, state)
        with self._lock:
            s = self._get(user_id, session_id)
            self._check(s, expected_version)
            for mid, n in (sizes or {}).items():
                if mid in s.by_id:
                    s.by_id[mid].size = int(n)
            s.provider, s.policy = provider, policy_json
            s.events.extend(event_rows)
            return self._bump(s, expected_version, state)

    # -- reads -------------------------------------------------------------------------

    def events(self, user_id: str, session_id: str) -> list[dict[str, Any]]:
        with self._lock:
            return copy.deepcopy(self._get(user_id, session_id).events)

    def transcript(self, user_id: str, session_id: str) -> list[TranscriptRow]:
        with self._lock:
            return copy.deepcopy(self._get(user_id, session_id).transcript)

    def original(self, user_id: str, session_id: str, tool_use_id: str | None = None, *,
                 message_id: str | None = None) -> Message | None:
        if (tool_use_id is None) == (message_id is None):
            raise ValueError("original(): give exactly one of tool_use_id and message_id")
        with self._lock:
            s = self._get(user_id, session_id)
            if message_id is not None:
                row = s.by_id.get(message_id)
            else:
                found = sorted((r for r in s.rows if tool_use_id in r.tool_use_ids), key=lambda r: -r.seq)
                seq = _pick_original([(r.seq, r.state) for r in found])
                row = next((r for r in found if r.seq == seq), None)
            return Message.model_validate(row.original) if row is not None else None

    # -- user memory -------------------------------------------------------------------

    def _entry(self, d: dict[str, Any]) -> Any:
        from ..memory.user import MemoryEntry

        return MemoryEntry(**d)

    def _active(self, user_id: str, entry_id: Any) -> dict[str, Any] | None:
        ident = _entry_id(entry_id)
        return next((d for d in self._memory if d["id"] == ident and d["user_id"] == user_id
                     and d["status"] == "active"), None) if ident is not None else None

    def list_memory(self, user_id: str, *, include_inactive: bool = False, exclude_session: str | None = None,
                    created_before: datetime | None = None) -> list[Any]:
        with self._lock:
            return [self._entry({k: v for k, v in d.items() if k != "user_id"}) for d in self._memory
                    if d["user_id"] == user_id and (include_inactive or d["status"] == "active")
                    and (exclude_session is None or d["source_session_id"] != exclude_session)
                    and (created_before is None or d["created_at"] is None or d["created_at"] <= created_before)]

    def _add(self, user_id: str, text: str, kind: str, supersedes_id: Any, source_session_id: str | None,
             source_message_id: str | None) -> Any:
        checks.json_doc([user_id, text, kind, source_session_id, source_message_id], "memory entry")
        d = dict(id=self._next_entry, user_id=user_id, text=text, kind=kind, status="active",
                 supersedes_id=supersedes_id, source_session_id=source_session_id,
                 source_message_id=source_message_id, created_at=_now())
        self._next_entry += 1
        self._memory.append(d)
        return self._entry({k: v for k, v in d.items() if k != "user_id"})

    def add_memory(self, user_id: str, text: str, kind: str = "preference", *, supersedes_id: Any = None,
                   source_session_id: str | None = None, source_message_id: str | None = None) -> Any:
        with self._lock:
            return self._add(user_id, text, kind, supersedes_id, source_session_id, source_message_id)

    def supersede_memory(self, user_id: str, entry_id: Any, text: str, kind: str | None = None, *,
                         source_session_id: str | None = None, source_message_id: str | None = None) -> Any:
        from ..errors import MemoryEntryNotFound

        with self._lock:
            old = self._active(user_id, entry_id)
            if old is None:
                raise MemoryEntryNotFound(f"user {user_id!r} has no active memory entry {entry_id!r}")
            new = self._add(user_id, text, kind or old["kind"], old["id"], source_session_id, source_message_id)
            old["status"] = "superseded"
            return new

    def retract_memory(self, user_id: str, entry_id: Any) -> bool:
        with self._lock:
            d = self._active(user_id, entry_id)
            if d is None:
                return False
            d["status"] = "retracted"
            return True

    def clear_memory(self, user_id: str, *, purge: bool = False) -> int:
        with self._lock:
            mine = [d for d in self._memory if d["user_id"] == user_id]
            if purge:
                self._memory = [d for d in self._memory if d["user_id"] != user_id]
                return len(mine)
            active = [d for d in mine if d["status"] == "active"]
            for d in active:
                d["status"] = "retracted"
            return len(active)

    def apply_memory(self, user_id: str, ops: Iterable[Any], *, source_session_id: str | None = None,
                     source_message_id: str | None = None, owner: str | None = None) -> list[Any]:
        from ..errors import MemoryBusy, MemoryEntryNotFound

        done: list[Any] = []
        with self._lock:
            if owner is not None:
                if not self.renew_memory(user_id, owner):
                    raise MemoryBusy(f"memory claim of user {user_id!r} was taken over from {owner!r} "
                                     f"(its lease ran out); nothing of this extraction was written")
            saved, saved_next = copy.deepcopy(self._memory), self._next_entry
            try:
                for op in ops:
                    if op.op == "ADD":
                        self._add(user_id, op.text or "", op.kind or "preference", None, source_session_id,
                                  source_message_id)
                    elif op.op == "SUPERSEDE":
                        try:
                            self.supersede_memory(user_id, op.target_id, op.text or "", op.kind,
                                                  source_session_id=source_session_id,
                                                  source_message_id=source_message_id)
                        except MemoryEntryNotFound:
                            continue
                    elif op.op == "RETRACT":
                        if not self.retract_memory(user_id, op.target_id):
                            continue
                    elif op.op == "CLEAR":
                        self.clear_memory(user_id)
                    else:
                        continue
                    done.append(op)
            except BaseException:
                self._memory, self._next_entry = saved, saved_next
                raise
        return done

    def claim_memory(self, user_id: str, owner: str, *, stale_after_s: float = 15.0) -> bool:
        with self._lock:
            now = _now()
            held = self._claims.get(user_id)
            if held is not None and held[1] < now - timedelta(seconds=stale_after_s):
                held = None
            if held is not None and held[0] != owner:
                return False
            self._claims[user_id] = (owner, now)
            return True

    def renew_memory(self, user_id: str, owner: str) -> bool:
        with self._lock:
            held = self._claims.get(user_id)
            if held is None or held[0] != owner:
                return False
            self._claims[user_id] = (owner, _now())
            return True

    def release_memory(self, user_id: str, owner: str) -> bool:
        with self._lock:
            held = self._claims.get(user_id)
            if held is None or held[0] != owner:
                return False
            del self._claims[user_id]
            return True

    def close(self) -> None:
        """Nothing to release (kept for the protocol)."""

    def __enter__(self) -> "InMemoryStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["InMemoryStore"]


def _checked_writes(events: list[dict[str, Any]] | None, state: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The event rows to store and a checked session state, both validated before any lock is
    taken (what the SQL store refuses, this store refuses too: same errors, nothing written)."""
    if state is not None:
        checks.json_doc(state, "session state")
    return [_event_row(i, ev)["data"] for i, ev in enumerate(events or [])]


def _newest_row(s: Any, message_id: str | None, op: str) -> Any:
    """The newest appended row still in the context of session ``s``, or None (pop and amend
    act on it). Raises ValueError when ``message_id`` is given and is not that message."""
    last = max((r for r in s.rows if r.generation == 0 and r.state in VISIBLE_STATES),
               key=lambda r: r.seq, default=None)
    if last is not None and message_id is not None and last.message_id != message_id:
        raise NotNewestMessage(op, last.message_id, message_id)
    return last
