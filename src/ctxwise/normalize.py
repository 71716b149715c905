"""What models really send, made safe at append (before anything is stored).

Real servers return replies the provider rules refuse when sent back, and one such reply used
to leave a session where every later ``prepare()`` failed. Each rule below fixes a *kind* of
reply, keeps what arrived in the transcript, and says what it did (the message's
``metadata["ctxwise"]["normalized"]`` list and one ``normalized`` event):

* **blank text beside tool calls** (vLLM, Qwen and DeepSeek-style servers send
  ``"content": "\\n\\n"`` with ``tool_calls``): the blank text block is dropped; its text is
  kept in the note. Anthropic: "text content blocks must contain non-whitespace text".
* **an empty reply** (Anthropic ``end_turn`` with ``content: []`` after tool results; an
  OpenAI ``content: ""`` or ``null`` with no calls) and **a refusal-only reply** (OpenAI's
  ``refusal`` field with no content): the message is stored and shown in the transcript, and
  left out of the context (``metadata["ctxwise"]["omitted"]`` is ``"empty_reply"`` or
  ``"refusal"``). Every provider refuses an empty non-final assistant message (Anthropic: "all
  messages must have non-empty content except for the optional final assistant message";
  OpenAI: assistant ``content`` is required unless ``tool_calls`` is given), and a
  consecutive user message is accepted by all of them. A reply of reasoning only (a Responses
  output that is one encrypted ``reasoning`` item, e.g. cut off by ``max_output_tokens``) is
  such an empty reply: the API refuses a reasoning item with no item after it in its turn
  (rule ``reasoning-without-following-item``), so it is kept in the transcript and the record
  (its note says ``reasoning``), not sent.
* **notes a front end wrote** in ``metadata["ctxwise"]["normalized"]`` when it read the input
  (the AgentScope middleware sends a text block in place of an audio / PDF / video block) get
  the same ``normalized`` event.
* **``tool_calls: []`` or ``null``** is no tool calls (OpenAI refuses an empty array when it is
  sent back: "expected an array with minimum length 1").

And these are refused with a :class:`~ctxwise.errors.FormatError` naming the message index,
before anything is stored:

* ``tool_calls`` that is not a list (``"nope"``), a call that is not an object;
* ``arguments`` that are not a JSON object: non-JSON text, ``NaN`` / ``Infinity`` (not JSON,
  RFC 8259 section 6), a JSON array or string; arguments given as an object (some SDK
  wrappers and local servers do) are serialized to JSON text first (noted);
* a tool input (canonical ``tool_use.input``) holding a value JSON cannot carry (a
  ``datetime``, a set, bytes, NaN);
* ``arguments`` text nested deeper than :data:`ctxwise.nesting.MAX_DEPTH`.

A JSON value nested deeper than :data:`ctxwise.nesting.MAX_DEPTH` (a tool input, ``metadata``,
a block's ``extra``) is refused with :class:`~ctxwise.errors.MessageNotStorable` (rule
``too-deep``, naming the message index): no walker could read it back.
"""

from __future__ import annotations

import json
import math
from typing import Any

from . import nesting
from .errors import FormatError
from .messages import (
    MARKER_KEY,
    ROLES,
    AudioBlock,
    DocumentBlock,
    ImageBlock,
    Marker,
    Message,
    ProviderBlock,
    RefusalBlock,
    SearchResultBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)

_OTHER_BLOCKS = (ImageBlock, DocumentBlock, SearchResultBlock, AudioBlock, RefusalBlock, ProviderBlock)
"""Blocks that are content by themselves (their fields are checked by pydantic on construction)."""

OMITTED_KEY = "omitted"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _strict_loads(text: str) -> Any:
    return nesting.loads(text, parse_constant=_reject_constant)


def prepare_openai(raw: list[Any], base: int) -> tuple[list[Any], dict[int, list[dict[str, Any]]]]:
    """Check and normalize OpenAI chat dicts before they are read (``base`` is the session
    index of ``raw[0]``, used in error places).

    Returns the dicts to read (copies where something changed) and the notes per position.
    Raises :class:`FormatError` (``message <i>, tool call <j>: ...``) as described in the
    module docstring. Non-dict items are passed through for the reader to refuse.
    """
    out: list[Any] = []
    notes: dict[int, list[dict[str, Any]]] = {}
    for k, m in enumerate(raw):
        if not isinstance(m, dict):
            out.append(m)
            continue
        place = f"message {base + k}"
        if "tool_calls" not in m:
            out.append(m)
            continue
        calls = m["tool_calls"]
        if calls is None or (isinstance(calls, list) and not calls):
            m = {key: v for key, v in m.items() if key != "tool_calls"}
            notes.setdefault(k, []).append({"rule": "no-tool-calls", "original": {"tool_calls": calls}})
            out.append(m)
            continue
        if not isinstance(calls, list):
            raise FormatError(place, f"tool_calls must be a list of tool call objects, got {type(calls).__name__}")
        new_calls = []
        for j, c in enumerate(calls):
            where = f"{place}, tool call {j}"
            if not isinstance(c, dict) or not isinstance(c.get("function"), dict):
                raise FormatError(where, "a tool call must be an object with a 'function' object")
            fn = c["function"]
            args = fn.get("arguments", "")
            if isinstance(args, dict):
                text = _dumps_input(args, where)
                notes.setdefault(k, []).append({"rule": "arguments-object", "call": j, "original": args})
                c = {**c, "function": {**fn, "arguments": text}}
            elif isinstance(args, str):
                if args.strip():
                    try:
                        parsed = _strict_loads(args)
                    except nesting.TooDeep as e:
                        raise FormatError(where, f"arguments are {e}") from None
                    except ValueError as e:
                        raise FormatError(where, f"arguments are not valid JSON ({e})") from None
                    if not isinstance(parsed, dict):
                        raise FormatError(where, f"arguments must be a JSON object, got a JSON {type(parsed).__name__}")
            elif args is not None:
                raise FormatError(where, f"arguments must be a JSON string or an object, got {type(args).__name__}")
            new_calls.append(c)
        out.append({**m, "tool_calls": new_calls})
    return out, notes


def _dumps_input(value: Any, place: str) -> str:
    why = nesting.too_deep(value)
    if why is not None:
        raise FormatError(place, f"tool input is {why}; send deeper data as text or flatten it")
    try:
        return json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise FormatError(place, f"tool input is not JSON: {e}") from None


def _check_json(value: Any, place: str) -> None:
    """Raise FormatError unless ``value`` is plain JSON (no NaN, no datetime, no set)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise FormatError(place, f"tool input holds {value!r}, which JSON cannot carry")
    _dumps_input(value, place)


def _valid_result(b: ToolResultBlock) -> bool:
    return isinstance(b.tool_use_id, str) and isinstance(b.output, list) and all(
        isinstance(o, (ImageBlock, DocumentBlock, SearchResultBlock)) or (isinstance(o, TextBlock) and isinstance(o.text, str))
        for o in b.output)


def _valid_block(b: Any) -> bool:
    """Whether ``b`` is a block of the canonical shape (its fields of the right types)."""
    if isinstance(b, TextBlock):
        return isinstance(b.text, str)
    if isinstance(b, ThinkingBlock):
        return isinstance(b.thinking, str)
    if isinstance(b, ToolUseBlock):
        return isinstance(b.id, str) and isinstance(b.name, str)
    if isinstance(b, ToolResultBlock):
        return _valid_result(b)
    if isinstance(b, ProviderBlock):
        return isinstance(b.raw, dict) and isinstance(b.kind, str)
    return isinstance(b, _OTHER_BLOCKS)


def _check_shape(m: Any, place: str) -> None:
    """Raise FormatError unless ``m`` has the canonical shape. Messages built with pydantic's
    ``model_construct`` skip validation; one stored with a dict for a block or an unknown
    role made its session unloadable, so the shape is checked here (cheap: no copy)."""
    if not isinstance(m.id, str) or not m.id:
        raise FormatError(place, f"message id must be a non-empty string, got {m.id!r}")
    if m.role not in ROLES:
        raise FormatError(place, f"unknown role {m.role!r}; expected one of {', '.join(ROLES)}")
    if not isinstance(m.blocks, list) or not isinstance(m.metadata, dict):
        raise FormatError(place, "blocks must be a list and metadata a dict")
    for j, b in enumerate(m.blocks):
        if not _valid_block(b):
            raise FormatError(f"{place}, block {j}", f"not a valid block ({type(b).__name__}); build messages with "
                              "Message(...) or Message.model_validate(...), not model_construct")


def _blank(b: Any) -> bool:
    return isinstance(b, TextBlock) and not b.text.strip()


def _has_content(blocks: list[Any]) -> bool:
    return any((isinstance(b, TextBlock) and b.text.strip()) or isinstance(b, (ToolUseBlock,) + _OTHER_BLOCKS)
               for b in blocks)


def omitted(m: Message) -> str | None:
    """Why ``m`` is left out of the context (``"empty_reply"``, ``"refusal"``), or None."""
    return Marker.read(m).omitted if MARKER_KEY in m.metadata else None


def _given_notes(m: Message) -> list[dict[str, Any]]:
    """Notes a front end put in ``metadata["ctxwise"]["normalized"]`` when it read the input
    (e.g. the AgentScope middleware's ``data-block-held-as-text``); they get the same event."""
    notes = Marker.read(m).normalized if MARKER_KEY in m.metadata else None
    return [n for n in notes if isinstance(n.get("rule"), str)] if notes else []


def _with_notes(m: Message, notes: list[dict[str, Any]], **marks: Any) -> Message:
    return m.model_copy(update={"metadata": Marker.with_(
        m, normalized=[*(Marker.read(m).normalized or ()), *notes], **marks)})


def _check_inputs(m: Message, place: str) -> None:
    """Raise FormatError naming the call and key unless every tool input is a JSON object."""
    for j, u in enumerate(m.tool_uses):
        if not isinstance(u.input, dict):
            raise FormatError(f"{place}, tool call {j}", "tool input must be an object")
        for key, v in u.input.items():
            _check_json(v, f"{place}, tool call {j}, input {key!r}")


def _empty_or_blank(m: Message, notes: list[dict[str, Any]], marks: dict[str, Any]) -> Message:
    """An assistant message with no content marked as left out of the context (``refusal``
    or ``empty_reply`` in ``marks``), or its blank text blocks dropped; each change noted in
    ``notes``. Returns the message to keep."""
    if not _has_content(m.blocks):
        refusal = m.metadata.get("refusal")
        why = "refusal" if isinstance(refusal, str) and refusal.strip() else "empty_reply"
        marks[OMITTED_KEY] = why
        note: dict[str, Any] = {"rule": why, "note": "kept in the transcript, left out of the context"}
        if m.thinking:  # reasoning alone: no provider takes it without a reply after it
            note["reasoning"] = (f"{len(m.thinking)} reasoning block(s) and nothing else: a reasoning item needs an "
                                 "item after it (Responses), thinking needs the reply it precedes (Anthropic)")
        notes.append(note)
    elif any(_blank(b) for b in m.blocks):
        dropped = [b.text for b in m.blocks if isinstance(b, TextBlock) and _blank(b)]
        m = m.model_copy(update={"blocks": [b for b in m.blocks if not _blank(b)]})
        notes.append({"rule": "blank-text-dropped", "original": dropped})
    return m


def normalize_batch(batch: list[Message], base: int,
                    notes: dict[int, list[dict[str, Any]]] | None = None) -> tuple[list[Message], list[dict[str, Any]]]:
    """Apply the rules of this module to canonical messages about to be appended.

    ``base`` is the session index of ``batch[0]``; ``notes`` are earlier notes per batch
    position (from :func:`prepare_openai`). Returns the batch to store (same length, same
    ids) and one record per changed message ``{"index", "id", "rules": [...]}``. Raises
    :class:`FormatError` naming the message index for a tool input JSON cannot carry, and
    :class:`MessageNotStorable` (rule ``too-deep``) for a JSON value nested too deep.
    """
    notes = notes or {}
    out: list[Message] = []
    changed: list[dict[str, Any]] = []
    for k, m in enumerate(batch):
        place = f"message {base + k}"
        _check_shape(m, place)
        nesting.check_message(m, base + k)
        _check_inputs(m, place)
        mine = list(notes.get(k, []))
        marks: dict[str, Any] = {}
        if m.role == "assistant" and omitted(m) is None:
            m = _empty_or_blank(m, mine, marks)
        given = _given_notes(m)  # a front end's own record of what it changed when it read the input
        if mine or marks:
            m = _with_notes(m, mine, **marks)
        if mine or marks or given:
            changed.append({"index": base + k, "id": m.id, "rules": [n["rule"] for n in given + mine]})
        out.append(m)
    return out, changed


__all__ = ["normalize_batch", "prepare_openai", "omitted", "OMITTED_KEY"]
