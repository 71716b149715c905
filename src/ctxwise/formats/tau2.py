"""tau2-bench "Results" JSON (sierra-research/tau2-bench) ↔ canonical.

Shape: ``{"timestamp", "info", "tasks", "simulations": [{"id", "task_id", ..., "messages":
[...]}]}``. The agent's system prompt is ``info.environment_info.policy`` (not in ``messages``).
Messages: ``{"role": "assistant" | "user", "content": str | null, "tool_calls": [{"id", "name",
"arguments": {...}, "requestor"}] | null, "turn_idx", "timestamp", "cost", "usage",
"raw_data", ...}`` and tool results ``{"id": <call id>, "role": "tool", "content", "requestor",
"error": bool, "turn_idx", "timestamp"}`` paired to their call by ``id``. Anthropic-backed runs
carry thinking in ``raw_data.thinking_blocks`` (``{"type": "thinking", "thinking",
"signature"}``).

Mapping: the policy → a ``system`` message first (id ``m0000``); messages follow with ids
``m0001``…; thinking blocks → :class:`ThinkingBlock` (with signature) first in their assistant
message and removed from the ``raw_data`` copy kept in metadata (the writer puts them back);
``error`` ↔ ``state``; every other key (``turn_idx``, ``timestamp``, ``cost``, ``usage`` —
``metadata["usage"]["prompt_tokens"]`` is the provider-reported prompt size of that model call
— ``raw_data``, ``requestor``, ...) is kept in ``Message.metadata`` / block ``extra``. One
:class:`Conversation` per simulation, id = the simulation id.
"""

from __future__ import annotations

import copy
from typing import Any

from ..errors import FormatError
from ..messages import Message, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from ._common import book_key, default_id, need_dict, no_call, order_note, reorder, split_known, with_book
from .conversation import Conversation

BOOK = book_key("tau2")
_NATURAL = ["role", "content", "tool_calls"]
_NATURAL_TOOL = ["id", "role", "content", "requestor", "error"]


def _thinking(raw: dict[str, Any], meta: dict[str, Any], book: dict[str, Any]) -> list[ThinkingBlock]:
    rd = raw.get("raw_data")
    tbs = rd.get("thinking_blocks") if isinstance(rd, dict) else None
    if not isinstance(tbs, list) or not tbs or not isinstance(rd, dict):
        return []
    out = []
    for tb in tbs:
        tb = need_dict(tb, "thinking block")
        t = tb.get("type", "thinking")
        extra = split_known(tb, ("type", "thinking", "signature", "data"))
        if t == "redacted_thinking":
            out.append(ThinkingBlock(thinking=tb.get("data", ""), redacted=True, extra=extra))
        else:
            out.append(ThinkingBlock(thinking=tb.get("thinking", ""), signature=tb.get("signature"), extra=extra))
    book["thinking_at"] = list(rd).index("thinking_blocks")
    meta["raw_data"] = {k: v for k, v in rd.items() if k != "thinking_blocks"}
    return out


def _user_side(raw: dict[str, Any], user_calls: set[str]) -> bool:
    """Whether a raw message is the user's own tool activity (dual control): a user message
    calling tools with no text, or a tool message answering the user (``requestor: "user"``)."""
    if raw.get("role") == "tool":
        return raw.get("requestor") == "user" or raw.get("id") in user_calls
    content = raw.get("content")
    return raw.get("role") == "user" and bool(raw.get("tool_calls")) and not (isinstance(content, str) and content)


def _read_tool(raw: dict[str, Any], place: str, names: dict[str, str], mid: str, book: dict[str, Any]) -> Message:
    """A tau2 ``tool`` message as a canonical ``tool`` message; raises FormatError when its
    ``id`` matches no earlier call (``names``: call id → tool name)."""
    cid = raw.get("id")
    if cid not in names:
        raise no_call(place, cid, "matches no earlier tool call id")
    order = order_note(raw, _NATURAL_TOOL)
    if order:
        book["order"] = order
    content = raw.get("content")
    if not isinstance(content, str) or not content:
        book["content"] = content if "content" in raw else "absent"
    if "error" not in raw or not isinstance(raw["error"], bool):
        book["error"] = raw.get("error", "absent")
    meta = split_known(raw, ("id", "role", "content", "error"))
    return Message(id=mid, role="tool", metadata=with_book(meta, BOOK, book), blocks=[
        ToolResultBlock(tool_use_id=str(cid), name=names[cid], state="error" if raw.get("error") is True else "success",
                        output=[TextBlock(text=content)] if isinstance(content, str) and content else [])])


def _read_calls(calls: list[Any], place: str, names: dict[str, str]) -> list[ToolUseBlock]:
    """An assistant message's ``tool_calls`` as tool uses; each call's name is noted in
    ``names`` by its id."""
    out = []
    for j, c in enumerate(calls):
        c = need_dict(c, f"{place}, tool call {j}", "a tool call object")
        extra = split_known(c, ("id", "name", "arguments"))
        args = c.get("arguments")
        cbook = {}
        if not isinstance(args, dict):
            cbook["arguments"] = args
        co = order_note(c, ["id", "name", "arguments"])
        if co:
            cbook["order"] = co
        u = ToolUseBlock(id=str(c.get("id")), name=str(c.get("name")), input=args if isinstance(args, dict) else {},
                         extra=with_book(extra, BOOK, cbook))
        names[u.id] = u.name
        out.append(u)
    return out


def _read_message(raw: dict[str, Any], place: str, names: dict[str, str], mid: str,
                  book: dict[str, Any]) -> Message:
    """A tau2 assistant, user or system message as a canonical message (thinking first, then
    the text, then the agent's tool calls; a user's own calls stay in its record)."""
    role = raw.get("role")
    if role not in ("assistant", "user", "system"):
        raise FormatError(place, f"unknown role {role!r}; expected assistant, user, tool (or system)")
    order = order_note(raw, _NATURAL)
    if order:
        book["order"] = order
    meta = split_known(raw, ("role", "content", "tool_calls"))
    blocks: list[Any] = _thinking(raw, meta, book)
    content = raw.get("content")
    if isinstance(content, str) and content:
        blocks.append(TextBlock(text=content))
    elif content is not None or "content" not in raw:
        book["content"] = content if "content" in raw else "absent"
    calls = raw.get("tool_calls", "absent")
    if isinstance(calls, list) and calls and role != "assistant":
        book["tool_calls"] = calls  # the user's own calls (dual control): kept, not read
    elif isinstance(calls, list) and calls:
        blocks.extend(_read_calls(calls, place, names))
    elif calls is not None:
        book["tool_calls"] = calls
    return Message(id=mid, role=role, blocks=blocks, metadata=with_book(meta, BOOK, book))


def from_tau2_messages(raw_msgs: list[dict[str, Any]], policy: str | None = None) -> list[Message]:
    """Read one simulation's ``messages`` (plus the policy, when given, as a system message).

    Dual control (tau2 domains where the user also calls tools, e.g. ``telecom``): the user's
    tool calls and the tool messages answering them (``requestor: "user"``) are the user's own
    actions on their device, not the agent's context, and no provider takes tool calls in a
    user message. So they are not read as canonical messages: a user message's ``tool_calls``
    stay in its record (``metadata["_tau2"]["tool_calls"]``, the text alone is read), and the
    user-side messages without text travel, verbatim, in the record of the next message
    (``metadata["_tau2"]["before"]``, or ``["after"]`` of the last one). The agent sees what
    it saw when recorded: the user's words. :func:`to_tau2_messages` writes them back in place.

    Raises :class:`~ctxwise.errors.FormatError` naming the message for an unknown role or a
    tool result whose ``id`` matches no earlier call.
    """
    out: list[Message] = []
    if policy is not None:
        out.append(Message(id=default_id(0), role="system", blocks=[TextBlock(text=policy)],
                           metadata={BOOK: {"policy": True}}))
    names: dict[str, str] = {}
    user_calls: set[str] = set()
    carried: list[dict[str, Any]] = []
    for i, raw in enumerate(raw_msgs):
        place = f"message {i}"
        raw = need_dict(raw, place, "a message object")
        book: dict[str, Any] = {}
        if raw.get("role") == "user" and isinstance(raw.get("tool_calls"), list):
            user_calls.update(str(c.get("id")) for c in raw["tool_calls"] if isinstance(c, dict))
        if _user_side(raw, user_calls):
            carried.append(raw)
            continue
        if carried:
            book["before"], carried = carried, []
        read = _read_tool if raw.get("role") == "tool" else _read_message
        out.append(read(raw, place, names, default_id(len(out)), book))
    if carried:
        if not out:
            raise FormatError("messages", "only user-side tool activity: no message to read")
        last = out[-1]
        lbook = {**(last.metadata.get(BOOK) or {}), "after": carried}
        out[-1] = last.model_copy(update={"metadata": {**last.metadata, BOOK: lbook}})
    return out


def _write_results(m: Message, book: dict[str, Any], meta: dict[str, Any]) -> list[dict[str, Any]]:
    """A canonical ``tool`` message as one tau2 tool message per result."""
    out = []
    for r in m.tool_results:
        d: dict[str, Any] = {"id": r.tool_use_id, "role": "tool"}
        c = book.get("content", r.text) if not r.output else r.text
        if c != "absent":
            d["content"] = c
        d.update(meta)
        err = book.get("error", False) if r.state == "success" else True
        if err != "absent":
            d["error"] = err
        out.append(reorder(_tool_order(d), book.get("order")))
    return out


def _write_thinking(d: dict[str, Any], m: Message, book: dict[str, Any]) -> None:
    """Put ``m``'s thinking blocks back in ``d["raw_data"]["thinking_blocks"]``, where they were read."""
    rd = dict(d.get("raw_data") or {})
    items = list(rd.items())
    tbs = []
    for t in m.thinking:
        tb: dict[str, Any] = ({"type": "redacted_thinking", "data": t.thinking} if t.redacted
                              else {"type": "thinking", "thinking": t.thinking, "signature": t.signature})
        tb.update(t.extra)
        tbs.append(tb)
    items.insert(book.get("thinking_at", len(items)), ("thinking_blocks", tbs))
    d["raw_data"] = dict(items)


def _write_message(m: Message, book: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    """A canonical assistant, user or system message as a tau2 message."""
    d: dict[str, Any] = {"role": m.role}
    text = "\n".join(b.text for b in m.blocks if isinstance(b, TextBlock))
    has_text = any(isinstance(b, TextBlock) for b in m.blocks)
    c = text if has_text else book.get("content", None)
    if c != "absent":
        d["content"] = c
    calls = []
    for u in m.tool_uses:
        cb = u.extra.get(BOOK) or {}
        cd = {"id": u.id, "name": u.name, "arguments": cb.get("arguments", u.input) if not u.input else u.input}
        cd.update((k, v) for k, v in u.extra.items() if k != BOOK)
        calls.append(reorder(cd, cb.get("order")))
    tc = calls if calls else book.get("tool_calls", None)
    if tc != "absent":
        d["tool_calls"] = tc
    d.update(meta)
    if m.thinking or "thinking_at" in book:
        _write_thinking(d, m, book)
    return reorder(d, book.get("order"))


def to_tau2_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Write canonical messages as a tau2 ``messages`` list (the policy system message, if
    first, is left out: it belongs in ``info.environment_info.policy``). Message ids are not
    written (tau2 has none); a ``tool`` message with several results is written as one tau2
    message per result."""
    out: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        book = m.metadata.get(BOOK) or {}
        meta = {k: v for k, v in m.metadata.items() if k != BOOK}
        out.extend(book.get("before") or [])
        if m.role == "tool":
            out.extend(_write_results(m, book, meta))
        elif not (i == 0 and m.role == "system" and book.get("policy")):  # the policy goes in info
            out.append(_write_message(m, book, meta))
        out.extend(book.get("after") or [])
    return out


def _tool_order(d: dict[str, Any]) -> dict[str, Any]:
    return reorder(d, [k for k in _NATURAL_TOOL if k in d])


def from_tau2(results: dict[str, Any], source: str = "") -> list[Conversation]:
    """Read a tau2 Results document into one :class:`Conversation` per simulation.

    ``Conversation.metadata`` holds ``simulation`` (the simulation's other fields, in order),
    ``messages_at`` (the position of its ``messages`` key) and ``results`` (the document's
    other top-level keys, shared, not copied). Raises
    :class:`~ctxwise.errors.FormatError` naming the simulation and message.
    """
    results = need_dict(results, "document", "a tau2 Results object")
    sims = results.get("simulations")
    if not isinstance(sims, list):
        raise FormatError("document", "expected a 'simulations' list (tau2 Results)")
    info = results.get("info") or {}
    policy = ((info.get("environment_info") or {}) if isinstance(info, dict) else {}).get("policy")
    rest = {k: v for k, v in results.items() if k != "simulations"}
    convs = []
    for k, sim in enumerate(sims):
        sim = need_dict(sim, f"simulation {k}", "a simulation object")
        try:
            msgs = from_tau2_messages(sim.get("messages") or [], policy)
        except FormatError as e:
            raise FormatError(f"simulation {k} ({sim.get('id')}), {e.place}", e.rule) from None
        meta = {"simulation": {a: b for a, b in sim.items() if a != "messages"},
                "messages_at": list(sim).index("messages") if "messages" in sim else None, "results": rest}
        convs.append(Conversation(id=str(sim.get("id", f"simulation{k}")), messages=msgs, format="tau2",
                                  source=source, metadata=meta))
    return convs


def to_tau2_simulation(conv: Conversation) -> dict[str, Any]:
    """The tau2 simulation dict of ``conv`` (its kept fields with ``messages`` rewritten)."""
    sim = conv.metadata.get("simulation") or {"id": conv.id}
    items = list(sim.items())
    at = conv.metadata.get("messages_at")
    items.insert(len(items) if at is None else at, ("messages", to_tau2_messages(conv.messages)))
    return dict(items)


def to_tau2(conversations: list[Conversation]) -> dict[str, Any]:
    """A tau2 Results document from conversations read by :func:`from_tau2` (the first one's
    ``results`` fields, the policy taken from its system message)."""
    rest = dict(conversations[0].metadata.get("results") or {}) if conversations else {}
    first = conversations[0].messages if conversations else []
    if first and first[0].role == "system" and (first[0].metadata.get(BOOK) or {}).get("policy"):
        rest = copy.deepcopy(rest) if "info" in rest else rest
        rest.setdefault("info", {}).setdefault("environment_info", {})["policy"] = first[0].text
    return {**rest, "simulations": [to_tau2_simulation(c) for c in conversations]}
