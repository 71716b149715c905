"""SDK objects -> the JSON dicts the format readers take (no SDK import needed).

The official clients hand back pydantic models: ``openai``'s ``ChatCompletionMessage`` (and
its tool calls), ``anthropic``'s ``Message`` and its content blocks. An agent loop passes
them straight on (``messages.append({"role": "assistant", "content": reply.content})``), so
the ``Session.append_openai`` / ``append_anthropic`` helpers accept them: any object with
``model_dump`` is dumped to JSON (``None`` fields left out), at any depth.
"""

from __future__ import annotations

from typing import Any

from .. import nesting
from ..errors import FormatError
from ..usage import DIAGNOSTICS_KEY, USAGE_KEY

MESSAGE_DEPTH = nesting.MAX_DEPTH + 8
"""The deepest nesting read from one message object: its values nest at most
:data:`ctxwise.nesting.MAX_DEPTH` deep, inside the message's own levels (content, block)."""


def plain(x: Any, place: str = "input", _level: int = 0) -> Any:
    """``x`` with every pydantic model (at any depth) dumped to a JSON dict, ``None`` fields
    left out; dicts and lists are copied, other values returned as they are. Raises
    :class:`~ctxwise.errors.FormatError` naming ``place`` when ``x`` nests deeper than
    :data:`MESSAGE_DEPTH`."""
    if _level > MESSAGE_DEPTH:
        raise FormatError(place, f"nested more than {MESSAGE_DEPTH} levels deep (a message's values may nest "
                                 f"{nesting.MAX_DEPTH}); send deeper data as text or flatten it")
    if hasattr(x, "model_dump") and callable(x.model_dump):
        return plain(x.model_dump(mode="json", exclude_none=True), place, _level)
    if isinstance(x, dict):
        return {k: plain(v, place, _level + 1) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v, place, _level + 1) for v in x]
    return x


def _items(messages: Any) -> list[Any]:
    if isinstance(messages, dict) or hasattr(messages, "model_dump"):
        return [messages]
    if isinstance(messages, (str, bytes)) or not hasattr(messages, "__iter__"):
        raise FormatError("messages", f"expected a list of messages, got {type(messages).__name__}")
    return list(messages)


def openai_dicts(messages: Any) -> list[dict[str, Any]]:
    """OpenAI chat message dicts from dicts and/or ``ChatCompletionMessage`` objects (a single
    message is taken as a list of one). Raises :class:`~ctxwise.errors.FormatError` naming
    the message for anything that is not a message."""
    out = []
    for i, m in enumerate(_items(messages)):
        d = plain(m, f"message {i}")
        if not isinstance(d, dict):
            raise FormatError(f"message {i}", f"expected a message object, got {type(m).__name__}")
        out.append(d)
    return out


def anthropic_dicts(messages: Any) -> list[dict[str, Any]]:
    """Anthropic message dicts from any of: a list of message dicts (``content`` may hold SDK
    block objects), SDK ``Message`` objects (``role`` and ``content`` are kept, and its ``usage`` /
    ``diagnostics`` as the message's ``usage`` / ``cache_diagnostics`` keys, which the reader
    keeps in ``metadata``: the response's id, model and stop reason are not part of the
    conversation), a
    ``reply.content`` list of blocks (read as one assistant message), or a ``{"system"?,
    "messages"}`` payload. Raises :class:`~ctxwise.errors.FormatError` naming the message."""
    if isinstance(messages, dict) and "messages" in messages and "role" not in messages:
        head = [{"role": "system", "content": plain(messages["system"], "system")}] if "system" in messages else []
        return head + anthropic_dicts(messages["messages"])
    items = [plain(m, f"message {i}") for i, m in enumerate(_items(messages))]
    if items and all(isinstance(b, dict) and "type" in b and "role" not in b for b in items):
        return [{"role": "assistant", "content": items}]  # reply.content
    out = []
    for i, (raw, d) in enumerate(zip(_items(messages), items)):
        if not isinstance(d, dict):
            raise FormatError(f"message {i}", f"expected a message object, got {type(raw).__name__}")
        if d.get("type") == "message" and "content" in d and "role" in d:  # an SDK Message
            kept = {"role": d["role"], "content": d["content"]}
            if d.get("usage"):  # anthropic/types/usage.py: the call's billing, ctxwise.usage reads it
                kept[USAGE_KEY] = d["usage"]
            if d.get("diagnostics"):
                kept[DIAGNOSTICS_KEY] = d["diagnostics"]
            d = kept
        out.append(d)
    return out
