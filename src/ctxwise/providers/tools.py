"""The tool schemas a session sends with every call, checked against the provider's tool shape.

    from ctxwise.providers.tools import check_tools
    tools = check_tools([{"type": "function", "function": {"name": "f"}}], "openai")

Each wire has its own tool shape, and a tool of another wire's shape is the usual mistake:

* Chat Completions (``wire="chat"``: OpenAI, DeepSeek, Gemini, Qwen): ``{"type": "function",
  "function": {"name", "description"?, "parameters"?}}`` or ``{"type": "custom", "custom":
  {"name", ...}}`` (``openai/types/chat/chat_completion_function_tool_param.py``,
  ``chat_completion_custom_tool_param.py``).
* Anthropic: ``{"name", "description"?, "input_schema"}`` (``type`` absent or ``"custom"``,
  ``anthropic/types/tool_param.py``: ``name`` and ``input_schema`` required), or a server /
  client tool of a dated ``type`` (``web_search_20250305``, ``bash_20250124``, ...) with its
  ``name`` (``anthropic/types/tool_union_param.py``).
* Responses: a ``type`` string; a function tool is flat, ``{"type": "function", "name",
  "parameters", ...}`` (``openai/types/responses/function_tool_param.py``); built-in tools
  (``web_search``, ``file_search``, ``mcp``, ...) are taken as given.
"""

from __future__ import annotations

from typing import Any

from ..errors import FormatError
from ..messages import JSONObject
from .profiles import get_profile

_CHAT_HINT = ('an OpenAI Chat tool is {"type": "function", "function": {"name", "description", "parameters"}}')
_ANTHROPIC_HINT = 'an Anthropic tool is {"name", "description", "input_schema"}'
_RESPONSES_HINT = 'a Responses function tool is flat: {"type": "function", "name", "description", "parameters"}'


def _name(d: dict[str, Any] | Any) -> bool:
    return isinstance(d, dict) and isinstance(d.get("name"), str) and bool(d["name"])


def _chat(t: dict[str, Any], place: str) -> None:
    kind = t.get("type")
    if kind in ("function", "custom") and _name(t.get(kind)):
        return
    if "input_schema" in t or (kind is None and _name(t)):
        raise FormatError(place, "an Anthropic-shaped tool on a Chat Completions session", hint=_CHAT_HINT)
    if kind == "function" and _name(t):
        raise FormatError(place, "a Responses-shaped (flat) function tool on a Chat Completions session",
                          hint=_CHAT_HINT)
    raise FormatError(place, "a Chat Completions tool needs type 'function' with a 'function' object holding its "
                             "name (or type 'custom' with a 'custom' object)", hint=_CHAT_HINT)


def _anthropic(t: dict[str, Any], place: str) -> None:
    kind = t.get("type")
    if kind == "function" or "function" in t:
        raise FormatError(place, "an OpenAI-shaped tool (type 'function') on an Anthropic session",
                          hint=_ANTHROPIC_HINT)
    if not _name(t):
        raise FormatError(place, "an Anthropic tool needs a non-empty string 'name'", hint=_ANTHROPIC_HINT)
    if kind in (None, "custom") and not isinstance(t.get("input_schema"), dict):
        raise FormatError(place, "an Anthropic custom tool needs an 'input_schema' object", hint=_ANTHROPIC_HINT)
    if kind is not None and not isinstance(kind, str):
        raise FormatError(place, f"a tool's type must be a string, got {type(kind).__name__}")


def _responses(t: dict[str, Any], place: str) -> None:
    kind = t.get("type")
    if not isinstance(kind, str) or not kind:
        hint = _RESPONSES_HINT if "input_schema" in t else None
        raise FormatError(place, "a Responses tool needs a string 'type' ('function', 'web_search', ...)", hint=hint)
    if kind == "function" and isinstance(t.get("function"), dict):
        raise FormatError(place, "a Chat Completions-shaped function tool on a Responses session",
                          hint=_RESPONSES_HINT)
    if kind == "function" and not _name(t):
        raise FormatError(place, "a Responses function tool needs a non-empty string 'name'", hint=_RESPONSES_HINT)


_CHECKS = {"chat": _chat, "anthropic": _anthropic, "responses": _responses}


def check_tools(tools: Any, provider: str) -> list[JSONObject]:
    """``tools`` (None: no tools) as the list of tool schemas a session of ``provider`` sends;
    raises :class:`~ctxwise.errors.FormatError` naming ``tools`` (not a list) or ``tool k`` (not an
    object, or not the provider's tool shape, another wire's shape named; see the module
    docstring for each shape and its source). :class:`~ctxwise.errors.PolicyError` for an
    unknown provider."""
    if tools is None:
        return []
    if not isinstance(tools, (list, tuple)):
        raise FormatError("tools", f"tools must be a list of tool schema objects, got {type(tools).__name__}")
    check = _CHECKS[get_profile(provider).wire]
    for k, t in enumerate(tools):
        if not isinstance(t, dict):
            raise FormatError(f"tool {k}", f"expected a tool schema object, got {type(t).__name__}")
        check(t, f"tool {k}")
    return list(tools)


def from_chat_tools(tools: list[JSONObject], provider: str) -> list[JSONObject]:
    """Chat Completions function tools (as LangChain's ``convert_to_openai_tool`` gives them) in
    ``provider``'s tool shape (see the module docstring): unchanged for a chat provider;
    ``{"name", "description"?, "input_schema"}`` for Anthropic (no parameters: an empty object
    schema); the flat function tool for Responses. A tool of another shape is kept as it is."""
    wire = get_profile(provider).wire
    if wire == "chat":
        return list(tools)
    out: list[JSONObject] = []
    for t in tools:
        fn = t.get("function") if isinstance(t, dict) and t.get("type") == "function" else None
        if not isinstance(fn, dict) or not _name(fn):
            out.append(t)
            continue
        empty: JSONObject = {"type": "object", "properties": {}}
        params: Any = fn.get("parameters") if isinstance(fn.get("parameters"), dict) else empty
        desc = {"description": fn["description"]} if isinstance(fn.get("description"), str) else {}
        if wire == "anthropic":
            out.append({"name": fn["name"], **desc, "input_schema": params})
        else:
            out.append({"type": "function", "name": fn["name"], **desc, "parameters": params,
                        "strict": fn.get("strict") if isinstance(fn.get("strict"), bool) else None})
    return out
