"""What a session has recorded, read back: :class:`SessionRecords` (a base of
:class:`ctxwise.Session`): the transcript, the events, the original of a message. Reads only;
every call is one store query."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Protocol

from .messages import JSONObject, Message

if TYPE_CHECKING:
    from datetime import datetime

    from .compaction.events import CompactionEvent
    from .core.prepare import Prepared
    from .core.view import Deps, SessionView
    from .memory.session import SessionMemory
    from .policy import Policy
    from .store.protocols import SessionStore
    from .store.types import SessionState, TranscriptRow


class _Manager(Protocol):
    store: "SessionStore"


class SessionRecords:
    """The record of the session ``(user_id, session_id)`` in ``manager.store``."""

    manager: _Manager
    user_id: str
    session_id: str

    def transcript(self) -> list["TranscriptRow"]:
        """The transcript rows a person sees (never touched by compaction)."""
        return self.manager.store.transcript(self.user_id, self.session_id)

    def events(self) -> list[JSONObject]:
        """Every compaction event of the session, oldest first (JSON objects)."""
        return self.manager.store.events(self.user_id, self.session_id)

    def original(self, tool_use_id: str | None = None, *, message_id: str | None = None) -> Message | None:
        """The original, uncleared message holding the result of ``tool_use_id`` (or the
        message ``message_id``). When the session reused a call id, the one in the current
        context is meant: the oldest cleared one first (the body a placeholder naming the bare
        id points to; a result cleared while another under its id was in the context has a
        placeholder naming its ``message_id`` as well), else the newest one in the context; never
        another call's result. None when there is none."""
        if message_id is not None:
            return self.manager.store.original(self.user_id, self.session_id, message_id=message_id)
        return self.manager.store.original(self.user_id, self.session_id, tool_use_id)

    async def atranscript(self) -> list["TranscriptRow"]:
        """Async :meth:`transcript` (runs in a worker thread)."""
        return await asyncio.to_thread(self.transcript)

    async def aevents(self) -> list[JSONObject]:
        """Async :meth:`events` (runs in a worker thread)."""
        return await asyncio.to_thread(self.events)

    async def aoriginal(self, tool_use_id: str | None = None, *, message_id: str | None = None) -> Message | None:
        """Async :meth:`original` (runs in a worker thread)."""
        return await asyncio.to_thread(lambda: self.original(tool_use_id, message_id=message_id))


class AsyncCalls:
    """The async forms of :class:`ctxwise.Session`'s writing calls; each runs the call in a
    worker thread (``asyncio.to_thread``)."""

    if TYPE_CHECKING:  # defined by Session
        def append(self, messages: Iterable[Message | Mapping[str, object]]) -> int: ...
        def prepare(self, *, thinking: bool | None = None, checked_version: int | None = None,
                    now: "float | datetime | None" = None) -> "Prepared": ...
        def pop(self, *, then: Iterable[Message | Mapping[str, object]] | None = None) -> Message | None: ...
        def record_usage(self, response: object, diagnostics: object = None) -> "CompactionEvent": ...
        def clear(self) -> int: ...
        def append_openai(self, messages: object) -> int: ...
        def append_anthropic(self, messages: object) -> int: ...
        def append_responses(self, items: object) -> int: ...

    async def aappend(self, messages: Iterable[Message | Mapping[str, object]]) -> int:
        """Async :meth:`append` (runs in a worker thread)."""
        return await asyncio.to_thread(self.append, list(messages))

    async def aappend_openai(self, messages: object) -> int:
        """Async :meth:`append_openai` (runs in a worker thread)."""
        return await asyncio.to_thread(self.append_openai, messages)

    async def aappend_anthropic(self, messages: object) -> int:
        """Async :meth:`append_anthropic` (runs in a worker thread)."""
        return await asyncio.to_thread(self.append_anthropic, messages)

    async def aappend_responses(self, items: object) -> int:
        """Async :meth:`append_responses` (runs in a worker thread)."""
        return await asyncio.to_thread(self.append_responses, items)

    async def aprepare(self, *, thinking: bool | None = None, now: "float | datetime | None" = None) -> "Prepared":
        """Async :meth:`prepare` (runs in a worker thread)."""
        return await asyncio.to_thread(lambda: self.prepare(thinking=thinking, now=now))

    async def arecord_usage(self, response: object, diagnostics: object = None) -> "CompactionEvent":
        """Async :meth:`record_usage` (runs in a worker thread)."""
        return await asyncio.to_thread(lambda: self.record_usage(response, diagnostics))

    async def apop(self) -> Message | None:
        """Async :meth:`pop`."""
        return await asyncio.to_thread(self.pop)

    async def aclear(self) -> int:
        """Async :meth:`clear`."""
        return await asyncio.to_thread(self.clear)


def load_view(store: "SessionStore", state: "SessionState", memory: "SessionMemory", policy: "Policy",
              deps_of: Callable[[], "Deps"]) -> "SessionView":
    """The view of a session loaded as ``state`` (visible rows), its fact book and user-memory
    block put into ``memory``. A session stored before the engine kept its state is rebuilt
    once from its whole history (hidden rows and events read then); ``deps_of`` builds the
    dependencies once ``memory`` is loaded."""
    from .core.view import view_from_state, view_rebuilt

    st = state.state or {}
    if st.get("v") == 1 or state.version == 0:  # version 0: nothing stored yet, nothing to rebuild
        memory.load(None, state.created_at, book=st.get("facts"))
        return view_from_state(state, policy, deps_of(), memory.facts)
    full = store.load(state.user_id, state.session_id, include_hidden=True)
    memory.load([r.original for r in sorted(full.rows, key=lambda r: r.seq)
                 if r.state not in ("popped", "reset") and r.original is not None], state.created_at,
                lost={r.message_id for r in full.rows if r.state in ("summarized", "trimmed")})
    events = store.events(state.user_id, state.session_id) if state.version else []
    return view_rebuilt(state, full, events, policy, deps_of(), memory.facts)
