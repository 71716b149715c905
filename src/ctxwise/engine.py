"""The session shell: :class:`Session`, one conversation, from :meth:`ContextManager.session`.

Each session keeps two records in the store: the transcript a person sees (never touched by
compaction) and the context the model reads (edited in place by compaction; originals kept).
Each call computes a plan from the session's frozen view (:mod:`ctxwise.core`, no store),
commits it with one store call under the view's version, and only then takes the new view; a
call that raises has changed nothing. Every compaction action is a durable event, logged as
one JSON line on the ``ctxwise`` logger and handed to ``on_event``.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from .compaction import Budgeting, CompactionEvent
from .core import (Deps, Plan, Prepared, SessionView, plan_amend, plan_amend_omitted, plan_append, plan_clear,
                   plan_close_pending, plan_migrate, plan_pop, plan_pop_omitted, plan_prepare)
from .core.commit import commit
from .prices import idle_seconds, newest_time
from .core.prepare import check_thinking_arg, now_arg
from .core.usage import SentCall, usage_event
from .usage import DIAGNOSTICS_KEY, USAGE_KEY, reported_usage
from .core.append import EMPTY_RESULT_MARKER, mark_empty_result, plan_append_numbered, refused  # noqa: F401 (re-exported)
from .errors import CtxwiseError, FormatError, MessageNotStorable, NotNewestMessage, SessionConflict
from .memory.session import SessionMemory
from .records import AsyncCalls, SessionRecords, load_view
from .messages import JSONObject, Message
from .policy import Policy
from .providers.append import as_message_list, read_anthropic, read_openai, read_responses, refuse_deep_input
from .tokens import get_counter

if TYPE_CHECKING:
    from .manager import ContextManager
    from .store.types import SessionState

log = logging.getLogger("ctxwise")


class Session(SessionRecords, AsyncCalls):
    """One conversation ``(user_id, session_id)``. Get it from :meth:`ContextManager.session`.

    Not thread-safe: use one Session object per writer. Two writers on the same session in
    different processes are serialized by the store's version check
    (:class:`~ctxwise.errors.SessionConflict`; call :meth:`reload` and retry).

    A shell over :mod:`ctxwise.core`: every operation plans from the current
    :class:`~ctxwise.core.SessionView`, commits the plan with one store call under the view's
    version, then takes the planned view; nothing changes before the commit.
    """

    manager: "ContextManager"

    def __init__(self, manager: "ContextManager", user_id: str, session_id: str, state: SessionState, policy: Policy,
                 *, tools: list[JSONObject] | None = None, migrate: Mapping[str, tuple[object, object]] | None = None) -> None:
        """The session stored as ``state`` under ``policy``; ``migrate`` (``{field: (stored,
        given)}``) records a ``policy_migrated`` event first. Open sessions with
        :meth:`ContextManager.session`."""
        self.manager, self.user_id, self.session_id = manager, user_id, session_id
        self.tools = tools or []
        self.chars_counter = get_counter("chars")
        self._view: SessionView | None = None
        self._last_call: float | None = None
        self._sent: SentCall | None = None
        self._use_policy(policy)
        self._load(state)
        if migrate:
            self._run(plan_migrate(self.view, self._deps, policy, dict(migrate)))

    def _use_policy(self, policy: Policy) -> None:
        """Set the policy and everything derived from it (counter, sizer, overhead, memory)."""
        self.policy = policy
        self.counter = self.manager.counter or get_counter(policy.counter_name)
        self._sizer = Budgeting(policy, self.counter)
        self.overhead = policy.tools_size + self.counter.count_tools(self.tools) + self.counter.frame.reply_priming
        self.memory = SessionMemory(self.manager.memory_store, self.user_id, self.session_id, policy, self.counter,
                                    self.manager.fact_extractor, self.manager.memory_decider)

    def reload(self) -> None:
        """Read the session back from the store (after a SessionConflict, say). Costs
        O(visible context): the stored sizes, fact book, failed-summary keys and id counter
        are used as stored; nothing is counted again and no hidden row or event is read."""
        self._load(self.manager.store.load(self.user_id, self.session_id))

    def _load(self, state: SessionState) -> None:
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

    @refuse_deep_input
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
        batch = as_message_list(messages, "append")
        before = len(self.view.messages)
        self._run(plan_append(self.view, self._deps, batch))
        self._record_reply_usage(before)
        return self.version

    def _record_reply_usage(self, before: int) -> None:
        """One ``cache_usage`` event for the newest reply among the messages that joined the
        context after index ``before`` whose ``metadata["usage"]`` holds a known usage shape
        (:func:`ctxwise.usage.reported_usage`), when a ``prepare()`` on this object sent the
        call it answers; nothing otherwise."""
        added = self.view.messages[before:]  # what joined the context (a reply left out is not there)
        reply = next((m for m in reversed(added) if m.role == "assistant" and m.metadata.get(USAGE_KEY)), None)
        reported = reported_usage(reply.metadata[USAGE_KEY], reply.metadata.get(DIAGNOSTICS_KEY)) if reply else None
        if reply is not None and reported is not None and self._sent is not None:
            self._record(usage_event(self._sent, self.policy, get_counter(self.policy.tokenizer), reported, reply.id,
                                     self.view.size + self.overhead))

    def record_usage(self, response: object, diagnostics: object = None) -> CompactionEvent:
        """Record the provider's cache usage of the latest model call: one ``cache_usage``
        event with the reported figures beside the cost model's prediction for the payload the
        last ``prepare()`` on this object returned (``detail["predicted"]`` None when there was
        none). ``response``: the reply (Anthropic ``Message``, OpenAI ``ChatCompletion`` or
        ``Response``, SDK object or dict) or its ``usage`` alone; ``diagnostics`` its
        diagnostics when kept apart (see :func:`ctxwise.usage.reported_usage`). A reply appended
        with ``metadata["usage"]`` (and ``metadata["cache_diagnostics"]``) after a ``prepare()``
        is recorded so by :meth:`append`. Returns the event; raises
        :class:`~ctxwise.errors.FormatError` when no known usage shape is found, and
        SessionConflict like :meth:`append`."""
        reported = reported_usage(response, diagnostics)
        if reported is None:
            raise FormatError("record_usage(...)", f"no provider usage found in {type(response).__name__}",
                              hint="pass the reply (Anthropic Message, OpenAI ChatCompletion or Response) or its usage")
        last = next((m for m in reversed(self.view.messages) if m.role == "assistant"), None)
        event = usage_event(self._sent, self.policy, get_counter(self.policy.tokenizer), reported,
                            last.id if last else None, self.view.size + self.overhead)
        self._record(event)
        return event

    def _record(self, event: CompactionEvent) -> None:
        """Write one event (its own small write) and hand it to ``on_event``."""
        self._run(Plan(self.view, None, None, records=(event,)))

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

    @refuse_deep_input
    def append_openai(self, messages: object) -> int:
        """Append messages in the OpenAI chat shape: ``{"role", "content", "tool_calls"?,
        "tool_call_id"?, "reasoning_content"?}`` dicts or the SDK's ``ChatCompletionMessage``
        objects (one message is a list of one). Ids continue the session's numbering
        (``msg-000001``, ...) unless a dict carries an ``"id"``; tool results may come in a later
        batch than their call. Returns the version. Raises
        :class:`~ctxwise.errors.FormatError` naming the message for another shape, and what
        :meth:`append` raises."""
        before = len(self.view.messages)
        read, keep, notes = read_openai(self.view.messages, messages)
        self._run(plan_append_numbered(self.view, self._deps, read, keep, notes))
        self._record_reply_usage(before)
        return self.version

    @refuse_deep_input
    def append_anthropic(self, messages: object) -> int:
        """Append messages in the Anthropic Messages shape: ``{"role", "content"}`` dicts
        (a string or text, image, document, search_result, thinking, redacted_thinking, tool_use,
        tool_result blocks, and server-tool / MCP blocks, kept verbatim), the
        SDK's ``Message`` objects, a ``reply.content`` list (one assistant message), or a
        ``{"system"?, "messages"}`` payload. A user message of ``tool_result`` blocks becomes
        ``tool`` messages (its text a user message after). Ids continue the session's numbering;
        tool results may come in a later batch than their call. An SDK ``Message``'s ``usage``
        (``anthropic/types/usage.py``) and ``diagnostics`` are kept as ``metadata["usage"]`` /
        ``metadata["cache_diagnostics"]`` and recorded as :meth:`append` records them (one
        ``cache_usage`` event after a ``prepare()``). Returns the version. Raises
        :class:`~ctxwise.errors.FormatError` naming the message for another shape (e.g. a
        tool_result answering no tool_use before it), and what :meth:`append` raises."""
        before = len(self.view.messages)
        read, keep = read_anthropic(self.view.messages, messages)
        self._run(plan_append_numbered(self.view, self._deps, read, keep))
        self._record_reply_usage(before)
        return self.version

    @refuse_deep_input
    def append_responses(self, items: object) -> int:
        """Append OpenAI Responses API items: a ``Response`` (``client.responses.create(...)``,
        the SDK object or its dict; its ``output`` items are the model's reply) or a list of
        input / output items (dicts or the SDK's item objects: ``message``, ``reasoning``,
        ``function_call``, ``function_call_output``, ``compaction``, hosted tool calls, ...;
        see :func:`ctxwise.formats.from_responses`). Consecutive model items make one
        assistant message; ids continue the session's numbering (``msg-000001``, ...), so
        batch after batch never collide; tool results may come in a later batch than their
        call. A ``Response``'s ``usage`` (``openai/types/responses/response_usage.py``:
        ``input_tokens``, ``input_tokens_details.cached_tokens`` / ``cache_write_tokens``,
        ``output_tokens_details.reasoning_tokens``) and ``prompt_cache_diagnostics`` are kept as
        the reply's ``metadata["usage"]`` / ``metadata["cache_diagnostics"]`` and recorded as
        :meth:`append` records them (one ``cache_usage`` event after a ``prepare()``). Returns
        the version. Raises :class:`~ctxwise.errors.FormatError` naming the item for another
        shape (e.g. a ``function_call_output`` answering no ``function_call``), and what
        :meth:`append` raises."""
        before = len(self.view.messages)
        read = read_responses(self.view.messages, items)
        self._run(plan_append_numbered(self.view, self._deps, read, None))
        self._record_reply_usage(before)
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

    def record_branch(self, parent_session_id: str, reason: str) -> int:
        """Record that this session is a new branch of ``parent_session_id``: the framework that
        owns the conversation changed its record under the parent (messages removed or
        corrected, a checkpoint from before the parent's last append resumed, a fresh run on a
        reused id), so the framework's record is appended here from its start instead. One
        ``branched`` event (``trigger``: ``reason``; ``detail``: ``{"parent": parent_session_id,
        "messages": number of messages this session holds}``); the parent is left as it is.
        Returns the new version; raises :class:`~ctxwise.errors.SessionConflict` like
        :meth:`append`."""
        total = self.size
        event = CompactionEvent(stage="branched", trigger=reason, unit=self.policy.unit, size_before=total,
                                size_after=total, detail={"parent": parent_session_id, "messages": len(self.messages)})
        self._run(Plan(self.view, None, None, records=(event,)))
        return self.version

    def prepare(self, *, thinking: bool | None = None, checked_version: int | None = None,
                now: float | datetime | None = None) -> Prepared:
        """Compact the context if a watermark is crossed, store what changed, check, and build
        the provider payload.

        ``thinking`` (providers passing reasoning back in tool spans, DeepSeek): whether the
        request runs in thinking mode. None: as the session shows (on once a message carried
        reasoning). True on a session that ran without it: the earlier tool-using turns the
        provider would refuse are folded into a summary now. False: the payload carries no
        reasoning and later replies without it are accepted. It holds for this object until a
        ``prepare()`` states another. ``checked_version``: the stored version as the caller
        just read it (not read again; another value than :attr:`version` is SessionConflict).
        ``now``: when this request is made (epoch seconds or a ``datetime``, UTC when it names
        no zone); None: the newest ``metadata["timestamp"]`` of the messages. With the previous
        call's time (the latest assistant message's timestamp, else the ``now`` the previous
        ``prepare()`` on this object was given) it tells how long the prompt cache went unused:
        past the price model's lifetime (``PriceModel.lifetime``) an edit re-bills nothing and
        optional edits fire (:func:`ctxwise.compaction.cost.cold_cache`).

        Raises :class:`~ctxwise.errors.ContextBudgetExceeded` when pinned content alone does
        not fit, :class:`~ctxwise.errors.PayloadInvalid` when the context cannot be sent as it
        stands (e.g. a tool call still waiting for its result), SessionConflict when another
        writer changed the session (one indexed read of the stored version)."""
        t0 = time.perf_counter()
        check_thinking_arg(thinking)
        at = now_arg(now)
        stored = self.manager.store.version(self.user_id, self.session_id) if checked_version is None else checked_version
        if stored != self.version:
            raise SessionConflict(f"session {self.session_id!r} is at version {stored}, this Session object "
                                  f"read version {self.version}: another writer got in first; reload() and retry")
        messages = self.view.messages
        idle = idle_seconds(messages, at, self._last_call)
        plan = plan_prepare(self.view, self._deps, thinking, idle)
        self._run(plan)
        self._sent = SentCall(self._sent.sent if self._sent else (), tuple(plan.result.messages), idle)
        newest = newest_time(messages) if at is None else None
        self._last_call = at if at is not None else (self._last_call if newest is None else newest)
        return replace(plan.result, latency_ms=(time.perf_counter() - t0) * 1000)


__all__ = ["Prepared", "Session"]
