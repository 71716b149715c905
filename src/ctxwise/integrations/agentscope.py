"""AgentScope 2.x middleware: ctxwise keeps an ``agentscope.agent.Agent``'s context inside a budget.

    from agentscope.agent import Agent
    from agentscope.tool import Toolkit
    from ctxwise import ContextManager, Policy
    from ctxwise.integrations.agentscope import CtxwiseMiddleware

    cm = ContextManager("sqlite:///ctxwise.db", Policy(budget=60_000, unit="tokens"))
    mw = CtxwiseMiddleware(cm, user_id="user-42")
    agent = Agent(name="agent", system_prompt=PROMPT, model=model,
                  toolkit=Toolkit(tools=[*tools, *await mw.list_tools()]), middlewares=[mw])
    await agent.reply(UserMsg("user", "Hi"))

How it works (``pip install 'ctxwise[agentscope]'``, AgentScope 2.0.x's ``MiddlewareBase``):

* The agent's own record, ``agent.state.context``, is never edited: every message stays there
  and AgentScope's built-in compressor does not run (:meth:`~CtxwiseMiddleware.on_compress_context`
  stands in for it and leaves the record alone; two compactors never fight over one context;
  the ``on_compress_context`` hooks of the middlewares after it in the list still run).
* ``on_model_call``: what the record gained since the last call is appended to the ctxwise
  session (an AgentScope assistant message carries its tool calls *and* their results; it is
  read as the chat messages it is sent as, ids ``<Msg id>/<k>``, so a message that grows within
  a reply adds new parts only), ``prepare()`` compacts and checks the context, and the model gets
  that view instead of the record. Unchanged messages keep their AgentScope blocks byte for byte;
  a cleared result or a summary is rebuilt from ctxwise's canonical message.
* ``on_system_prompt`` appends ctxwise's user-memory block (the user's long-term memory, quoted
  as data) to the system prompt; ``list_tools`` offers the recall tool
  (:data:`ctxwise.RECALL_TOOL_NAME`), which the agent's ``Toolkit`` must include.
* ctxwise's record (session, last part appended, store version) is kept under
  :meth:`get_middleware_key` in ``agent.state.middle_context``, so an agent rebuilt from a saved
  ``AgentState`` (and the same ctxwise store) sends the same next request, byte for byte.
* Tool calls still open (awaiting a user confirmation or an external result, or unfinished)
  stay in the in-flight cycle ctxwise pins: they are never cleared or summarized.
* Image ``DataBlock``s (base64 or URL source; in a message, a tool result's output or a hint)
  are read as ctxwise images (counted by the image rule, kept through compaction, rebuilt as
  ``DataBlock``s). Any other ``DataBlock`` (audio, PDF, video, a text file) reaches the model as
  written; ctxwise holds and counts a short text naming it in its place
  (``[audio/wav block: sent as given; ctxwise holds this text for it]``; the data itself is
  not counted), recorded on the ctxwise message (``metadata["ctxwise"]["normalized"]``, rule
  ``data-block-held-as-text``, with the block's place and media type) and as a ``normalized``
  event of the session. A message ctxwise rebuilds (a cleared result) carries that text.
* With nothing compacted the model gets ``agent.state.context``'s own ``Msg`` objects, each
  whole (a reply holding a tool call, its result and text stays one message; every speaker
  keeps its name), after the system prompt and ``state.summary`` as AgentScope sends them.

* AgentScope's OpenAI chat formatter writes ``name`` (the tool's name) on every ``tool``
  message, and ``OpenAIChatModel`` sends it as written; the formatter runs after this
  middleware, so ctxwise neither adds nor removes it, and keeps it equal to the called tool's
  name in the results it rebuilds (cleared placeholders). The OpenAI SDK types lack the key
  (OpenAI ignores it; Gemini's OpenAI endpoint requires it; strict gateways may refuse it).

Importing this module needs ``agentscope`` 2.x; without it it raises :class:`~ctxwise.MissingExtra`
(``pip install 'ctxwise[agentscope]'``). ``import ctxwise`` never imports it.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import json
import threading
from typing import Any, Callable, Literal

from .. import (
    RECALL_TOOL_NAME,
    ContextManager,
    ImageBlock,
    Marker,
    Message,
    MissingExtra,
    Session,
    SessionPool,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    recall_tool_output,
    recall_tool_schema,
)
from ..errors import FormatError
from ._record import branch_id, digest, follow, pool_key, pooled_session

try:
    from agentscope import message as asm
    from agentscope.middleware import MiddlewareBase
    from agentscope.permission import PermissionBehavior, PermissionDecision
    from agentscope.tool import FunctionTool, ToolBase, ToolChunk
except ModuleNotFoundError as e:  # pragma: no cover - exercised by tests/integrations/test_agentscope.py
    raise MissingExtra("ctxwise.integrations.agentscope", "agentscope", (e.name or "agentscope").split(".")[0]) from None

__all__ = ["CtxwiseMiddleware", "HELD_RULE", "held_text", "to_canonical"]

_SYSTEM = "system"
_SUMMARY = "summary"
_ABSENT = object()
"""No instance attribute of that name (see ``on_compress_context``)."""


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    return "\n".join(b.text for b in output if isinstance(b, asm.TextBlock))


HELD_RULE = "data-block-held-as-text"


def held_text(media_type: str) -> str:
    """The text ctxwise holds (and counts) in place of a non-image ``DataBlock``, which the model
    gets as written (characters: about 70)."""
    return f"[{media_type} block: sent as given; ctxwise holds this text for it]"


def _image(b: Any) -> ImageBlock:
    """An AgentScope image ``DataBlock`` as a ctxwise image (base64 ``data`` or ``url``, with its
    media type)."""
    src = b.source
    media = str(src.media_type)
    if isinstance(src, asm.Base64Source):
        try:
            size: int | None = len(base64.b64decode(src.data.strip(), validate=True))
        except (binascii.Error, ValueError):
            size = None
        return ImageBlock(media_type=media, data=src.data, byte_size=size)
    return ImageBlock(url=str(src.url), media_type=media)


def _data(b: Any, place: str, notes: list[dict[str, Any]]) -> tuple[TextBlock | ImageBlock, Any]:
    """A ``DataBlock`` as (the ctxwise block, the AgentScope block the view sends). An image is
    itself; any other media type (audio, PDF, video, text files) is sent as written while
    ctxwise holds a text naming it (:func:`held_text`; it counts that text, not the data),
    noted in ``notes`` (rule :data:`HELD_RULE`, ``place``, ``media_type``)."""
    media = str(b.source.media_type)
    if media.startswith("image/"):
        return _image(b), b
    text = held_text(media)
    notes.append({"rule": HELD_RULE, "place": place, "media_type": media, "note": text})
    return TextBlock(text=text), b


def _output(output: Any, place: str, notes: list[dict[str, Any]]) -> tuple[list[TextBlock | ImageBlock], Any]:
    """A tool result's or a hint's AgentScope output as (ctxwise output blocks, the output the
    view sends): text only (a string, or text blocks) is one text block, the texts joined by
    newlines, as before; with data blocks, each block in order (see :func:`_data`)."""
    if isinstance(output, str) or not any(isinstance(b, asm.DataBlock) for b in output):
        return [TextBlock(text=_output_text(output))], output
    blocks: list[TextBlock | ImageBlock] = []
    sent: list[Any] = []
    for k, b in enumerate(output):
        if isinstance(b, asm.TextBlock):
            blocks.append(TextBlock(text=b.text))
            sent.append(b)
        elif isinstance(b, asm.DataBlock):
            mine, src = _data(b, f"{place}, output {k}", notes)
            blocks.append(mine)
            sent.append(src)
    return blocks, sent


def _thinking(b: Any) -> ThinkingBlock:
    """An AgentScope thinking block as ctxwise thinking, with Anthropic's opaque data kept (the
    ``signature`` extra; a ``redacted_thinking_data`` extra is a redacted block holding it):
    Anthropic requires the latest assistant thinking sent back byte-identical."""
    redacted = getattr(b, "redacted_thinking_data", None)
    if isinstance(redacted, str):
        return ThinkingBlock(thinking=redacted, redacted=True)
    sig = getattr(b, "signature", None)
    return ThinkingBlock(thinking=b.thinking, signature=sig if isinstance(sig, str) and sig else None)


def _parts(msg: Any, index: int | None = None) -> list[tuple[Message, list[Any]]]:
    """One AgentScope ``Msg`` as the canonical messages it is sent as (the order of OpenAI's
    formatter: text and tool calls, then one tool message per result, hints as user text), each
    with the AgentScope blocks it came from. Ids: ``<Msg id>/<k>``. ``index`` (the message's
    place in ``agent.state.context``) is named in errors.

    Image ``DataBlock``s (in the content, a tool result's output or a hint) are read as
    :class:`~ctxwise.ImageBlock`; any other ``DataBlock`` is a text block naming what was left
    out, in the canonical message and in the blocks the view sends, recorded in the message's
    ``metadata["ctxwise"]["normalized"]`` (see :func:`_data`). ``msg`` is never changed."""
    out: list[tuple[Message, list[Any]]] = []
    blocks: list[Any] = []
    src: list[Any] = []
    notes: list[dict[str, Any]] = []
    where = f"agent.state.context message {index} (Msg id {msg.id!r})" if index is not None \
        else f"Msg id {msg.id!r}"

    def flush() -> None:
        nonlocal blocks, src, notes
        if blocks:
            role: Literal["system", "user", "assistant"] = msg.role
            out.append((Message(id=f"{msg.id}/{len(out)}", role=role, name=msg.name if role != "system" else None,
                                blocks=blocks, metadata=_noted(notes)), src))
        blocks, src, notes = [], [], []

    for k, b in enumerate(msg.content):
        place = f"{where}, block {k}"
        if isinstance(b, (asm.TextBlock, asm.DataBlock)):
            if blocks and isinstance(blocks[-1], ToolUseBlock):
                flush()  # text after a call starts the next assistant message, as it is sent
            if isinstance(b, asm.TextBlock):
                blocks.append(TextBlock(text=b.text))
                src.append(b)
            else:
                block, sent = _data(b, place, notes)
                blocks.append(block)
                src.append(sent)
        elif isinstance(b, asm.ThinkingBlock):
            blocks.append(_thinking(b))
            src.append(b)
        elif isinstance(b, asm.ToolCallBlock):
            try:
                args = json.loads(b.input) if b.input else {}
            except ValueError:
                args = {"_raw": b.input}
            blocks.append(ToolUseBlock(id=b.id, name=b.name, input=args if isinstance(args, dict) else {"_": args}))
            src.append(b)
        elif isinstance(b, asm.ToolResultBlock):
            flush()
            state: Literal["success", "error"] = \
                "error" if str(b.state) in ("error", "denied", "interrupted") else "success"
            left: list[dict[str, Any]] = []  # what _output left out, for this message's record
            output, sent_output = _output(b.output, place, left)
            out.append((Message(id=f"{msg.id}/{len(out)}", role="tool", metadata=_noted(left), blocks=[ToolResultBlock(
                tool_use_id=b.id, name=b.name, output=list(output), state=state)]),
                [b.model_copy(update={"output": sent_output}) if left else b]))
        elif isinstance(b, asm.HintBlock):
            flush()
            left = []
            hint, sent_hint = _output(b.hint, place, left)
            out.append((Message(id=f"{msg.id}/{len(out)}", role="user", blocks=list(hint), metadata=_noted(left)),
                        [b.model_copy(update={"hint": sent_hint}) if left else b]))
        else:
            raise FormatError(place, f"unknown AgentScope block type {getattr(b, 'type', type(b).__name__)!r}; "
                                     "ctxwise reads text, data (images), thinking, hint, tool_call and tool_result")
    flush()
    return out


def _noted(notes: list[dict[str, Any]]) -> dict[str, Any]:
    """Message metadata recording what was left out (the engine's ``normalized`` record)."""
    return Marker.with_({}, normalized=list(notes)) if notes else {}


def to_canonical(context: list[Any]) -> list[Message]:
    """AgentScope ``Msg`` objects (``agent.state.context``) as canonical ctxwise messages."""
    return [m for i, msg in enumerate(context) for m, _ in _parts(msg, i)]


class CtxwiseMiddleware(MiddlewareBase):
    """ctxwise as an AgentScope 2 middleware (see the module docstring).

    ``manager`` is a :class:`ctxwise.ContextManager` (policy, store, summarizer). ``user_id``
    scopes the sessions; the session id is ``"<AgentState.session_id>:<key>"``. ``key`` is what
    :meth:`get_middleware_key` returns (two instances on one agent need different keys).

    Raises, from the model call: :class:`~ctxwise.PayloadInvalid`,
    :class:`~ctxwise.ContextBudgetExceeded`, and :class:`~ctxwise.SessionConflict` when the
    saved ``AgentState`` record was saved against another ctxwise store. When
    ``agent.state.context`` no longer continues the session (a message removed or corrected in
    place, an older saved state restored), the context is appended to a new branch of the
    session (``"<session id>~<12 hex>"``, a ``branched`` event naming the parent).

    ``sessions``: the pool the open sessions are kept in between model calls (default: a
    :class:`ctxwise.SessionPool` of 1,024 sessions and 128 MiB; pass one to share or size it).
    """

    def __init__(self, manager: ContextManager, *, user_id: str = "default", key: str = "ctxwise",
                 sessions: SessionPool[tuple[str, str, str], Session] | None = None) -> None:
        if not isinstance(manager, ContextManager):
            raise TypeError(f"CtxwiseMiddleware needs a ctxwise.ContextManager, got {type(manager).__name__}")
        self.manager = manager
        self.user_id = user_id
        self.key = key
        self.sessions: SessionPool[tuple[str, str, str], Session] = SessionPool() if sessions is None else sessions
        """The open sessions, bounded by count and by the bytes their contexts hold."""
        self._lock = threading.Lock()  # model calls run on worker threads (asyncio.to_thread)
        self.last_prepared: Any = None
        """The :class:`ctxwise.Prepared` of the latest model call."""

    async def get_middleware_key(self) -> str:
        """Where this instance's record lives in ``AgentState.middle_context``."""
        return self.key

    # -- records and sessions ------------------------------------------------------------

    def record(self, state: Any) -> dict[str, Any] | None:
        """This instance's record in an ``AgentState``: ``{"user_id", "session_id", "last" (the
        id of the last part appended), "version", "payload_sha256"}``, or None before the first
        model call."""
        return (state.middle_context or {}).get(self.key)

    def session(self, state: Any, tools: list[dict[str, Any]] | None = None) -> Session:
        """The ctxwise session behind an ``AgentState`` (its ``events()``, ``transcript()``, ...)."""
        rec = self.record(state) or {}
        return self._session(rec.get("user_id", self.user_id),
                             rec.get("session_id", f"{state.session_id}:{self.key}"), tools or [])

    def _session(self, user_id: str, session_id: str, tools: list[dict[str, Any]]) -> Session:
        """The session, from :attr:`sessions` when held (reloaded when another writer moved it
        on), else opened; put back (weighed) in the pool."""
        return pooled_session(self.manager, self.sessions, self._lock, user_id, session_id, tools)

    def _memory_text(self, session: Session) -> str:
        return "\n".join(m.text for m in session.memory.head_blocks())

    # -- the hooks -----------------------------------------------------------------------

    async def on_system_prompt(self, agent: Any, current_prompt: str) -> str:
        """The system prompt with ctxwise's user-memory block after it (when the user has one)."""
        session = await asyncio.to_thread(self.session, agent.state)
        memory = self._memory_text(session)
        return f"{current_prompt}\n\n{memory}" if memory else current_prompt

    async def on_compress_context(self, agent: Any, input_kwargs: dict[str, Any], next_handler: Callable[..., Any]) -> None:
        """Stands in for AgentScope's compressor (``Agent._compress_context_impl``, the end of
        the ``compress_context`` chain), which would rewrite ``agent.state.context`` (dropping
        what it summarized) and fight ctxwise's edits: ctxwise compacts the view at every model
        call and leaves the record whole. The middlewares after this one in the list still run,
        with the arguments as given; only the chain's end is skipped (for this call only: the
        agent's own method is put back after it, also when the chain raises)."""

        async def stood_in(**kwargs: Any) -> None:
            return None

        own = agent.__dict__.get("_compress_context_impl", _ABSENT)
        agent._compress_context_impl = stood_in
        try:
            await next_handler(**input_kwargs)
        finally:
            if own is _ABSENT:
                del agent._compress_context_impl
            else:
                agent._compress_context_impl = own

    async def on_model_call(self, agent: Any, input_kwargs: dict[str, Any], next_handler: Callable[..., Any]) -> Any:
        """Send the model ctxwise's compacted, checked view of the agent's context."""
        messages = list(input_kwargs["messages"])
        view, record = await asyncio.to_thread(self._prepare, agent, messages, list(input_kwargs.get("tools") or []))
        agent.state.middle_context[self.key] = record
        return await next_handler(messages=view)

    async def list_tools(self) -> list[ToolBase]:
        """The recall tool (fetch a cleared result back by its ``tool_use_id``); add it to the
        agent's ``Toolkit``."""
        middleware = self
        schema = recall_tool_schema("openai")["function"]

        async def recall(tool_use_id: str, _agent_state: Any = None) -> ToolChunk:
            session = await asyncio.to_thread(middleware.session, _agent_state)
            text, is_error = recall_tool_output(session, {"tool_use_id": tool_use_id})
            return ToolChunk(content=[asm.TextBlock(text=text)],
                             state=asm.ToolResultState.ERROR if is_error else asm.ToolResultState.SUCCESS)

        return [FunctionTool(recall, name=RECALL_TOOL_NAME, description=schema["description"],
                             input_schema=schema["parameters"], is_read_only=True, is_state_injected=True,
                             permission=PermissionDecision(behavior=PermissionBehavior.ALLOW,
                                                           message="reading the session's own tool results"))]

    # -- ctxwise's side ------------------------------------------------------------------

    def _prepare(self, agent: Any, messages: list[Any], tools: list[dict[str, Any]]) -> tuple[list[Any], dict[str, Any]]:
        state = agent.state
        rec = self.record(state)
        user_id = rec["user_id"] if rec else self.user_id
        session_id = rec["session_id"] if rec else f"{state.session_id}:{self.key}"
        session = self._session(user_id, session_id, tools)

        system = messages[0] if messages and messages[0].role == "system" else None
        # AgentScope sends state.summary (its compressor's, or one restored with the state) as a
        # user message right after the system prompt: ctxwise holds it there, under ids of its own
        first = state.context[0] if state.context else None
        summary = messages[1] if state.summary and len(messages) > 1 and messages[1] is not first \
            and messages[1].role == "user" else None
        head = [m.model_copy(update={"id": f"{self.key}-{_SUMMARY}/{k}"})
                for k, (m, _) in enumerate(_parts(summary))] if summary is not None else []
        parts = [p for i, msg in enumerate(state.context) for p in _parts(msg, i)]
        ids = [m.id for m in head] + [m.id for m, _ in parts]
        stable = [m.model_dump_json() for m in [*head, *(m for m, _ in parts)]]
        start, why = follow(ids, rec, session, session_id, state="this AgentState's context and summary",
                            prefix_digest=lambda at: digest(stable[:at + 1]))
        if why is not None:
            # agent.state.context (or state.summary) changed under the session (a message
            # removed or corrected in place, an older saved state restored): the state is the
            # truth, so it goes to a new branch of the session, recorded there
            parent, session_id = session_id, branch_id(session_id)
            session = self._session(user_id, session_id, tools)
            session.record_branch(parent, why)
            start = 0
        batch: list[Message] = []
        if not session.messages:
            if system is not None:
                memory = self._memory_text(session)
                text = _output_text(system.content) if not isinstance(system.content, str) else system.content
                if memory and text.endswith("\n\n" + memory):
                    text = text[: -len(memory) - 2]  # the memory block is counted as ctxwise's own message
                batch.append(Message(id=f"{self.key}-{_SYSTEM}", role="system", blocks=[TextBlock(text=text)]))
        batch += [*head, *(m for m, _ in parts)][start:]  # in the order of ids
        if batch:
            session.append(batch)
        prepared = session.prepare()
        self.last_prepared = prepared
        self.sessions.put(pool_key(user_id, session_id, tools), session)  # weighed again, compacted

        view = self._view(agent, system, summary, prepared.messages, parts, state.context)
        record = {"user_id": user_id, "session_id": session_id, "last": ids[-1] if ids else None,
                  "version": session.version, "digest": digest(stable),
                  "payload_sha256": hashlib.sha256(json.dumps(prepared.payload, ensure_ascii=False).encode()).hexdigest()}
        return view, record

    def _view(self, agent: Any, system: Any, summary: Any, prepared: list[Message],
              parts: list[tuple[Message, list[Any]]], context: list[Any]) -> list[Any]:
        """The messages the model gets: the system prompt and ``summary`` as they came, then the
        context: each ``Msg`` whose parts ctxwise sends unchanged and whole is the state's own
        object; a ``Msg`` ctxwise edited is one ``Msg`` again (its id, name and role kept: a
        reply holding a tool call, its result and text is never split, and each speaker keeps
        its name); what ctxwise made (a summary, the facts block) is a user message."""
        by_id = {m.id: (m, src) for m, src in parts}
        origin = {msg.id: msg for msg in context}
        view: list[Any] = [system] if system is not None else []
        groups: list[tuple[str | None, list[Any], bool, int]] = []  # (origin id, blocks, all unchanged, parts)
        # (a part's blocks are the Msg's own objects unless one was left out: see _data)
        for m in prepared:
            if m.id == f"{self.key}-{_SYSTEM}" or m.kind == "user_memory":
                continue  # the system prompt (with the memory block) travels as it came
            if m.id.startswith(f"{self.key}-{_SUMMARY}/"):
                if summary is not None and not (groups and groups[-1][0] == _SUMMARY):
                    groups.append((_SUMMARY, [], True, 0))
                continue
            orig = by_id.get(m.id)
            same = orig is not None and orig[0].role == m.role and (_unedited(m) or
                                                                     [b.model_dump() for b in orig[0].blocks] ==
                                                                     [b.model_dump() for b in m.blocks])
            blocks = list(orig[1]) if same and orig is not None else _blocks(m)
            owner = m.id.rsplit("/", 1)[0] if "/" in m.id and m.id.rsplit("/", 1)[0] in origin else None
            if owner is not None and groups and groups[-1][0] == owner:
                o, bl, unchanged, n = groups[-1]
                groups[-1] = (o, bl + blocks, unchanged and same, n + 1)
            elif owner is not None:
                groups.append((owner, blocks, same, 1))
            else:  # ctxwise's own (a summary, the facts block)
                groups.append((None, [asm.Msg(name=m.name or "user", role="user", content=blocks, id=m.id)], True, 0))
        for owner, blocks, unchanged, n in groups:
            if owner == _SUMMARY:
                view.append(summary)
            elif owner is None:
                view.extend(blocks)
            elif unchanged and len(blocks) == len(origin[owner].content) and \
                    all(a is b for a, b in zip(blocks, origin[owner].content)):
                view.append(origin[owner])  # the state's own message, as written, every block sent
            else:
                msg = origin[owner]
                view.append(msg.model_copy(update={"content": blocks}))
        return view


def _unedited(m: Message) -> bool:
    """Whether ``m`` holds what was appended, only normalized at append (an empty result marked,
    an empty text block dropped: the formatter makes its own such fixes) and never edited by
    compaction (no clearing, thinking pruning or truncation marker)."""
    mark = Marker.read(m)
    if mark.cleared or mark.cleared_inputs or mark.pruned_thinking or mark.truncated or mark.kind is not None:
        return False
    return bool(mark.empty_marked or mark.normalized)



def _data_block(b: ImageBlock) -> Any:
    """A ctxwise image as the AgentScope ``DataBlock`` it was read from (base64 or URL source)."""
    media = b.media_type or "image/png"
    if b.data is not None:
        return asm.DataBlock(source=asm.Base64Source(data=b.data, media_type=media))
    return asm.DataBlock(source=asm.URLSource.model_validate({"url": b.url or "", "media_type": media}))


def _blocks(m: Message) -> list[Any]:
    """AgentScope blocks for a canonical message ctxwise changed or made (a placeholder, a summary,
    the facts block)."""
    out: list[Any] = []
    for b in m.blocks:
        if isinstance(b, TextBlock):
            out.append(asm.TextBlock(text=b.text))
        elif isinstance(b, ImageBlock):
            out.append(_data_block(b))
        elif isinstance(b, ToolUseBlock):
            out.append(asm.ToolCallBlock(id=b.id, name=b.name, input=json.dumps(b.input, ensure_ascii=False),
                                         state=asm.ToolCallState.FINISHED))
        elif isinstance(b, ToolResultBlock):
            output: list[Any] = [asm.TextBlock(text=b.text)] if not any(isinstance(o, ImageBlock) for o in b.output) \
                else [asm.TextBlock(text=o.text) if isinstance(o, TextBlock) else _data_block(o) for o in b.output
                      if isinstance(o, (TextBlock, ImageBlock))]
            out.append(asm.ToolResultBlock(id=b.tool_use_id, name=b.name or "", output=output,
                                           state=asm.ToolResultState.ERROR if b.state == "error"
                                           else asm.ToolResultState.SUCCESS))
        elif isinstance(b, ThinkingBlock):
            if b.redacted:
                out.append(asm.ThinkingBlock.model_validate({"thinking": "", "redacted_thinking_data": b.thinking}))
            elif b.signature is not None:
                out.append(asm.ThinkingBlock.model_validate({"thinking": b.thinking, "signature": b.signature}))
            else:
                out.append(asm.ThinkingBlock(thinking=b.thinking))
    return out
