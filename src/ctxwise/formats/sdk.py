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
from ..usage import DIAGNOSTICS_KEY, USAGE_KEY, usage_problem

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
    """OpenAI chat message dicts from dicts, ``ChatCompletionMessage`` objects and whole
    ``ChatCompletion`` replies (a single one is taken as a list of one).

    * A ``ChatCompletion`` (``openai/types/chat/chat_completion.py``: ``choices``, ``usage``)
      with one choice is its choice's ``message`` with the reply's ``usage``
      (``openai/types/completion_usage.py``) as the message's ``usage`` key, which the reader
      keeps in ``metadata["usage"]`` (recorded after a ``prepare()``, see
      :meth:`ctxwise.Session.append`).
    * A message dict whose ``metadata`` holds ``usage`` (and ``cache_diagnostics``), the place
      frameworks keep a reply's usage, has them lifted to the message's own ``usage`` /
      ``cache_diagnostics`` keys, so they are stored and recorded as a top-level ``usage`` is
      (the rest of ``metadata`` stays under that key).

    Raises :class:`~ctxwise.errors.FormatError` naming the message for anything that is not a
    message, a ``ChatCompletion`` with other than one choice, a ``usage`` given both at the top
    and in ``metadata``, and a ``metadata.usage`` that is no usage shape
    :func:`ctxwise.usage.reported_usage` reads."""
    out = []
    for i, m in enumerate(_items(messages)):
        refuse_foreign(m, f"message {i}")
        d = plain(m, f"message {i}")
        if not isinstance(d, dict):
            raise FormatError(f"message {i}", f"expected a message object, got {type(m).__name__}")
        refuse_other_shape(d, f"message {i}", "append_openai")
        if "choices" in d and "role" not in d:
            d = _completion_message(d, f"message {i}")
        d = _lift_usage(d, f"message {i}")
        check_usage(d.get(USAGE_KEY), f"message {i}")
        out.append(d)
    return out


def _completion_message(d: dict[str, Any], place: str) -> dict[str, Any]:
    """The message of a one-choice ``ChatCompletion`` dict, with its ``usage``."""
    choices = d["choices"]
    if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict) \
            or not isinstance(choices[0].get("message"), dict):
        n = len(choices) if isinstance(choices, list) else type(choices).__name__
        raise FormatError(place, f"a ChatCompletion with {n} choices is refused: a reply is one message",
                          hint="append the chosen choice's message (completion.choices[k].message)")
    msg = dict(choices[0]["message"])
    if d.get("usage"):
        msg[USAGE_KEY] = d["usage"]
    return msg


LANGCHAIN_HINT = ("let ctxwise.integrations.langchain (ContextMiddleware) manage a LangChain agent's messages, or "
                  "convert them with langchain_core.messages.convert_to_openai_messages() and pass the dicts to "
                  "Session.append_openai()")
GEMINI_HINT = ("use Gemini's OpenAI-compatible endpoint (https://generativelanguage.googleapis.com/v1beta/openai/, "
               "https://ai.google.dev/gemini-api/docs/openai) and pass its chat messages to Session.append_openai() "
               "with provider='gemini'")


def refuse_foreign(x: Any, place: str) -> None:
    """Raise FormatError naming ``place`` when ``x`` is a message of a framework or API ctxwise
    does not read as such: a LangChain message object (``langchain_core.messages.BaseMessage``)
    or its ``message_to_dict`` form (``{"type": "human", "data": {...}}``), or a Gemini-native
    content (``{"role", "parts"}``, https://ai.google.dev/api/caching#Content); the hint names
    the way in."""
    mod = type(x).__module__ or ""
    if mod.split(".")[0] in ("langchain", "langchain_core"):
        raise FormatError(place, f"a LangChain {type(x).__name__} is not a message ctxwise reads directly",
                          hint=LANGCHAIN_HINT)
    if not isinstance(x, dict) or "role" in x and "parts" not in x:
        return
    if "role" not in x and isinstance(x.get("data"), dict) and x.get("type") in (
            "human", "ai", "system", "tool", "chat", "function", "AIMessageChunk", "HumanMessageChunk"):
        raise FormatError(place, f"a LangChain message dict (message_to_dict, type {x['type']!r}) is not a message "
                                 "ctxwise reads directly", hint=LANGCHAIN_HINT)
    if "parts" in x and "content" not in x and x.get("role") in ("user", "model", "function", None):
        raise FormatError(place, "a Gemini-native content ({'role', 'parts'}) is not a format ctxwise reads",
                          hint=GEMINI_HINT)


def refuse_other_shape(d: Any, place: str, call: str) -> None:
    """Raise FormatError when ``d`` (a dict read from the input) is a whole reply of another
    API than ``call`` reads: a ``ChatCompletion`` (``choices``; for ``append_openai``), a
    ``Response`` (``object: "response"``; ``append_responses``) or an Anthropic ``Message``
    (``type: "message"`` with ``stop_reason``; ``append_anthropic``)."""
    if not isinstance(d, dict):
        return
    if "choices" in d and "role" not in d:
        what, right = "an OpenAI ChatCompletion", "append_openai"
    elif d.get("object") == "response":
        what, right = "an OpenAI Responses Response", "append_responses"
    elif d.get("type") == "message" and "stop_reason" in d:
        what, right = "an Anthropic Message", "append_anthropic"
    else:
        return
    if right != call:
        raise FormatError(place, f"{what} was passed to {call}()", hint=f"pass it to Session.{right}()")


def check_usage(usage: Any, place: str, where: str = "") -> None:
    """FormatError naming ``place`` and the rule (:func:`ctxwise.usage.usage_problem`) unless
    ``usage`` (a reply's ``usage``, or null) is a provider usage ctxwise stores and reads."""
    why = usage_problem(usage) if usage is not None else None
    if why is not None:
        raise FormatError(place, f"{where}{why}",
                          hint="pass the usage the SDK returned (completion.usage / message.usage) or leave it out")


def _lift_usage(d: dict[str, Any], place: str) -> dict[str, Any]:
    """``d`` with ``metadata.usage`` / ``metadata.cache_diagnostics`` moved to its top level."""
    meta = d.get("metadata")
    if not isinstance(meta, dict) or not (USAGE_KEY in meta or DIAGNOSTICS_KEY in meta):
        return d
    for key in (USAGE_KEY, DIAGNOSTICS_KEY):
        if key in meta and key in d:
            raise FormatError(place, f"{key!r} given both on the message and in its metadata",
                              hint=f"keep one {key!r}")
    if USAGE_KEY in meta:
        check_usage(meta[USAGE_KEY], place, "metadata.")
    rest = {k: v for k, v in meta.items() if k not in (USAGE_KEY, DIAGNOSTICS_KEY)}
    out = {k: v for k, v in d.items() if k != "metadata"}
    out.update((k, meta[k]) for k in (USAGE_KEY, DIAGNOSTICS_KEY) if k in meta)
    if rest:
        out["metadata"] = rest
    return out


def responses_items(items: Any) -> tuple[list[dict[str, Any]], Any, Any]:
    """Responses API items from a ``Response`` (``openai/types/responses/response.py``: its
    ``output`` items, SDK object or dict) or from a list of input / output items (dicts or the
    SDK's item objects; a single item is taken as a list of one): ``(items, usage,
    diagnostics)``, the last two the ``Response``'s ``usage`` (``response_usage.py``) and
    ``prompt_cache_diagnostics`` (None for a list of items). Raises
    :class:`~ctxwise.errors.FormatError` naming the item for anything that is not an item, and
    for a ``Response`` inside a list (append it alone)."""
    if (isinstance(items, dict) or hasattr(items, "model_dump")) and not isinstance(items, list):
        d = plain(items, "response")
        refuse_other_shape(d, "input", "append_responses")
        if isinstance(d, dict) and (d.get("object") == "response"
                                    or ("output" in d and "type" not in d and "role" not in d)):
            output = d.get("output")
            if not isinstance(output, list):
                raise FormatError("response", f"output: expected a list of items, got {type(output).__name__}")
            check_usage(d.get("usage"), "response")
            return [plain(x, f"item {k}") for k, x in enumerate(output)], d.get("usage"), \
                d.get("prompt_cache_diagnostics")
    out = []
    for i, x in enumerate(_items(items)):
        refuse_foreign(x, f"item {i}")
        d = plain(x, f"item {i}")
        if not isinstance(d, dict):
            raise FormatError(f"item {i}", f"expected an item object, got {type(x).__name__}")
        if d.get("object") != "response":
            refuse_other_shape(d, f"item {i}", "append_responses")
        if d.get("object") == "response":
            raise FormatError(f"item {i}", "a whole Response inside a list of items",
                              hint="append the Response alone (its usage is recorded), or its .output items")
        out.append(d)
    return out, None, None


def anthropic_dicts(messages: Any) -> list[dict[str, Any]]:
    """Anthropic message dicts from any of: a list of message dicts (``content`` may hold SDK
    block objects), SDK ``Message`` objects (``role`` and ``content`` are kept, and its ``usage`` /
    ``diagnostics`` as the message's ``usage`` / ``cache_diagnostics`` keys, which the reader
    keeps in ``metadata``: the response's id, model and stop reason are not part of the
    conversation), a
    ``reply.content`` list of blocks (read as one assistant message), or a ``{"system"?,
    "messages"}`` payload. Raises :class:`~ctxwise.errors.FormatError` naming the message."""
    if isinstance(messages, dict) and "messages" in messages and "role" not in messages:
        system = plain(messages["system"], "system") if "system" in messages else None
        if "system" in messages and not isinstance(system, (str, list)):
            raise FormatError("system", f"the system prompt must be a string or a list of text blocks, got "
                                        f"{type(system).__name__} (anthropic/types/message_create_params.py: system)")
        head = [{"role": "system", "content": system}] if "system" in messages else []
        return head + anthropic_dicts(messages["messages"])
    for i, m in enumerate(_items(messages)):
        refuse_foreign(m, f"message {i}")
    items = [plain(m, f"message {i}") for i, m in enumerate(_items(messages))]
    for i, d in enumerate(items):
        refuse_other_shape(d, f"message {i}", "append_anthropic")
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
        check_usage(d.get(USAGE_KEY), f"message {i}")
        out.append(d)
    return out
