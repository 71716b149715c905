"""The values a store backend's primitives take and return (see :class:`~ctxwise.store.base.BaseStore`).

A backend stores three things per session: a header (:class:`Head`), context rows
(:class:`StoredRow`, one per message ever appended or inserted, keyed by ``message_id``), and
two append-only logs (transcript rows, event dicts). Bodies are JSON dicts (a message's
``model_dump(mode="json")``), already checked storable; the backend keeps them as given.
The base class computes every write; the backend applies a :class:`Write` whole or not at
all. Nothing here imports a database driver.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from .types import TranscriptRow


@dataclass(frozen=True)
class Head:
    """A session's header: its provider and policy, ``version`` (committed writes, 0 when
    new), the engine's ``state`` dict, and three counters the base class keeps: ``last_seq``
    (the highest row ``seq`` given out), ``open_from_seq`` (the ``seq`` of the first message of
    the turn still waiting for its reply; None when the turn is closed) and ``transcript_seq``
    (transcript rows written). Times are UTC."""

    provider: str
    policy: dict[str, Any]
    version: int = 0
    state: dict[str, Any] = field(default_factory=dict)
    last_seq: int = 0
    open_from_seq: int | None = None
    transcript_seq: int = 0
    created_at: datetime | None = None
    updated_at: datetime | None = None


@dataclass(frozen=True)
class StoredRow:
    """One context row as the backend holds it.

    ``seq``: its insertion number (1-based, per session); context order is
    ``(anchor_seq, generation)`` (an appended message has ``anchor_seq == seq`` and
    ``generation == 0``; a summary takes its anchor's ``anchor_seq`` and its own ``seq`` as
    generation). ``state``: one of :data:`~ctxwise.store.STATES`. ``current``: the edited body
    (None: unedited, the original is what the model reads). ``original``: the body as first
    stored; a read leaves it None unless the query asked for originals or ``current`` is None.
    ``size``: the engine's size in the policy unit (None: not stored). ``tool_use_ids``: the
    call ids whose results the message holds."""

    message_id: str
    seq: int
    anchor_seq: int
    generation: int
    state: str
    role: str
    current: dict[str, Any] | None = None
    original: dict[str, Any] | None = None
    size: int | None = None
    tool_use_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class RowQuery:
    """Which rows a read returns: those matching every given filter, in any order.

    ``states``: only rows in these states. ``message_ids``: only these ids. ``tool_use_id``:
    only rows holding a result for that call id. ``open_turn``: only rows whose ``seq`` is at
    least the header's ``open_from_seq`` as read in the same snapshot (none when it is None).
    ``appended``: only appended rows (``generation == 0``). ``newest``: of the matches, only the
    one with the highest ``seq``. ``bodies``: False leaves ``current`` and ``original`` None
    (ids, states and sizes only). ``originals``: the original body of every returned row,
    edited ones included (else only of rows whose ``current`` is None)."""

    states: tuple[str, ...] | None = None
    message_ids: tuple[str, ...] | None = None
    tool_use_id: str | None = None
    open_turn: bool = False
    appended: bool = False
    newest: bool = False
    bodies: bool = True
    originals: bool = False


@dataclass(frozen=True)
class Snapshot:
    """What one read saw, in one consistent snapshot: the header and, per query given, its rows."""

    head: Head
    rows: tuple[tuple[StoredRow, ...], ...] = ()


@dataclass(frozen=True)
class RowUpdate:
    """New values for the existing row ``message_id``; a None field stays as it is."""

    message_id: str
    state: str | None = None
    current: dict[str, Any] | None = None
    original: dict[str, Any] | None = None
    size: int | None = None


HeadField = Literal["provider", "policy", "state", "last_seq", "open_from_seq", "transcript_seq"]


@dataclass(frozen=True)
class Write:
    """One atomic write of a session, computed by the base class.

    With ``create``: store ``head`` (version 0) as a new session unless one with the key
    exists (then nothing); the other fields are empty. Otherwise: fail with
    :class:`~ctxwise.errors.SessionConflict` and store nothing unless the stored version is
    ``expected_version``; else, in one transaction, add ``inserts`` (new rows), apply ``updates``
    (rows that exist), set every row in a visible state to ``reset`` when ``reset_visible``,
    add ``transcript`` rows and ``events`` (JSON dicts, in order) and store ``head`` (whose
    ``version`` is ``expected_version + 1``). ``changed`` names the header fields that differ
    from the stored ones (``version`` and ``updated_at`` always change); a backend may write
    only those."""

    expected_version: int
    head: Head
    changed: frozenset[HeadField] = frozenset()
    inserts: tuple[StoredRow, ...] = ()
    updates: tuple[RowUpdate, ...] = ()
    reset_visible: bool = False
    transcript: tuple[TranscriptRow, ...] = ()
    events: tuple[dict[str, Any], ...] = ()
    create: bool = False


@dataclass(frozen=True)
class MemoryQuery:
    """Which of a user's memory entries a read returns, oldest (lowest id) first: active ones
    only unless ``include_inactive``; without those whose ``source_session_id`` is
    ``exclude_session``; only those created at or before ``created_before`` (entries with no
    time are kept)."""

    include_inactive: bool = False
    exclude_session: str | None = None
    created_before: datetime | None = None


@dataclass(frozen=True)
class AddEntry:
    """Add an active memory entry; its result is the new ``MemoryEntry`` (with its new int id)."""

    text: str
    kind: str
    supersedes_id: int | None = None
    source_session_id: str | None = None
    source_message_id: str | None = None


@dataclass(frozen=True)
class SupersedeEntry:
    """Mark the active entry ``entry_id`` ``superseded`` and add ``text`` in its place (``kind``
    None: the old entry's kind); its result is the new entry, or None (nothing written for this
    change) when the user has no active entry with that id."""

    entry_id: int
    text: str
    kind: str | None = None
    source_session_id: str | None = None
    source_message_id: str | None = None


@dataclass(frozen=True)
class RetractEntry:
    """Mark the active entry ``entry_id`` ``retracted``; its result is True, or False when the
    user has no active entry with that id."""

    entry_id: int


@dataclass(frozen=True)
class ClearEntries:
    """Mark every active entry of the user ``retracted`` (``purge``: delete all the user's
    entries); its result is the count."""

    purge: bool = False


MemoryChange = AddEntry | SupersedeEntry | RetractEntry | ClearEntries
"""One change of a :meth:`~ctxwise.store.base.BaseStore.write_memory` batch."""

ClaimAction = Literal["take", "renew", "release"]
"""What :meth:`~ctxwise.store.base.BaseStore.memory_claim` does with a user's claim."""

__all__ = [
    "Head", "StoredRow", "RowQuery", "Snapshot", "RowUpdate", "Write", "HeadField", "MemoryQuery",
    "AddEntry", "SupersedeEntry", "RetractEntry", "ClearEntries", "MemoryChange", "ClaimAction",
]
