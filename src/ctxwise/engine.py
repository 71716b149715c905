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

:class:`Session` is a shell over :mod:`ctxwise.core`: each call computes a plan from the
session's frozen view (no store), commits it with one store call under the view's version,
and only then takes the new view; a call that raises has changed nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from pydantic import ValidationError

from .compaction import Budgeting, CompactionEvent, Pipeline
from .core import (Deps, Plan, Prepared, SessionView, plan_amend, plan_amend_omitted, plan_append, plan_clear,
                   plan_close_pending, plan_migrate, plan_pop, plan_pop_omitted, plan_prepare, state_of)
from .core.commit import commit
from .core.append import EMPTY_RESULT_MARKER, mark_empty_result, plan_append_numbered, refused  # noqa: F401 (re-exported)
from .errors import (CtxwiseError, FormatError, MessageNotStorable, NotNewestMessage, PolicyError, PolicyMismatch,
                     SessionConflict, StoreUnavailable)
from .memory.session import SessionMemory
from .records import SessionRecords, load_view
from .messages import JSONObject, Message
from .policy import RUNTIME_FIELDS, Policy, RuntimeSettings, setting_name
from .providers.append import read_anthropic, read_openai
from .summarizers import Summarizer, from_settings
from .tokens import Counter, get_counter

if TYPE_CHECKING:
    from .memory.facts import Extractor
    from .memory.user import Op
    from .store import MemoryStore, SessionStore

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


class Session(SessionRecords):
    """One conversation ``(user_id, session_id)``. Get it from :meth:`ContextManager.session`.

    Not thread-safe: use one Session object per writer. Two writers on the same session in
    different processes are serialized by the store's version check
    (:class:`~ctxwise.errors.SessionConflict`; call :meth:`reload` and retry).

    A shell over :mod:`ctxwise.core`: every operation plans from the current
    :class:`~ctxwise.core.SessionView`, commits the plan with one store call under the view's
    version, then takes the planned view; nothing changes before the commit.
    """

    manager: "ContextManager"

    def __init__(self, manager: "ContextManager", user_id: str, session_id: str, *, tools: list[JSONObject] | None = None,
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
                raise PolicyMismatch(session_id, diff, names={k: setting_name(k) for k in diff})
            self._use_policy(given)
        self._load(state)
        if diff and explicit:
            self._run(plan_migrate(self.view, self._deps, given, diff))

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
        declared = self._view.thinking_declared if self._view else None
        view = load_view(self.manager.store, state, self.memory, self.policy, self._make_deps)
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
                version, returned = commit(self.manager.store, self.user_id, self.session_id, self.version, plan.write)
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

    def _update_user_memory(self, batch: list[Message]) -> None:
        """Long-term memory from the committed batch; what went wrong is an event, never an
        exception of append() (which has already stored the batch)."""
        event = self.memory.remember(batch)
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
    def append(self, messages: Iterable[Message | Mapping[str, object]]) -> int:
        """Add what arrived since the last model call (user input, the model's output, tool
        results; :class:`Message` objects or canonical dicts), in order, in one write. Returns
        the new version.

        Raises :class:`~ctxwise.errors.PayloadInvalid` naming the message's place in the session
        and the rule (a tool result with no call, a system message after the first, empty
        content, a repeated id), :class:`~ctxwise.errors.MessageNotStorable` (same place) for
        what the store cannot hold (an id over 255 characters, a NUL, a lone surrogate), and
        :class:`~ctxwise.errors.SessionConflict` when another writer got in first; nothing is
        stored then. Once stored it raises nothing: a failure of the user's long-term memory
        update (e.g. ``MemoryBusy``) is a logged ``memory_failed`` event."""
        self._run(plan_append(self.view, self._deps, _as_list(messages, "append")))
        return self.version

    def pop(self, *, then: Iterable[Message | Mapping[str, object]] | None = None) -> Message | None:
        """Remove the newest message still in the context (the final reply, or the last tool
        result of a batch) and return it; None when the context is empty. Recorded: the store
        keeps it (state ``popped``, its id stays taken), the transcript gets a ``retracted``
        row, the events a ``popped`` event; facts taken from it are forgotten.

        ``then``: messages appended in its place in the same write, checked as :meth:`append`
        checks a batch joining the context without it (the Agents SDK's ``pop_item``). Raises
        PayloadInvalid / MessageNotStorable naming the place, SessionConflict; nothing
        changes then."""
        if not self.view.messages:
            return None
        repl = list(then or [])
        try:
            popped: Message | None = self._run(plan_pop(self.view, self._deps, repl))
        except NotNewestMessage:
            if repl:
                raise
            popped = self._run(plan_pop_omitted(self.view, self._deps))
        return popped

    def amend(self, update: Callable[[Message], Message]) -> Message | None:
        """Set metadata on the newest stored message: ``update`` gets it and returns it with
        top-level metadata keys set and/or other :attr:`~ctxwise.Message.beside` items (sent
        right after it, counted in its size). One write and one ``amended`` event (sizes
        before and after, the keys set); returns the message as stored, None when the session
        is empty. The newest stored message may be a reply left out of the context
        (:mod:`ctxwise.normalize`): it is amended in the record only.

        Raises :class:`~ctxwise.errors.FormatError` when ``update`` changes anything else (id,
        role, name, blocks, a removed key, a ctxwise marker other than ``beside``),
        :class:`~ctxwise.errors.MessageNotStorable` when the store cannot hold the result, and
        :class:`~ctxwise.errors.SessionConflict`; nothing changes then."""
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
        """Reset the context to empty (the system prompt too; append it again). Recorded: rows
        kept as ``reset``, a ``cleared`` transcript row and event; the fact book starts empty;
        ids stay taken. Returns the new version; raises SessionConflict."""
        self._run(plan_clear(self.view, self._deps))
        return self.version

    @_refuse_deep_input
    def append_openai(self, messages: object) -> int:
        """Append messages in the OpenAI chat shape: ``{"role", "content", "tool_calls"?,
        "tool_call_id"?, "reasoning_content"?}`` dicts or the SDK's ``ChatCompletionMessage``
        objects (one message is a list of one). Ids continue the session's numbering
        (``msg-000001``, ...) unless a dict carries an ``"id"``; tool results may come in a later
        batch than their call. Returns the version. Raises
        :class:`~ctxwise.errors.FormatError` naming the message for another shape, and what
        :meth:`append` raises."""
        read, keep, notes = read_openai(self.view.messages, messages)
        self._run(plan_append_numbered(self.view, self._deps, read, keep, notes))
        return self.version

    @_refuse_deep_input
    def append_anthropic(self, messages: object) -> int:
        """Append messages in the Anthropic Messages shape: ``{"role", "content"}`` dicts
        (a string or text, image, thinking, redacted_thinking, tool_use, tool_result blocks), the
        SDK's ``Message`` objects, a ``reply.content`` list (one assistant message), or a
        ``{"system"?, "messages"}`` payload. A user message of ``tool_result`` blocks becomes
        ``tool`` messages (its text a user message after). Ids continue the session's numbering;
        tool results may come in a later batch than their call. Returns the version. Raises
        :class:`~ctxwise.errors.FormatError` naming the message for another shape (e.g. a
        tool_result answering no tool_use before it), and what :meth:`append` raises."""
        read, keep = read_anthropic(self.view.messages, messages)
        self._run(plan_append_numbered(self.view, self._deps, read, keep))
        return self.version

    def close_pending(self, reason: str = "the turn was interrupted") -> int:
        """Answer every tool call still waiting for its result with an ``error`` result
        ``"interrupted: <reason>"`` (one ``tool`` message each, numbered as the session's own,
        and one ``interrupted`` event), so a turn that broke off between a call and its result
        can go on. Returns the number of calls answered (0: nothing written). Raises
        :class:`~ctxwise.errors.SessionConflict` like :meth:`append`."""
        plan = plan_close_pending(self.view, self._deps, reason)
        self._run(plan)
        return plan.result

    def prepare(self, *, thinking: bool | None = None, checked_version: int | None = None) -> Prepared:
        """Compact the context if a watermark is crossed, store what changed, check, and build
        the provider payload.

        ``thinking`` (providers passing reasoning back in tool spans, DeepSeek): whether the
        request runs in thinking mode. None: as the session shows (on once a message carried
        reasoning). True on a session that ran without it: the earlier tool-using turns the
        provider would refuse are folded into a summary now. False: the payload carries no
        reasoning and later replies without it are accepted. It holds for this object until a
        ``prepare()`` states another. ``checked_version``: the stored version as the caller
        just read it (not read again; another value than :attr:`version` is SessionConflict).

        Raises :class:`~ctxwise.errors.ContextBudgetExceeded` when pinned content alone does
        not fit, :class:`~ctxwise.errors.PayloadInvalid` when the context cannot be sent as it
        stands (e.g. a tool call still waiting for its result), SessionConflict when another
        writer changed the session (one indexed read of the stored version)."""
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

    async def aappend(self, messages: Iterable[Message | Mapping[str, object]]) -> int:
        """Async :meth:`append` (runs in a worker thread)."""
        return await asyncio.to_thread(self.append, list(messages))

    async def aprepare(self, *, thinking: bool | None = None) -> Prepared:
        """Async :meth:`prepare` (runs in a worker thread)."""
        return await asyncio.to_thread(lambda: self.prepare(thinking=thinking))

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
    ``policy``: the session settings for new sessions; an existing session keeps the policy it
    was created with, and only the fields this one sets are compared with it (see
    :meth:`session`). ``runtime``: the process settings
    (:class:`~ctxwise.policy.RuntimeSettings`: which summarizer, its model, endpoint, timeout,
    retries), never stored or compared. ``counter``: the :class:`~ctxwise.tokens.Counter`
    measuring the policy unit (default: the one the policy names). ``summarizer``: default the
    one ``runtime`` names (the offline digest without it). ``fact_extractor``:
    ``Message -> list[Fact]`` for the pinned facts (default the rules; e.g. an
    :class:`~ctxwise.memory.LLMFactExtractor`). ``memory_decider``: the long-term memory decider, called as ``memory_decider(text, entries, threshold=...)``
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
        policy: Policy | Mapping[str, object] | None = None,
        *,
        counter: Counter | None = None,
        summarizer: Summarizer | None = None,
        fact_extractor: "Extractor | None" = None,
        memory_decider: "Callable[..., list[Op]] | None" = None,
        memory_store: "MemoryStore | None" = None,
        on_event: Callable[[CompactionEvent], None] | None = None,
        store: "SessionStore | None" = None,
        pipeline: Pipeline | None = None,
        runtime: RuntimeSettings | None = None,
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
        self.runtime = runtime or RuntimeSettings()
        self.summarizer = summarizer or from_settings(self.runtime)
        self.fact_extractor = fact_extractor
        self.memory_decider = memory_decider
        self.on_event = on_event
        self.pipeline = pipeline or Pipeline.default()

    def session(self, user_id: str, session_id: str, *, tools: list[JSONObject] | None = None,
                create: bool = True, policy: Policy | None = None, migrate_policy: bool = False) -> Session:
        """Open the session ``(user_id, session_id)``, creating it if missing; with
        ``create=False`` raise :class:`~ctxwise.errors.SessionNotFound` instead (sessions are
        scoped by user: another user's session id is not found). ``tools`` are the tool schemas
        sent with every call (counted inside the budget).

        A session keeps the policy it was created with. Reopening it compares the fields the
        given policy sets (``policy``, or the manager's when one was given; its
        ``model_fields_set``) with the stored ones; the others keep their stored values, so a
        default that moved in a newer ctxwise changes no stored session. A difference raises
        :class:`~ctxwise.errors.PolicyMismatch` naming the fields (``clearing.clear_at``:
        stored vs given), unless ``migrate_policy=True``: then the session takes the given
        fields (the others as stored), recorded as a ``policy_migrated`` event. A manager built
        without a policy opens existing sessions with their stored one. Process settings
        (``runtime``) are never compared."""
        if migrate_policy and (policy is not None or self.policy_given):
            policy = self._adopted(user_id, session_id, policy or self.policy)
        return Session(self, user_id, session_id, tools=tools, create=create, policy=policy,
                       migrate_policy=migrate_policy)

    def _adopted(self, user_id: str, session_id: str, given: Policy) -> Policy:
        """The policy ``migrate_policy=True`` switches a stored session to: the stored one with
        the fields ``given`` sets (``given`` itself for a session not stored yet). Raises
        PolicyError when the two together do not validate."""
        from .errors import SessionNotFound

        try:
            state = self.store.load(user_id, session_id)
        except SessionNotFound:
            return given
        stored = _stored_policy(state.policy, state.provider, given)
        return stored.with_(**given.session_settings(only_set=True))

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


def _normalized(policy: Mapping[str, Any], provider: str | None = None) -> dict[str, Any]:
    """A stored policy as JSON values: its fields as stored, today's defaults for the ones it
    lacks, no process settings (raw, minus the process settings, when it no longer validates)."""
    try:
        return Policy.from_stored(policy, provider).session_settings()
    except PolicyError:  # a policy stored by another version: compare as stored
        raw = {k: v for k, v in policy.items() if k not in RUNTIME_FIELDS}
        if provider is not None:
            raw.setdefault("provider", provider)
        return raw


def _stored_policy(stored: Mapping[str, Any], provider: str, fallback: Policy) -> Policy:
    """The policy a session was stored with, process settings ignored (``fallback`` when it no
    longer validates)."""
    try:
        return Policy.from_stored(stored, provider)
    except PolicyError:
        return fallback


def _policy_diff(stored: Mapping[str, Any], provider: str, given: Policy) -> dict[str, tuple[Any, Any]]:
    """``{field: (stored, given)}`` for every field ``given`` sets (its ``model_fields_set``)
    whose value differs from the stored one; fields it leaves unset are not compared, nor are
    process settings."""
    old, new = _normalized(stored, provider), given.session_settings(only_set=True)
    return {k: (old.get(k), new[k]) for k in sorted(new) if old.get(k) != new[k]}


__all__ = ["ContextManager", "Prepared", "Session", "CtxwiseError"]
