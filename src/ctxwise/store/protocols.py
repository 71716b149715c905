"""The seams between the engine and persistence: :class:`SessionStore` and :class:`MemoryStore`.

A backend implements both (``SqlStore`` on SQLite / PostgreSQL, ``InMemoryStore`` in one
process), most simply as a :class:`~ctxwise.store.BaseStore` subclass that writes eight
primitives and inherits every call below; :func:`ctxwise.testing.validate_store` runs the
conformance suite against any of them. Modelled on openai-agents-python's ``Session`` protocol
and langgraph's ``BaseCheckpointSaver``: small typed calls, the semantics fixed by the suite
rather than by one implementation.

Contracts every implementation keeps:

* every write is all-or-nothing and bumps the session ``version`` by one; a write with a
  stale ``expected_version`` raises :class:`~ctxwise.errors.SessionConflict` and stores nothing;
* every call is scoped by ``user_id``: another user's session is
  :class:`~ctxwise.errors.SessionNotFound`, another user's memory entry does not exist;
* a message, id or text the backend cannot hold (ids over 255 characters, NUL characters, lone
  surrogates) is refused *before* anything is written with
  :class:`~ctxwise.errors.MessageNotStorable` naming its index in the batch;
* the store knows nothing of compaction: it stores the typed changes of
  :mod:`ctxwise.changes` it is handed, and the engine's own small ``state`` dict as given.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable, Protocol, Sequence, runtime_checkable

from ..changes import Change
from ..messages import Message
from .types import SessionInfo, SessionState, TranscriptRow


@runtime_checkable
class SessionStore(Protocol):
    """Sessions: the context the model reads, the transcript a person sees, the events.

    Sizes (``sizes``) are the engine's per-message sizes in the session's policy unit, stored
    beside each row so a reopen does not count again; ``state`` is a small JSON dict the
    engine persists with a write (its fact book, failed-summary keys, id counter) and gets back
    from :meth:`load` (``SessionState.state``), merged key by key.
    """

    def open_session(self, user_id: str, session_id: str, *, provider: str,
                     policy: dict[str, Any], defer: bool = False) -> SessionState:
        """Create the session at version 0 if missing, else load it (the *stored* provider and
        policy are returned; the engine decides what a difference means). Visible rows only.
        ``defer``: a missing session is stored by its first write, not now (a refused first
        write leaves nothing behind); see :meth:`ctxwise.store.BaseStore.open_session`."""
        ...

    def load(self, user_id: str, session_id: str, *, include_hidden: bool = False) -> SessionState:
        """The session: visible context rows in context order (all rows, hidden included,
        when ``include_hidden``), its policy, version and persisted ``state``. O(visible rows)
        by default. Raises SessionNotFound."""
        ...

    def version(self, user_id: str, session_id: str) -> int:
        """The session's current version (one indexed read). Raises SessionNotFound."""
        ...

    def append(self, user_id: str, session_id: str, messages: list[Message], *, expected_version: int,
               sizes: Sequence[int] | None = None, state: dict[str, Any] | None = None) -> int:
        """Append ``messages`` (k context rows, state ``verbatim``) and the transcript rows they
        complete, in one write. Returns the new version. Raises SessionConflict,
        SessionNotFound, MessageNotStorable (a message id already stored, text the database
        cannot hold), TypeError (not a Message)."""
        ...

    def apply(self, user_id: str, session_id: str, changes: list[Change], events: list[dict[str, Any]], *,
              expected_version: int, sizes: dict[str, int] | None = None,
              state: dict[str, Any] | None = None) -> int:
        """Apply typed changes (Replace, Hide, InsertSummary) and append ``events`` in one
        write; ``sizes`` maps the message ids written to their new size. Returns the new
        version. Raises SessionConflict, SessionNotFound, ValueError (unknown id, bad state)."""
        ...

    def pop(self, user_id: str, session_id: str, *, expected_version: int,
            events: list[dict[str, Any]] | None = None, state: dict[str, Any] | None = None,
            message_id: str | None = None, then_append: list[Message] | None = None,
            sizes: Sequence[int] | None = None) -> tuple[int, Message | None]:
        """Retract the last appended message still in the context (state ``popped``; its id
        stays taken). The transcript gets a ``retracted`` row naming it. Returns ``(version,
        message)``; ``(version, None)`` and no write when there is nothing to pop. With
        ``message_id``, raises :class:`~ctxwise.errors.NotNewestMessage` (nothing written) unless
        that is the message. With
        ``then_append`` (and their ``sizes``), those messages are appended in the same write,
        as :meth:`append` would (the last message replaced in one version bump);
        MessageNotStorable for one of them, nothing written."""
        ...

    def amend(self, user_id: str, session_id: str, *, expected_version: int, metadata: dict[str, Any],
              beside: list[Any] | None = None, message_id: str | None = None, size: int | None = None, events: list[dict[str, Any]] | None = None,
              state: dict[str, Any] | None = None) -> tuple[int, Message | None]:
        """Set ``metadata``'s top-level keys (and, unless None, ``beside`` as
        ``metadata["ctxwise"]["beside"]``) on the newest appended message still in the
        context (original and current body; role and blocks unchanged: no transcript row), its
        stored ``size`` when given, and store ``events``. Returns ``(version, the amended
        original)``; ``(version, None)`` and no write when the context is empty. With
        ``message_id``, raises NotNewestMessage (nothing written) unless that is the message;
        MessageNotStorable when the metadata makes it unstorable."""
        ...

    def clear(self, user_id: str, session_id: str, *, expected_version: int,
              events: list[dict[str, Any]] | None = None, state: dict[str, Any] | None = None) -> int:
        """Hide every context row (state ``reset``; originals kept) and add a ``cleared`` row to
        the transcript. Returns the new version."""
        ...

    def set_policy(self, user_id: str, session_id: str, *, provider: str, policy: dict[str, Any],
                   expected_version: int, events: list[dict[str, Any]] | None = None,
                   sizes: dict[str, int] | None = None, state: dict[str, Any] | None = None) -> int:
        """Replace the stored provider and policy (an explicit migration). Returns the version."""
        ...

    def events(self, user_id: str, session_id: str) -> list[dict[str, Any]]:
        """Every event of the session, oldest first, as given to the writes."""
        ...

    def transcript(self, user_id: str, session_id: str) -> list[TranscriptRow]:
        """The transcript rows, in order."""
        ...

    def original(self, user_id: str, session_id: str, tool_use_id: str | None = None, *,
                 message_id: str | None = None) -> Message | None:
        """A message as first stored: by ``message_id``, or the one holding the result of
        ``tool_use_id`` (when a session reuses a call id: the one in the current context, else
        the latest). None when there is none."""
        ...

    def list_sessions(self, user_id: str | None = None, *, limit: int = 100,
                      offset: int = 0, user_prefix: str | None = None) -> list[SessionInfo]:
        """Sessions, most recently updated first, ``limit`` from ``offset``; one user's only
        when ``user_id`` is given; only users whose id starts with ``user_prefix`` (taken
        literally, no wildcards) when that is given."""
        ...

    def close(self) -> None:
        """Release connections; the store must not be used afterwards."""
        ...


@runtime_checkable
class MemoryStore(Protocol):
    """Long-term user memory (``MemoryEntry`` rows) and the per-user extraction claim.

    Entries are never rewritten: a supersede adds an entry and marks the old one ``superseded``,
    a retraction marks it ``retracted``. An id that is not one of the user's active entries
    (another user's, or not an id at all) is simply not found.
    """

    def list_memory(self, user_id: str, *, include_inactive: bool = False, exclude_session: str | None = None,
                    created_before: datetime | None = None) -> list[Any]:
        """The user's entries, oldest first (active only unless ``include_inactive``); without
        those written by session ``exclude_session``, and only those created at or before
        ``created_before`` (UTC; entries with no time are kept) when these are given. The
        filters run in the store, so a session open reads only what it can show."""
        ...

    def add_memory(self, user_id: str, text: str, kind: str = "preference", *,
                   supersedes_id: Any = None, source_session_id: str | None = None,
                   source_message_id: str | None = None) -> Any:
        """Store one active entry; returns it with its new id."""
        ...

    def supersede_memory(self, user_id: str, entry_id: Any, text: str, kind: str | None = None, *,
                         source_session_id: str | None = None, source_message_id: str | None = None) -> Any:
        """Mark ``entry_id`` superseded and add ``text`` in its place, in one write; raises
        MemoryEntryNotFound when the user has no active entry with that id."""
        ...

    def retract_memory(self, user_id: str, entry_id: Any) -> bool:
        """Mark one entry retracted; False when the user has no active entry with that id."""
        ...

    def clear_memory(self, user_id: str, *, purge: bool = False) -> int:
        """Retract every active entry (``purge``: delete all the user's entries); the count."""
        ...

    def apply_memory(self, user_id: str, ops: Iterable[Any], *, source_session_id: str | None = None,
                     source_message_id: str | None = None, owner: str | None = None) -> list[Any]:
        """Apply ``Op``s (ADD / SUPERSEDE / RETRACT / CLEAR; NOOP skipped) in one write;
        returns those that changed something. With ``owner``: only while ``owner`` holds the
        user's claim, checked (and the claim renewed) in the same write, so a holder whose
        claim was taken over writes nothing; raises :class:`~ctxwise.errors.MemoryBusy` then."""
        ...

    def claim_memory(self, user_id: str, owner: str, *, stale_after_s: float = 15.0) -> bool:
        """Take the user's extraction claim for ``owner`` (True; refreshed when ``owner`` holds
        it already); False when another owner holds one renewed less than ``stale_after_s``
        seconds ago. A claim is a lease: its holder renews it (:meth:`renew_memory`) while it
        works, so only a holder that died (or stalled longer than the lease) loses it."""
        ...

    def renew_memory(self, user_id: str, owner: str) -> bool:
        """Renew ``owner``'s claim (its time becomes now); False when ``owner`` does not hold
        it any more (taken over, or released): a renewal never takes a claim."""
        ...

    def release_memory(self, user_id: str, owner: str) -> bool:
        """Drop ``owner``'s claim; False when ``owner`` did not hold it."""
        ...
