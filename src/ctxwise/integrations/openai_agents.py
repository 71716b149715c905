"""ctxwise as an OpenAI Agents SDK ``Session`` (``pip install 'ctxwise[openai-agents]'``).

    from agents import Runner
    from ctxwise import ContextManager, Policy
    from ctxwise.integrations.openai_agents import CtxwiseSession

    cm = ContextManager("sqlite:///ctxwise.db", Policy(budget=60_000, unit="tokens", provider="openai_responses"))
    session = CtxwiseSession(cm.session("user-42", "chat-7"))
    result = await Runner.run(agent, "Where is my order?", session=session, run_config=session.run_config())

What the SDK calls, and what this class does (the protocol is ``agents.memory.Session`` of
openai-agents 0.24, ``src/agents/memory/session.py``; the Runner's use of it is
``src/agents/run_internal/session_persistence.py``):

* ``add_items(items)``: the Runner's Responses input items (user / assistant ``message``,
  ``reasoning``, ``function_call``, ``function_call_output``) are appended to the ctxwise session
  as canonical messages: a run of assistant-side items (reasoning, message, function_call) is one
  assistant message, so a reasoning item stays with the item it precedes; each output and each
  user message is a message of its own. A ``function_call_output`` may come in a later batch than
  its ``function_call`` (it is matched by ``call_id``). Each message keeps the items exactly as
  written (``metadata["openai_agents"]["items"]``; never sent).
* Hosted and built-in tool items (every other Responses input item type of the installed
  ``openai`` package: ``web_search_call``, ``file_search_call``, ``computer_call`` /
  ``computer_call_output``, ``code_interpreter_call``, ``image_generation_call``, ``mcp_*``,
  shell / patch / custom tool items, ``item_reference``, ...) are not read into canonical
  blocks: each is kept, as written, with the message of the item before it; hosted items that
  open a batch go with the batch's next message (ahead of its items), and a batch of hosted
  items only (the Runner's ``computer_call_output``) updates the message stored before it in
  place (``Session.amend``: one write, one ``amended`` event; the transcript is unchanged, as
  its text is; nothing is recorded as retracted). The view sends each back right after the
  item it followed when it validates as the ``openai`` package's input item param of its type
  (``ResponseInputItemParam``); one that does not stays in the record only. Every hosted item
  sent is **counted** in its message's size (``Message.beside``: its JSON text with the
  session's counter, an inline screenshot by the image rule), so the budget holds it and
  compaction fires for it; it is not checked by ctxwise's wire check, and leaves the view with
  its message (a summary stands for both). Rendered for any other provider (replay, the
  inspector), they are left out: only the canonical blocks are rendered.
* ``get_items()`` (no limit): the ctxwise **context view**, what the model should read: the
  session is prepared (compacted if the policy says so, checked) and its Responses payload
  returned, where every message ctxwise did not edit is given back **exactly as written**
  (same fields, order and types: with nothing compacted the SDK cannot tell ctxwise is there).
  The transcript keeps every message.
* Message content ctxwise has no block for (a ``refusal`` part, ``input_file``, ...) is read
  as a short text part for counting and compaction, a ``system`` / ``developer`` message
  after the first item as a user message, and a ``function_call_output`` answering no call
  waiting for it (its call is not in the session, or was answered already) as a user note
  ``[function_call_output <call_id>] <output>``; the items as written are what is sent while
  their message is unedited. A ``message`` item without a role is carried like a hosted item.
* ``get_items(limit=N)``: the newest N items of the record **as they were written** (a cleared
  result too: its original), read without compacting or writing anything. The Runner compares
  the tail it wrote with what it reads back when it settles or rewinds a write, so the tail must
  be what it wrote; a summary standing for older items is rendered as it is sent.
* A reply ctxwise leaves out of the context (an empty or refusal-only assistant message, see
  ``ctxwise.normalize``) is stored and kept in the transcript only. ``pop_item()`` right after
  it removes it; hosted items arriving alone after it are kept with it (in the record; like
  the reply, they are not sent).
* ``pop_item()``: removes and returns the item appended last (``Session.pop()``; the transcript
  records the retraction). When that item shared its assistant message with earlier items,
  the message is replaced by one holding those, as they were written, in the same write
  (``Session.pop(then=...)``): the call pops or raises and changes nothing. A hosted item
  popped is an update of its message (``Session.amend``), as its arrival was.
* A tool call left without its output when the next batch starts with other input (a run
  paused at a tool approval and a new run begun instead of resuming it) is answered with an
  explicit interruption result (``Session.close_pending``: an ``error`` output
  ``"interrupted: ..."``, an ``interrupted`` event), so the session goes on.
* ``clear_session()``: ``Session.clear()`` (the transcript keeps everything, with a record of
  the reset).
* ``run_compaction(args)``: the post-turn hook (``OpenAIResponsesCompactionAwareSession``). In
  0.24 the Runner calls it with ``{"response_id", "force", "store"?}`` after a write that holds a
  model response and no local tool output, i.e. when a run ends with the answer (a write with
  tool outputs goes to an optional ``_defer_compaction``, which this class does not have).
  ctxwise prepares the session then, so compaction due after the turn happens between turns and
  is recorded as events. Nothing is sent anywhere.

The Runner reads the session once per ``Runner.run``; the model calls inside one run (a tool loop)
see the items it generated since. Pass ``run_config=session.run_config()`` (or
``call_model_input_filter=session.model_input_filter``) so that **every** model call gets the
prepared ctxwise view: the filter replaces the Runner's input by the session's payload plus
any item the Runner has not stored yet.

The ctxwise policy must use ``provider="openai_responses"`` (the wire shape the SDK speaks);
``tools=`` on ``cm.session(...)`` counts tool schemas inside the budget. Agent instructions go
to the model beside the input and are not counted: keep them out of the budget with
``reserve_output`` or a smaller ``budget``. ``session_settings.limit`` is not needed (the budget
does its job); if set, ``get_items()`` returns that many items as written, uncompacted, as the
SDK's own sessions do. ``run_config(reasoning_item_id_policy="omit")`` drops reasoning ids from
what is sent, and ``run_config(session_input_callback=...)`` keeps what the callback removed
out of every model call. The object is safe to use from several threads and event loops.
"""

from __future__ import annotations

import asyncio
from collections import Counter
import copy
import functools
import importlib
import inspect
import json
import logging
import re
import threading
import typing
import uuid
from typing import TYPE_CHECKING, Any

from ctxwise import Marker, Message, TextBlock, ToolResultBlock, ToolUseBlock
from ctxwise.errors import CtxwiseError, FormatError, MissingExtra, PolicyError
from ctxwise.formats import from_responses, plain, to_responses
from ctxwise.providers import render

from ._record import retry_races

if TYPE_CHECKING:
    from ctxwise import Prepared, Session

log = logging.getLogger("ctxwise")

PROVIDER = "openai_responses"
KEY = "openai_agents"
REF = "ctxwise_beside"
"""A stored item ``{REF: k}`` stands for ``message.beside[k]`` (a hosted item stored once)."""
"""The message metadata key holding the items as written (``{"items": [...]}``)."""
EXTRA = "openai-agents"
_ASSISTANT_SIDE = ("reasoning", "function_call")


def _agents() -> Any:
    """The ``agents`` package; MissingExtra naming the extra when it is not installed."""
    try:
        return importlib.import_module("agents")
    except ModuleNotFoundError as e:
        if e.name is not None and e.name.split(".")[0] == "agents":
            raise MissingExtra("ctxwise.integrations.openai_agents", EXTRA, "openai-agents") from None
        raise


_agents()  # at import, as the other integrations do: the missing extra is the first thing said


def _item_type(item: dict[str, Any]) -> Any:
    return item.get("type", "message" if "role" in item else None)


INTERRUPTED = "the tool call got no output: the run stopped before it (a pending approval, a cancelled run)"
"""The reason :meth:`ctxwise.Session.close_pending` records for a call a new run left unanswered."""

CORE_TYPES = ("message", "reasoning", "function_call", "function_call_output")
"""The Responses items ctxwise reads into canonical messages (counted, compacted, checked)."""


def _literals(hint: Any) -> list[str]:
    if typing.get_origin(hint) is typing.Literal:
        return [a for a in typing.get_args(hint) if isinstance(a, str)]
    return [lit for a in typing.get_args(hint) for lit in _literals(a)]


@functools.lru_cache(maxsize=1)
def input_item_types() -> dict[str, Any]:
    """Every Responses API input item ``type`` the installed ``openai`` package declares
    (``openai.types.responses.ResponseInputItemParam``), mapped to its TypedDict. Source of
    truth for what the API accepts as an ``input`` item."""
    from openai.types.responses.response_input_item_param import ResponseInputItemParam

    out: dict[str, Any] = {}
    for member in typing.get_args(ResponseInputItemParam):
        for lit in _literals(typing.get_type_hints(member).get("type")):
            out.setdefault(lit, member)
    return out


def hosted(item: dict[str, Any]) -> bool:
    """Whether ``item`` is a Responses input item ctxwise does not read but keeps as written:
    the hosted and built-in tools' items (``web_search_call``, ``file_search_call``,
    ``computer_call`` / ``computer_call_output``, ``code_interpreter_call``,
    ``image_generation_call``, ``mcp_*``, shell / patch / custom tool items, ``item_reference``,
    ``compaction``, ...): any input item type of the installed ``openai`` package other than
    :data:`CORE_TYPES`; and any other dict the SDK stores (an ``EncryptedSession`` envelope, an
    item type newer than the installed ``openai``), carried verbatim like a hosted item: kept
    in the record and sent as written while its message is unedited (counted: ``Message.beside``),
    never re-rendered (it does not validate as an input item, :func:`accepted`). A ``message`` item without a
    ``role`` (the SDK stores what it is given; its own tests write ``{"type": "message", "id":
    ...}``) is carried the same way; one with a role ctxwise does not know raises (add_items)."""
    if not isinstance(item, dict):
        return False
    t = _item_type(item)
    if t == "message":
        return item.get("role") is None
    return t not in CORE_TYPES


@functools.lru_cache(maxsize=None)
def _adapter(t: str) -> Any:
    from pydantic import TypeAdapter

    return TypeAdapter(input_item_types()[t])


def accepted(item: dict[str, Any]) -> bool:
    """Whether a :func:`hosted` item validates as the ``openai`` package's input item param of
    its type (its required fields present and well typed): those are counted and go into a
    re-rendered view. A ``local_shell_call_output`` is also accepted in the Agents SDK's
    shape, ``call_id`` instead of ``id`` (``agents/run_internal/tool_actions.py``: the API pairs
    it with its ``local_shell_call`` by that id)."""
    if _item_type(item) == "local_shell_call_output" and isinstance(item.get("call_id"), str) \
            and isinstance(item.get("output"), str):
        return True
    try:
        _adapter(_item_type(item)).validate_python(item)
    except Exception:  # noqa: BLE001 - pydantic's ValidationError, or a type the SDK cannot express
        return False
    return True


READ_PARTS = ("input_text", "output_text", "input_image")
"""The message content part types ctxwise reads into blocks (``ctxwise.formats.from_responses``)."""


def _part_text(part: Any) -> str:
    if isinstance(part, dict) and part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
        return str(part["refusal"])
    if isinstance(part, dict):
        name = part.get("filename") or part.get("file_id") or part.get("file_url") or ""
        return f"[{part.get('type')}{' ' + name if name else ''}]"
    return str(part)


def _orphan_text(item: dict[str, Any]) -> str:
    out = item.get("output")
    body = out if isinstance(out, str) else json.dumps(out, ensure_ascii=False, default=str)
    return f"[function_call_output {item.get('call_id')}] {body}"


def readable(item: dict[str, Any], *, opens_session: bool = False, orphan: bool = False) -> dict[str, Any]:
    """The copy of a core item ctxwise reads into blocks (the item itself is stored as written
    and sent as written while ctxwise has not edited its message): a content part ctxwise has no
    block for (``refusal``, ``input_file``, ``input_audio``, ...) becomes a text part (a refusal's
    text, ``[input_file name]`` for the others: a file's bytes are not counted), and a
    ``system`` / ``developer`` message that does not open the session is read as a user message
    (ctxwise keeps one system message, the first). ``orphan``: a ``function_call_output`` that
    answers no call waiting for it (its call is not in the session, or was answered already: the
    SDK stores such outputs and sends them as written) is read as a user message
    ``[function_call_output <call_id>] <output>``, so the canonical context stays valid. Any
    other item is returned as it is."""
    if orphan and _item_type(item) == "function_call_output":
        return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": _orphan_text(item)}]}
    if _item_type(item) != "message":
        return item
    out = item
    role = item.get("role")
    if role in ("system", "developer") and not opens_session:
        out = {**out, "role": "user"}
        if isinstance(out.get("content"), list):  # an output_text part stays readable for a user message
            out["content"] = [{**p, "type": "input_text"} if isinstance(p, dict) and p.get("type") == "output_text"
                              else p for p in out["content"]]
    content = out.get("content")
    if isinstance(content, list) and any(not (isinstance(p, dict) and p.get("type") in READ_PARTS) for p in content):
        text_type = "output_text" if out.get("role") == "assistant" else "input_text"
        out = {**out, "content": [p if isinstance(p, dict) and p.get("type") in READ_PARTS else
                                  {"type": text_type, "text": _part_text(p)} for p in content]}
    return out


def _assistant_side(item: dict[str, Any]) -> bool:
    t = _item_type(item)
    return t in _ASSISTANT_SIDE or (t == "message" and item.get("role") == "assistant")


def group_items(items: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Split Responses items into the groups that become one canonical message each: a run of
    assistant-side items (``reasoning``, assistant ``message``, ``function_call``) is one group;
    any other core item (user / system / developer message, ``function_call_output``) is a group
    of its own. A :func:`hosted` item joins the group of the item before it; hosted items
    before the first core item form a first group of their own (kept with the message stored
    before the batch)."""
    groups: list[list[dict[str, Any]]] = []
    for item in items:
        core = [i for i in groups[-1] if not hosted(i)] if groups else []
        if hosted(item) and groups:
            groups[-1].append(item)
        elif groups and core and _assistant_side(item) and _assistant_side(core[-1]):
            groups[-1].append(item)
        else:
            groups.append([item])
    return groups


def _without_reasoning_id(item: dict[str, Any]) -> dict[str, Any]:
    """``item`` without its ``id`` when it is a reasoning item (``reasoning_item_id_policy="omit"``)."""
    if _item_type(item) == "reasoning" and "id" in item:
        return {k: v for k, v in item.items() if k != "id"}
    return item


def _key(item: dict[str, Any]) -> str:
    """What identifies an item across the SDK's re-serializations (``status`` and other output
    fields come and go): the call id for calls and outputs, the item id, else the content."""
    t = _item_type(item)
    if (t in ("function_call", "function_call_output") or hosted(item)) and item.get("call_id"):
        return f"{t}:{item['call_id']}"
    if isinstance(item.get("id"), str) and item["id"]:
        return f"{t}:{item['id']}"
    return json.dumps({"t": t, "role": item.get("role"), "content": item.get("content")}, sort_keys=True,
                      ensure_ascii=False, default=str)


class CtxwiseSession:
    """An OpenAI Agents SDK ``Session`` (``agents.memory.Session`` protocol, plus the
    ``run_compaction`` hook) backed by a ctxwise :class:`~ctxwise.Session`.

    ``session``: a session from ``ContextManager.session(user_id, session_id, tools=...)`` whose
    policy has ``provider="openai_responses"`` (else :class:`~ctxwise.errors.PolicyError`).
    ``session_settings``: the SDK's ``SessionSettings`` (or a dict), as other sessions take it.
    The SDK's ``session_id`` is the ctxwise session id.

    All methods are coroutines run one at a time per object, from any thread or event loop (a
    thread lock taken in the worker thread that does the store work). Errors are ctxwise's: :class:`~ctxwise.errors.FormatError` naming the item
    for an item type that is not a Responses input item type of the installed ``openai``
    package (``message``, ``reasoning``, ``function_call`` and ``function_call_output`` are
    read; the hosted-tool items are kept as written, see the module docstring), a hosted
    item opening an empty session, :class:`~ctxwise.errors.PayloadInvalid` for a batch
    that breaks the message rules, :class:`~ctxwise.errors.ContextBudgetExceeded` from a
    read when the pinned content alone does not fit. A failed ``add_items`` stores nothing of
    its batch (the interruption results for calls an earlier run left open, written first,
    stay: they are true whatever the batch).
    Raises :class:`~ctxwise.errors.MissingExtra` when ``openai-agents`` is not installed.
    """

    def __init__(self, session: "Session", *, session_settings: Any = None) -> None:
        agents = _agents()
        if session.policy.provider != PROVIDER:
            raise PolicyError(
                f"CtxwiseSession needs a policy with provider={PROVIDER!r} (the Agents SDK sends Responses "
                f"items), got provider={session.policy.provider!r}",
                hint=f"build the ContextManager with Policy(..., provider={PROVIDER!r})")
        self.ctx = session
        self.session_id = session.session_id
        # as the SDK's own sessions: a dict is coerced (an unknown field raises TypeError), None
        # is the default SessionSettings()
        if session_settings is None:
            session_settings = agents.SessionSettings()
        elif not isinstance(session_settings, agents.SessionSettings):
            session_settings = importlib.import_module("agents.memory.session_settings").coerce_session_settings(
                dict(session_settings))
        self.session_settings = session_settings
        self._lock = threading.RLock()
        self.last_prepared: "Prepared | None" = None
        """The last :class:`~ctxwise.Prepared` a read, the input filter or run_compaction made."""

    # -- the Session protocol ---------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[dict[str, Any]]:
        """``limit=None`` (and no ``session_settings.limit``): the context view as Responses
        input items, prepared (compaction may fire and is persisted); a message ctxwise did not
        edit comes back exactly as it was written. ``limit=N`` (or ``session_settings.limit``
        when ``limit`` is None): the newest N items of the record exactly as written (cleared
        results with their original body), read without compacting or writing; ``0``: none; a
        negative N: every item of the record, as ``SQLiteSession`` reads it."""
        if limit is None and self.session_settings is not None:
            limit = getattr(self.session_settings, "limit", None)
        if limit is not None:
            # a negative limit reads everything, as SQLite's LIMIT -1 does in SQLiteSession
            return typing.cast(list[dict[str, Any]], await self._run(self._tail, limit if limit >= 0 else 1 << 62))
        return typing.cast(list[dict[str, Any]], await self._run(self._view))

    async def add_items(self, items: list[Any]) -> None:
        """Append the Runner's new items (in order, one transaction; nothing is stored when it
        raises)."""
        await self._run(self._add, [plain(i) for i in items])

    async def pop_item(self) -> dict[str, Any] | None:
        """Remove and return the item appended last, as it was written; None when the context
        is empty."""
        return typing.cast("dict[str, Any] | None", await self._run(self._pop))

    async def clear_session(self) -> None:
        """Reset the context (the transcript keeps every message and records the reset)."""
        await self._run(self.ctx.clear)

    async def run_compaction(self, args: dict[str, Any] | None = None) -> None:
        """The Runner's post-turn hook (``OpenAIResponsesCompactionAwareSession``): prepare the
        session now, so compaction due after this turn happens and is recorded between turns.
        ``args`` (``response_id``, ``force``, ``store``) are not needed: ctxwise decides by its
        policy. A ctxwise error here is logged, not raised (the turn is already stored; the next
        read raises it)."""

        def compact() -> None:
            if self.ctx.messages and not self._open_calls():
                self.last_prepared = self.ctx.prepare()

        try:
            await self._run(compact)
        except CtxwiseError as e:
            log.warning(json.dumps({"event": "ctxwise.openai_agents.run_compaction_failed",
                                    "session": self.session_id, "error": str(e)}))

    async def _run(self, fn: Any, *args: Any) -> Any:
        """``fn(*args)`` in a worker thread, one call at a time per object: the lock is a thread
        lock taken in the worker, so callers on several event loops and threads (``Runner.run_sync``
        in threads) wait for each other instead of binding an ``asyncio.Lock`` to one loop."""

        def locked() -> Any:
            with self._lock:
                return self._synced(fn, *args)

        return await asyncio.to_thread(locked)

    # -- every model call -----------------------------------------------------------------

    async def model_input_filter(self, data: Any) -> Any:
        """A ``RunConfig.call_model_input_filter``: the model input becomes the prepared ctxwise
        view plus the Runner's items not stored yet (normally none: the Runner stores each step
        before the next model call). Instructions are passed on unchanged."""
        given = list(data.model_data.input)
        view = await self._run(self._view)
        return _agents().run_config.ModelInputData(input=view + self._unstored(given),
                                                   instructions=data.model_data.instructions)

    async def _filter(self, data: Any, *, omit_reasoning_ids: bool = False, follow_input: bool = False,
                      then: Any = None) -> Any:
        """:meth:`model_input_filter` with the run's settings: ``follow_input`` leaves out every
        stored item the Runner's input does not hold (what a ``session_input_callback`` removed);
        ``omit_reasoning_ids`` drops the ``id`` of every reasoning item sent
        (``reasoning_item_id_policy="omit"``); ``then``: the caller's own
        ``call_model_input_filter``, applied to the result."""
        agents = _agents()
        out = await self.model_input_filter(data)
        items = list(out.input)
        if follow_input:
            present = {_key(_without_reasoning_id(plain(i))) for i in data.model_data.input}
            stored = {_key(_without_reasoning_id(i)) for m in self.ctx.messages for i in (self._written(m) or [])}
            items = [i for i in items if (k := _key(_without_reasoning_id(i))) in present or k not in stored]
        if omit_reasoning_ids:
            items = [_without_reasoning_id(i) for i in items]
        out = agents.run_config.ModelInputData(input=items, instructions=out.instructions)
        if then is not None:
            result = then(agents.run_config.CallModelData(model_data=out, agent=data.agent, context=data.context))
            out = await result if inspect.isawaitable(result) else result
        return out

    def run_config(self, **kwargs: Any) -> Any:
        """An ``agents.RunConfig`` whose ``call_model_input_filter`` hands every model call the
        prepared ctxwise view (:meth:`model_input_filter`), keeping the run's conventions:
        ``reasoning_item_id_policy="omit"`` drops reasoning ids from what is sent, what a
        ``session_input_callback`` removed from the history stays out, and a
        ``call_model_input_filter`` given here runs after ctxwise's. Other keyword arguments go
        to ``RunConfig``."""
        omit = kwargs.get("reasoning_item_id_policy") == "omit"
        follow = kwargs.get("session_input_callback") is not None
        then = kwargs.pop("call_model_input_filter", None)
        if not (omit or follow or then):
            return _agents().RunConfig(call_model_input_filter=self.model_input_filter, **kwargs)

        async def call_model_input_filter(data: Any) -> Any:
            return await self._filter(data, omit_reasoning_ids=omit, follow_input=follow, then=then)

        return _agents().RunConfig(call_model_input_filter=call_model_input_filter, **kwargs)

    def recall_tool(self) -> Any:
        """The recall tool as an ``agents.FunctionTool`` (name ``recall_tool_result``): add it to
        the agent's ``tools`` so the model can fetch a cleared tool result back by the
        ``tool_use_id`` its placeholder names. Answers with :func:`ctxwise.recall_tool_output`
        (only this session's own results); an unknown id or bad arguments come back to the model
        as a one-line error."""
        from ctxwise import RECALL_TOOL_NAME, recall_tool_output, recall_tool_schema

        schema = recall_tool_schema(PROVIDER)
        # strict mode makes every property required: the optional message_id may be null
        params = schema["parameters"]
        params["properties"]["message_id"]["type"] = ["string", "null"]

        async def invoke(ctx: Any, arguments: str) -> str:
            text, _ = await asyncio.to_thread(recall_tool_output, self.ctx, arguments)
            return text

        return _agents().FunctionTool(name=RECALL_TOOL_NAME, description=schema["description"],
                                      params_json_schema=params, on_invoke_tool=invoke,
                                      strict_json_schema=True)

    # -- work (in a worker thread) --------------------------------------------------------

    def _synced(self, fn: Any, *args: Any) -> Any:
        """``fn(*args)`` after catching up with what another writer stored since this object
        last read the session (another CtxwiseSession on the same session, another worker or
        process): one indexed version read, and a reload when it moved. Without it the object
        that did not write last raised SessionConflict on every call until reloaded by hand
        (found by a fresh-user check); the LangChain middleware does the same. A write that
        loses a race (SessionConflict: nothing was stored) is tried again after a reload, with a
        jittered backoff, up to :data:`._record.RACE_ATTEMPTS` times in all
        (:func:`._record.retry_races`); then the SessionConflict is raised."""
        ctx = self.ctx

        def attempt() -> Any:
            if ctx.version != ctx.manager.store.version(ctx.user_id, ctx.session_id):
                ctx.reload()
            return fn(*args)

        def moved() -> bool:
            return bool(ctx.version != ctx.manager.store.version(ctx.user_id, ctx.session_id))

        return retry_races(attempt, moved)

    def _open_calls(self) -> set[str]:
        """Call ids still waiting for an output, paired in order: a call id a model reuses
        (some gateways and local models repeat ``call_0``) is answered by the output that
        follows that call, not by an earlier call's output under the same id."""
        waiting: Counter[str] = Counter()
        for m in self.ctx.messages:
            if m.role == "assistant":
                waiting.update(b.id for b in m.blocks if isinstance(b, ToolUseBlock))
            for r in m.tool_results:
                if waiting[r.tool_use_id] > 0:
                    waiting[r.tool_use_id] -= 1
        return {k for k, n in waiting.items() if n > 0}

    def _view(self) -> list[dict[str, Any]]:
        if not self.ctx.messages:
            return []
        if self._open_calls():  # a call still waiting for its output cannot be prepared
            return self._as_written(self.ctx.messages, self._rendered(self.ctx.messages))
        self.last_prepared = self.ctx.prepare()
        return self._as_written(self.last_prepared.messages, copy.deepcopy(self.last_prepared.payload))

    @staticmethod
    def _rendered(messages: list[Message]) -> list[dict[str, Any]]:
        return list(render(messages, PROVIDER))

    def _as_written(self, messages: list[Message], payload: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``payload`` (ctxwise's rendering of ``messages``, one message after another) with
        every message ctxwise did not edit replaced by its items exactly as written (same
        fields, order and types: the SDK cannot tell ctxwise is there), and in each edited one
        its :func:`hosted` items put back after the rendered item of the core item they
        followed (only those that validate, :func:`accepted`; the others stay in the record)."""
        spans = [len(self._rendered([m])) for m in messages]
        if sum(spans) != len(payload):  # not one rendering per message: send what ctxwise checked
            log.warning(json.dumps({"event": "ctxwise.openai_agents.rendered_view", "session": self.session_id}))
            return payload
        out: list[dict[str, Any]] = []
        pos = 0
        for k, (m, n) in enumerate(zip(messages, spans)):
            units, pos = payload[pos:pos + n], pos + n
            written = self._written(m)
            if written and self._unedited(m, written, units, k == 0):
                out.extend(written)
                continue
            at: dict[int, list[dict[str, Any]]] = {}
            core = 0
            for item in written or []:
                if not hosted(item):
                    core += 1
                elif accepted(item):
                    at.setdefault(min(core, n), []).append(item)
            for k in range(n + 1):
                out.extend(at.get(k, []))
                if k < n:
                    out.append(units[k])
        return out

    def _unedited(self, m: Message, written: list[dict[str, Any]], units: list[dict[str, Any]], first: bool) -> bool:
        """Whether the items ``m`` was written as read back to exactly ``units``, what ctxwise
        sends for ``m`` (it did not clear, prune, rename or otherwise edit it): then the items
        as written stand for it."""
        holder = (m.metadata.get(KEY) or {}).get("holder")
        if holder:  # a message standing for hosted items only: unedited while it holds its own text
            return [b.model_dump() for b in m.blocks] == [TextBlock(text=holder).model_dump()]
        if m.role == "user" and any(_item_type(i) == "function_call_output" for i in written):
            # an orphan function_call_output (no call waiting for it) is read as a user note; sent as
            # written, the Responses API rejects it (400: no tool call found for the output): the
            # note is sent instead (the record keeps the item as written)
            log.warning(json.dumps({"event": "ctxwise.openai_agents.orphan_output_sent_as_note",
                                    "session": self.session_id, "message": m.id}))
            return False
        core = [readable(i, opens_session=first and k == 0, orphan=m.role == "user")
                for k, i in enumerate(x for x in written if not hosted(x))]
        try:
            return self._rendered(from_responses(core, strict=False)) == units
        except CtxwiseError:
            return False

    @staticmethod
    def _written(m: Message) -> list[dict[str, Any]] | None:
        """The items ``m`` was written as, in order (a hosted item sent beside it is stored
        once, in ``m.beside``, and referenced from the items), or None."""
        items = (m.metadata.get(KEY) or {}).get("items")
        if not isinstance(items, list) or not items:
            return None
        beside = m.beside
        return [copy.deepcopy(beside[i[REF]]) if isinstance(i, dict) and set(i) == {REF} and
                isinstance(i[REF], int) and 0 <= i[REF] < len(beside) else copy.deepcopy(i) for i in items]

    @staticmethod
    def _stored(m: Message, items: list[dict[str, Any]], holder: str | None = None) -> Message:
        """``m`` holding ``items`` as written: each :func:`hosted` item goes to ``m.beside``
        (counted in its size: the view sends it as written while ``m`` is unedited) and is
        referenced from the items; each content part of a message item that ctxwise reads only
        as a placeholder text (:func:`readable`: an unknown part type, ``input_file``,
        ``input_audio``) is also put in ``m.beside`` (counted, not referenced: it is sent inside
        its item as written), so what is sent is what is counted."""
        beside: list[dict[str, Any]] = []
        kept: list[dict[str, Any]] = []
        unread: list[Any] = []
        for item in items:
            if hosted(item):
                kept.append({REF: len(beside)})
                beside.append(copy.deepcopy(item))
            else:
                kept.append(copy.deepcopy(item))
                content = item.get("content") if _item_type(item) == "message" else None
                if isinstance(content, list):
                    unread += [copy.deepcopy(p) for p in content if not (isinstance(p, dict) and (
                        p.get("type") in READ_PARTS or (p.get("type") == "refusal" and isinstance(p.get("refusal"), str))))]
        beside += unread
        mark = {k: v for k, v in Marker.stored(m).items() if k != "beside"}
        if beside:
            mark["beside"] = beside
        if holder is None:  # an update keeps what the message was
            holder = (m.metadata.get(KEY) or {}).get("holder")
        meta = {**{k: v for k, v in m.metadata.items() if k != Marker.KEY},
                KEY: {"items": kept, **({"holder": holder} if holder else {})}}
        if mark:
            meta[Marker.KEY] = mark
        return m.model_copy(update={"metadata": meta})

    def _tail(self, limit: int) -> list[dict[str, Any]]:
        """The newest ``limit`` items of the record as written, from the stored rows, hidden ones
        included (everything written: rows a summary or a trim took out of the context view
        too, as ``SQLiteSession`` reads its table; a reply left out of the context, such as a
        batch holding only a reasoning item, included: it is what ``pop_item`` would return;
        ctxwise's own summary rows are not items; popped and reset rows are gone)."""
        if limit <= 0 or self.ctx.version == 0:  # nothing stored yet (the session is created by its first write)
            return []
        rows = sorted((r for r in self.ctx.manager.store.load(self.ctx.user_id, self.session_id, include_hidden=True).rows
                       if (r.original or r.current).kind is None and r.state not in ("popped", "reset")),
                      key=lambda r: r.seq)
        out: list[dict[str, Any]] = []
        for r in reversed(rows):
            msg = r.original or r.current
            out[:0] = self._written(r.current) or self._written(msg) or self._rendered([msg])
            if len(out) >= limit:
                break
        return out[-limit:]

    def _to_messages(self, groups: list[list[dict[str, Any]]], done: int = 0) -> list[Message]:
        """One canonical message per group (its core items read, every item kept as written in
        ``metadata[KEY]["items"]``); ``done``: the batch index of the first group's first item,
        for errors."""
        names = {b.id: b.name for m in self.ctx.messages for b in m.blocks if isinstance(b, ToolUseBlock)}
        out: list[Message] = []
        opens = not self.ctx.messages
        waiting = Counter(self._open_calls())
        for group in groups:
            where = [k for k, item in enumerate(group) if not hosted(item)]
            orphans = set()
            for k in where:
                item = group[k]
                if _item_type(item) == "function_call" and isinstance(item.get("call_id"), str):
                    waiting[item["call_id"]] += 1
                elif _item_type(item) == "function_call_output":
                    cid = str(item.get("call_id"))
                    if waiting[cid] > 0:
                        waiting[cid] -= 1
                    else:
                        orphans.add(k)
            try:
                read = from_responses([readable(group[k], opens_session=opens and not out and n == 0, orphan=k in orphans)
                                       for n, k in enumerate(where)], strict=False)
            except FormatError as e:
                place = re.sub(r"^item (\d+)", lambda g: f"item {done + where[int(g.group(1))]}", e.place)
                raise FormatError(f"add_items {place}", e.rule) from None
            done += len(group)
            (m,) = read  # a group is one message by construction
            for b in m.blocks:
                if isinstance(b, ToolUseBlock):
                    names[b.id] = b.name
            blocks = [b.model_copy(update={"name": names[b.tool_use_id]})
                      if isinstance(b, ToolResultBlock) and b.name is None and b.tool_use_id in names else b
                      for b in m.blocks]
            out.append(self._stored(m.model_copy(update={"id": f"oa-{uuid.uuid4().hex[:16]}", "blocks": blocks}), group))
        return out

    def _add(self, items: list[Any]) -> None:
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                raise FormatError(f"add_items item {i}", f"expected a Responses input item (a dict), got {type(item).__name__}")
            t = _item_type(item)
            if t not in CORE_TYPES and not hosted(item):
                raise FormatError(f"add_items item {i}", f"unknown item type {t!r}: not a Responses input item type of "
                                  f"the installed openai package (ctxwise reads {', '.join(CORE_TYPES)} and keeps the "
                                  f"hosted-tool items as written: {', '.join(sorted(set(input_item_types()) - set(CORE_TYPES)))})")
        open_ids = self._unanswered_call_ids()
        for i, item in enumerate(items):
            if item.get("type") == "function_call_output":
                open_ids.discard(item.get("call_id"))
            elif item.get("type") == "function_call" and item.get("call_id"):
                if item["call_id"] in open_ids:
                    raise FormatError(f"add_items item {i}", f"function_call call_id {item['call_id']!r} is already "
                                      "waiting for its output: outputs are matched by call_id, so a second open call "
                                      "with the same id could never be answered")
                open_ids.add(item["call_id"])
        if not items:
            return
        first = next((i for i in items if not hosted(i)), None)
        if first is not None and _item_type(first) != "function_call_output" and open_ids - \
                {i.get("call_id") for i in items if _item_type(i) == "function_call"}:
            # calls left without their output (a run stopped at a tool approval and a new run
            # began instead of resuming it, a run cancelled between a call and its output):
            # answered as interrupted, one event, so the session goes on
            self.ctx.close_pending(INTERRUPTED)
        groups = group_items(items)
        if len(groups) > 1 and all(hosted(i) for i in groups[0]):
            lead = groups.pop(0)  # hosted items first: they go with the next item's message
            groups[0] = [*lead, *groups[0]]
        if all(hosted(i) for i in groups[0]) and not self.ctx.messages:
            # hosted items alone opening the session (the SDK's OpenAIResponsesCompactionSession
            # writes its `compaction` item as the whole new history): they get a message of their
            # own, a user message naming them; while unedited it stands for them as written
            kinds = ", ".join(dict.fromkeys(str(_item_type(i) or "item") for i in groups[0]))
            m = Message(id=f"oa-{uuid.uuid4().hex[:16]}", role="user", blocks=[TextBlock(text=f"[{kinds}]")])
            self.ctx.append([self._stored(m, groups[0], holder=f"[{kinds}]")])
            return
        if not all(hosted(i) for i in groups[0]):
            self.ctx.append(self._to_messages(groups))
            return
        # a batch of hosted items only (a computer_call_output, a hosted call answered later):
        # kept with the message stored before them, updated in place (Session.amend: one
        # write, an `amended` event, the transcript unchanged since the text is)
        lead = groups[0]
        self.ctx.amend(lambda m: self._stored(m, (self._written(m) or to_responses([m], extras=False)) + lead))

    def _unanswered_call_ids(self) -> set[str]:
        """The call_ids of the tool calls at the context's tail still waiting for an output."""
        msgs = self.ctx.messages
        k = len(msgs) - 1
        while k >= 0 and msgs[k].role == "tool":
            k -= 1
        if k < 0 or msgs[k].role != "assistant":
            return set()
        waiting = {b.id for b in msgs[k].blocks if isinstance(b, ToolUseBlock)}
        for m in msgs[k + 1:]:
            waiting -= {b.tool_use_id for b in m.blocks if isinstance(b, ToolResultBlock)}
        return waiting

    def _pop(self) -> dict[str, Any] | None:
        if not self.ctx.messages:
            return None
        last = self._newest()
        items = self._written(last) or to_responses([last], extras=False)
        if len(items) > 1 and hosted(items[-1]):
            # a hosted item went with its message as an update (Session.amend): popping it is
            # one too; the message and the transcript stay as they are
            self.ctx.amend(lambda m: self._stored(m, items[:-1]))
            return items[-1]
        rest = items[:-1]
        if rest and all(hosted(i) for i in rest) and last.id == self.ctx.messages[-1].id and len(self.ctx.messages) > 1:
            # hosted items opened the batch of the popped item: they stay, with the message
            # before (where a batch of hosted items alone goes); two writes, each recorded
            self.ctx.pop()
            self.ctx.amend(lambda m: self._stored(m, (self._written(m) or to_responses([m], extras=False)) + rest))
            return items[-1]
        # one write: the message goes, the items written with it before the popped one stay
        # (Session.pop(then=...)), or nothing changes
        if last.id == self.ctx.messages[-1].id:
            msg = self.ctx.pop(then=self._to_messages([items[:-1]]) if len(items) > 1 else None)
        else:  # the newest stored row is a reply left out of the context: what was written last
            msg = self.ctx.pop()
        if msg is None:
            return None
        return (self._written(msg) or to_responses([msg], extras=False))[-1]

    def _newest(self) -> Message:
        """The newest stored message: the context's last one, or a reply left out of the
        context stored after it (an empty reply: not in ``ctx.messages``)."""
        rows = [r for r in self.ctx.manager.store.load(self.ctx.user_id, self.session_id).rows
                if r.current.kind is None]  # appended rows (a summary row is ctxwise's own)
        return max(rows, key=lambda r: r.seq).current if rows else self.ctx.messages[-1]

    def _unstored(self, given: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The Runner's input items after the newest stored one (normally none)."""
        last = next((self._written(m) for m in reversed(self.ctx.messages) if self._written(m)), None)
        if not given or last is None:
            return [plain(i) for i in given] if last is None else []
        want = _key(last[-1])
        for k in range(len(given) - 1, -1, -1):
            if _key(plain(given[k])) == want:
                return [plain(i) for i in given[k + 1:]]
        stored = {_key(i) for m in self.ctx.messages for i in (self._written(m) or [])}
        return [plain(i) for i in given if _key(plain(i)) not in stored]
