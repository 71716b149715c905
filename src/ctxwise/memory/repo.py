"""Long-term user memory through a :class:`~ctxwise.store.MemoryStore` (no SQL here).

Every call takes ``db``: a MemoryStore (``SqlStore``, ``InMemoryStore``, or anything that
implements the protocol) or a URL string (a ``SqlStore`` is opened and closed around the
call). Every operation is scoped by ``user_id``.

Entries are never rewritten: a supersede adds a new entry (``supersedes_id`` = the old id)
and marks the old one ``superseded``; a retraction marks it ``retracted``; a clear retracts
every active entry (or deletes the user's entries with ``purge=True``).

Two extractions for one user never run at once: :func:`extract_and_store` takes the store's
per-user claim, decides with :func:`ctxwise.memory.user.decide` *outside* any transaction
(pattern work never holds a lock other users wait on), applies each utterance's ops in one
write, then releases. The claim is a lease of ``ttl_s`` seconds (default :data:`LEASE_S`): a
heartbeat thread renews it every ``ttl_s / 3`` while the extraction works, so a slow decider
(an LLM call) keeps it as long as it runs, and the claim of a process that died (SIGKILL, a
lost machine) is taken over by the next extraction within one lease. Each write checks, in its
own transaction, that the claim is still this extraction's: a holder that stalled past its lease
and was taken over writes nothing (:class:`MemoryBusy`).

Example::

    store = SqlStore("sqlite:///ctxwise.db")
    extract_and_store(store, "u1", ["I prefer over-ear headphones."])
    [e.text for e in list_memory(store, "u1")]     # ['I prefer over-ear headphones.']
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Iterable

from ..errors import MemoryBusy, MemoryEntryNotFound  # re-exported: they live in ctxwise.errors
from ..messages import Message
from ..units import is_user_input
from .facts import Counter
from .user import MemoryEntry, Op, decide, render_user_memory

STATUSES = ("active", "superseded", "retracted")


@contextmanager
def _store(db: Any) -> Iterator[Any]:
    """The MemoryStore behind ``db`` (a URL opens a ``SqlStore`` for the call)."""
    if isinstance(db, str):
        from ..store import SqlStore

        store = SqlStore(db)
        try:
            yield store
        finally:
            store.close()
    else:
        yield db


def list_memory(db: Any, user_id: str, *, include_inactive: bool = False, exclude_session: str | None = None,
                created_before: datetime | None = None) -> list[MemoryEntry]:
    """The user's entries, oldest first: ``[MemoryEntry]`` (active only by default); without
    those session ``exclude_session`` wrote, and none created after ``created_before`` (UTC),
    when given (filtered by the store)."""
    with _store(db) as s:
        return list(s.list_memory(user_id, include_inactive=include_inactive, exclude_session=exclude_session,
                                  created_before=created_before))


def add_memory(db: Any, user_id: str, text: str, kind: str = "preference", *,
               source_session_id: str | None = None, source_message_id: str | None = None) -> MemoryEntry:
    """Store ``text`` as a new active entry as given (the explicit API; no decision rules)."""
    with _store(db) as s:
        entry: MemoryEntry = s.add_memory(user_id, text, kind, source_session_id=source_session_id,
                                          source_message_id=source_message_id)
        return entry


def supersede_memory(db: Any, user_id: str, entry_id: Any, text: str, kind: str | None = None) -> MemoryEntry:
    """Replace entry ``entry_id`` with ``text``; raises :class:`MemoryEntryNotFound`."""
    with _store(db) as s:
        entry: MemoryEntry = s.supersede_memory(user_id, entry_id, text, kind)
        return entry


def retract_memory(db: Any, user_id: str, entry_id: Any) -> bool:
    """Retract one entry; False when the user has no active entry with that id (an id that is
    not a number is simply not found)."""
    with _store(db) as s:
        return bool(s.retract_memory(user_id, entry_id))


def clear_memory(db: Any, user_id: str, *, purge: bool = False) -> int:
    """Retract all of the user's entries (``purge=True`` deletes them); returns the count."""
    with _store(db) as s:
        return int(s.clear_memory(user_id, purge=purge))


def user_memory_block(db: Any, user_id: str, budget: int, counter: Counter | None = None) -> Message | None:
    """The pinned block for the start of a session: :func:`render_user_memory` over
    :func:`list_memory` (None when the user has no active entry)."""
    return render_user_memory(list_memory(db, user_id), budget, counter)


# -- the claim --------------------------------------------------------------------------------


def default_owner() -> str:
    """``host:pid:random``: a claim owner unique to this call."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


LEASE_S = 15.0
"""Seconds a memory claim lives without renewal: the longest a dead holder blocks its user.
Its holder renews it every third of that, so a live one loses it only when no renewal got
through for two thirds of a lease (10 s)."""

WAIT_S = LEASE_S + 5.0
"""How long :func:`extract_and_store` waits for a claim by default: longer than a lease, so the
claim of a holder that died is taken over within one wait."""


def claim(db: Any, user_id: str, owner: str, ttl_s: float = LEASE_S) -> bool:
    """Take the user's memory claim for ``owner``: True when taken (or already held by
    ``owner``, whose claim time is refreshed), False when another owner holds a claim renewed
    less than ``ttl_s`` seconds ago. A claim not renewed for ``ttl_s`` is taken over (its holder
    is presumed dead): a holder working longer calls :func:`renew` (or :class:`Heartbeat`)."""
    with _store(db) as s:
        return bool(s.claim_memory(user_id, owner, stale_after_s=ttl_s))


def renew(db: Any, user_id: str, owner: str) -> bool:
    """Renew ``owner``'s claim; False when ``owner`` does not hold it any more."""
    with _store(db) as s:
        return bool(s.renew_memory(user_id, owner))


def release(db: Any, user_id: str, owner: str) -> bool:
    """Drop ``owner``'s claim on the user; False when ``owner`` did not hold it."""
    with _store(db) as s:
        return bool(s.release_memory(user_id, owner))


class Heartbeat:
    """Renews ``owner``'s claim on ``user_id`` in ``store`` every ``every_s`` seconds on a
    daemon thread, from :meth:`start` until :meth:`stop`. ``lost`` becomes True (and the
    renewing stops) once a renewal finds the claim no longer ``owner``'s. A renewal that fails
    (the database briefly unreachable) is retried at the next beat; if none succeeds within the
    lease the claim may be taken over, and the next write finds that out (see
    ``apply_memory(owner=...)``)."""

    def __init__(self, store: Any, user_id: str, owner: str, every_s: float) -> None:
        self.store, self.user_id, self.owner, self.every_s = store, user_id, owner, every_s
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"ctxwise-memory-claim-{owner}", daemon=True)

    def start(self) -> "Heartbeat":
        """Start renewing (once: a second call does nothing)."""
        if self._thread.ident is None and not self._stop.is_set():
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                held = self.store.renew_memory(self.user_id, self.owner)
            except Exception:  # noqa: BLE001 - a transient store error: try again at the next beat
                continue
            if not held:
                self.lost = True
                return

    def stop(self) -> None:
        """Stop renewing (waits for a renewal in progress)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


@dataclass
class StoredExtraction:
    """What :func:`extract_and_store` did: ``ops`` decided (one per clause, NOOPs included),
    ``applied`` the ops that changed an entry, ``entries`` the user's active entries afterwards,
    ``owner`` the claim owner used and ``waited_s`` the seconds spent waiting for the claim."""

    ops: list[Op] = field(default_factory=list)
    applied: list[Op] = field(default_factory=list)
    entries: list[MemoryEntry] = field(default_factory=list)
    owner: str = ""
    waited_s: float = 0.0


def _readable(u: str | Message) -> tuple[str, str | None] | None:
    """``(text, source message id)`` of one utterance, None for a message that is not user input."""
    if isinstance(u, Message):
        if not is_user_input(u) or u.kind is not None:
            return None
        return u.text, u.id
    return str(u), None


def _read_ahead(store: Any, user_id: str, texts: list[tuple[str, str | None]], decide_one: Callable[..., list[Op]],
                ) -> tuple[list[MemoryEntry], list[list[Op]]]:
    """The optimistic read of :func:`extract_and_store`: the user's entries as one read shows
    them, and the ops decided on them for ``texts`` in order, up to and including the first
    utterance whose ops would write (all of them when none would)."""
    entries = store.list_memory(user_id)
    decided: list[list[Op]] = []
    for text, _mid in texts:
        ops = decide_one(text, entries)
        decided.append(ops)
        if any(op.op != "NOOP" for op in ops):
            break
    return entries, decided


def extract_and_store(
    db: Any,
    user_id: str,
    utterances: Iterable[str | Message],
    *,
    session_id: str | None = None,
    owner: str | None = None,
    ttl_s: float = LEASE_S,
    wait_s: float = WAIT_S,
    poll_s: float = 0.05,
    threshold: float | None = None,
    on_claimed: Callable[[], None] | None = None,
    decider: Callable[..., list[Op]] | None = None,
    optimistic: bool = False,
) -> StoredExtraction:
    """Decide and store the memory ops implied by ``utterances`` for ``user_id``.

    ``utterances`` are strings (taken as the user's words) or messages (only user input is
    read: assistant, tool, system and ctxwise-made messages are skipped; the message id is
    recorded as ``source_message_id``). The claim is awaited up to ``wait_s`` seconds
    (polling every ``poll_s``), then :class:`MemoryBusy` is raised. The claim is a lease of
    ``ttl_s`` seconds, renewed every ``ttl_s / 3`` by a :class:`Heartbeat` while this call works
    (a claim not renewed for ``ttl_s`` is taken over); each write checks it still holds the
    claim and raises :class:`MemoryBusy` (writing nothing more) when it was taken over. Decisions see the
    entries as they are once the claim is held and run outside any transaction; each
    utterance's ops are applied in one write, so two concurrent extractions for one user give
    the same result as two in a row (a repeated preference is stored once). ``on_claimed`` is
    called right after the claim is taken (a hook for metrics and tests). ``decider`` replaces
    :func:`ctxwise.memory.user.decide` (same call: ``decider(text, entries, threshold=...)``;
    e.g. an :class:`ctxwise.memory.llm.LLMMemoryDecider`). The claim is released on every
    exit path.

    ``optimistic``: decide first on the entries as one read shows them, without the claim.
    When no op would write (the usual user turn), nothing is written and no claim is taken:
    the same result as this extraction run alone at that read (``owner`` is then ``""``).
    Otherwise the claim is taken and the entries read again under it; the decisions already
    made are kept when the entries are unchanged (the decider is not called twice), else made
    again. The heartbeat runs only while a decider is called under the claim.
    """
    kw = {} if threshold is None else {"threshold": threshold}
    chosen = decider or decide

    def decide_one(text: str, entries: list[MemoryEntry]) -> list[Op]:
        return chosen(text, entries, **kw)

    texts = [t for t in map(_readable, utterances) if t is not None]
    with _store(db) as store:
        ahead: tuple[list[MemoryEntry], list[list[Op]]] | None = None
        if optimistic:
            ahead = _read_ahead(store, user_id, texts, decide_one)
            if all(op.op == "NOOP" for ops in ahead[1] for op in ops):
                return StoredExtraction(ops=[op for ops in ahead[1] for op in ops], entries=ahead[0])
        owner = owner or default_owner()
        out = StoredExtraction(owner=owner, waited_s=_await_claim(store, user_id, owner, ttl_s, wait_s, poll_s))
        beat = Heartbeat(store, user_id, owner, ttl_s / 3)
        if not optimistic:
            beat.start()
        try:
            if on_claimed is not None:
                on_claimed()
            entries = store.list_memory(user_id)
            reuse = ahead[1] if ahead is not None and ahead[0] == entries else []
            _claimed(store, user_id, texts, reuse, decide_one, entries, beat, session_id, out, ttl_s)
        finally:
            beat.stop()
            store.release_memory(user_id, owner)
        return out


def _await_claim(store: Any, user_id: str, owner: str, ttl_s: float, wait_s: float, poll_s: float) -> float:
    """Take the user's claim for ``owner``, polling every ``poll_s``; the seconds waited.
    Raises MemoryBusy after ``wait_s``."""
    start = time.monotonic()
    while not store.claim_memory(user_id, owner, stale_after_s=ttl_s):
        if time.monotonic() - start > wait_s:
            raise MemoryBusy(f"memory of user {user_id!r} is being extracted by another process; "
                             f"waited {wait_s:g}s")
        time.sleep(poll_s)
    return time.monotonic() - start


def _claimed(store: Any, user_id: str, texts: list[tuple[str, str | None]], reuse: list[list[Op]],
             decide_one: Callable[..., list[Op]], entries: list[MemoryEntry], beat: Heartbeat,
             session_id: str | None, out: StoredExtraction, ttl_s: float) -> None:
    """:func:`extract_and_store` under the claim: each utterance's ops (``reuse``'s when given,
    else decided on ``entries`` with the heartbeat running) applied in one write; fills ``out``."""
    for k, (text, mid) in enumerate(texts):
        if beat.lost:  # taken over while this call stalled: decide nothing more
            raise MemoryBusy(f"memory claim of user {user_id!r} was taken over from {beat.owner!r} "
                             f"(its lease of {ttl_s:g}s ran out)")
        if k < len(reuse):
            ops = reuse[k]
        else:
            beat.start()
            ops = decide_one(text, entries)
        out.ops.extend(ops)
        if any(op.op != "NOOP" for op in ops):
            out.applied.extend(store.apply_memory(user_id, ops, source_session_id=session_id,
                                                  source_message_id=mid, owner=beat.owner))
            entries = store.list_memory(user_id)
    out.entries = entries


__all__ = [
    "MemoryBusy", "MemoryEntryNotFound", "StoredExtraction", "list_memory", "add_memory",
    "supersede_memory", "retract_memory", "clear_memory", "user_memory_block", "claim", "renew", "release",
    "Heartbeat", "LEASE_S", "WAIT_S", "extract_and_store", "default_owner",
]
