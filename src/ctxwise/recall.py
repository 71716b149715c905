"""Recall by id: a tool the agent can register to fetch a cleared tool result back.

When clearing replaces an old tool-result body by a placeholder, the original stays in the
store and the placeholder names its ``tool_use_id``. Register :func:`recall_tool_schema` with
the model's other tools and answer its calls with :func:`recall_tool_output`::

    tools = [*my_tools, recall_tool_schema("openai")]
    ...
    for call in reply.tool_calls:
        if call.function.name == RECALL_TOOL_NAME:
            text, is_error = recall_tool_output(session, call.function.arguments)

The lookup goes through :meth:`ctxwise.Session.original`, which is scoped to the session's
``(user_id, session_id)``: an agent can fetch only its own session's results, never another
user's. Each provider gets the tool in its own format (Chat Completions ``{"type": "function",
"function": {...}}``; Responses API ``{"type": "function", "name": ...}``; Anthropic
``{"name", "description", "input_schema"}``).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, Protocol

from .errors import FormatError, ToolResultNotFound
from .messages import Message
from .nesting import loads
from .providers import PROFILES
from .tokens import get_counter

if TYPE_CHECKING:
    from .policy import Policy


class RecallSession(Protocol):
    """What the handler needs of a session (a :class:`ctxwise.Session` is one): its keys and
    ``original(tool_use_id)``, the store lookup scoped to them."""

    user_id: str
    session_id: str

    def original(self, tool_use_id: str | None = None, *, message_id: str | None = None) -> Message | None: ...

RECALL_TOOL_NAME = "recall_tool_result"
RECALL_TOOL_DESCRIPTION = (
    "Fetch the full original output of an earlier tool call whose result was cleared from the "
    "context to save room. Pass the tool_use_id the placeholder names. Use it only when you need "
    "a detail the placeholder does not show. A long output comes back in pages: each but the last "
    "ends with the offset of the next."
)
RECALL_PAGE_CHARS = 40_000
"""At most this many characters of an original per recall call: a longer original (a 2 MB
log) comes back in pages, each ending with the call that fetches the next one. A session with
a policy gets smaller pages when its budget is small (:func:`recall_page`)."""
RECALL_PAGE_SHARE = 0.25
"""Of the policy's effective budget (its unit), the most one recalled page may take, so that
the page lands in the context whole next to what is pinned there."""
RECALL_PAGE_MIN_CHARS = 2_000
"""The fewest characters a page holds, whatever the budget (fewer would take a call per line)."""
PAGE_NOTE = ('\n[ctxwise: characters {start}–{end} of {total} of this result; the next page: '
             '{name}("{key}", offset={end})]')
"""The line after a page that is not the last."""
RECALL_TOOL_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "tool_use_id": {"type": "string", "description": "The id named in the cleared result's placeholder."},
        "message_id": {"type": "string", "description": "The message_id the placeholder names, when it names one "
                                                        "(the session reused the call id)."},
        "offset": {"type": "integer", "minimum": 0,
                   "description": "Where the page starts, in characters of the original (0 when absent). A result "
                                  "longer than one page ends with the offset of the next page."},
    },
    "required": ["tool_use_id"],
    "additionalProperties": False,
}
"""The tool's input, as JSON Schema (the same for every provider)."""


def recall_tool_schema(provider: str = "openai") -> dict[str, Any]:
    """The recall tool's declaration in ``provider``'s tool format: Chat Completions shape for
    ``openai``, ``deepseek``, ``qwen`` and ``gemini`` (its OpenAI-compatible endpoint), the
    Responses API function tool for ``openai_responses``, Anthropic's ``input_schema`` shape for
    ``anthropic``; for ``openai_responses`` in strict mode (every property required,
    ``message_id`` nullable). Raises :class:`~ctxwise.errors.FormatError` for an unknown provider."""
    if provider not in PROFILES:
        raise FormatError(f"provider {provider!r}", f"unknown provider; known: {', '.join(PROFILES)}")
    params = json.loads(json.dumps(RECALL_TOOL_PARAMETERS))  # a fresh copy the caller may edit
    if provider == "anthropic":
        return {"name": RECALL_TOOL_NAME, "description": RECALL_TOOL_DESCRIPTION, "input_schema": params}
    if provider == "openai_responses":
        # Strict mode (the Responses API's default for function tools) needs every property
        # listed in "required"; an optional one is a union with null (OpenAI, Structured
        # Outputs: "all fields must be required"; the handler reads null as absent).
        params["properties"]["message_id"]["type"] = ["string", "null"]
        params["properties"]["offset"]["type"] = ["integer", "null"]
        params["required"] = list(params["properties"])
        return {"type": "function", "name": RECALL_TOOL_NAME, "description": RECALL_TOOL_DESCRIPTION,
                "parameters": params, "strict": True}
    return {"type": "function",
            "function": {"name": RECALL_TOOL_NAME, "description": RECALL_TOOL_DESCRIPTION, "parameters": params}}


_CALL = re.compile(rf"""^\s*(?:{RECALL_TOOL_NAME}\s*\(\s*)?(?P<q>["'])(?P<key>.*)(?P=q)\s*\)?\s*$""", re.DOTALL)
"""The id as a placeholder writes it, copied whole: ``recall_tool_result("call_0")`` or ``"call_0"``."""
_KEY = re.compile(r"^\s*(?:tool_use_id[\s:=]+)?(?P<id>[^\s,;]+)\s*(?:[,;]\s*message_id[\s:=]+(?P<mid>[^\s,;]+))?\s*$")


def _key(tool_use_id: str, message_id: str | None) -> tuple[str, str | None]:
    """The call id and message id of a recall key, as a model may copy it from a placeholder:
    ``"call_0"``, ``"call_0, message_id msg-000012"``, the phrase with its ``tool_use_id``
    word, extra spaces, a ``;`` for the comma, the placeholder's whole call
    (``recall_tool_result("call_0")``) or the id in quotes. Anything else is taken as given."""
    call = _CALL.match(tool_use_id)
    if call is not None:
        tool_use_id = call.group("key")
    m = _KEY.match(tool_use_id)
    if m is None:
        return tool_use_id, message_id
    return m.group("id"), message_id.strip() if message_id is not None else m.group("mid")


def find_original(session: RecallSession, tool_use_id: str, message_id: str | None = None) -> tuple[str, Message]:
    """``(call id, original message)``: the message holding the tool result that
    ``tool_use_id`` names in ``session`` (as it was appended, before any clearing), and the
    call id that key names. ``tool_use_id`` may be a placeholder's whole
    recall key (``"call_0, message_id msg-000012"``, when the session reused the call id), or
    the id with ``message_id`` given apart; then this result is returned, never another call's.
    Without a message id, the cleared result in the context whose placeholder names the bare
    id is meant. Raises :class:`~ctxwise.errors.ToolResultNotFound` when the session (of this
    user) holds no such result."""
    tool_use_id, message_id = _key(tool_use_id, message_id)
    original = (session.original(message_id=message_id) if message_id is not None
                else session.original(tool_use_id))
    if original is not None and any(r.tool_use_id == tool_use_id for r in original.tool_results):
        return tool_use_id, original
    where = f" in message {message_id!r}" if message_id is not None else ""
    raise ToolResultNotFound(f"no tool result with tool_use_id {tool_use_id!r}{where} in session "
                             f"{session.session_id!r} of user {session.user_id!r}")


def recall_tool_result(session: RecallSession, tool_use_id: str, message_id: str | None = None) -> str:
    """The original text of the tool result answering ``tool_use_id`` in ``session`` (see
    :func:`find_original` for the key forms). Raises
    :class:`~ctxwise.errors.ToolResultNotFound` when the session (of this user) holds no such
    result."""
    key, original = find_original(session, tool_use_id, message_id)
    return next(r.text for r in original.tool_results if r.tool_use_id == key)


def _only_result(session: RecallSession, message_id: str) -> str | None:
    """The call id of the one tool result in message ``message_id``, else None."""
    original = session.original(message_id=message_id.strip())
    ids = [r.tool_use_id for r in original.tool_results] if original is not None else []
    return ids[0] if len(ids) == 1 else None


def recall_tool_output(session: RecallSession, arguments: str | dict[str, Any]) -> tuple[str, bool]:
    """Answer one call of the recall tool: ``arguments`` as the model sent them (a JSON string
    or a dict with ``tool_use_id`` and optionally ``offset``). Returns ``(text, is_error)``: the
    original body, in pages when it is longer than one (:func:`recall_page`: sized from the
    session's policy when it has one, else :data:`RECALL_PAGE_CHARS` characters; each page but
    the last ends with the call for the next), or a one-line error for the model (bad arguments, unknown id) with ``is_error`` True, so an agent
    loop can send it back as a failed tool result instead of stopping."""
    try:
        args = loads(arguments) if isinstance(arguments, str) else dict(arguments)
        message_id = args.get("message_id") or None
        tool_use_id = args.get("tool_use_id") or None
        offset = args.get("offset") or 0
        if tool_use_id is None and isinstance(message_id, str):
            tool_use_id = _only_result(session, message_id)  # the message id alone names one result
        if not isinstance(tool_use_id, str) or not tool_use_id or not isinstance(message_id, (str, type(None))):
            raise TypeError
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise TypeError
    except (ValueError, TypeError, KeyError, AttributeError):
        return (f'{RECALL_TOOL_NAME} needs {{"tool_use_id": "<id from the placeholder>"}} and optionally '
                f'{{"offset": <characters, 0 or more>}}, got {arguments!r}'[:300], True)
    try:
        text = recall_tool_result(session, tool_use_id, message_id)
    except ToolResultNotFound as e:
        return str(e), True
    key = tool_use_id if message_id is None else f"{tool_use_id}, message_id {message_id}"
    return recall_page(text, offset, key, getattr(session, "policy", None))


def recall_page(text: str, offset: int, key: str, policy: Policy | None = None) -> tuple[str, bool]:
    """:func:`page` sized from the context it lands in: at most :data:`RECALL_PAGE_SHARE` of
    ``policy``'s effective budget, in its unit (tokens counted with its tokenizer, note
    included), never fewer than :data:`RECALL_PAGE_MIN_CHARS` characters nor more than
    :data:`RECALL_PAGE_CHARS`; without a policy, pages of :data:`RECALL_PAGE_CHARS`. Returns
    ``(text, is_error)`` as :func:`page` does."""
    if policy is None:
        return page(text, offset, key)
    room = max(1, int(policy.effective_budget * RECALL_PAGE_SHARE))
    counter = get_counter(policy.counter_name)
    size = max(RECALL_PAGE_MIN_CHARS, min(RECALL_PAGE_CHARS, room * (1 if policy.unit == "chars" else 4)))
    for _ in range(8):  # counts are not linear in characters: shrink until the page fits its share
        body, error = page(text, offset, key, size)
        used = counter.count_text(body)
        if error or used <= room or size <= RECALL_PAGE_MIN_CHARS:
            return body, error
        size = max(RECALL_PAGE_MIN_CHARS, min(size - 1, int(size * room / used * 0.95)))
    return page(text, offset, key, size)


def page(text: str, offset: int, key: str, size: int = RECALL_PAGE_CHARS) -> tuple[str, bool]:
    """``(the page of text starting at offset, is_error)``: at most ``size`` characters, the page
    ending at a line break when one is in its last tenth, followed by :data:`PAGE_NOTE` naming
    the next page's call when the text goes on; a text that fits one page comes back whole. An
    offset past the end is an error for the model (``is_error`` True)."""
    total = len(text)
    if offset == 0 and total <= size:
        return text, False
    if offset >= total:
        return f"offset {offset} is past the end of this result ({total} characters)", True
    end = min(total, offset + size)
    if end < total:
        brk = text.rfind("\n", offset, end)
        end = brk + 1 if brk >= offset + size * 9 // 10 else end
    body = text[offset:end]
    if end < total:
        body += PAGE_NOTE.format(start=offset, end=end, total=total, name=RECALL_TOOL_NAME, key=key)
    return body, False
