"""The public API: :class:`ContextManager` and :class:`Session`.

    cm = ContextManager("sqlite:///ctxwise.db", Policy.preset("default"))
    s = cm.session("user-1", "chat-42")
    s.append([user_msg])                 # what arrived since the last model call
    prepared = s.prepare()               # compact if needed, validate, build the payload
    client.chat.completions.create(model=..., messages=prepared.payload)
    s.append([assistant_msg, *tool_msgs])  # the model's output and the tool results

Each session keeps two records in the store: the transcript a person sees (never touched by
compaction) and the context the model reads (edited in place by compaction; originals kept).
Sizes are kept incrementally: an append of k messages counts k messages and writes k rows;
a call that fires no stage writes nothing. Every compaction action is a durable event, logged
as one JSON line on the ``ctxwise`` logger and handed to ``on_event``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from pydantic import ValidationError

from .compaction import Budgeting, CompactionEvent, Pipeline
from .core import (AmendWrite, AppendWrite, ApplyWrite, Deps, Plan, PopWrite, Prepared, SessionView, Write, dump, plan_amend,
                   plan_amend_omitted, plan_append, plan_clear, plan_close_pending, plan_pop, plan_pop_omitted, plan_prepare,
                   state_of, view_from_state)
from .core.append import EMPTY_RESULT_MARKER, mark_empty_result, memory_event, plan_append_numbered, refused
from .core.view import view_rebuilt
from .errors import (CtxwiseError, FormatError, MessageNotStorable, NotNewestMessage, PolicyError, PolicyMismatch,
                     SessionConflict, StoreUnavailable)
from .memory.session import SessionMemory
from .messages import Message
from .normalize import prepare_openai
from .policy import Policy
from .providers.append import open_cycle_start, read_after
from .summarizers import Summarizer, from_policy
from .tokens import TokenCounter, get_counter

if TYPE_CHECKING:
    from .store import SessionStore

log = logging.getLogger("ctxwise")


def _refuse_deep_input(method: Any) -> Any:
    """An append whose input is nested deeper than Python's parsers and serializers can walk
    (``"[" * 5000`` as tool arguments, a tool input 3,000 objects deep), or that a format reader
    could not build a message from (``"name": 5``, a tool input with a non-string key), raises
    FormatError naming the field instead of a raw RecursionError / pydantic ValidationError; it
    fails before anything is stored."""
    import functools

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except RecursionError:
            from .errors import FormatError

            raise FormatError("input", "nested too deeply to read or store (RecursionError); send the value "
                                       "flattened or as text") from None
        except ValidationError as e:
            from .errors import FormatError

            err = e.errors()[0]
            where = ".".join(str(x) for x in err.get("loc", ())) or e.title
            raise FormatError(f"input ({e.title} {where})", str(err.get("msg", e))) from None
    return wrapper


def _as_list(messages: Any, call: str) -> list[Any]:
    """``messages`` as a list: a single message (a dict or a Message) is a list of one, as in
    ``append_openai``; a string or anything not iterable is a :class:`FormatError` naming the
    call (never its characters or a dict's keys read as messages)."""
    if isinstance(messages, (Mapping, Message)):
        return [messages]
    if isinstance(messages, (str, bytes)) or not hasattr(messages, "__iter__"):
        raise FormatError(f"{call}()", f"expected a list of messages, got {type(messages).__name__}",
                          hint=f"pass a list of messages: {call}([message, ...])")
    return list(messages)


class Session:
    """One conversation ``(user_id, session_id)``. Get it from :meth:`ContextManager.session`.

    Not thread-safe: use one Session object per writer. Two writers on the same session in
    different processes are serialized by the store's version check
    (:class:`~ctxwise.errors.SessionConflict`; call :meth:`reload` and retry).

    A shell over :mod:`ctxwise.core`: every operation plans from the current
    :class:`~ctxwise.core.SessionView`, commits the plan with one store call under the view's
    version, then takes the planned view; nothing changes before the commit.
    """

    def __init__(self, manager: "ContextManager", user_id: str, session_id: str, *, tools: list[dict[str, Any]] | None = None,
                 create: bool = True, policy: Policy | None = None, migrate_policy: bool = False) -> None:
        self.manager = manager
        self.user_id = user_id
        self.session_id = session_id
        self.tools = tools or []
        self.chars_counter = get_counter("chars")
        self._view: SessionView | None = None
        store = manager.store
        given = policy or manager.policy
        if create:
            state = store.open_session(user_id, session_id, provider=given.provider,
                                       policy=given.model_dump(mode="json"))
        else:
            state = store.load(user_id, session_id)
        explicit = policy is not None or manager.policy_given
        self._use_policy(_stored_policy(state.policy, state.provider, given))
        diff = _policy_diff(state.policy, state.provider, given)
        if diff and explicit:
            if not migrate_policy:
                raise PolicyMismatch(session_id, diff)
            self._use_policy(given)
        self._load(state)
        if diff and explicit:
            view = self.view
            event = {"stage": "policy_migrated", "trigger": "migrate_policy=True", "at": _now(),
                     "detail": {k: {"stored": a, "given": b} for k, (a, b) in diff.items()}}
            st = state_of(view, self._deps.size_key)
            version = store.set_policy(user_id, session_id, provider=given.provider,
                                       policy=given.model_dump(mode="json"), expected_version=view.version, events=[event],
                                       sizes={m.id: view.sizes[m.id] for m in view.messages}, state=st)
            self._swap(replace(view, version=version, saved_state=dump(st)))

    def _use_policy(self, policy: Policy) -> None:
        """Set the policy and everything derived from it (counter, sizer, overhead, memory)."""
        self.policy = policy
        self.counter = self.manager.counter or get_counter(policy.counter_name)
        self._sizer = Budgeting(policy, self.counter)
        self.overhead = policy.tools_size + self.counter.count_tools(self.tools) + self.counter.frame.reply_priming
        self.memory = SessionMemory(self.manager.memory_store, self.user_id, self.session_id, policy, self.counter,
                                    self.manager.fact_extractor, self.manager.memory_decider)

    # -- state ---------------------------------------------------------------------------

    def reload(self, *, create: bool = False) -> None:
        """Read the session back from the store (after a SessionConflict, say). Costs
        O(visible context): the stored sizes, fact book, failed-summary keys and id counter
        are used as stored; nothing is counted again and no hidden row or event is read."""
        self._load(self.manager.store.load(self.user_id, self.session_id))

    def _load(self, state: Any) -> None:
        st = state.state or {}
        store, declared = self.manager.store, self._view.thinking_declared if self._view else None
        if st.get("v") == 1 or state.version == 0:  # version 0: nothing stored yet, nothing to rebuild
            self.memory.load(None, state.created_at, book=st.get("facts"))
            view = view_from_state(state, self.policy, self._make_deps(), self.memory.facts)
        else:  # stored before the engine kept its state: rebuild once from the whole history
            full = store.load(self.user_id, self.session_id, include_hidden=True)
            self.memory.load([r.original for r in sorted(full.rows, key=lambda r: r.seq)
                              if r.state not in ("popped", "reset") and r.original is not None], state.created_at,
                             lost={r.message_id for r in full.rows if r.state in ("summarized", "trimmed")})
            events = store.events(self.user_id, self.session_id) if state.version else []
            view = view_rebuilt(state, full, events, self.policy, self._make_deps(), self.memory.facts)
        self._swap(replace(view, thinking_declared=declared))

    def _make_deps(self) -> Deps:
        name = getattr(self.counter, "name", None) or self.policy.counter_name
        p = self.policy
        self._deps = Deps(self.counter, self._sizer, self.overhead, f"{p.unit}|{name}|{p.provider}|{int(p.count_system)}",
                          tuple(self.memory.head_blocks()), self.manager.pipeline, self.manager.summarizer,
                          self.chars_counter, self.session_id)
        return self._deps

    def _swap(self, view: SessionView) -> None:
        self._view = view
        self.memory.facts = view.facts

    @property
    def view(self) -> SessionView:
        """The session as this object knows it (a frozen :class:`~ctxwise.core.SessionView`)."""
        assert self._view is not None
        return self._view

    @property
    def version(self) -> int:
        """The stored version this object is at."""
        return self.view.version

    @version.setter
    def version(self, version: int) -> None:
        self._swap(replace(self.view, version=version))

    def _state(self) -> dict[str, Any]:
        """The engine's session state the store keeps (small; restored by :meth:`reload`)."""
        return state_of(self.view, self._deps.size_key)

    @property
    def messages(self) -> list[Message]:
        """The context as the model reads it now (a copy of the list)."""
        return list(self.view.messages)

    @property
    def size(self) -> int:
        """Current context size in the policy unit, tool-schema overhead included."""
        return self.view.size + self.overhead

    def _sz(self, m: Message) -> int:
        """A message's size in the policy unit, as the stages count it (one rule)."""
        return self._sizer.size_of(m)

    # -- the shell -------------------------------------------------------------------------

    def _run(self, plan: Plan[Any]) -> Any:
        """Commit ``plan`` with its one store write, take its view, then record, log, update
        the user's memory and emit what follows. Returns what the store returned (a message
        for pop and amend, else None)."""
        returned: Message | None = None
        if plan.write is None:
            self._swap(plan.view)
        else:
            try:
                version, returned = self._commit(plan.write)
            except MessageNotStorable as e:
                raise refused(e, plan.index_base, self.policy.provider) from None
            self._swap(replace(plan.view, version=version))
        for event in plan.records:
            self.version = self.manager.store.apply(self.user_id, self.session_id, [], [event.model_dump(mode="json")],
                                                    expected_version=self.version)
            self.manager.emit(event)
        for line in plan.logs:
            log.info(line)  # logged (not printed unless logging is configured)
        if plan.remember:
            self._update_user_memory(list(plan.remember))
        for ev in plan.emit:
            self.manager.emit(ev)
        if plan.error is not None:
            raise plan.error
        return returned

    def _commit(self, w: Write) -> tuple[int, Message | None]:
        """The one store call of a plan, under the view's version: ``(new version, message)``."""
        store, u, s, v = self.manager.store, self.user_id, self.session_id, self.view.version
        if isinstance(w, AppendWrite):
            return store.append(u, s, list(w.messages), expected_version=v, sizes=list(w.sizes), state=w.state), None
        if isinstance(w, ApplyWrite):
            return store.apply(u, s, list(w.changes), list(w.events), expected_version=v, sizes=dict(w.sizes),
                               state=w.state), None
        if isinstance(w, PopWrite):
            more: dict[str, Any] = {"message_id": w.message_id} if w.message_id is not None else {}
            if w.then_append:
                more.update(then_append=list(w.then_append), sizes=list(w.sizes))
            return store.pop(u, s, expected_version=v, events=list(w.events), state=w.state, **more)
        if isinstance(w, AmendWrite):
            return store.amend(u, s, expected_version=v, metadata=w.metadata, beside=w.beside, message_id=w.message_id,
                               size=w.size, events=list(w.events), state=w.state)
        return store.clear(u, s, expected_version=v, events=list(w.events), state=w.state), None

    def _update_user_memory(self, batch: list[Message]) -> None:
        """Long-term memory from the committed batch; a failure becomes a ``memory_failed``
        event, never an exception of append() (which has already stored the batch), and text
        the memory decider skipped because of its bounds a ``memory_skipped`` event."""
        try:
            event = memory_event(self.memory.observe_memory(batch), None, batch, self.session_id, self.user_id)
        except Exception as exc:  # noqa: BLE001 - reported, not raised: the append is committed
            event = memory_event(None, exc, batch, self.session_id, self.user_id)
        if event is None:
            return
        try:
            self.version = self.manager.store.apply(self.user_id, self.session_id, [], [event],
                                                    expected_version=self.version)
        except CtxwiseError as store_exc:  # another writer got in: the log line stays the record
            log.warning(json.dumps({"event": f"ctxwise.{event['stage']}_unrecorded", "session": self.session_id,
                                    "error": str(store_exc)[:300]}))

    # -- operations ------------------------------------------------------------------------

    @_refuse_deep_input
    def append(self, messages: Iterable[Message | dict[str, Any]]) -> int:
        """Add what arrived since the last model call (user input, the model's output, tool
        results), in order, in one transaction. Returns the new session version.

        Accepts :class:`Message` objects or dicts in the canonical shape. Raises
        :class:`~ctxwise.errors.PayloadInvalid` naming the message index (position in the
        session) and the rule when the batch breaks the message rules (a tool result with no
        call, a system message after the first, empty content, a repeated id),
        :class:`~ctxwise.errors.MessageNotStorable` (same index) for what the store cannot
        hold (an id over 255 characters, a NUL character, a lone surrogate), and
        :class:`~ctxwise.errors.SessionConflict` when another writer got in first. Nothing is
        stored when it raises, and it raises nothing once stored: the user's long-term memory
        is updated after the commit, and a failure there (e.g. ``MemoryBusy``) is recorded as
        a ``memory_failed`` event, logged, and not raised.
        """
        self._run(plan_append(self.view, self._deps, _as_list(messages, "append")))
        return self.version

    def pop(self, *, then: Iterable[Message | dict[str, Any]] | None = None) -> Message | None:
        """Remove the last message appended (one message: the newest one still in the
        context, e.g. the final reply, or the last tool result of a batch) and return it;
        None when the context is empty. Durable and recorded: the store keeps the message
        (state ``popped``), the transcript gets a ``retracted`` row, the events a ``popped``
        event; its id stays taken. Facts taken from it are forgotten. Raises SessionConflict
        when another writer got in first (nothing changes then).

        ``then``: messages appended in its place in the same write (one version bump), checked
        as :meth:`append` checks a batch joining the context without the popped message: the
        last message is replaced, or nothing changes (PayloadInvalid / MessageNotStorable
        naming the index, SessionConflict). An integration uses it to take one item out of a
        message holding several (the Agents SDK's ``pop_item``)."""
        if not self.view.messages:
            return None
        plan = plan_pop(self.view, self._deps, list(then or []))
        try:
            popped: Message | None = self._run(plan)
        except NotNewestMessage:
            if then:
                raise
            popped = self._run(plan_pop_omitted(self.view, self._deps))
        return popped

    def amend(self, update: Callable[[Message], Message]) -> Message | None:
        """Update the newest stored message in place: ``update`` gets it and returns it with
        other metadata (top-level keys set, and its :attr:`~ctxwise.Message.beside` items: what
        an integration sends right after it, verbatim, counted in its size). Its id, role,
        name and blocks must not change, so the transcript is unchanged; one ``amended`` event
        records it (sizes before and after, the keys set). Durable, one write; returns the
        amended message as stored (None: the session is empty, nothing written).

        The newest stored message is the context's last one, or a reply left out of the
        context stored after it (an empty or refusal-only reply, :mod:`ctxwise.normalize`):
        that one is amended in the record only (it is not sent). An integration uses this to
        keep items that arrive after a message with it (the Agents SDK's hosted-tool items),
        where a :meth:`pop` and re-append would record a retraction that never happened.

        Raises :class:`~ctxwise.errors.FormatError` when ``update`` changes more than that
        (the message's content, a metadata key removed, a ctxwise marker other than
        ``beside``), :class:`~ctxwise.errors.MessageNotStorable` naming the message when the
        store cannot hold what the metadata makes of it, and
        :class:`~ctxwise.errors.SessionConflict` when another writer got in first; nothing
        changes then."""
        if not self.view.messages:
            return None
        try:
            amended: Message | None = self._run(plan_amend(self.view, self._deps, update))
        except NotNewestMessage:
            rows = self.manager.store.load(self.user_id, self.session_id).rows
            newest = max((r for r in rows if r.current.kind is None), key=lambda r: r.seq)  # a summary is ctxwise's own
            amended = self._run(plan_amend_omitted(self.view, self._deps, newest.current, update))
        return amended

    def clear(self) -> int:
        """Reset the context to empty (the system prompt too; append it again). Durable and
        recorded: the rows are kept as ``reset``, the transcript gets a ``cleared`` row, the
        events a ``cleared`` event; the fact book starts empty. Message ids stay taken.
        Returns the new version; raises SessionConflict when another writer got in first."""
        self._run(plan_clear(self.view, self._deps))
        return self.version

    @_refuse_deep_input
    def append_openai(self, messages: Any) -> int:
        """Append messages in the OpenAI chat shape (what your client sends and receives:
        ``{"role", "content", "tool_calls"?, "tool_call_id"?, "reasoning_content"?}`` dicts,
        or the SDK's ``ChatCompletionMessage`` objects, e.g. ``reply.choices[0].message``; a
        single message is taken as a list of one).

        Message ids continue the session's own numbering (``msg-000001``, ...) unless a dict
        carries an ``"id"``; tool results may come in their own batch, after the call that
        asked for them. Raises :class:`~ctxwise.errors.FormatError` naming the message for a
        shape that is not OpenAI chat, and whatever :meth:`append` raises. Returns the version.
        """
        from .formats import from_openai, to_openai
        from .formats.sdk import openai_dicts

        new, notes = prepare_openai(openai_dicts(messages), len(self.view.messages))
        cycle = self._open_cycle()
        prefix = to_openai(cycle, extras=False) if cycle else []
        read = read_after(from_openai, prefix, new, len(prefix))
        self._run(plan_append_numbered(self.view, self._deps, read, [("id" in raw) for raw in new], notes))
        return self.version

    @_refuse_deep_input
    def append_anthropic(self, messages: Any) -> int:
        """Append messages in the Anthropic Messages shape: ``{"role", "content"}`` dicts
        (``content`` a string or blocks: text, image, thinking, redacted_thinking, tool_use,
        tool_result), the SDK's ``Message`` objects (``client.messages.create(...)``'s reply),
        a ``reply.content`` list (one assistant message), or a ``{"system"?, "messages"}``
        payload; a ``{"role": "system"}`` message may come first.

        A user message of ``tool_result`` blocks becomes ``tool`` messages (text beside them a
        user message after). Ids continue the session's own numbering (``msg-000001``, ...);
        tool results may come in their own batch, after the message with the ``tool_use``
        blocks. Raises :class:`~ctxwise.errors.FormatError` naming the message for a shape
        that is not Anthropic's (e.g. a tool_result answering no tool_use of the assistant
        message before it), and whatever :meth:`append` raises. Returns the version.
        """
        from .formats import from_anthropic
        from .formats.sdk import anthropic_dicts
        from .providers import render_anthropic

        new = anthropic_dicts(messages)
        cycle = self._open_cycle()
        prefix = render_anthropic.render(cycle)["messages"] if cycle else []
        skip = len(from_anthropic({"messages": prefix}, strict=False)) if prefix else 0
        read = read_after(lambda ms: from_anthropic({"messages": ms}), prefix, new, skip)
        keep = [("id" in raw) for raw in new] if len(read) == len(new) else None
        self._run(plan_append_numbered(self.view, self._deps, read, keep))
        return self.version

    def _open_cycle(self) -> list[Message]:
        """The tool cycle still open at the tail of the context, or []."""
        return list(self.view.messages[open_cycle_start(self.view.messages):])

    def close_pending(self, reason: str = "the turn was interrupted") -> int:
        """Answer every tool call still waiting for its result with an explicit interruption
        result (state ``error``, text ``"interrupted: <reason>"``), so a turn that crashed or
        was cancelled between a tool call and its result can go on with new user input.

        One ``tool`` message per unanswered call (ids continue the session's numbering), and
        one ``interrupted`` event. Returns the number of calls answered (0: nothing pending,
        nothing written). Raises :class:`~ctxwise.errors.SessionConflict` like :meth:`append`.
        """
        plan = plan_close_pending(self.view, self._deps, reason)
        self._run(plan)
        return plan.result

    def prepare(self, *, thinking: bool | None = None, checked_version: int | None = None) -> Prepared:
        """Compact the context if a watermark is crossed, persist what changed, validate, and
        build the provider payload.

        ``thinking``: whether the request built from this payload runs with the provider's
        thinking mode on, for providers that want reasoning passed back in tool-using spans
        (DeepSeek). None (the default): as the session shows (on once any message carried
        reasoning). True on the first thinking request of a session that ran without it: the
        earlier tool-using turns DeepSeek would refuse are folded into a summary now, not after
        the first reply with reasoning. False when thinking was turned off: the payload then
        carries no reasoning (a request without thinking needs none) and later replies without
        reasoning are accepted at append. The choice holds for this Session
        object until the next ``prepare()`` that states one.

        Raises :class:`~ctxwise.errors.ContextBudgetExceeded` when pinned content alone does
        not fit, :class:`~ctxwise.errors.PayloadInvalid` when the context cannot be sent as
        it stands (e.g. a tool call still waiting for its result), and SessionConflict when
        another writer changed the session meanwhile (checked with one indexed read of the
        stored version).

        ``checked_version``: the session's stored version as the caller read it right before
        this call (a server that checks every request against the store does): the version
        is then not read again, and a value other than :attr:`version` is SessionConflict.
        """
        t0 = time.perf_counter()
        if thinking is not None and not isinstance(thinking, bool):
            raise FormatError("prepare(thinking=...)", f"takes True, False or None, not {type(thinking).__name__}",
                              hint="say whether the request runs in the provider's thinking mode, or leave it out")
        stored = self.manager.store.version(self.user_id, self.session_id) if checked_version is None else checked_version
        if stored != self.version:
            raise SessionConflict(f"session {self.session_id!r} is at version {stored}, this Session object "
                                  f"read version {self.version}: another writer got in first; reload() and retry")
        plan = plan_prepare(self.view, self._deps, thinking)
        self._run(plan)
        return replace(plan.result, latency_ms=(time.perf_counter() - t0) * 1000)

    # -- records -----------------------------------------------------------------------------

    def transcript(self) -> list[Any]:
        """The transcript rows a person sees (never touched by compaction)."""
        return self.manager.store.transcript(self.user_id, self.session_id)

    def events(self) -> list[dict]:
        """Every compaction event of the session, oldest first (JSON dicts)."""
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

    # -- async -------------------------------------------------------------------------------

    async def aappend(self, messages: Iterable[Message | dict]) -> int:
        """Async :meth:`append` (runs in a worker thread)."""
        return await asyncio.to_thread(self.append, list(messages))

    async def aprepare(self, *, thinking: bool | None = None) -> Prepared:
        """Async :meth:`prepare` (runs in a worker thread)."""
        return await asyncio.to_thread(lambda: self.prepare(thinking=thinking))

    async def atranscript(self) -> list[Any]:
        return await asyncio.to_thread(self.transcript)

    async def aevents(self) -> list[dict]:
        return await asyncio.to_thread(self.events)

    async def aoriginal(self, tool_use_id: str | None = None, *, message_id: str | None = None) -> Message | None:
        return await asyncio.to_thread(lambda: self.original(tool_use_id, message_id=message_id))

    async def apop(self) -> Message | None:
        """Async :meth:`pop`."""
        return await asyncio.to_thread(self.pop)

    async def aclear(self) -> int:
        """Async :meth:`clear`."""
        return await asyncio.to_thread(self.clear)


class ContextManager:
    """Entry point: a store, a policy and a summarizer shared by many sessions.

    ``store``: a :class:`~ctxwise.store.SessionStore` instance (``SqlStore``,
    ``InMemoryStore``, your own), or a URL (``sqlite:///ctxwise.db`` by default,
    ``postgresql+psycopg://...`` in production, ``memory://`` for an in-memory store).
    ``policy``: for new sessions; an existing session keeps the policy it was created with
    (see :meth:`session`). ``counter``: the :class:`~ctxwise.tokens.TokenCounter` measuring the
    policy unit (default: the one the policy names). ``summarizer``: default the one the
    policy names. ``fact_extractor``: ``Message -> list[Fact]`` for the pinned facts (default
    the rules; e.g. an :class:`~ctxwise.memory.LLMFactExtractor`). ``memory_decider``: the
    long-term memory decider, called as ``memory_decider(text, entries, threshold=...)``
    (default the rules of :func:`ctxwise.memory.decide`; e.g. an
    :class:`~ctxwise.memory.LLMMemoryDecider`, held to the same limits). ``memory_store``: where
    long-term user memory lives (default ``store``). ``on_event`` is called with every
    :class:`CompactionEvent`. ``pipeline`` is the compaction
    :class:`~ctxwise.compaction.Pipeline` every session runs (default :meth:`Pipeline.default`);
    the engine stores exactly the changes its stages return. Usable as a context manager
    (``with ContextManager(...) as cm:``; closes the store).
    """

    def __init__(
        self,
        store_url: "str | SessionStore" = "sqlite:///ctxwise.db",
        policy: Policy | Mapping[str, Any] | None = None,
        *,
        counter: TokenCounter | None = None,
        summarizer: Summarizer | None = None,
        fact_extractor: Callable[[Message], list[Any]] | None = None,
        memory_decider: Callable[..., list[Any]] | None = None,
        memory_store: Any = None,
        on_event: Callable[[CompactionEvent], None] | None = None,
        store: "SessionStore | None" = None,
        pipeline: Pipeline | None = None,
    ) -> None:
        if policy is not None and not isinstance(policy, Policy):
            if not isinstance(policy, Mapping):
                raise PolicyError(f"policy must be a ctxwise.Policy or a mapping of its settings, got {type(policy).__name__}")
            policy = Policy.model_validate(dict(policy))  # PolicyError names a bad setting
        self.policy_given = policy is not None
        self.policy = policy or Policy.preset("default")
        from .store import open_store  # SQLAlchemy and Alembic load here, not at import

        target = store if store is not None else store_url
        self._owns_store = isinstance(target, str)
        try:
            self.store: Any = open_store(target)
        except CtxwiseError:
            raise
        except Exception as e:
            if not self._owns_store or not type(e).__module__.startswith(("sqlalchemy", "psycopg", "sqlite3")):
                raise
            scheme = str(target).split(":", 1)[0]
            raise StoreUnavailable(f"cannot open the store {scheme}://...: {type(e).__name__}: "
                                   f"{str(e).splitlines()[0] if str(e) else ''}") from None
        self.memory_store: Any = memory_store if memory_store is not None else self.store
        self.counter = counter
        self.summarizer = summarizer or from_policy(self.policy)
        self.fact_extractor = fact_extractor
        self.memory_decider = memory_decider
        self.on_event = on_event
        self.pipeline = pipeline or Pipeline.default()

    def session(self, user_id: str, session_id: str, *, tools: list[dict] | None = None,
                create: bool = True, policy: Policy | None = None, migrate_policy: bool = False) -> Session:
        """Open the session ``(user_id, session_id)``, creating it if missing; with
        ``create=False`` raise :class:`~ctxwise.errors.SessionNotFound` instead (sessions are
        scoped by user: another user's session id is not found). ``tools`` are the tool schemas
        sent with every call (counted inside the budget).

        A session keeps the policy it was created with. Reopening it with a different one
        (``policy``, or the manager's when one was given) raises
        :class:`~ctxwise.errors.PolicyMismatch` naming the differing fields, unless
        ``migrate_policy=True``: then the session switches to the new policy, recorded as a
        ``policy_migrated`` event. A manager built without a policy opens existing sessions
        with their stored one."""
        return Session(self, user_id, session_id, tools=tools, create=create, policy=policy,
                       migrate_policy=migrate_policy)

    def emit(self, event: CompactionEvent) -> None:
        """Log ``event`` as one JSON line and hand it to ``on_event``."""
        log.info(json.dumps(event.log_record(), ensure_ascii=False))
        if self.on_event is not None:
            self.on_event(event)

    def close(self) -> None:
        """Release the store's connections."""
        self.store.close()

    def __enter__(self) -> "ContextManager":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _now() -> str:
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).isoformat()


def _dump(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _normalized(policy: dict[str, Any]) -> dict[str, Any]:
    """A stored policy dict with today's defaults filled in (raw when it no longer validates)."""
    try:
        return Policy.model_validate(policy).model_dump(mode="json")
    except Exception:  # noqa: BLE001 - a policy stored by another version: compare as stored
        return dict(policy)


def _stored_policy(stored: dict[str, Any], provider: str, fallback: Policy) -> Policy:
    """The policy a session was stored with (``fallback`` when it no longer validates)."""
    try:
        return Policy.model_validate({**stored, "provider": stored.get("provider", provider)})
    except Exception:  # noqa: BLE001
        return fallback


def _policy_diff(stored: dict[str, Any], provider: str, given: Policy) -> dict[str, tuple[Any, Any]]:
    """``{field: (stored, given)}`` for every policy field that differs (provider included)."""
    old, new = _normalized(stored), given.model_dump(mode="json")
    old.setdefault("provider", provider)
    return {k: (old.get(k), new.get(k)) for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)}


__all__ = ["ContextManager", "Prepared", "Session", "CtxwiseError"]
