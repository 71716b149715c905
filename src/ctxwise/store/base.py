"""The store semantics, written once over eight primitives a backend implements.

:class:`BaseStore` implements every call of :class:`~ctxwise.store.SessionStore` and
:class:`~ctxwise.store.MemoryStore` (``open_session``, ``append``, ``apply``, ``pop``, ``amend``,
``clear``, ``set_policy``, ``load``, ``original``, the transcript, the memory calls, ...) by
reading a snapshot, checking the input, computing one :class:`~ctxwise.store.contract.Write`
and handing it to the backend. A backend writes:

* :meth:`BaseStore.read_session`: a session's header and the rows some
  :class:`~ctxwise.store.contract.RowQuery` select, in one snapshot;
* :meth:`BaseStore.commit`: one :class:`~ctxwise.store.contract.Write`, all or nothing,
  under the expected version;
* :meth:`BaseStore.read_events`, :meth:`BaseStore.read_transcript`: a session's two logs;
* :meth:`BaseStore.query_sessions`: the session list;
* :meth:`BaseStore.read_memory`, :meth:`BaseStore.write_memory`,
  :meth:`BaseStore.memory_claim`: user memory and its claim.

Writes are optimistic: a write read at version v commits only if the session is still at v.
With ``wait`` a stale :meth:`~BaseStore.append` reads again and retries instead of failing.
:func:`ctxwise.testing.validate_store` checks a backend against the contract.
"""

from __future__ import annotations

import copy
import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from ..changes import Change, Hide, InsertSummary, Replace
from ..errors import MemoryBusy, MemoryEntryNotFound, MessageNotStorable, NotNewestMessage, SessionConflict, \
    SessionNotFound
from ..messages import Marker, Message
from ..pool import held_bytes
from ..transcript import Entry, derive
from . import checks
from .contract import (
    AddEntry,
    ClaimAction,
    ClearEntries,
    Head,
    HeadField,
    MemoryChange,
    MemoryQuery,
    RetractEntry,
    RowQuery,
    RowUpdate,
    Snapshot,
    StoredRow,
    SupersedeEntry,
    Write,
)
from .types import HIDDEN_STATES, REMOVED_STATES, VISIBLE_STATES, ContextRow, SessionInfo, SessionState, \
    TranscriptRow

if TYPE_CHECKING:
    from ..memory.user import MemoryEntry

MAX_REBASES = 1000
"""How often a ``wait`` store re-reads and retries an append another writer got in before."""

_BIG = 2**63 - 1
_LIVE_STATES = VISIBLE_STATES + HIDDEN_STATES


def utc_now() -> datetime:
    """Timezone-aware UTC now."""
    return datetime.now(timezone.utc)


class BaseStore(ABC):
    """A :class:`~ctxwise.store.SessionStore` and :class:`~ctxwise.store.MemoryStore` over eight
    primitives (the abstract methods). Subclass it, implement the primitives, and run
    :func:`ctxwise.testing.validate_store` on a factory of your store.

    ``wait``: when True, :meth:`append` with a stale ``expected_version`` appends after the
    newest write instead of raising :class:`~ctxwise.errors.SessionConflict`."""

    wait: bool = False

    # -- the primitives a backend writes -------------------------------------------------

    @abstractmethod
    def read_session(self, user_id: str, session_id: str, *queries: RowQuery) -> Snapshot:
        """The session's header and, for each query, the rows it selects, all from one
        consistent snapshot. Raises :class:`~ctxwise.errors.SessionNotFound`."""

    @abstractmethod
    def commit(self, user_id: str, session_id: str, write: Write) -> None:
        """Apply ``write`` whole or not at all (see :class:`~ctxwise.store.contract.Write`).
        Raises :class:`~ctxwise.errors.SessionConflict` when the stored version is not
        ``write.expected_version`` (nothing stored), SessionNotFound when there is no session."""

    def update_session(self, user_id: str, session_id: str, queries: Sequence[RowQuery],
                       build: Callable[[Snapshot], Write]) -> Write:
        """Read ``queries`` (one snapshot) and commit the write ``build`` makes of what they saw,
        whole or not at all; returns that write. ``build`` raises (SessionConflict for a stale
        expected version, MessageNotStorable, ...) to commit nothing. Here: :meth:`read_session`
        then :meth:`commit` under the snapshot's version, so a writer in between makes the commit
        raise SessionConflict. A backend that can hold the session's lock across the read and
        the write (SqlStore) overrides it to do both in one transaction. Raises SessionNotFound."""
        write = build(self.read_session(user_id, session_id, *queries))
        self.commit(user_id, session_id, write)
        return write

    @abstractmethod
    def read_events(self, user_id: str, session_id: str) -> list[dict[str, Any]]:
        """The session's event dicts, oldest first, as committed. Raises SessionNotFound."""

    @abstractmethod
    def read_transcript(self, user_id: str, session_id: str) -> list[TranscriptRow]:
        """The session's transcript rows, by ``seq``. Raises SessionNotFound."""

    @abstractmethod
    def query_sessions(self, user_id: str | None, user_prefix: str | None, limit: int,
                       offset: int) -> list[SessionInfo]:
        """Sessions, most recently updated first (the later-created first on a tie), ``limit``
        (≥ 0) from ``offset`` (≥ 0); only ``user_id``'s when given; only users whose id starts
        with ``user_prefix`` (literally) when given."""

    @abstractmethod
    def read_memory(self, user_id: str, query: MemoryQuery) -> list[MemoryEntry]:
        """The user's memory entries ``query`` selects, oldest first."""

    @abstractmethod
    def write_memory(self, user_id: str, changes: Sequence[MemoryChange],
                     owner: str | None) -> list[object]:
        """Apply ``changes`` in order, all or nothing; one result per change (see each change
        type). With ``owner``: only while ``owner`` holds the user's claim, renewed in the same
        write; else raise :class:`~ctxwise.errors.MemoryBusy` and write nothing."""

    @abstractmethod
    def memory_claim(self, user_id: str, owner: str, action: ClaimAction, stale_after_s: float) -> bool:
        """``take``: take the user's claim for ``owner`` (True; refreshed when ``owner`` holds it),
        False when another owner holds one renewed less than ``stale_after_s`` seconds ago.
        ``renew``: set the time of ``owner``'s claim to now; False when it does not hold it.
        ``release``: drop ``owner``'s claim; False when it did not hold it."""

    def close(self) -> None:
        """Release what the store holds; it must not be used afterwards."""

    def __enter__(self) -> BaseStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- sessions: reads ---------------------------------------------------------------

    def open_session(self, user_id: str, session_id: str, *, provider: str,
                     policy: dict[str, Any], defer: bool = False) -> SessionState:
        """Create the session at version 0 if missing, else load it (its stored provider and
        policy are returned). Raises :class:`~ctxwise.errors.NotStorable` for a key or policy
        the store cannot hold.

        ``defer``: a missing session is not stored now but by the first write that names it
        (in the same transaction on :class:`~ctxwise.store.SqlStore` and
        :class:`~ctxwise.store.InMemoryStore`), so a session whose first write is refused
        leaves nothing behind. Until then this store object answers :meth:`version` (0),
        :meth:`events`, :meth:`transcript` (empty) and :meth:`original` (None) for it;
        :meth:`load` and :meth:`list_sessions` do not show it, nor does any other store.
        The session's creation time is the time of this call. At most :data:`MAX_DEFERRED`
        such sessions are held per store object (the oldest forgotten first)."""
        checks.key(user_id, session_id)
        now = utc_now()
        head = Head(provider, checks.json_doc(policy, "policy"), created_at=now, updated_at=now)
        if defer:
            try:
                return self.load(user_id, session_id)
            except SessionNotFound:
                _defer(self, user_id, session_id, head)
                return SessionState(user_id, session_id, provider, copy.deepcopy(head.policy), 0, [],
                                    created_at=now, state={})
        self.commit(user_id, session_id, Write(expected_version=0, head=head, create=True))
        return self.load(user_id, session_id)

    def commit_new(self, user_id: str, session_id: str, create: Write, write: Write) -> None:
        """Store the session ``create`` holds (a ``create`` write) unless it exists, then
        ``write`` (see :meth:`commit`): the first write of a session opened with ``defer``.
        This base version makes two commits; a backend that can should override it to make
        them one transaction. Raises what :meth:`commit` raises."""
        self.commit(user_id, session_id, create)
        self.commit(user_id, session_id, write)

    def load(self, user_id: str, session_id: str, *, include_hidden: bool = False) -> SessionState:
        """The session: visible context rows in context order (every row with
        ``include_hidden``, originals included), its policy, version and ``state``. Reads
        O(visible rows) by default. Raises SessionNotFound."""
        _known(user_id, session_id)
        query = RowQuery(states=None if include_hidden else VISIBLE_STATES, originals=include_hidden)
        snap = self.read_session(user_id, session_id, query)
        rows = []
        for r in sorted(snap.rows[0], key=lambda r: (r.anchor_seq, r.generation)):
            original = Message.model_validate(r.original) if r.original is not None else None
            current = original if r.current is None else Message.model_validate(r.current)
            assert current is not None, "a row read without its body"
            rows.append(ContextRow(r.message_id, r.seq, r.state, current, original, r.size))
        h = snap.head
        return SessionState(user_id, session_id, h.provider, copy.deepcopy(h.policy), h.version, rows,
                            created_at=h.created_at, state=copy.deepcopy(h.state))

    def version(self, user_id: str, session_id: str) -> int:
        """The session's current version (0 for one opened with ``defer`` and not yet
        written). Raises SessionNotFound."""
        _known(user_id, session_id)
        try:
            return self.read_session(user_id, session_id).head.version
        except SessionNotFound:
            return deferred_or_raise(self, user_id, session_id, 0)

    def events(self, user_id: str, session_id: str) -> list[dict[str, Any]]:
        """Every event of the session, oldest first, as given to the writes. Raises SessionNotFound."""
        _known(user_id, session_id)
        try:
            return self.read_events(user_id, session_id)
        except SessionNotFound:
            return deferred_or_raise(self, user_id, session_id, [])

    def transcript(self, user_id: str, session_id: str) -> list[TranscriptRow]:
        """The transcript rows, in order (agent work waiting for its reply is not listed until
        the reply, or the next user input as ``interrupted``, comes). Raises SessionNotFound."""
        _known(user_id, session_id)
        try:
            return self.read_transcript(user_id, session_id)
        except SessionNotFound:
            return deferred_or_raise(self, user_id, session_id, [])

    def original(self, user_id: str, session_id: str, tool_use_id: str | None = None, *,
                 message_id: str | None = None) -> Message | None:
        """A message as first stored: by ``message_id``, or the one holding the result of
        ``tool_use_id`` (on a reused call id: the oldest cleared one in the context, else the
        newest in the context, else the newest). None when there is none. Raises ValueError
        unless exactly one of the two is given, SessionNotFound."""
        if (tool_use_id is None) == (message_id is None):
            raise ValueError("original(): give exactly one of tool_use_id and message_id")
        if not checks.holdable(tool_use_id if message_id is None else message_id):
            self.version(user_id, session_id)  # SessionNotFound as for any id
            return None
        _known(user_id, session_id)
        if message_id is not None:
            query = RowQuery(message_ids=(message_id,), originals=True)
        else:
            query = RowQuery(tool_use_id=tool_use_id, originals=True)
        try:
            found = sorted(self.read_session(user_id, session_id, query).rows[0], key=lambda r: -r.seq)
        except SessionNotFound:
            return deferred_or_raise(self, user_id, session_id, None)
        seq = _pick_original([(r.seq, r.state) for r in found])
        row = next((r for r in found if r.seq == seq), None)
        return Message.model_validate(row.original) if row is not None and row.original is not None else None

    def list_sessions(self, user_id: str | None = None, *, limit: int = 100, offset: int = 0,
                      user_prefix: str | None = None) -> list[SessionInfo]:
        """Sessions, most recently updated first, ``limit`` from ``offset``; one user's only
        when ``user_id`` is given; only users whose id starts with ``user_prefix`` (taken
        literally) when that is given. An offset past any list gives []."""
        limit, offset = max(0, int(limit)), max(0, int(offset))
        if offset >= _BIG or not checks.holdable(*(x for x in (user_id, user_prefix) if x is not None)):
            return []
        return self.query_sessions(user_id, user_prefix, min(limit, _BIG), offset)

    # -- sessions: writes --------------------------------------------------------------

    def append(self, user_id: str, session_id: str, messages: list[Message], *, expected_version: int,
               sizes: Sequence[int] | None = None, state: dict[str, Any] | None = None) -> int:
        """Append ``messages`` (k rows, state ``verbatim``) and the transcript rows they
        complete, in one write. Returns the new version. Raises SessionConflict (stale
        ``expected_version`` unless ``wait``), SessionNotFound, TypeError (not a Message),
        :class:`~ctxwise.errors.MessageNotStorable` (an id already stored, text the store cannot
        hold), ValueError (``sizes`` of another length): nothing is stored then."""
        bodies = checks.bodies(messages)
        _check_sizes(sizes, len(messages), "append")
        state_doc = _state_doc(state)
        _known(user_id, session_id)
        built_on = [expected_version]  # the version the last build wrote on
        turns = _open_turns(self)
        known: list[OpenTurn | None] = [turns.get((user_id, session_id))]
        after: list[OpenTurn] = []

        def build(snap: Snapshot) -> Write:
            base = built_on[0] = _base_version(snap.head, expected_version, session_id, rebase=self.wait)
            _refuse_taken(snap.rows[0], messages, session_id)
            turn = _turn_read(snap, known[0])
            inserts, head, changed, entries, left = _appended(snap.head, turn, messages, bodies, sizes)
            write = _write(base, head, changed | _state_changed(state_doc), state_doc, inserts=inserts,
                           transcript=entries)
            after[:] = [OpenTurn(write.head.version, write.head.created_at, left)]
            return write

        for attempt in range(MAX_REBASES + 1):
            held = known[0] is not None and known[0].version == expected_version and not (self.wait and attempt)
            queries = (_taken(messages),) if held else (_taken(messages), _OPEN_TURN)
            if not held:
                known[0] = None
            try:
                write = _read_commit(self, user_id, session_id, queries, build)
            except _StaleTurn:  # another writer moved the session since this process last wrote it
                known[0] = None
                continue
            except SessionConflict:  # with wait: retried only when another write moved the version
                if not self.wait or attempt == MAX_REBASES or self.version(user_id, session_id) == built_on[0]:
                    raise
                continue
            _keep_turn(turns, (user_id, session_id), after[0])
            return write.head.version
        raise AssertionError("unreachable")  # pragma: no cover

    def apply(self, user_id: str, session_id: str, changes: list[Change], events: list[dict[str, Any]], *,
              expected_version: int, sizes: dict[str, int] | None = None,
              state: dict[str, Any] | None = None) -> int:
        """Apply typed changes (Replace, Hide, InsertSummary) and append ``events`` in one
        write; ``sizes`` maps message ids to their new size. Returns the new version. Raises
        SessionConflict (whatever ``wait``), SessionNotFound, ValueError (an unknown id, a bad
        state, data that is not JSON): nothing is stored then."""
        prepared = _prepare_changes(changes)
        docs = _event_docs(events)
        state_doc = _state_doc(state)
        _known(user_id, session_id)
        snap, new = _read_for_write(self, user_id, session_id, RowQuery(message_ids=_referenced(changes, sizes),
                                                                        bodies=False))
        _base_version(snap.head, expected_version, session_id, rebase=False)
        plan = _ApplyPlan(snap.head, {r.message_id: r for r in snap.rows[0]}, session_id)
        for i, (ch, body) in enumerate(prepared):
            plan.add(i, ch, body)
        plan.set_sizes(sizes or {})
        head = replace(snap.head, last_seq=plan.last_seq)
        changed: frozenset[HeadField] = frozenset({"last_seq"})
        write = _write(expected_version, head, changed | _state_changed(state_doc), state_doc,
                       inserts=tuple(plan.inserts), updates=tuple(plan.updates.values()), events=docs)
        _commit(self, user_id, session_id, write, new)
        return expected_version + 1

    def pop(self, user_id: str, session_id: str, *, expected_version: int,
            events: list[dict[str, Any]] | None = None, state: dict[str, Any] | None = None,
            message_id: str | None = None, then_append: list[Message] | None = None,
            sizes: Sequence[int] | None = None) -> tuple[int, Message | None]:
        """Retract the newest appended message still in the context (state ``popped``; its id
        stays taken); the transcript gets a ``retracted`` row naming it. With ``then_append``
        (and their ``sizes``), those messages are appended in the same write. Returns
        ``(version, message)``; ``(expected_version, None)`` and no write when nothing is left.
        Raises SessionConflict, SessionNotFound, :class:`~ctxwise.errors.NotNewestMessage`
        (``message_id`` is not that message), MessageNotStorable (a ``then_append`` message):
        nothing is written then."""
        docs = _event_docs(events or [])
        state_doc = _state_doc(state)
        then = list(then_append or [])
        bodies = checks.bodies(then)
        _check_sizes(sizes, len(then), "pop")
        _known(user_id, session_id)
        snap, new = _read_for_write(self, user_id, session_id, _NEWEST, _taken(then),
                                    *([_OPEN_TURN] if then else []))
        _base_version(snap.head, expected_version, session_id, rebase=False)
        last = _newest(snap.rows[0], message_id, "pop")
        if last is None:
            return expected_version, None
        _refuse_taken(snap.rows[1], then, session_id)
        assert last.original is not None
        msg = Message.model_validate(last.original)
        open_from = snap.head.open_from_seq
        head = replace(snap.head, open_from_seq=None if open_from is not None and open_from >= last.seq else open_from,
                       transcript_seq=snap.head.transcript_seq + 1)
        entries = _rows_of(snap.head.transcript_seq, [Entry(msg.role, msg.text, [], "retracted", [last.message_id])])
        changed: frozenset[HeadField] = frozenset({"open_from_seq", "transcript_seq"})
        inserts: tuple[StoredRow, ...] = ()
        if then:
            still = [r for r in snap.rows[2] if r.message_id != last.message_id] \
                if head.open_from_seq is not None else []
            turn = tuple((r.seq, Message.model_validate(r.original)) for r in sorted(still, key=lambda r: r.seq))
            inserts, head, more, appended, _left = _appended(head, turn, then, bodies, sizes)
            changed, entries = changed | more, entries + appended
        write = _write(expected_version, head, changed | _state_changed(state_doc), state_doc, inserts=inserts,
                       updates=(RowUpdate(last.message_id, state="popped"),), transcript=entries, events=docs)
        _commit(self, user_id, session_id, write, new)
        return expected_version + 1, msg

    def amend(self, user_id: str, session_id: str, *, expected_version: int, metadata: dict[str, Any],
              beside: list[Any] | None = None, message_id: str | None = None, size: int | None = None,
              events: list[dict[str, Any]] | None = None,
              state: dict[str, Any] | None = None) -> tuple[int, Message | None]:
        """Set ``metadata``'s top-level keys (and, unless None, ``beside`` as
        ``metadata["ctxwise"]["beside"]``) on the newest appended message still in the context
        (original and current body; no transcript row), its ``size`` when given, and store
        ``events``. Returns ``(version, the amended original)``; ``(expected_version, None)``
        and no write when the context is empty. Raises SessionConflict, SessionNotFound,
        NotNewestMessage, MessageNotStorable: nothing is written then."""
        docs = _event_docs(events or [])
        state_doc = _state_doc(state)
        _known(user_id, session_id)
        snap, new = _read_for_write(self, user_id, session_id, _NEWEST)
        _base_version(snap.head, expected_version, session_id, rebase=False)
        last = _newest(snap.rows[0], message_id, "amend")
        if last is None:
            return expected_version, None
        assert last.original is not None
        msg = _with_metadata(Message.model_validate(last.original), metadata, beside)
        (body,) = checks.bodies([msg])
        current = None
        if last.current is not None:
            (current,) = checks.bodies([_with_metadata(Message.model_validate(last.current), metadata, beside)])
        update = RowUpdate(last.message_id, current=current, original=body, size=None if size is None else int(size))
        write = _write(expected_version, snap.head, _state_changed(state_doc), state_doc, updates=(update,),
                       events=docs)
        _commit(self, user_id, session_id, write, new)
        return expected_version + 1, msg

    def clear(self, user_id: str, session_id: str, *, expected_version: int,
              events: list[dict[str, Any]] | None = None, state: dict[str, Any] | None = None) -> int:
        """Hide every context row (state ``reset``; originals kept), close the open turn and
        add a ``cleared`` row to the transcript. Returns the new version. Raises
        SessionConflict, SessionNotFound."""
        docs = _event_docs(events or [])
        state_doc = _state_doc(state)
        _known(user_id, session_id)
        snap, new = _read_for_write(self, user_id, session_id)
        h = snap.head
        _base_version(h, expected_version, session_id, rebase=False)
        head = replace(h, open_from_seq=None, transcript_seq=h.transcript_seq + 1)
        changed: frozenset[HeadField] = frozenset({"open_from_seq", "transcript_seq"})
        write = _write(expected_version, head, changed | _state_changed(state_doc), state_doc, reset_visible=True,
                       transcript=_rows_of(h.transcript_seq, [Entry("system", "", [], "cleared", [])]), events=docs)
        _commit(self, user_id, session_id, write, new)
        return expected_version + 1

    def set_policy(self, user_id: str, session_id: str, *, provider: str, policy: dict[str, Any],
                   expected_version: int, events: list[dict[str, Any]] | None = None,
                   sizes: dict[str, int] | None = None, state: dict[str, Any] | None = None) -> int:
        """Replace the stored provider and policy (an explicit migration) with ``events`` and
        new ``sizes`` (ids not in the session are ignored), in one write. Returns the version.
        Raises SessionConflict, SessionNotFound, NotStorable."""
        policy_doc = checks.json_doc(policy, "policy")
        docs = _event_docs(events or [])
        state_doc = _state_doc(state)
        _known(user_id, session_id)
        snap, new = _read_for_write(self, user_id, session_id, RowQuery(message_ids=tuple(sizes or {}),
                                                                        bodies=False))
        _base_version(snap.head, expected_version, session_id, rebase=False)
        present = {r.message_id for r in snap.rows[0]}
        updates = tuple(RowUpdate(mid, size=int(n)) for mid, n in (sizes or {}).items() if mid in present)
        head = replace(snap.head, provider=provider, policy=policy_doc)
        changed: frozenset[HeadField] = frozenset({"provider", "policy"})
        write = _write(expected_version, head, changed | _state_changed(state_doc), state_doc, updates=updates,
                       events=docs)
        _commit(self, user_id, session_id, write, new)
        return expected_version + 1

    # -- user memory -------------------------------------------------------------------

    def list_memory(self, user_id: str, *, include_inactive: bool = False, exclude_session: str | None = None,
                    created_before: datetime | None = None) -> list[Any]:
        """The user's entries (``MemoryEntry``), oldest first (active only unless
        ``include_inactive``), filtered as :class:`~ctxwise.store.contract.MemoryQuery` says."""
        if not checks.holdable(user_id):
            return []
        return list(self.read_memory(user_id, MemoryQuery(include_inactive, exclude_session, created_before)))

    def add_memory(self, user_id: str, text: str, kind: str = "preference", *, supersedes_id: Any = None,
                   source_session_id: str | None = None, source_message_id: str | None = None) -> Any:
        """Store ``text`` as a new active entry; returns it with its id. Raises NotStorable."""
        change = _add_entry(user_id, text, kind, _entry_id(supersedes_id), source_session_id, source_message_id)
        return self.write_memory(user_id, [change], None)[0]

    def supersede_memory(self, user_id: str, entry_id: Any, text: str, kind: str | None = None, *,
                         source_session_id: str | None = None, source_message_id: str | None = None) -> Any:
        """Mark ``entry_id`` superseded and add ``text`` in its place, in one write. Raises
        :class:`~ctxwise.errors.MemoryEntryNotFound` when the user has no active entry with
        that id, NotStorable."""
        ident = _entry_id(entry_id)
        checks.json_doc([user_id, text, kind, source_session_id, source_message_id], "memory entry")
        new = None if ident is None else self.write_memory(
            user_id, [SupersedeEntry(ident, text, kind, source_session_id, source_message_id)], None)[0]
        if new is None:
            raise MemoryEntryNotFound(f"user {user_id!r} has no active memory entry {entry_id!r}")
        return new

    def retract_memory(self, user_id: str, entry_id: Any) -> bool:
        """Mark one entry retracted; False when the user has no active entry with that id."""
        ident = _entry_id(entry_id)
        return ident is not None and bool(self.write_memory(user_id, [RetractEntry(ident)], None)[0])

    def clear_memory(self, user_id: str, *, purge: bool = False) -> int:
        """Retract every active entry (``purge``: delete all the user's entries); the count."""
        count = self.write_memory(user_id, [ClearEntries(purge)], None)[0]
        assert isinstance(count, int)
        return count

    def apply_memory(self, user_id: str, ops: Iterable[Any], *, source_session_id: str | None = None,
                     source_message_id: str | None = None, owner: str | None = None) -> list[Any]:
        """Apply ``Op``s (ADD / SUPERSEDE / RETRACT / CLEAR; others skipped) in one write;
        returns those that changed something. With ``owner``: only while ``owner`` holds the
        user's claim, renewed in the same write; raises :class:`~ctxwise.errors.MemoryBusy`
        (nothing written) when it does not."""
        pairs: list[tuple[Any, MemoryChange]] = []
        for op in ops:
            change = _memory_change(user_id, op, source_session_id, source_message_id)
            if change is not None:
                pairs.append((op, change))
        if not pairs and owner is None:
            return []
        results = self.write_memory(user_id, [c for _, c in pairs], owner)
        return [op for (op, _), res in zip(pairs, results) if res is not None and res is not False]

    def claim_memory(self, user_id: str, owner: str, *, stale_after_s: float = 15.0) -> bool:
        """Take the user's extraction claim for ``owner`` (True; refreshed when ``owner`` holds
        it); False when another owner holds one renewed less than ``stale_after_s`` seconds ago."""
        return self.memory_claim(user_id, owner, "take", stale_after_s)

    def renew_memory(self, user_id: str, owner: str) -> bool:
        """Renew ``owner``'s claim (its time becomes now); False when ``owner`` does not hold it."""
        return self.memory_claim(user_id, owner, "renew", 0.0)

    def release_memory(self, user_id: str, owner: str) -> bool:
        """Drop ``owner``'s claim; False when ``owner`` did not hold it."""
        return self.memory_claim(user_id, owner, "release", 0.0)


# -- helpers -------------------------------------------------------------------------------

_NEWEST = RowQuery(states=VISIBLE_STATES, appended=True, newest=True, originals=True)
_OPEN_TURN = RowQuery(states=_LIVE_STATES, open_turn=True, appended=True, originals=True)


MAX_DEFERRED = 10_000
"""How many sessions opened with ``defer`` and not yet written one store object holds."""

T = TypeVar("T")

_DEFERRED_LOCK = threading.RLock()


def _held(store: BaseStore, name: str) -> "OrderedDict[tuple[str, str], Any]":
    """The per-session table ``name`` kept on the store object itself, created once (under a
    lock, so two threads never create two)."""
    held: "OrderedDict[tuple[str, str], Any] | None" = store.__dict__.get(name)
    if held is None:
        with _DEFERRED_LOCK:
            held = store.__dict__.setdefault(name, OrderedDict())
    return held


def _deferred(store: BaseStore) -> "OrderedDict[tuple[str, str], Head]":
    """The store's sessions opened with ``defer`` and not yet written (key → header to create)."""
    return _held(store, "_ctxwise_deferred")


def _defer(store: BaseStore, user_id: str, session_id: str, head: Head) -> None:
    held = _deferred(store)
    with _DEFERRED_LOCK:
        held[(user_id, session_id)] = head
        held.move_to_end((user_id, session_id))
        while len(held) > MAX_DEFERRED:
            held.popitem(last=False)


def deferred_or_raise(store: BaseStore, user_id: str, session_id: str, empty: T) -> T:
    """``empty`` for a session opened with ``defer`` and not yet written; else SessionNotFound."""
    if (user_id, session_id) in _deferred(store):
        return empty
    raise SessionNotFound(f"no session {session_id!r} for user {user_id!r}")


def _read_for_write(store: BaseStore, user_id: str, session_id: str,
                    *queries: RowQuery) -> tuple[Snapshot, Head | None]:
    """The snapshot a write builds on, and the header to create the session with first (None
    when it is stored): a session opened with ``defer`` and not yet written reads as empty."""
    try:
        return store.read_session(user_id, session_id, *queries), None
    except SessionNotFound:
        head = _deferred(store).get((user_id, session_id))
        if head is None:
            raise
        return Snapshot(head, tuple(() for _ in queries)), head


def _read_commit(store: BaseStore, user_id: str, session_id: str, queries: Sequence[RowQuery],
                 build: Callable[[Snapshot], Write]) -> Write:
    """:meth:`BaseStore.update_session`, or for a session opened with ``defer`` and not yet
    written, the read of :func:`_read_for_write` and the commit that creates it."""
    if (user_id, session_id) not in _deferred(store):
        return store.update_session(user_id, session_id, queries, build)
    snap, new = _read_for_write(store, user_id, session_id, *queries)
    write = build(snap)
    _commit(store, user_id, session_id, write, new)
    return write


def _commit(store: BaseStore, user_id: str, session_id: str, write: Write, new: Head | None) -> None:
    """``store.commit(write)``; with ``new``, the session is created with it in the same write."""
    if new is None:
        store.commit(user_id, session_id, write)
        return
    store.commit_new(user_id, session_id, Write(expected_version=0, head=new, create=True), write)
    with _DEFERRED_LOCK:
        _deferred(store).pop((user_id, session_id), None)


def _known(user_id: Any, session_id: Any) -> None:
    """SessionNotFound for a key no store can hold (a read by it would match nothing)."""
    if not checks.holdable(user_id, session_id):
        raise SessionNotFound(f"no session {session_id!r} for user {user_id!r}")


def _taken(messages: Sequence[Message]) -> RowQuery:
    return RowQuery(message_ids=tuple(m.id for m in messages), bodies=False)


def _base_version(head: Head, expected: int, session_id: str, *, rebase: bool) -> int:
    """The version a write builds on: ``expected`` when it is the stored one, the stored one
    when ``rebase``; else SessionConflict."""
    if head.version == expected:
        return expected
    if rebase:
        return head.version
    raise SessionConflict(f"session {session_id!r} is at version {head.version}, not {expected}: another writer "
                          "got in first; reload and retry")


def _check_sizes(sizes: Sequence[int] | None, n: int, op: str) -> None:
    if sizes is not None and len(sizes) != n:
        raise ValueError(f"{op}: {len(sizes)} sizes for {n} messages")


def _state_doc(state: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if state is None else dict(checks.json_doc(state, "session state"))


def _state_changed(state_doc: dict[str, Any] | None) -> frozenset[HeadField]:
    return frozenset() if state_doc is None else frozenset({"state"})


def _event_docs(events: Sequence[Any]) -> tuple[dict[str, Any], ...]:
    """Each event as a checked JSON copy. Raises TypeError (not a dict), NotStorable."""
    out = []
    for i, ev in enumerate(events):
        if not isinstance(ev, dict):
            raise TypeError(f"event {i}: expected a dict, got {type(ev).__name__}")
        out.append(checks.json_doc(ev, f"event {i}"))
    return tuple(out)


def _refuse_taken(rows: Sequence[StoredRow], messages: Sequence[Message], session_id: str) -> None:
    taken = {r.message_id for r in rows}
    for i, m in enumerate(messages):
        if m.id in taken:
            raise MessageNotStorable(i, "duplicate-message-id", f"id {m.id!r} is already stored in session "
                                                                f"{session_id!r}")


def _rows_of(after_seq: int, entries: Sequence[Entry]) -> tuple[TranscriptRow, ...]:
    """Transcript rows for ``entries``, numbered after ``after_seq``."""
    now = utc_now()
    return tuple(TranscriptRow(after_seq + 1 + i, e.role, e.text, copy.deepcopy(e.blocks), e.status,
                               list(e.message_ids), now) for i, e in enumerate(entries))


def _write(expected: int, head: Head, changed: frozenset[HeadField], state_doc: dict[str, Any] | None,
           **parts: Any) -> Write:
    """The write of ``head`` (with ``state_doc`` when given) one version on from ``expected``."""
    new = replace(head, version=expected + 1, updated_at=utc_now(),
                  state=head.state if state_doc is None else state_doc)
    return Write(expected_version=expected, head=new, changed=changed, **parts)


def _appended(head: Head, turn: tuple[tuple[int, Message], ...], messages: list[Message],
              bodies: list[dict[str, Any]], sizes: Sequence[int] | None
              ) -> tuple[tuple[StoredRow, ...], Head, frozenset[HeadField], tuple[TranscriptRow, ...],
                         tuple[tuple[int, Message], ...]]:
    """New rows for ``messages`` after ``head``, the header after them, the header fields that
    changed, the transcript rows they complete, and the open turn after them (``turn``: the
    open turn's ``(seq, original message)`` pairs by seq, as :data:`_OPEN_TURN` reads them)."""
    open_msgs = [m for _, m in turn]
    entries, still_open = derive(open_msgs, list(messages))
    first = head.last_seq + 1
    inserts = tuple(StoredRow(m.id, first + k, first + k, 0, "verbatim", m.role, None, body,
                              int(sizes[k]) if sizes is not None else None,
                              tuple(r.tool_use_id for r in m.tool_results))
                    for k, (m, body) in enumerate(zip(messages, bodies)))
    open_from = _open_from(open_msgs, [q for q, _ in turn], messages, still_open, first)
    new_head = replace(head, last_seq=head.last_seq + len(messages), transcript_seq=head.transcript_seq + len(entries),
                       open_from_seq=open_from)
    changed: frozenset[HeadField] = frozenset({"last_seq", "open_from_seq", "transcript_seq"})
    left = () if open_from is None else tuple(
        (q, m) for q, m in (*turn, *((first + k, m) for k, m in enumerate(messages))) if q >= open_from)
    return inserts, new_head, changed, _rows_of(head.transcript_seq, entries), left


@dataclass(frozen=True)
class OpenTurn:
    """The open turn of a session as this process left it: at ``version`` of the session
    created at ``created_at``, the ``(seq, original message)`` pairs :data:`_OPEN_TURN` reads
    there (the live appended rows from the header's ``open_from_seq`` on), by seq."""

    version: int
    created_at: datetime | None
    rows: tuple[tuple[int, Message], ...]


MAX_OPEN_TURNS = 1_000
"""How many sessions' open turns one store object keeps (the sessions it appended to last)."""

MAX_TURN_KEPT = 64
"""An open turn of more messages than this is not kept (the next append reads it)."""

MAX_TURN_BYTES = 256 * 2**10
"""An open turn holding more bytes than this (:func:`ctxwise.pool.held_bytes`) is not kept
either: the memory kept stays bounded by ``MAX_OPEN_TURNS * MAX_TURN_BYTES`` (250 MiB at
worst, a few MiB for ordinary turns), whatever the results weigh."""


class _StaleTurn(Exception):
    """The kept open turn is not the session's (another writer got in): read it again."""


def _open_turns(store: BaseStore) -> "OrderedDict[tuple[str, str], OpenTurn]":
    """The open turn of each session this store object appended to last (:func:`_keep_turn`)."""
    return _held(store, "_ctxwise_open_turns")


def _keep_turn(held: "OrderedDict[tuple[str, str], OpenTurn]", key: tuple[str, str], turn: OpenTurn) -> None:
    too_big = len(turn.rows) > MAX_TURN_KEPT or sum(held_bytes(m) for _, m in turn.rows) > MAX_TURN_BYTES
    with _DEFERRED_LOCK:
        if too_big:
            held.pop(key, None)
            return
        held[key] = turn
        held.move_to_end(key)
        while len(held) > MAX_OPEN_TURNS:
            held.popitem(last=False)


def _turn_read(snap: Snapshot, known: OpenTurn | None) -> tuple[tuple[int, Message], ...]:
    """The open turn of the session ``snap`` read: its rows when it read them, else the
    ``known`` turn this process left at that very version (the store accepts a write only on
    the version it read, so the rows are those); :class:`_StaleTurn` when the session moved."""
    if len(snap.rows) > 1:
        return tuple((r.seq, Message.model_validate(r.original)) for r in sorted(snap.rows[1], key=lambda r: r.seq))
    if known is None or known.version != snap.head.version or known.created_at != snap.head.created_at:
        raise _StaleTurn()
    return known.rows


def _open_from(open_msgs: list[Message], open_seqs: list[int], new: list[Message],
               still_open: list[Message], first_seq: int) -> int | None:
    """The seq of the first still-open message (an old open one or a new one), None if none."""
    if not still_open:
        return None
    first = still_open[0]
    for m, s in zip(open_msgs, open_seqs):
        if m is first:
            return s
    for k, m in enumerate(new):
        if m is first:
            return first_seq + k
    raise AssertionError("open message not found")  # pragma: no cover


def _newest(rows: Sequence[StoredRow], message_id: str | None, op: str) -> StoredRow | None:
    """The newest appended row still in the context (one query's rows), or None. Raises
    NotNewestMessage when ``message_id`` is given and is not that row's."""
    last = max(rows, key=lambda r: r.seq, default=None)
    if last is not None and message_id is not None and last.message_id != message_id:
        raise NotNewestMessage(op, last.message_id, message_id)
    return last


def _pick_original(found: Sequence[tuple[int, str]]) -> int | None:
    """Of ``(seq, state)`` rows holding one call id (newest first), the one ``original()``
    means: the oldest cleared one in the context (a later result cleared under the same id,
    while this one was still in the context, has a placeholder naming its message id too),
    else the newest in the context, else the newest."""
    cleared = [seq for seq, st in found if st == "cleared"]
    if cleared:
        return cleared[-1]
    hit = next((seq for seq, st in found if st in VISIBLE_STATES), None)
    if hit is not None:
        return hit
    return found[0][0] if found else None


def _prepare_changes(changes: list[Change]) -> list[tuple[Change, dict[str, Any] | None]]:
    """Check each change and serialize its body. Raises ValueError (a bad state), TypeError
    (not a change), MessageNotStorable."""
    prepared: list[tuple[Change, dict[str, Any] | None]] = []
    for i, ch in enumerate(changes):
        if isinstance(ch, Replace):
            if ch.state not in ("cleared", "pruned"):
                raise ValueError(f"change {i}: Replace state must be cleared or pruned, not {ch.state!r}")
            prepared.append((ch, checks.message_body(ch.current, i)))
        elif isinstance(ch, Hide):
            if ch.state not in HIDDEN_STATES:
                raise ValueError(f"change {i}: Hide state must be summarized or trimmed, not {ch.state!r}")
            prepared.append((ch, None))
        elif isinstance(ch, InsertSummary):
            prepared.append((ch, checks.message_body(ch.summary, i)))
        else:
            raise TypeError(f"change {i}: unknown change {type(ch).__name__}")
    return prepared


def _referenced(changes: list[Change], sizes: dict[str, int] | None) -> tuple[str, ...]:
    """Every message id ``apply`` reads: those changed, anchors, new summary ids, sized ids."""
    ids: list[str] = []
    for ch in changes:
        if isinstance(ch, Replace):
            ids.append(ch.message_id)
        elif isinstance(ch, Hide):
            ids.extend(ch.message_ids)
        elif isinstance(ch, InsertSummary):
            ids.extend((ch.anchor_message_id, ch.summary.id))
    ids.extend(sizes or {})
    return tuple(dict.fromkeys(i for i in ids if checks.holdable(i)))


class _ApplyPlan:
    """The rows one ``apply`` writes, built change by change over what was read (``found``)."""

    def __init__(self, head: Head, found: dict[str, StoredRow], session_id: str) -> None:
        self.found, self.session_id = found, session_id
        self.last_seq = head.last_seq
        self.inserts: list[StoredRow] = []
        self.updates: dict[str, RowUpdate] = {}

    def _has(self, mid: str) -> bool:
        return mid in self.found or any(r.message_id == mid for r in self.inserts)

    def _update(self, mid: str, **values: Any) -> None:
        for k, r in enumerate(self.inserts):
            if r.message_id == mid:  # a summary inserted by this same write
                self.inserts[k] = replace(r, **values)
                return
        self.updates[mid] = replace(self.updates.get(mid) or RowUpdate(mid), **values)

    def add(self, i: int, ch: Change, body: dict[str, Any] | None) -> None:
        """Add change ``i`` (with its serialized ``body``). Raises ValueError for an unknown id."""
        if isinstance(ch, Replace):
            if not self._has(ch.message_id):
                raise ValueError(f"change {i}: no message {ch.message_id!r} in session {self.session_id!r}")
            self._update(ch.message_id, current=body, state=ch.state)
        elif isinstance(ch, Hide):
            wanted = sorted(set(ch.message_ids))
            if not all(self._has(m) for m in wanted):
                raise ValueError(f"change {i}: some of {wanted} are not in session {self.session_id!r}")
            for mid in wanted:
                self._update(mid, state=ch.state)
        elif isinstance(ch, InsertSummary):
            self._insert(i, ch, body)

    def _insert(self, i: int, ch: InsertSummary, body: dict[str, Any] | None) -> None:
        anchor = self.found.get(ch.anchor_message_id) or next(
            (r for r in self.inserts if r.message_id == ch.anchor_message_id), None)
        if anchor is None:
            raise ValueError(f"change {i}: no anchor message {ch.anchor_message_id!r}")
        if self._has(ch.summary.id):
            raise ValueError(f"change {i}: message id {ch.summary.id!r} already stored")
        self.last_seq += 1
        self.inserts.append(StoredRow(ch.summary.id, self.last_seq, anchor.anchor_seq, self.last_seq, "verbatim",
                                      ch.summary.role, None, body, None))

    def set_sizes(self, sizes: dict[str, int]) -> None:
        """Store each size. Raises ValueError for an id not in the session."""
        for mid, n in sizes.items():
            if not self._has(mid):
                raise ValueError(f"sizes: no message {mid!r} in session {self.session_id!r}")
            self._update(mid, size=int(n))


def _with_metadata(m: Message, metadata: dict[str, Any], beside: list[Any] | None) -> Message:
    """``m`` with ``metadata``'s top-level keys set and, unless None, ``beside`` as its
    ``metadata["ctxwise"]["beside"]``."""
    md = {**m.metadata, **metadata}
    if beside is not None:
        md = Marker.with_(md, beside=list(beside))
    return m.model_copy(update={"metadata": md})


def _entry_id(entry_id: Any) -> int | None:
    """A memory entry id as a backend holds it (None: not an id, so not found)."""
    if isinstance(entry_id, bool):
        return None
    if isinstance(entry_id, str) and entry_id.strip().isascii() and entry_id.strip().isdigit():
        entry_id = int(entry_id)
    if isinstance(entry_id, int) and 0 < entry_id < 2**63:
        return entry_id
    return None


def _add_entry(user_id: str, text: str, kind: str, supersedes_id: int | None, source_session_id: str | None,
               source_message_id: str | None) -> AddEntry:
    checks.json_doc([user_id, text, kind, source_session_id, source_message_id], "memory entry")
    return AddEntry(text, kind, supersedes_id, source_session_id, source_message_id)


def _memory_change(user_id: str, op: Any, source_session_id: str | None,
                   source_message_id: str | None) -> MemoryChange | None:
    """The change one ``Op`` makes (None: skipped: a NOOP, or an id that is not one)."""
    if op.op == "ADD":
        return _add_entry(user_id, op.text or "", op.kind or "preference", None, source_session_id, source_message_id)
    if op.op == "SUPERSEDE":
        ident = _entry_id(op.target_id)
        checks.json_doc([user_id, op.text or "", op.kind, source_session_id, source_message_id], "memory entry")
        return None if ident is None else SupersedeEntry(ident, op.text or "", op.kind, source_session_id,
                                                         source_message_id)
    if op.op == "RETRACT":
        ident = _entry_id(op.target_id)
        return None if ident is None else RetractEntry(ident)
    if op.op == "CLEAR":
        return ClearEntries()
    return None


def busy(user_id: str, owner: str) -> MemoryBusy:
    """The error of a memory write whose ``owner`` lost the user's claim."""
    return MemoryBusy(f"memory claim of user {user_id!r} was taken over from {owner!r} (its lease ran out); "
                      "nothing of this extraction was written")


__all__ = ["BaseStore", "utc_now", "busy", "MAX_REBASES"]
