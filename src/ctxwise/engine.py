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
import dataclasses
import json
import logging
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from pydantic import ValidationError

from .compaction import Budgeting, CompactionEvent, Pipeline
from .errors import (CtxwiseError, FormatError, MessageNotStorable, NotNewestMessage, PayloadInvalid, PolicyError, PolicyMismatch,
                     SessionConflict, StoreUnavailable, Violation)
from .messages import Message, TextBlock, ToolResultBlock
from .normalize import normalize_batch, omitted, prepare_openai
from .memory.session import SessionMemory
from .memory.user import SKIPPED
from .policy import RUNTIME_FIELDS, Policy, RuntimeSettings
from .providers import check as check_payload
from .providers import check_wire, get_profile, render
from .providers import rules as provider_rules
from .changes import InsertSummary, Replace
from .summarizers import Summarizer, from_settings
from .tokens import TokenCounter, get_counter
from .units import is_user_input, tool_cycles

if TYPE_CHECKING:
    from .store import SessionStore

log = logging.getLogger("ctxwise")

VISIBLE = ("verbatim", "cleared", "pruned")


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


@dataclass
class Prepared:
    """What one ``prepare()`` produced.

    ``messages`` is the canonical context sent (pinned blocks included); ``payload`` the
    provider's JSON, rendered by :func:`ctxwise.providers.render` and checked by
    :func:`ctxwise.providers.check_wire` (a list of chat messages for OpenAI-style providers,
    ``{"system"?, "messages"}`` for Anthropic, a list of input items for ``openai_responses``); ``size`` / ``size_before`` the context size after / before
    compaction in the policy unit (tool-schema overhead included); ``chars`` the size by the
    ``chars`` rule; ``events`` the compaction events fired by this call.
    """

    messages: list[Message]
    payload: Any
    size: int
    size_before: int
    chars: int
    unit: str
    events: list[CompactionEvent] = field(default_factory=list)
    latency_ms: float = 0.0


EMPTY_RESULT_MARKER = "(no output)"


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


def mark_empty_result(m: Message) -> Message:
    """A tool message whose result has no output gets a one-line marker instead.

    Providers reject empty non-final content (Anthropic: "all messages must have non-empty
    content except for the optional final assistant message"), and recorded sessions hold
    such results (tau-bench has 83). The marker, ``(no output)`` (3 o200k tokens, carried by
    every later call), says what happened; the message's marker dict records ``empty_marked``
    so nothing is hidden (cases README notation ``3*``).
    """
    if m.role != "tool" or not any(_blank_result(r) for r in m.tool_results):
        return m
    blocks = [
        b.model_copy(update={"output": [TextBlock(text=EMPTY_RESULT_MARKER)]}) if isinstance(b, ToolResultBlock) and _blank_result(b) else b
        for b in m.blocks
    ]
    md = dict(m.metadata)
    md["ctxwise"] = {**(md.get("ctxwise") or {}), "empty_marked": True}
    return m.model_copy(update={"blocks": blocks, "metadata": md})


def _blank_result(r: ToolResultBlock) -> bool:
    return not r.output or all(isinstance(o, TextBlock) and not o.text.strip() for o in r.output)


class Session:
    """One conversation ``(user_id, session_id)``. Get it from :meth:`ContextManager.session`.

    Not thread-safe: use one Session object per writer. Two writers on the same session in
    different processes are serialized by the store's version check
    (:class:`~ctxwise.errors.SessionConflict`; call :meth:`reload` and retry).
    """

    def __init__(self, manager: "ContextManager", user_id: str, session_id: str, *, tools: list[dict] | None = None,
                 create: bool = True, policy: Policy | None = None, migrate_policy: bool = False) -> None:
        self.manager = manager
        self.user_id = user_id
        self.session_id = session_id
        self.tools = tools or []
        self.chars_counter = get_counter("chars")
        self.version = 0
        self._context: list[Message] = []
        self._sizes: dict[str, int] = {}
        self._ids: set[str] = set()
        self._size = 0
        self._lossy = False
        self._thinking_seen: bool | None = None
        self._thinking_declared: bool | None = None  # prepare(thinking=...): what the app said
        self._counter_ids = 0
        self._failed_summaries: set[str] = set()
        self._saved_state: str | None = None
        self._pending_state: str | None = None
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
            sizes = {m.id: self._sizes[m.id] for m in self._context}
            event = {"stage": "policy_migrated", "trigger": "migrate_policy=True", "at": _now(),
                     "detail": {k: {"stored": a, "given": b} for k, (a, b) in diff.items()}}
            self.version = store.set_policy(user_id, session_id, provider=given.provider,
                                            policy=given.model_dump(mode="json"), expected_version=self.version,
                                            events=[event], sizes=sizes, state=self._state())
            self._saved_state = _dump(self._state())

    def _use_policy(self, policy: Policy) -> None:
        """Set the policy and everything derived from it (counter, sizer, overhead, memory)."""
        self.policy = policy
        self.counter = self.manager.counter or get_counter(policy.counter_name)
        self._sizer = Budgeting(policy, self.counter)
        self.overhead = policy.tools_size + self.counter.count_tools(self.tools) + self.counter.frame.reply_priming
        self.memory = SessionMemory(self.manager.memory_store, self.user_id, self.session_id, policy, self.counter,
                                    self.manager.fact_extractor, self.manager.memory_decider)

    # -- state ---------------------------------------------------------------------------

    def _size_key(self) -> str:
        """What the stored sizes were measured with (a size measured otherwise is recounted)."""
        name = getattr(self.counter, "name", None) or self.policy.counter_name
        return f"{self.policy.unit}|{name}|{self.policy.provider}|{int(self.policy.count_system)}"

    def _state(self) -> dict[str, Any]:
        """The engine's session state the store keeps (small; restored by :meth:`reload`)."""
        return {"v": 1, "next_id": self._counter_ids, "lossy": self._lossy,
                "failed_summaries": sorted(self._failed_summaries), "size_key": self._size_key(),
                "facts": self.memory.state(), "thinking_seen": self._thinking_seen is True}

    def _state_if_changed(self) -> dict[str, Any] | None:
        """The state to store when it differs from the stored one, else None. Serializes it
        once; the caller marks it stored with :meth:`_stored_state` after the write."""
        st = self._state()
        dumped = _dump(st)
        self._pending_state = dumped
        return None if dumped == self._saved_state else st

    def _stored_state(self) -> None:
        """After a write that carried :meth:`_state_if_changed`'s result: that is the stored state."""
        self._saved_state = self._pending_state

    def reload(self, *, create: bool = False) -> None:
        """Read the session back from the store (after a SessionConflict, say). Costs
        O(visible context): the stored sizes, fact book, failed-summary keys and id counter
        are used as stored; nothing is counted again and no hidden row or event is read."""
        store = self.manager.store
        state = store.load(self.user_id, self.session_id)
        self._load(state)

    def _load(self, state: Any) -> None:
        self.version = state.version
        st = state.state or {}
        self._context = [r.current for r in state.rows if omitted(r.current) is None]  # omitted replies: transcript only
        self._ids = {r.message_id for r in state.rows}
        if st.get("v") == 1 or state.version == 0:  # version 0: nothing stored yet, nothing to rebuild
            same_sizes = st.get("size_key") == self._size_key()
            self._sizes = {r.message_id: (r.size if same_sizes and r.size is not None else self._sz(r.current))
                           for r in state.rows}
            self._counter_ids = int(st.get("next_id", 0))
            self._lossy = bool(st.get("lossy", False))
            self._failed_summaries = set(st.get("failed_summaries", []))
            self._thinking_seen = True if st.get("thinking_seen") else None
            self.memory.load(None, state.created_at, book=st.get("facts"))
            self._saved_state = _dump(st)
        else:  # stored before the engine kept its state: rebuild once from the whole history
            full = self.manager.store.load(self.user_id, self.session_id, include_hidden=True)
            self._sizes = {r.message_id: self._sz(r.current) for r in state.rows}
            self._ids = {r.message_id for r in full.rows}
            self._counter_ids = sum(1 for r in full.rows if r.message_id.startswith("msg-"))
            self._lossy = any(r.state in ("summarized", "trimmed") for r in full.rows)
            self._failed_summaries = {
                e["detail"]["key"] for e in (self.manager.store.events(self.user_id, self.session_id) if state.version else [])
                if e.get("stage") == "summarizer_failed" and isinstance(e.get("detail"), dict) and "key" in e["detail"]
            }
            self._thinking_seen = None
            self.memory.load([r.original for r in sorted(full.rows, key=lambda r: r.seq)
                              if r.state not in ("popped", "reset") and r.original is not None], state.created_at,
                             lost={r.message_id for r in full.rows if r.state in ("summarized", "trimmed")})
            self._saved_state = None
        self._size = sum(self._sizes[m.id] for m in self._context)

    @property
    def messages(self) -> list[Message]:
        """The context as the model reads it now (a copy of the list)."""
        return list(self._context)

    @property
    def size(self) -> int:
        """Current context size in the policy unit, tool-schema overhead included."""
        return self._size + self.overhead

    def _sz(self, m: Message) -> int:
        """A message's size in the policy unit, as the stages count it (one rule)."""
        return self._sizer.size_of(m)

    def _check_version(self) -> None:
        """Raise SessionConflict when another writer changed the session (one indexed read)."""
        stored = self.manager.store.version(self.user_id, self.session_id)
        if stored != self.version:
            raise SessionConflict(f"session {self.session_id!r} is at version {stored}, this Session object "
                                  f"read version {self.version}: another writer got in first; reload() and retry")

    # -- append ----------------------------------------------------------------------------

    @_refuse_deep_input
    def append(self, messages: Iterable[Message | dict]) -> int:
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
        return self._append(_as_list(messages, "append"))

    def _append(self, items: Sequence[Message | dict], notes: dict[int, list[dict]] | None = None) -> int:
        batch = [mark_empty_result(m) for m in self._coerce(list(items))]
        if not batch:
            return self.version
        batch, normalized = normalize_batch(batch, len(self._context), notes)
        visible = [m for m in batch if omitted(m) is None]  # omitted replies stay in the transcript only
        self._check_batch(visible, batch)
        base = len(self._context)
        sizes = [self._sz(m) for m in batch]
        book = self.memory.state() if self.policy.facts else None
        self.memory.observe_facts(visible)
        numbered = self._counter_ids
        for m in batch:  # the session's own numbering (msg-000001, ...) is stored with the batch
            if m.id.startswith("msg-") and m.id[4:].isdigit():
                self._counter_ids = max(self._counter_ids, int(m.id[4:]))
        thinking_before = self._thinking_seen
        if any(m.thinking for m in visible):
            self._thinking_seen = True
        try:
            self.version = self.manager.store.append(self.user_id, self.session_id, batch, expected_version=self.version,
                                                     sizes=sizes, state=self._state_if_changed())
        except MessageNotStorable as e:
            self._undo_append(book, numbered, thinking_before)
            if e.rule == "duplicate-message-id":
                raise PayloadInvalid(self.policy.provider, [Violation(base + e.index, e.rule, e.detail)]) from None
            raise e.at(base) from None
        except BaseException:
            self._undo_append(book, numbered, thinking_before)
            raise
        self._stored_state()
        if normalized:
            self._record(CompactionEvent(
                stage="normalized", trigger="a reply the provider would refuse when sent back", unit=self.policy.unit,
                size_before=self._size + self.overhead, size_after=self._size + self.overhead,
                affected_ids=[n["id"] for n in normalized], detail={"messages": normalized}))
        size_of = {m.id: n for m, n in zip(batch, sizes)}
        batch = visible
        sizes = [size_of[m.id] for m in batch]
        self._context.extend(batch)
        self._ids.update(m.id for m in batch)
        self._sizes.update((m.id, n) for m, n in zip(batch, sizes))
        self._size += sum(sizes)
        for m in batch:
            if (m.role == "system" and self.policy.clear_target > 0 and self.policy.edit_when == "watermark"
                    and self._sz(m) > self.policy.level(self.policy.clear_target)):
                log.info(json.dumps({  # logged (not printed unless logging is configured)
                    "event": "ctxwise.policy_warning", "session": self.session_id,
                    "message": (f"the system prompt alone ({self._sz(m)} {self.policy.unit}) is above clear_target "
                                f"({self.policy.level(self.policy.clear_target)}): clearing can never reach its target, "
                                "so it will fire in small batches; raise the budget or lower clear_target's share")}))
        self._update_user_memory(batch)
        return self.version

    def _undo_append(self, book: dict[str, Any] | None, numbered: int, thinking: bool | None) -> None:
        """Put the in-memory state back as it was before an append that raised."""
        if book is not None:
            self.memory.restore(book)
        self._counter_ids = numbered
        self._thinking_seen = thinking

    def _update_user_memory(self, batch: list[Message]) -> None:
        """Long-term memory from the committed batch; a failure becomes an event, never an
        exception of append() (which has already stored the batch). Text the memory decider
        left unread or unstored because of its bounds (pasted material, more new entries than
        one message may add) is a ``memory_skipped`` event with the reasons."""
        try:
            done = self.memory.observe_memory(batch)
        except Exception as exc:  # noqa: BLE001 - reported, not raised: the append is committed
            event = {"stage": "memory_failed", "trigger": type(exc).__name__, "at": _now(),
                     "affected_ids": [m.id for m in batch], "detail": {"error": str(exc)[:500]}}
            log.warning(json.dumps({"event": "ctxwise.memory_failed", "session": self.session_id,
                                    "user": self.user_id, "error": f"{type(exc).__name__}: {exc}"[:500]}))
        else:
            skipped = [op.reason for op in (getattr(done, "ops", None) or []) if op.reason.startswith(SKIPPED)]
            if not skipped:
                return
            reasons = list(dict.fromkeys(skipped))[:5]
            event = {"stage": "memory_skipped", "trigger": "bounds of the memory decider", "at": _now(),
                     "affected_ids": [m.id for m in batch], "detail": {"skipped": len(skipped), "reasons": reasons}}
            log.info(json.dumps({"event": "ctxwise.memory_skipped", "session": self.session_id,
                                 "user": self.user_id, "reasons": reasons}))
        try:
            self.version = self.manager.store.apply(self.user_id, self.session_id, [], [event],
                                                    expected_version=self.version)
        except CtxwiseError as store_exc:  # another writer got in: the log line stays the record
            log.warning(json.dumps({"event": f"ctxwise.{event['stage']}_unrecorded", "session": self.session_id,
                                    "error": str(store_exc)[:300]}))

    def pop(self, *, then: Iterable[Message | dict] | None = None) -> Message | None:
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
        if not self._context:
            return None
        last = self._context[-1]
        repl = self._coerce(list(then or []))
        if repl:
            kept, self._context = self._context, self._context[:-1]
            try:  # checked where it will stand: after the context without `last`
                self._check_batch(repl)
            finally:
                self._context = kept
        sizes = [self._sz(m) for m in repl]
        book = self.memory.state() if self.policy.facts else None
        self.memory.forget(last.id)
        self.memory.observe_facts(repl)
        event: dict[str, Any] = {
            "stage": "popped", "trigger": "pop()", "at": _now(), "affected_ids": [last.id],
            "size_before": self.size, "size_after": self.size - self._sizes.get(last.id, 0) + sum(sizes),
            "unit": self.policy.unit}
        if repl:
            event["detail"] = {"replaced_by": [m.id for m in repl]}
        try:
            version, msg = self.manager.store.pop(self.user_id, self.session_id, expected_version=self.version,
                                                  events=[event], state=self._state(), message_id=last.id,
                                                  **({"then_append": repl, "sizes": sizes} if repl else {}))
        except MessageNotStorable as e:  # a replacement the store cannot hold
            if book is not None:
                self.memory.restore(book)
            raise e.at(len(self._context) - 1) from None
        except NotNewestMessage:
            if book is not None:
                self.memory.restore(book)
            if repl:
                raise
            return self._pop_omitted()
        except BaseException:
            if book is not None:
                self.memory.restore(book)
            raise
        self.version = version
        self._saved_state = _dump(self._state())
        self._context.pop()
        self._size -= self._sizes.pop(last.id, 0)
        self._context.extend(repl)
        self._ids.update(m.id for m in repl)
        self._sizes.update((m.id, n) for m, n in zip(repl, sizes))
        self._size += sum(sizes)
        return msg

    def _pop_omitted(self) -> Message | None:
        """Pop the newest stored message when it is a reply left out of the context (an empty
        or refusal-only reply, see ctxwise.normalize): it leaves the transcript, the context
        is unchanged."""
        event = {"stage": "popped", "trigger": "pop()", "at": _now(), "affected_ids": [],
                 "size_before": self.size, "size_after": self.size, "unit": self.policy.unit,
                 "detail": {"omitted_reply": True}}
        version, msg = self.manager.store.pop(self.user_id, self.session_id, expected_version=self.version,
                                              events=[event], state=self._state())
        self.version = version
        return msg

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
        if not self._context:
            return None
        last = self._context[-1]
        new = update(last)
        metadata, beside = self._amendment(last, new)
        size = self._sz(new)
        event: dict[str, Any] = {
            "stage": "amended", "trigger": "amend()", "at": _now(), "affected_ids": [last.id],
            "size_before": self.size, "size_after": self.size - self._sizes.get(last.id, 0) + size,
            "unit": self.policy.unit, "detail": {"keys": sorted([*metadata, *(["beside"] if beside is not None else [])])}}
        try:
            version, msg = self.manager.store.amend(self.user_id, self.session_id, expected_version=self.version,
                                                    metadata=metadata, beside=beside, message_id=last.id, size=size,
                                                    events=[event], state=self._state())
        except MessageNotStorable as e:
            raise e.at(len(self._context) - 1) from None
        except NotNewestMessage:
            return self._amend_omitted(update)
        self.version = version
        self._saved_state = _dump(self._state())
        self._context[-1] = new
        self._size += size - self._sizes.get(last.id, 0)
        self._sizes[last.id] = size
        return msg

    @staticmethod
    def _amendment(old: Message, new: Message) -> tuple[dict[str, Any], list[Any] | None]:
        """What :meth:`amend`'s ``update`` changed: ``(top-level metadata keys set, the new
        beside items or None)``; FormatError for any other change."""
        if (new.id, new.role, new.name, new.blocks) != (old.id, old.role, old.name, old.blocks):
            raise FormatError(f"amend of message {old.id!r}", "only its metadata may change (its id, role, name and "
                              "blocks are what the transcript and the provider read); nothing was stored",
                              hint="append a new message instead, or pop() it first")
        gone = [k for k in old.metadata if k not in new.metadata and k != "ctxwise"]
        mine = {k: v for k, v in (new.metadata.get("ctxwise") or {}).items() if k != "beside"}
        if gone or mine != {k: v for k, v in (old.metadata.get("ctxwise") or {}).items() if k != "beside"}:
            raise FormatError(f"amend of message {old.id!r}", f"metadata keys may be set, not removed ({gone}), and "
                              "of ctxwise's markers only 'beside'; nothing was stored",
                              hint="set the keys to new values; ctxwise's own markers are its to write")
        metadata = {k: v for k, v in new.metadata.items() if k != "ctxwise" and old.metadata.get(k) != v}
        return metadata, (new.beside if new.beside != old.beside else None)

    def _amend_omitted(self, update: Callable[[Message], Message]) -> Message | None:
        """:meth:`amend` of a reply left out of the context (the newest stored row): the record
        changes, the context does not."""
        newest = max((r for r in self.manager.store.load(self.user_id, self.session_id).rows if r.current.kind is None),
                     key=lambda r: r.seq)  # appended rows: a summary row is ctxwise's own
        metadata, beside = self._amendment(newest.current, update(newest.current))
        event = {"stage": "amended", "trigger": "amend()", "at": _now(), "affected_ids": [newest.message_id],
                 "size_before": self.size, "size_after": self.size, "unit": self.policy.unit,
                 "detail": {"keys": sorted([*metadata, *(["beside"] if beside is not None else [])]), "omitted_reply": True}}
        try:
            version, msg = self.manager.store.amend(self.user_id, self.session_id, expected_version=self.version,
                                                    metadata=metadata, beside=beside, message_id=newest.message_id,
                                                    events=[event], state=self._state())
        except MessageNotStorable as e:
            raise e.at(len(self._context)) from None
        self.version = version
        self._saved_state = _dump(self._state())
        return msg

    def clear(self) -> int:
        """Reset the context to empty (the system prompt too; append it again). Durable and
        recorded: the rows are kept as ``reset``, the transcript gets a ``cleared`` row, the
        events a ``cleared`` event; the fact book starts empty. Message ids stay taken.
        Returns the new version; raises SessionConflict when another writer got in first."""
        ids = [m.id for m in self._context]
        event = {"stage": "cleared", "trigger": "clear()", "at": _now(), "affected_ids": ids,
                 "size_before": self.size, "size_after": self.overhead, "unit": self.policy.unit}
        book = self.memory.state() if self.policy.facts else None
        lossy, failed = self._lossy, set(self._failed_summaries)
        self.memory.reset()
        self._lossy, self._failed_summaries = False, set()
        try:
            self.version = self.manager.store.clear(self.user_id, self.session_id, expected_version=self.version,
                                                    events=[event], state=self._state())
        except BaseException:
            if book is not None:
                self.memory.restore(book)
            self._lossy, self._failed_summaries = lossy, failed
            raise
        self._saved_state = _dump(self._state())
        self._context, self._sizes, self._size = [], {}, 0
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

        new, notes = prepare_openai(openai_dicts(messages), len(self._context))
        cycle = self._open_cycle()
        prefix = to_openai(cycle, extras=False) if cycle else []
        read = self._read_after(from_openai, prefix, new, len(prefix))
        return self._append_numbered(read, [("id" in raw) for raw in new], notes)

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
        read = self._read_after(lambda ms: from_anthropic({"messages": ms}), prefix, new, skip)
        return self._append_numbered(read, [("id" in raw) for raw in new] if len(read) == len(new) else None)

    def _open_cycle(self) -> list[Message]:
        """The tool cycle still open at the tail of the context (its results may come in a
        later batch), or []."""
        tail = self._context[-64:]
        cycles = tool_cycles(tail)
        if cycles and cycles[-1].end == len(tail):
            return tail[cycles[-1].start:]
        return []

    @staticmethod
    def _read_after(reader: Callable[[list[dict]], list[Message]], prefix: list[dict], new: list[dict],
                    skip: int) -> list[Message]:
        """``new`` read after ``prefix`` (the open cycle, so new results find their calls);
        a FormatError's place counts the prefix, so it says so."""
        from .errors import FormatError

        try:
            return reader(prefix + new)[skip:]
        except FormatError as e:
            if not prefix:  # the reader's "message N" is the batch's item N
                raise FormatError(re.sub(r"^message (\d+)", r"item \1 of this append", e.place), e.rule,
                                  hint=e.hint) from None
            # the reader counted the prefix: name the item of this append instead
            place = re.sub(r"^message (\d+)", lambda m: (
                f"item {int(m.group(1)) - len(prefix)} of this append" if int(m.group(1)) >= len(prefix)
                else f"message {m.group(1)} of the session's last tool cycle, given before this append"), e.place)
            raise FormatError(f"{place} (read after the session's last tool cycle, {len(prefix)} message(s), so "
                              "results can answer its calls)", e.rule, hint=e.hint) from None

    def _append_numbered(self, read: list[Message], keep_id: list[bool] | None,
                         notes: dict[int, list[dict]] | None = None) -> int:
        """Give the read messages the session's own ids (unless the caller gave one) and
        append them; the numbering advances only when the append succeeds."""
        n = self._counter_ids
        batch = []
        for k, m in enumerate(read):
            if not (keep_id and keep_id[k]):
                n += 1
                m = m.model_copy(update={"id": f"msg-{n:06d}"})
            batch.append(m)
        version = self._append(batch, notes)
        self._counter_ids = n
        return version

    def close_pending(self, reason: str = "the turn was interrupted") -> int:
        """Answer every tool call still waiting for its result with an explicit interruption
        result (state ``error``, text ``"interrupted: <reason>"``), so a turn that crashed or
        was cancelled between a tool call and its result can go on with new user input.

        One ``tool`` message per unanswered call (ids continue the session's numbering), and
        one ``interrupted`` event. Returns the number of calls answered (0: nothing pending,
        nothing written). Raises :class:`~ctxwise.errors.SessionConflict` like :meth:`append`.
        """
        pending = self._pending_calls()
        if not pending:
            return 0
        text = f"interrupted: {reason}" if reason else "interrupted"
        batch = [Message(id="pending", role="tool", blocks=[ToolResultBlock(
            tool_use_id=u.id, name=u.name, state="error", output=[TextBlock(text=text)])],
            metadata={"ctxwise": {"interrupted": True}}) for u in pending]
        self._append_numbered(batch, None)
        self._record(CompactionEvent(
            stage="interrupted", trigger=text, unit=self.policy.unit, size_before=self.size, size_after=self.size,
            affected_ids=[m.id for m in self._context[-len(batch):]], detail={"tool_use_ids": [u.id for u in pending]}))
        return len(pending)

    def _pending_calls(self) -> list[Any]:
        """The tool_use blocks of the open tool cycle at the tail that have no result yet."""
        i = len(self._context) - 1
        while i >= 0 and self._context[i].role == "tool":
            i -= 1
        if i < 0 or self._context[i].role != "assistant" or not self._context[i].tool_uses:
            return []
        answered: dict[str, int] = {}
        for m in self._context[i + 1:]:
            for r in m.tool_results:
                answered[r.tool_use_id] = answered.get(r.tool_use_id, 0) + 1
        out = []
        for u in self._context[i].tool_uses:
            if answered.get(u.id, 0) > 0:
                answered[u.id] -= 1
            else:
                out.append(u)
        return out

    def _record(self, event: CompactionEvent) -> None:
        """Store one event written at append time (its own small write) and emit it."""
        self.version = self.manager.store.apply(self.user_id, self.session_id, [], [event.model_dump(mode="json")],
                                                expected_version=self.version)
        self.manager.emit(event)

    def _coerce(self, items: list[Message | dict]) -> list[Message]:
        out: list[Message] = []
        base = len(self._context)
        for k, item in enumerate(items):
            if isinstance(item, Message):
                out.append(item)
                continue
            try:
                out.append(Message.model_validate(item))
            except ValidationError as e:
                err = e.errors()[0]
                where = ".".join(str(x) for x in err.get("loc", ()))
                hint = " (for OpenAI-shaped dicts use append_openai())" if "role" in item and "blocks" not in item else ""
                raise PayloadInvalid(self.policy.provider, [Violation(base + k, "message-shape", f"{where}: {err.get('msg')}{hint}",
                                                                      where=f"item {k} of this append")]) from None
        return out

    def _check_batch(self, batch: list[Message], stored: list[Message] | None = None) -> None:
        """Check the new messages against the tail they join (O(batch + last cycle)); ids are
        checked over everything ``stored`` (omitted replies included)."""
        base = len(self._context)
        seen: set[str] = set()
        problems: list[Violation] = []
        for k, m in enumerate(batch if stored is None else stored):
            if m.id in self._ids or m.id in seen:
                where = "earlier in this batch" if m.id in seen else "in the session"
                problems.append(Violation(base + k, "duplicate-message-id", f"id {m.id!r} is already {where}"))
            seen.add(m.id)
        # The window starts at the last tool cycle still open at the tail, or at the end.
        start = base
        cycles = tool_cycles(self._context[-64:]) if self._context else []
        offset = max(0, base - 64)
        if cycles and cycles[-1].end + offset == base:
            start = cycles[-1].start + offset
        window = self._context[start:] + batch
        profile = get_profile(self.policy.provider)
        found = (provider_rules.check_tool_pairing(window, profile)
                 + provider_rules.check_empty_content(window, profile))
        last = tool_cycles(window)[-1] if tool_cycles(window) else None
        for v in found:
            if v.rule == provider_rules.UNANSWERED_TOOL_CALL and last is not None and last.end == len(window) and v.index == last.start:
                continue  # the in-flight cycle: its results may still come
            if v.rule == provider_rules.EMPTY_CONTENT and v.index < base - start:
                continue  # an earlier final assistant message is no longer final: not the batch's fault
            problems.append(Violation(v.index + start, v.rule, v.message, v.provider_error))
        for k, m in enumerate(batch):
            if m.role == "system" and base + k > 0:
                problems.append(Violation(base + k, provider_rules.SYSTEM_NOT_FIRST, "a system message may only be the first message"))
        problems += self._missing_reasoning(batch, profile)
        if problems:
            # the index is the message's place in the session's context; name the appended one too
            named = [dataclasses.replace(v, where=f"appended id {batch[v.index - base].id!r}")
                     if 0 <= v.index - base < len(batch) and not v.where and v.rule != "duplicate-message-id" else v
                     for v in problems]
            raise PayloadInvalid(self.policy.provider, sorted(named, key=lambda v: v.index))

    def _thinks(self) -> bool | None:
        """DeepSeek-style providers (reasoning passed back in tool spans): True once any message
        of the session carried reasoning, since thinking mode stays on from then (a payload
        whose reasoning was all pruned is still sent in it). Else None: the rules infer it from
        the messages (Anthropic reads it per turn, from the turn's first reply). What the app
        said with ``prepare(thinking=...)`` wins."""
        if get_profile(self.policy.provider).reasoning_passback != "tool_spans":
            return None
        if self._thinking_declared is not None:
            return self._thinking_declared
        return True if self._thinking_seen else None

    def _missing_reasoning(self, batch: list[Message], profile: Any) -> list[Violation]:
        """DeepSeek thinking mode: a reply of a tool-using span without ``reasoning_content`` is
        refused at append, before it is stored (else every later ``prepare()`` raises
        ``reasoning-content-missing`` and the session is stuck). Thinking mode is on once any
        message of the session carried reasoning. Checks the current user-to-user span only
        (O(span + batch)); a batch that turns reasoning on inside a span whose stored replies
        have none is refused too (the provider would refuse the turn). Source: api-docs.deepseek.com/guides/thinking_mode."""
        if profile.reasoning_passback != "tool_spans" or not any(m.role == "assistant" for m in batch):
            return []
        if self._thinking_declared is False:  # prepare(thinking=False): the app turned thinking off
            return []
        if self._thinking_seen is None:
            self._thinking_seen = any(m.thinking for m in self._context)
        if not (self._thinking_seen or self._thinking_declared or any(m.thinking for m in batch)):
            return []
        from .providers.reasoning import check_deepseek_reasoning
        from .units import last_user_index

        base = len(self._context)
        u = last_user_index(self._context)
        start = 0 if u is None else u
        window = self._context[start:] + batch
        found = check_deepseek_reasoning(window, profile, thinking=True)
        out = [Violation(v.index + start, v.rule, v.message, v.provider_error) for v in found if v.index + start >= base]
        earlier = [v for v in found if v.index + start < base]
        if earlier and not self._thinking_seen:
            # Reasoning switched on inside a turn whose earlier replies ran without it: the
            # provider refuses the whole turn from now on, and nothing can give those replies
            # reasoning. (Switched on between turns, the earlier turns are folded into a
            # summary at prepare(): compaction.reasoning_gap.)
            k = next(i for i, m in enumerate(batch) if m.thinking)
            first = earlier[0]
            out.append(Violation(base + k, first.rule,
                                 f"reasoning switched on inside a tool-using turn: message {first.index + start} "
                                 f"({window[first.index].id!r}) of this turn was stored without reasoning_content, so "
                                 f"{self.policy.provider} thinking mode would refuse every later request of the turn; "
                                 "append this reply without reasoning_content to finish the turn without thinking "
                                 "(thinking can start with the next user input)",
                                 profile.error_text(first.rule, first.index + start)))
        return out

    # -- prepare ----------------------------------------------------------------------------

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
        if checked_version is None:
            self._check_version()
        elif checked_version != self.version:
            raise SessionConflict(f"session {self.session_id!r} is at version {checked_version}, this Session object "
                                  f"read version {self.version}: another writer got in first; reload() and retry")
        if thinking is not None:
            self._thinking_declared = thinking
        if not self._context:
            raise PayloadInvalid(self.policy.provider, [Violation(0, "empty-payload",
                                 "the session has no messages yet: append() the system prompt and user input first")])
        head = self.memory.head_blocks()
        facts, evicted, evicted_changed = self.memory.facts_block(self._lossy)
        size_before = self._size + self._extra(head, facts)
        result = self._compact(self._context, head, facts, size_before)
        events = list(result.events)
        for _ in range(3):
            # User input that left the context puts its facts into the facts block (it changes
            # only here, where a summary or trim already broke the cached prefix). The block's
            # room comes from the same budget: when it grew past it, compact once more.
            kept = {m.id for m in result.messages}
            if not self.memory.lose([m for m in self._context if m.id not in kept]):
                break
            self._lossy = True
            facts, more_evicted, more_changed = self.memory.facts_block(True)
            evicted, evicted_changed = evicted + more_evicted, evicted_changed or more_changed
            size = self._measure(result.messages) + self._extra(head, facts)
            if facts is None or size <= self.policy.level(self.policy.hard_limit):
                break
            again = self._compact(result.messages, head, facts, size)
            result.messages = again.messages
            result.changes = result.changes + again.changes
            events += again.events
        if evicted_changed:
            size = self._measure(result.messages) + self._extra(head, facts)
            events.append(CompactionEvent(
                stage="facts_evicted", trigger=f"facts block over its share {self.policy.facts_share} of the budget",
                unit=self.policy.unit, size_before=size, size_after=size, affected_ids=[f.id for f in evicted],
                detail={"evicted": [f.text for f in evicted]}))
        if events:
            changes = result.changes
            sent = self._measure(result.messages) + self._extra(head, facts)
            if sent != events[-1].size_after:
                # the facts block appeared or grew after the stages measured: the size this
                # call sends, for whoever rebuilds the call from the events (the inspector)
                events[-1].detail["size_sent"] = sent
            records = [e.model_dump(mode="json") for e in events]
            self.version = self._persist(changes, records, result.messages)
            self._context = result.messages
            self._ids.update(m.id for m in result.messages)
            self._size = self._measure(self._context)
            for ev in events:
                self.manager.emit(ev)
        final = self._with_pinned(self._context, head, facts)
        if self._thinks() is False:
            # prepare(thinking=False) on a provider that passes reasoning back in tool spans:
            # the request runs without thinking, which needs none of it; sending it would make
            # the request look like thinking mode, whose rules the new replies cannot meet.
            from .compaction.context import sent_view

            final = [sent_view(m) for m in final]
        payload = render(final, self.policy.provider)
        # The last check runs on what is sent: the rendered payload against the request
        # types and the provider rules (providers.wire), after the rules on the canonical list.
        violations = (check_payload(final, self.policy.provider, thinking=self._thinks())
                      or check_wire(payload, self.policy.provider))
        if violations:
            raise PayloadInvalid(self.policy.provider, violations)
        return Prepared(
            messages=final,
            payload=payload,
            size=self._size + self._extra(head, facts),
            size_before=size_before,
            chars=sum(self.chars_counter.count_message(m) for m in final),
            unit=self.policy.unit,
            events=events,
            latency_ms=(time.perf_counter() - t0) * 1000,
        )

    def _persist(self, changes: list[Any], records: list[dict], new_context: list[Message]) -> int:
        """Store what compaction returned, with the new sizes of the rows it wrote and the
        engine state when it changed; keeps ``_sizes`` in step. Returns the new version."""
        written = {c.message_id for c in changes if isinstance(c, Replace)}
        written |= {c.summary.id for c in changes if isinstance(c, InsertSummary)}
        fresh = {m.id: self._sz(m) for m in new_context if m.id in written or m.id not in self._sizes}
        version = self.manager.store.apply(self.user_id, self.session_id, changes, records,
                                           expected_version=self.version,
                                           sizes={k: v for k, v in fresh.items() if k in written},
                                           state=self._state_if_changed())
        self._stored_state()
        self._sizes = {m.id: fresh[m.id] if m.id in fresh else self._sizes[m.id] for m in new_context}
        return version

    def _extra(self, head: list[Message], facts: Message | None) -> int:
        """Fixed overhead plus the pinned blocks, in the policy unit."""
        return self.overhead + sum(self._sz(m) for m in head) + (self._sz(facts) if facts is not None else 0)

    def _measure(self, messages: list[Message]) -> int:
        return sum(self._sz(m) for m in messages)

    def _compact(self, ctx: list[Message], head: list[Message], facts: Message | None, size: int):
        b = Budgeting(self.policy, self.counter, self._extra(head, facts))
        result = self.manager.pipeline.run(ctx, b, self.manager.summarizer, size=size, facts=self.memory.pinned_texts(),
                                           skip_summaries=frozenset(self._failed_summaries),
                                           thinking_mode=self._thinks())
        self._failed_summaries.update(e.detail["key"] for e in result.events
                                      if e.stage == "summarizer_failed" and "key" in e.detail)
        return result

    def _with_pinned(self, ctx: list[Message], head: list[Message], facts: Message | None) -> list[Message]:
        """The payload list (a new list: the session's own list grows with the next append).

        The user-memory block goes right after the system prompt. The facts block goes where
        additions never move it: right after the last summary, or right after the head when
        there is none (``facts_mode="when_compacted"``: it changes only when a summary or trim
        already broke the prefix there); with ``facts_mode="always"`` before the current user
        input."""
        out = list(ctx)
        if facts is not None:
            if self.policy.facts_mode == "always":
                at = next((i for i in range(len(out) - 1, -1, -1) if is_user_input(out[i]) and out[i].kind is None), None)
            else:
                summaries = [i for i, m in enumerate(out) if m.kind == "summary"]
                at = summaries[-1] + 1 if summaries else (1 if out and out[0].role == "system" else 0)
            if at is not None:
                out.insert(at, facts)
        if head:
            at = 1 if out and out[0].role == "system" else 0
            out[at:at] = head
        return out

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
    ``policy``: the session settings for new sessions; an existing session keeps the policy it
    was created with, and only the fields this one sets are compared with it (see
    :meth:`session`). ``runtime``: the process settings
    (:class:`~ctxwise.policy.RuntimeSettings`: which summarizer, its model, endpoint, timeout,
    retries), never stored or compared. ``counter``: the :class:`~ctxwise.tokens.TokenCounter`
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

    def session(self, user_id: str, session_id: str, *, tools: list[dict] | None = None,
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
