"""LangChain v1 middleware: ctxwise keeps a ``create_agent`` agent's context inside a budget.

    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver
    from ctxwise import ContextManager, Policy
    from ctxwise.integrations.langchain import CtxwiseMiddleware

    cm = ContextManager("sqlite:///ctxwise.db", Policy(budget=60_000, unit="tokens"))
    agent = create_agent(model, tools, system_prompt=PROMPT, middleware=[CtxwiseMiddleware(cm)],
                         checkpointer=InMemorySaver())
    agent.invoke({"messages": [{"role": "user", "content": "hi"}]}, {"configurable": {"thread_id": "t1"}})

How it works (``pip install 'ctxwise[langchain]'``):

* The agent's own record, ``state["messages"]``, is never edited: every message stays there.
* Before each model call (``wrap_model_call`` / ``awrap_model_call``) the messages the state
  gained since the last call are appended to a ctxwise session (ids: the LangChain message
  ids), ``prepare()`` compacts and checks the context, and the model gets that view through
  ``request.override(messages=...)``. A message ctxwise did not change is passed as the very
  LangChain object the state holds; a cleared result, a summary or a pinned block is rebuilt
  from ctxwise's checked chat payload.
* ctxwise's record (which session, the last message appended, the store version) is written
  back through the model call's state update (``ExtendedModelResponse`` with a ``Command``),
  into a private state field keyed by the middleware's ``key``; the context itself (clears,
  summaries) lives in the ctxwise store. So clears survive turns and stay byte-identical from
  call to call, unlike ``ContextEditingMiddleware``, which re-edits a throwaway copy on every
  call and persists nothing (langchain-ai/langchain#37815). With a LangGraph checkpointer the
  same ``thread_id`` resumes the same ctxwise session; a new process on the same checkpoint and
  the same ctxwise store sends the same next request, byte for byte.
* A failed call: a ``ToolMessage`` with ``status="error"`` (a tool error LangChain handled) is
  stored as an error result; a call with malformed arguments is read as a call (create_agent
  answers it with an error ``ToolMessage``); a tool call left without its ``ToolMessage`` (the
  tool raised out of ``invoke``, the run was cancelled or hit its recursion limit) is answered
  at the next model call with an explicit ``"interrupted: ..."`` error result
  (:meth:`ctxwise.Session.close_pending`, an ``interrupted`` event) in ctxwise's record and
  view, so the thread goes on; ``state["messages"]`` stays as LangGraph wrote it.
* The recall tool (:data:`ctxwise.RECALL_TOOL_NAME`) is registered with the agent (``recall=True``),
  so the model can fetch a cleared result back by the ``tool_use_id`` its placeholder names.

Importing this module needs ``langchain`` (v1) and ``langgraph``; without them it raises
:class:`~ctxwise.MissingExtra` (``pip install 'ctxwise[langchain]'``). ``import ctxwise`` never
imports them.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Annotated, Any, NotRequired

from .. import MissingExtra

try:
    from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
    from langchain.agents.middleware.types import ExtendedModelResponse, PrivateStateAttr
    from langchain.tools import InjectedState, tool
    from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
    from langchain_core.messages import convert_to_messages, convert_to_openai_messages
    from langchain_core.utils.function_calling import convert_to_openai_tool
    from langgraph.config import get_config
    from langgraph.types import Command
except ModuleNotFoundError as e:  # pragma: no cover - exercised by tests/integrations/test_extras.py
    raise MissingExtra("ctxwise.integrations.langchain", "langchain", (e.name or "langchain").split(".")[0]) from None

from .. import (RECALL_TOOL_NAME, ContextManager, Message, Session, SessionPool, ThinkingBlock, ToolResultBlock,
                recall_tool_output, recall_tool_schema)
from ..formats import from_openai
from ._record import branch_id, digest, follow, pool_key, pooled_session, retry_races
from ..providers import render

__all__ = ["CtxwiseMiddleware", "CtxwiseState", "STATE_FIELD"]

STATE_FIELD = "ctxwise"
"""The private agent-state field: ``{middleware key: record}``, one record per middleware
instance (see :meth:`CtxwiseMiddleware.record`)."""
_STRIPES = 64
"""How many locks the model calls of a middleware spread their thread_ids over."""


def _merge_records(old: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any]:
    """Reducer of :data:`STATE_FIELD`: records are merged key by key, so two ctxwise middlewares
    in one agent never overwrite each other's record."""
    return {**(old or {}), **(new or {})}


class CtxwiseState(AgentState[Any]):
    """The agent state with ctxwise's private field (not part of the agent's input or output)."""

    ctxwise: NotRequired[Annotated[dict[str, dict[str, Any]], PrivateStateAttr, _merge_records]]


def _to_chat(messages: Sequence[BaseMessage]) -> tuple[list[dict[str, Any]], dict[str, list[ThinkingBlock]]]:
    """LangChain messages as OpenAI chat dicts carrying the LangChain ids (``id`` key), and, by
    id, the signed thinking of the assistant messages that have any (see
    :func:`_reasoning_out_of_content`). Content parts ctxwise does not hold are read as
    :func:`_carried` text; a call with an empty id gets :func:`_blank_id` (and so does the
    ``ToolMessage`` answering it with ``tool_call_id=""``)."""
    out, signed = [], {}
    blank: list[str] = []  # the empty-id calls of the latest assistant message, in order
    for m, d in zip(messages, convert_to_openai_messages(list(messages)), strict=True):
        d = dict(d)
        if m.id:
            d["id"] = m.id
        if isinstance(m, AIMessage):
            # a call whose arguments did not parse: the agent answers it with an error
            # ToolMessage (create_agent's _patch_invalid_tool_calls) and the chat models send it
            # as a tool call, so it is one here too (its raw arguments kept); one whose id is
            # None gets no answer and is left out
            calls = [*(d.get("tool_calls") or []), *(
                {"id": c["id"], "type": "function", "function": {"name": c.get("name") or "", "arguments": c.get("args") or ""}}
                for c in m.invalid_tool_calls if c.get("id") is not None)]
            blank = []
            for c in calls:
                if not c.get("id"):
                    c["id"] = _blank_id(str(m.id), len(blank))
                    blank.append(c["id"])
            if calls:
                d["tool_calls"] = calls
        elif isinstance(m, ToolMessage) and not m.tool_call_id and blank:
            d["tool_call_id"] = blank.pop(0)
        if isinstance(d.get("content"), list):
            d["content"] = _readable_parts(d["content"], d.get("role") == "assistant")
        if d.get("role") == "assistant" and isinstance(d.get("content"), list):
            d, blocks = _reasoning_out_of_content(d)
            if m.id and any(b.signature is not None or b.redacted for b in blocks):
                signed[m.id] = blocks
        out.append(d)
    return out, signed


BLANK = "#ctxwise-blank-"
"""What marks the id ctxwise gives a tool call whose id is empty (``<message id>#ctxwise-blank-<k>``):
rebuilt messages send ``""`` again."""


def _blank_id(message_id: str, k: int) -> str:
    """The id of the ``k``-th call with an empty id in the assistant message ``message_id``."""
    return f"{message_id}{BLANK}{k}"


CALL_PARTS = frozenset({"tool_call", "tool_call_chunk", "invalid_tool_call", "function_call"})
"""Assistant content parts that repeat a call ``tool_calls`` / ``invalid_tool_calls`` already hold
(LangChain v1 ``tool_call`` blocks; ChatOpenAI's Responses mode ``function_call`` items)."""


def _readable_parts(content: list[Any], assistant: bool) -> list[Any]:
    """A converted message's content parts as ctxwise reads them: text, images and reasoning as
    they are; an assistant's call parts (:data:`CALL_PARTS`) left out (the calls are read from
    ``tool_calls``); any other part (a PDF ``file``, ``input_audio``, a Responses item such as
    ``web_search_call`` or ``refusal``) as its :func:`_carried` text."""
    out: list[Any] = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if isinstance(part, str):
            out.append({"type": "text", "text": part})
        elif kind in ("text", "image_url") or _thinking_part(part) is not None:
            out.append(part)
        elif assistant and kind in CALL_PARTS:
            continue
        else:
            out.append({"type": "text", "text": _carried(part)})
    return out


def _carried(part: Any) -> str:
    """The text ctxwise holds in place of a content part it cannot hold (a file, audio, a
    provider item): its type, name and size, e.g. ``[file part a.pdf, application/pdf, 120 KB:
    sent as given]``. The model gets the part itself (the message passes through unchanged);
    ctxwise counts this text for it (about 15 tokens)."""
    if not isinstance(part, dict):
        return f"[{type(part).__name__} part: sent as given]"
    kind = str(part.get("type"))
    inner = part.get(kind)
    body: dict[str, Any] = inner if isinstance(inner, dict) else part
    name = body.get("filename") or body.get("format") or body.get("mime_type") or body.get("name") or body.get("id") or ""
    size = len(json.dumps(part, default=str))
    return f"[{kind} part{' ' + str(name) if name else ''}, {size // 1024 or 1} KB: sent as given]"


def _thinking_part(part: Any) -> ThinkingBlock | None:
    """One content block of an AIMessage as ctxwise thinking, or None when it is not reasoning:
    LangChain's standard ``reasoning`` block (text or summary; an Anthropic signature in
    ``extras``), Anthropic's ``thinking`` (with its ``signature``) and ``redacted_thinking``
    (its opaque ``data``), also when wrapped as a ``non_standard`` block."""
    if not isinstance(part, dict):
        return None
    kind = part.get("type")
    if kind == "non_standard" and isinstance(part.get("value"), dict) and \
            part["value"].get("type") in ("thinking", "redacted_thinking"):
        return _thinking_part(part["value"])
    if kind == "reasoning":
        summary = part.get("summary") or []
        text = part.get("reasoning") or "\n\n".join(s.get("text", "") for s in summary if isinstance(s, dict))
        extras = part.get("extras")
        sig = part.get("signature", extras.get("signature") if isinstance(extras, dict) else None)
        return ThinkingBlock(thinking=text or "", signature=sig if isinstance(sig, str) else None)
    if kind == "thinking":
        sig = part.get("signature")
        return ThinkingBlock(thinking=part.get("thinking") or "", signature=sig if isinstance(sig, str) else None)
    if kind == "redacted_thinking":
        return ThinkingBlock(thinking=str(part.get("data") or ""), redacted=True)
    return None


def _reasoning_out_of_content(d: dict[str, Any]) -> tuple[dict[str, Any], list[ThinkingBlock]]:
    """An assistant message's reasoning content blocks (LangChain's standard ``reasoning``
    block, what ChatOpenAI's Responses mode returns, and Anthropic's ``thinking`` /
    ``redacted_thinking``) moved into the chat shape's ``reasoning_content``, which ctxwise
    reads as thinking: the chat wire has no such content part, and the provider profile
    decides whether it is sent back. Also returns each of those blocks as a ctxwise
    :class:`~ctxwise.ThinkingBlock`, signature and redaction kept: Anthropic requires the
    latest assistant thinking sent back byte-identical, signature included."""
    blocks, rest = [], []
    for part in d["content"]:
        t = _thinking_part(part)
        if t is None:
            rest.append(part)
        else:
            blocks.append(t)
    if not blocks:
        return d, []
    reasoning = "\n\n".join(b.thinking for b in blocks if b.thinking and not b.redacted)
    d = {**d, "content": rest or ""}
    if reasoning:
        d["reasoning_content"] = "\n\n".join(x for x in (d.get("reasoning_content"), reasoning) if x)
    return d, blocks


def _canonical(messages: Sequence[BaseMessage], prefix: Sequence[BaseMessage]) -> list[Message]:
    """``messages`` as canonical ctxwise messages; ``prefix`` (the assistant message whose calls
    the first results answer) is read for pairing and dropped. An assistant message with signed
    or redacted thinking gets those blocks as they came (one per block, signatures kept)
    instead of the one joined ``reasoning_content`` block."""
    chat, signed = _to_chat([*prefix, *messages])
    out = from_openai(chat, strict=False)[len(prefix):]
    failed = {m.id for m in messages if isinstance(m, ToolMessage) and m.status == "error"}
    return [m.model_copy(update={"blocks": [*signed[m.id], *(b for b in m.blocks if not isinstance(b, ThinkingBlock))]})
            if m.id in signed and m.role == "assistant" else
            m.model_copy(update={"blocks": [b.model_copy(update={"state": "error"}) if isinstance(b, ToolResultBlock)
                                            else b for b in m.blocks]})
            if m.id in failed and m.role == "tool" else m for m in out]


def _from_canonical(m: Message) -> BaseMessage:
    """One canonical message ctxwise changed (a placeholder, a summary, a pinned block) as a
    LangChain message, through ctxwise's own chat rendering; signed or redacted thinking goes
    back into the content as Anthropic ``thinking`` / ``redacted_thinking`` blocks."""
    rendered = render([m], "openai")
    built = convert_to_messages(rendered)
    if len(built) != 1:  # a tool message holding several results: LangChain has one per result
        return built[0] if built else SystemMessage(content="")
    msg = built[0]
    msg.id = m.id
    if isinstance(msg, ToolMessage) and BLANK in msg.tool_call_id:
        msg.tool_call_id = ""
    if isinstance(msg, AIMessage) and any(BLANK in str(c.get("id")) for c in msg.tool_calls):
        msg.tool_calls = [{**c, "id": "" if BLANK in str(c.get("id")) else c.get("id")} for c in msg.tool_calls]
    if isinstance(msg, ToolMessage) and any(r.state == "error" for r in m.tool_results):
        msg.status = "error"  # a failed result (ToolNode's handled error, an interruption) stays one
    if isinstance(msg, AIMessage) and any(b.signature is not None or b.redacted for b in m.thinking):
        text = msg.content if isinstance(msg.content, list) else \
            ([{"type": "text", "text": msg.content}] if msg.content else [])
        msg.content = [*({"type": "redacted_thinking", "data": b.thinking} if b.redacted else
                         {"type": "thinking", "thinking": b.thinking, "signature": b.signature or ""}
                         for b in m.thinking), *text]
    return msg


class CtxwiseMiddleware(AgentMiddleware[CtxwiseState, Any, Any]):
    """Keeps the context a ``create_agent`` agent sends to its model inside ctxwise's budget.

    ``manager`` is a :class:`ctxwise.ContextManager` (its policy, store and summarizer are
    used; ``Policy(budget=..., unit="tokens", provider="openai")`` is the usual choice).
    ``user_id`` scopes the sessions (``config["configurable"]["user_id"]`` overrides it per run).
    ``key`` names this instance: its record is ``state["ctxwise"][key]`` and its sessions are
    ``"<thread_id>:<key>"`` (a run without a ``thread_id`` gets a fresh id, kept in its record);
    two instances in one agent need different keys. ``recall`` registers the recall tool.
    ``sessions``: the pool the open sessions are kept in between model calls (default: a
    :class:`ctxwise.SessionPool` of 1,024 sessions and 128 MiB; pass one to share or size it).

    Raises, from the model call: :class:`~ctxwise.PayloadInvalid` (a message breaks a
    provider rule; nothing is stored), :class:`~ctxwise.ContextBudgetExceeded` (the pinned
    content alone does not fit), :class:`~ctxwise.SessionConflict` when the thread's record was
    saved against another ctxwise store (or an older copy of it).

    The thread's state is the truth for what the user changed: when it no longer continues the
    ctxwise session (a ``RemoveMessage`` or ``SummarizationMiddleware`` removed messages,
    ``update_state`` corrected one, an earlier checkpoint was resumed, the same ``thread_id`` was
    invoked afresh without a checkpointer), the state is appended to a new branch of the session
    (``"<thread_id>:<key>~<12 hex>"``, a ``branched`` event naming the parent) and the record
    follows that branch; the parent session is left as it was.
    """

    state_schema = CtxwiseState

    def __init__(self, manager: ContextManager, *, user_id: str = "default", key: str = "ctxwise",
                 recall: bool = True, sessions: SessionPool[tuple[str, str, str], Session] | None = None) -> None:
        if not isinstance(manager, ContextManager):
            raise TypeError(f"CtxwiseMiddleware needs a ctxwise.ContextManager, got {type(manager).__name__}")
        self.manager = manager
        self.user_id = user_id
        self.key = key
        self.sessions: SessionPool[tuple[str, str, str], Session] = SessionPool() if sessions is None else sessions
        """The open sessions, bounded by count and by the bytes their contexts hold."""
        self._lock = threading.Lock()
        self._threads = [threading.Lock() for _ in range(_STRIPES)]
        """Model calls on one thread_id take one of these (by the id's hash), so two concurrent
        invokes on a thread do not write the same pooled session at once."""
        self.tools = [self._recall_tool()] if recall else []
        self.last_prepared: Any = None
        """The :class:`ctxwise.Prepared` of the latest model call (its ``size``, ``events``, ...)."""

    @property
    def name(self) -> str:
        """Unique per key, so several instances can sit in one agent."""
        return "CtxwiseMiddleware" if self.key == "ctxwise" else f"CtxwiseMiddleware[{self.key}]"

    # -- the model call ------------------------------------------------------------------

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], Any]) -> Any:
        """Send the model ctxwise's view; return its reply with ctxwise's record as a state update."""
        view, record = self._prepare(request)
        return self._respond(handler(_with_view(request, view)), record)

    async def awrap_model_call(self, request: ModelRequest,
                               handler: Callable[[ModelRequest], Awaitable[Any]]) -> Any:
        """The async form of :meth:`wrap_model_call` (the store work runs in a worker thread)."""
        view, record = await asyncio.to_thread(self._prepare, request)
        return self._respond(await handler(_with_view(request, view)), record)

    def _respond(self, response: Any, record: dict[str, Any]) -> ExtendedModelResponse:
        if isinstance(response, AIMessage):
            response = ModelResponse(result=[response])
        return ExtendedModelResponse(model_response=response,
                                     command=Command(update={STATE_FIELD: {self.key: record}}))

    # -- ctxwise's side ------------------------------------------------------------------

    def record(self, state: Mapping[str, Any]) -> dict[str, Any] | None:
        """This instance's record in an agent ``state``: ``{"user_id", "session_id", "last"
        (the id of the last LangChain message appended), "version" (the ctxwise store version
        after the call's prepare), "payload_sha256" (of the chat payload ctxwise checked)}``,
        or None before the first model call."""
        return (state.get(STATE_FIELD) or {}).get(self.key)

    def session(self, state: Mapping[str, Any], tools: list[dict[str, Any]] | None = None) -> Session:
        """The ctxwise session behind a thread's ``state`` (to read its ``events()``,
        ``transcript()``, ``original(...)``). Raises KeyError before the first model call."""
        rec = self.record(state)
        if rec is None:
            raise KeyError(f"no ctxwise record {self.key!r} in this state yet (no model call so far)")
        return self._session(rec["user_id"], rec["session_id"], tools or [])

    def _session(self, user_id: str, session_id: str, tools: list[dict[str, Any]]) -> Session:
        """The session, from :attr:`sessions` when held (reloaded when another writer moved it
        on), else opened; put back (weighed) in the pool."""
        return pooled_session(self.manager, self.sessions, self._lock, user_id, session_id, tools)

    def _prepare(self, request: ModelRequest) -> tuple[list[Any], dict[str, Any]]:
        """:meth:`_prepare_once`, one model call per thread_id at a time in this middleware, tried
        again (reloaded, after a jittered backoff: :func:`._record.retry_races`) when its write
        lost a race to another writer of the session (another middleware or process): nothing
        of a lost write is stored, and the retry resumes from what the store holds."""
        seen: list[Session] = []

        def moved() -> bool:
            s = seen[-1] if seen else None
            return s is not None and s.version != self.manager.store.version(s.user_id, s.session_id)

        thread = str(_configurable().get("thread_id"))
        with self._threads[hash(thread) % _STRIPES]:
            return retry_races(lambda: self._prepare_once(request, seen), moved)

    def _prepare_once(self, request: ModelRequest, seen: list[Session]) -> tuple[list[Any], dict[str, Any]]:
        configurable = _configurable()
        rec = self.record(dict(request.state or {}))
        thread = configurable.get("thread_id")
        user_id = rec["user_id"] if rec else str(configurable.get("user_id") or self.user_id)
        session_id = rec["session_id"] if rec else f"{thread if thread else uuid.uuid4()}:{self.key}"
        tools = [t for t in (_tool_schema(t) for t in request.tools) if t is not None]
        session = self._session(user_id, session_id, tools)
        seen.append(session)

        history = list(request.messages)
        start, why = self._start(history, rec, session)
        if why is not None:
            # the thread's state changed under the session (messages removed or corrected, an
            # earlier checkpoint resumed, a fresh run on a reused thread_id): the state is the
            # truth, so it goes to a new branch of the session, recorded there
            parent, session_id = session.session_id, branch_id(session.session_id)
            session = self._session(user_id, session_id, tools)
            seen.append(session)
            session.record_branch(parent, why)
        if request.system_message is not None and request.system_message.content and not session.messages:
            # the system prompt opens the session, under an id of ours (it is not in the state);
            # an empty one (create_agent(system_prompt="")) is no message and is not stored
            system = request.system_message.model_copy(update={"id": f"{self.key}-system"})
            session.append(_canonical([system], []))
        for k, chunk in enumerate(_chunks(history, start)):
            if not isinstance(chunk[0], ToolMessage):
                # calls of an earlier step that never got their results (a tool raised out of
                # invoke, the run was cancelled): answered as interrupted, so the thread goes on
                session.close_pending(INTERRUPTED)
            prefix = [m for m in history[:start] if isinstance(m, AIMessage) and m.tool_calls][-1:] \
                if k == 0 and isinstance(chunk[0], ToolMessage) else []
            session.append(_canonical(chunk, prefix))
        prepared = session.prepare()
        self.last_prepared = prepared
        self.sessions.put(pool_key(user_id, session_id, tools), session)  # weighed again, compacted

        by_id = {m.id: m for m in history if m.id}
        read = {c.id: c for c in _canonical(history, [])}  # each read with its calls before it
        view: list[Any] = []
        for m in prepared.messages:
            if m.id == f"{self.key}-system":
                continue  # the system prompt travels as request.system_message
            lc = by_id.get(m.id)
            view.append(lc if lc is not None and _same(m, read.get(m.id)) else _from_canonical(m))
        record = {"user_id": user_id, "session_id": session_id,
                  "last": history[-1].id if history else None, "version": session.version,
                  "digest": _digest(history),
                  "payload_sha256": hashlib.sha256(json.dumps(prepared.payload, ensure_ascii=False).encode()).hexdigest()}
        return view, record

    def _start(self, history: Sequence[BaseMessage], rec: dict[str, Any] | None, session: Session) -> tuple[int, str | None]:
        """Index in ``history`` of the first message ctxwise has not seen, or ``(0, reason)``
        when the thread's state no longer continues the session (see :func:`._record.follow`)."""
        before, k = "start", 0
        for m in history:
            # a state always holds ids (add_messages sets them); the error ToolMessages
            # create_agent adds to each request for invalid calls, and a bare request, may not:
            # the id follows from the message before, the same at every call
            if not m.id:
                m.id = f"{before}+{k}"
                k += 1
            else:
                before, k = m.id, 1
        ids = [str(m.id) for m in history]
        return follow(ids, rec, session, session.session_id, state="this thread's agent state",
                      prefix_digest=lambda at: _digest(history[:at + 1]))

    # -- the recall tool -----------------------------------------------------------------

    def _recall_tool(self) -> Any:
        middleware = self

        @tool(RECALL_TOOL_NAME, description=recall_tool_schema("openai")["function"]["description"])
        def recall_tool_result(tool_use_id: str, state: Annotated[dict[str, Any], InjectedState]) -> str:
            """Fetch a cleared tool result back by the tool_use_id its placeholder names."""
            rec = middleware.record(state)
            if rec is None:
                return f"no ctxwise session in this thread yet; nothing to recall for {tool_use_id!r}"
            session = middleware._session(rec["user_id"], rec["session_id"], [])
            return recall_tool_output(session, {"tool_use_id": tool_use_id})[0]

        return recall_tool_result


INTERRUPTED = "the tool call got no result: the run stopped before its tool returned (it raised, or was cancelled)"
"""The reason :meth:`ctxwise.Session.close_pending` records for a call the thread left unanswered."""


def _with_view(request: ModelRequest, view: list[Any]) -> ModelRequest:
    """The request the next handler gets: ``request`` itself when ctxwise's view is its message
    list as it is (the same objects in the same order: nothing to compact), so the middlewares
    after ctxwise see the very request they would see without it (some edit its list in place);
    else the request with the view as its messages."""
    same = len(view) == len(request.messages) and all(a is b for a, b in zip(view, request.messages))
    return request if same else request.override(messages=view)


def _configurable() -> Mapping[str, Any]:
    """The run's ``config["configurable"]``; empty outside a LangGraph run (``wrap_model_call``
    called directly, as LangChain's own middleware unit tests call middlewares)."""
    try:
        config = get_config()
    except RuntimeError:  # "Called get_config outside of a runnable context"
        return {}
    return (config or {}).get("configurable") or {}



def _chunks(history: Sequence[BaseMessage], start: int) -> list[list[BaseMessage]]:
    """``history[start:]`` cut before each message that is not a tool result but follows
    tool calls some of which got no ``ToolMessage`` (a tool raised out of ``invoke``, or the
    run was cancelled, between the model's call and its result): there the unanswered calls
    are closed (:meth:`ctxwise.Session.close_pending`) before the rest is appended."""
    out: list[list[BaseMessage]] = []
    waiting: set[str] = set()
    for i, m in enumerate(history):
        cut = not isinstance(m, ToolMessage) and bool(waiting)
        if isinstance(m, AIMessage):
            waiting = {str(c.get("id")) for c in [*m.tool_calls, *m.invalid_tool_calls] if c.get("id")}
        elif isinstance(m, ToolMessage):
            waiting.discard(m.tool_call_id)
        else:
            waiting = set()
        if i < start:
            continue
        if not out or (cut and out[-1]):
            out.append([])
        out[-1].append(m)
    return [c for c in out if c]


def _digest(messages: Sequence[BaseMessage]) -> str:
    """What the record keeps of ``messages`` (type, id, name, content, calls, result id and
    status of each), so a message corrected or removed in the state is noticed."""
    return digest(json.dumps({"type": m.type, "id": m.id, "name": m.name, "content": m.content,
                              "calls": getattr(m, "tool_calls", None), "bad": getattr(m, "invalid_tool_calls", None),
                              "result": getattr(m, "tool_call_id", None), "status": getattr(m, "status", None)},
                             sort_keys=True, default=str, ensure_ascii=False) for m in messages)


def _tool_schema(t: Any) -> dict[str, Any] | None:
    """A tool as the Chat Completions schema ctxwise counts inside the budget (None: a
    provider built-in tool it cannot express)."""
    try:
        return dict(convert_to_openai_tool(t))
    except Exception:  # noqa: BLE001 - a provider-specific built-in tool dict: not counted
        return None


def _same(m: Message, read: Message | None) -> bool:
    """Whether ctxwise sends ``m`` as the state holds it (``read``: the state's message as ctxwise
    reads it); then the LangChain object itself is passed on."""
    return read is not None and m.role == read.role and \
        [b.model_dump() for b in m.blocks] == [b.model_dump() for b in read.blocks]
