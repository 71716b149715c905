"""The last check on what is sent: the rendered payload against the request types and the
provider rules.

    from ctxwise.providers import check_wire, render
    check_wire(render(messages, "anthropic"), "anthropic")   # -> list[Violation]

Two parts:

* **Schema** (rule ``wire-schema``): every message / item is validated with pydantic against
  ctxwise's own strict types (:mod:`ctxwise.providers.wire_types`, always; a test proves them a
  strict subset of the SDK types) and, when the SDK is imported in the process (or after
  :func:`use_sdk_types`), against the official SDK request types (``anthropic.types.MessageParam``
  blocks, ``openai.types.chat.ChatCompletionMessageParam``, Responses
  ``ResponseInputItemParam`` items), with unknown keys refused at every depth (the SDKs'
  TypedDicts are open by default; their core schema is made closed here) and lists validated
  eagerly. DeepSeek / Qwen's ``reasoning_content`` is their documented extension of the
  assistant message (https://api-docs.deepseek.com/guides/thinking_mode) and is checked as a
  string beside the SDK type.
* **Rules**: the payload is read back into canonical messages with :mod:`ctxwise.formats`
  and checked with :func:`ctxwise.providers.check` (pairing, order, empty content, reasoning
  pass-back, thinking placement; indexes are those of the read-back list), plus
  ``duplicate-tool-call-id``: a tool call id used twice in one request (Anthropic answers
  400: "tool_use ids must be unique").
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import sys
import json
import threading
from collections import OrderedDict
from typing import Any, Callable, Sequence, TypeVar

from ..errors import FormatError, PayloadInvalid, Violation
from ..messages import Message, memo_on
from .convert import call_id_problem
from .profiles import (CALL_ID_TOO_LONG, DUPLICATE_TOOL_CALL_ID, FIRST_MESSAGE_ROLE, IMAGE_NOT_SUPPORTED,
                       THOUGHT_SIGNATURE_MISSING, TOOL_MESSAGE_NAME, WIRE_SCHEMA, ProviderProfile, get_profile)
from . import wire_types as own

Validator = Callable[[Any], None]

_OWN: dict[str, Any] = {
    "chat:system": own.ChatSystem, "chat:developer": own.ChatDeveloper, "chat:user": own.ChatUser, "chat:assistant": own.ChatAssistant,
    "chat:tool": own.ChatTool,
    "anthropic:system": own.ASystem, "anthropic:user": own.AUser, "anthropic:assistant": own.AAssistant,
    "anthropic:beta:user": own.AUser, "anthropic:beta:assistant": own.AAssistant,
    "anthropic:system_message": own.ASystemMessage,
    "responses:message": own.RMessage, "responses:output_message": own.ROutputMessage,
    "responses:reasoning": own.RReasoning, "responses:function_call": own.RFunctionCall,
    "responses:function_call_output": own.RFunctionCallOutput,
}


@functools.cache
def _family_types(family: str) -> dict[str, Any] | None:
    """The SDK request type for each kind of one SDK family (``openai`` / ``anthropic``), or
    None when that SDK is not installed."""
    try:
        if family == "anthropic":
            from typing import Iterable, Union

            from anthropic.types import AssistantMessageParam, SystemMessageParam, TextBlockParam, UserMessageParam
            from anthropic.types.beta import BetaAssistantMessageParam, BetaUserMessageParam

            return {"anthropic:system": Union[str, Iterable[TextBlockParam]],
                    "anthropic:user": UserMessageParam, "anthropic:assistant": AssistantMessageParam,
                    "anthropic:beta:user": BetaUserMessageParam, "anthropic:beta:assistant": BetaAssistantMessageParam,
                    "anthropic:system_message": SystemMessageParam}
        from openai.types.chat import (ChatCompletionAssistantMessageParam, ChatCompletionDeveloperMessageParam,
                                       ChatCompletionSystemMessageParam,
                                       ChatCompletionToolMessageParam, ChatCompletionUserMessageParam)
        from openai.types.responses import (EasyInputMessageParam, ResponseFunctionToolCallParam,
                                            ResponseOutputMessageParam, ResponseReasoningItemParam)
        from openai.types.responses.response_input_item_param import FunctionCallOutput
    except ImportError:
        return None
    return {
        **_responses_items(),
        "chat:system": ChatCompletionSystemMessageParam, "chat:developer": ChatCompletionDeveloperMessageParam,
        "chat:user": ChatCompletionUserMessageParam,
        "chat:assistant": ChatCompletionAssistantMessageParam, "chat:tool": ChatCompletionToolMessageParam,
        "responses:message": EasyInputMessageParam, "responses:output_message": ResponseOutputMessageParam,
        "responses:reasoning": ResponseReasoningItemParam, "responses:function_call": ResponseFunctionToolCallParam,
        "responses:function_call_output": FunctionCallOutput,
    }


def _responses_items() -> dict[str, Any]:
    """``responses:item:<type>`` -> the member of the SDK's ``ResponseInputItemParam`` union
    with that ``type`` literal, for every item kind ctxwise keeps verbatim."""
    import typing

    from openai.types.responses.response_input_item_param import ResponseInputItemParam

    from ..formats.responses import PROVIDER_ITEMS

    out: dict[str, Any] = {}
    for member in typing.get_args(ResponseInputItemParam):
        try:
            hints = typing.get_type_hints(member)
        except (NameError, TypeError):
            continue
        for lit in typing.get_args(hints.get("type")):
            if isinstance(lit, str) and lit in PROVIDER_ITEMS:
                out[f"responses:item:{lit}"] = member
            for inner in typing.get_args(lit):  # Optional[Literal[...]]
                if isinstance(inner, str) and inner in PROVIDER_ITEMS:
                    out[f"responses:item:{inner}"] = member
    return out


_FAMILIES = ("openai", "anthropic")
_always = False


def use_sdk_types(on: bool = True) -> None:
    """Check against the SDK types whenever the SDK is installed (importing it on first use,
    which takes seconds), not only when the application has imported it already."""
    global _always
    _always = on


def _sdk_types() -> dict[str, Any] | None:
    """The SDK request types in use: those of each SDK the process has already imported (an
    application talking to the provider has; ctxwise never pays seconds of SDK import on its
    own), or of every installed SDK after :func:`use_sdk_types`. None when there are none."""
    out: dict[str, Any] = {}
    for family in _FAMILIES:
        if _always or family in sys.modules:
            out.update(_family_types(family) or {})
    return out or None


def sdk_available() -> bool:
    """Whether both the ``anthropic`` and the ``openai`` SDK are installed."""
    return all(importlib.util.find_spec(f) is not None for f in _FAMILIES)


def _closed(schema: Any) -> Any:
    """A core schema with every typed dict closed (``extra_behavior="forbid"``) and every
    lazy iterable (``generator``) turned into an eagerly checked list."""
    if isinstance(schema, list):
        return [_closed(x) for x in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _closed(v) for k, v in schema.items()}
    if out.get("type") in ("typed-dict", "model-fields"):  # the SDK unions hold response models too
        out["extra_behavior"] = "forbid"
        out.pop("extras_schema", None)  # typed extras (beta response models) are closed too
    elif out.get("type") == "model":
        out["config"] = {**(out.get("config") or {}), "extra_fields_behavior": "forbid"}
    elif out.get("type") == "generator":
        out = {k: v for k, v in out.items() if k in ("items_schema", "min_length", "max_length", "ref", "metadata")}
        out["type"] = "list"
    return out


@functools.cache
def strict_validator(tp: Any) -> Validator:
    """A validator for type ``tp`` that refuses unknown keys at every depth (strict mode:
    no coercion, e.g. ``"true"`` is not a bool). It raises ``pydantic.ValidationError``."""
    from pydantic import TypeAdapter
    from pydantic_core import SchemaValidator

    schema = _closed(copy.deepcopy(TypeAdapter(tp).core_schema))
    v = SchemaValidator(schema)
    return functools.partial(v.validate_python, strict=True)



def _kind(profile: ProviderProfile, item: Any) -> str | None:
    if not isinstance(item, dict):
        return None
    if profile.wire == "responses":
        t = item.get("type", "message" if "role" in item else "item_reference")
        if t is None and set(item) == {"id", "type"}:
            t = "item_reference"
        if t == "message" and "id" in item:
            return "responses:output_message"
        if isinstance(t, str) and t in _provider_items():
            return f"responses:item:{t}"
        return f"responses:{t}" if f"responses:{t}" in _OWN else None
    role = item.get("role")
    if profile.wire == "anthropic" and role == "system":
        # the top-level ``system`` only, unless the native form is on (Policy.native_system)
        return "anthropic:system_message" if profile.mid_system == "native" else None
    key = f"{profile.wire}:{role}"
    if profile.wire == "anthropic" and _has_beta_block(item):
        key = f"anthropic:beta:{role}"
    return key if key in _OWN else None


BETA_BLOCKS = ("mcp_tool_use", "mcp_tool_result", "compaction")
"""Anthropic block types only the beta request types hold (the MCP connector:
``anthropic/types/beta/beta_mcp_tool_use_block_param.py``, ``beta_request_mcp_tool_result_block_param.py``;
the ``compaction`` block of server-side compaction: ``types/beta/beta_compaction_block_param.py``):
a message with one is checked against ``BetaUserMessageParam`` / ``BetaAssistantMessageParam``."""


def _has_beta_block(item: dict[str, Any]) -> bool:
    content = item.get("content")
    return isinstance(content, list) and any(isinstance(b, dict) and b.get("type") in BETA_BLOCKS for b in content)


@functools.cache
def _provider_items() -> frozenset[str]:
    from ..formats.responses import PROVIDER_ITEMS

    return frozenset(PROVIDER_ITEMS)


def _loc_part(x: object) -> str:
    """One step of a pydantic error location, readable: a union or generic step
    (``list[union[TextBlockParam,...]]``) is named by its head (``list``)."""
    s = str(x)
    return s.split("[", 1)[0] or s if "[" in s else s


def _real_errors(errs: list[Any]) -> list[Any]:
    """The errors of a union check that say what is wrong, not which members did not match: a
    member whose ``type`` literal does not match the value's is not what the value is (its
    errors are dropped), and of the rest the deepest are kept (``content.str: Input should be a
    valid string`` is the union's other branch beside the block list's real error)."""
    wrong = {tuple(err["loc"][:-1]) for err in errs
             if err.get("loc") and err["loc"][-1] == "type" and err.get("type") == "literal_error"}
    kept = [err for err in errs
            if not any(tuple(err.get("loc", ()))[:len(w)] == w for w in wrong if w)] or errs
    depth = max(len(err.get("loc", ())) for err in kept)
    return [err for err in kept if len(err.get("loc", ())) == depth]


def _errors(e: Exception) -> list[str]:
    """Up to 5 errors of a pydantic ``ValidationError`` as ``loc: msg [type]`` (``loc`` with
    its union / generic steps named by their head), else ``str(e)``."""
    errs = getattr(e, "errors", None)
    if errs is None:
        return [str(e)]
    out = []
    for err in _real_errors(errs())[:5]:
        loc = ".".join(_loc_part(x) for x in err.get("loc", ()))
        out.append(f"{loc or '(root)'}: {err.get('msg')} [{err.get('type')}]")
    return out


_SEEN: "OrderedDict[tuple[str, str, bool, str], list[str]]" = OrderedDict()
_SEEN_MAX = 8192
_LOCK = threading.Lock()
"""Verdicts of items already checked, keyed by their JSON: a session sends the same messages
call after call, so each is validated once (bounded, least recently used dropped)."""


def _schema_one(profile: ProviderProfile, kind: str, value: Any, sdk: dict[str, Any] | None) -> list[str]:
    try:
        key = (kind, _extensions(profile), bool(sdk and kind in sdk), json.dumps(value, ensure_ascii=False))
    except (TypeError, ValueError):
        return _validate_one(profile, kind, value, sdk)
    with _LOCK:
        hit = _SEEN.get(key)
        if hit is not None:
            _SEEN.move_to_end(key)
            return list(hit)
    hit = _validate_one(profile, kind, value, sdk)
    with _LOCK:
        _SEEN[key] = hit
        if len(_SEEN) > _SEEN_MAX:
            _SEEN.popitem(last=False)
    return list(hit)


def _extensions(profile: ProviderProfile) -> str:
    """The documented extensions of the chat shape ``profile`` sends (part of a verdict's key)."""
    return f"{profile.reasoning_field}|{profile.tool_message_name}|{profile.thought_signatures}"


def _without(value: dict[str, Any], key: str, ok: Callable[[Any], bool], problems: list[str], want: str) -> dict[str, Any]:
    """``value`` without ``key``; a problem when its value fails ``ok``."""
    if key not in value:
        return value
    if not ok(value[key]):
        problems.append(f"{key}: must be {want}")
    return {k: v for k, v in value.items() if k != key}


def _is_str(v: Any) -> bool:
    return isinstance(v, str)


def _signature_shape(ec: Any) -> bool:
    google = ec.get("google") if isinstance(ec, dict) else None
    return (isinstance(ec, dict) and set(ec) == {"google"} and isinstance(google, dict)
            and set(google) == {"thought_signature"} and isinstance(google["thought_signature"], str))


def _strip_extensions(profile: ProviderProfile, kind: str, value: Any, problems: list[str]) -> Any:
    """``value`` without the provider's documented extensions of the SDK shape, each checked
    here: DeepSeek / Qwen ``reasoning_content`` (a string), Gemini's tool-message ``name`` (a
    string, https://ai.google.dev/gemini-api/docs/openai) and tool-call
    ``extra_content.google.thought_signature`` (a string,
    https://ai.google.dev/gemini-api/docs/thought-signatures)."""
    if not isinstance(value, dict):
        return value
    if kind == "chat:assistant" and profile.reasoning_field:
        value = _without(value, profile.reasoning_field, _is_str, problems, "a string")
    if kind == "chat:tool" and profile.tool_message_name:
        value = _without(value, "name", _is_str, problems, "a string")
    calls = value.get("tool_calls") if kind == "chat:assistant" and profile.thought_signatures else None
    if isinstance(calls, list):
        shape = "{'google': {'thought_signature': str}}"
        value = {**value, "tool_calls": [_without(c, "extra_content", _signature_shape, problems, shape)
                                         if isinstance(c, dict) else c for c in calls]}
    return value


def _validate_one(profile: ProviderProfile, kind: str, value: Any, sdk: dict[str, Any] | None) -> list[str]:
    from pydantic import ValidationError

    problems: list[str] = []
    value = _strip_extensions(profile, kind, value, problems)
    mine = own.RProviderItem if kind.startswith("responses:item:") else _OWN[kind]
    sources = [("ctxwise", mine)] + ([("SDK", sdk[kind])] if sdk and kind in sdk else [])
    for who, tp in sources:
        try:
            strict_validator(tp)(value)
        except ValidationError as e:
            problems += [f"{who} type {getattr(tp, '__name__', 'system')}: {x}" for x in _errors(e)]
    return problems


_T = TypeVar("_T")


def _entry_problems(profile: ProviderProfile, item: Any, sdk: dict[str, Any] | None) -> tuple[str, ...]:
    """The ``wire-schema`` problems of one entry of the ``messages`` list (or chat / Responses
    list) of a payload."""
    kind = _kind(profile, item)
    if kind is None:
        what = item.get("role", item.get("type")) if isinstance(item, dict) else type(item).__name__
        return (f"{what!r} is not a {profile.title} message or item",)
    return tuple(_schema_one(profile, kind, item, sdk))


def _sourced(src: tuple[Message, ...], profile: ProviderProfile, tag: str, compute: Callable[[], _T]) -> _T:
    """``compute()`` for an entry rendered from ``src`` (empty: not a function of its messages
    alone, computed each time), kept in their memo (:func:`ctxwise.messages.memo_on`) for
    this profile object."""
    if not src:
        return compute()
    return memo_on((*src, profile), tag, None, compute)


def schema_violations(payload: Any, provider: str | ProviderProfile,
                      sources: Sequence[tuple[Message, ...]] | None = None) -> list[Violation]:
    """``wire-schema`` violations of a rendered ``payload`` (index = position of the message
    or item in the payload's list; for Anthropic, ``system`` is reported at index 0 and
    ``messages[k]`` at ``k``). ``sources``: as :func:`ctxwise.providers.render_converted`
    filled it for this payload (each entry's verdict is then kept in the memo of the messages
    it was rendered from); ignored when its length does not match."""
    profile = get_profile(provider)
    sdk = _sdk_types()
    out: list[Violation] = []
    src: list[tuple[Message, ...]] = []
    if profile.wire == "anthropic":
        if not isinstance(payload, dict) or not isinstance(payload.get("messages"), list):
            return [Violation(0, WIRE_SCHEMA, "expected {'system'?, 'messages': [...]}")]
        extra = set(payload) - {"system", "messages"}
        if extra:
            out.append(Violation(0, WIRE_SCHEMA, f"unknown top-level key(s) {sorted(extra)}"))
        items = payload["messages"]
        if sources is not None and isinstance(items, list) and len(sources) == int("system" in payload) + len(items):
            src = list(sources)
        if "system" in payload:
            system = payload["system"]
            out += [Violation(0, WIRE_SCHEMA, f"system: {p}")
                    for p in _sourced(src.pop(0) if src else (), profile, "wire/schema-system",
                                      lambda: tuple(_schema_one(profile, "anthropic:system", system, sdk)))]
    else:
        if not isinstance(payload, list):
            return [Violation(0, WIRE_SCHEMA, f"expected a list, got {type(payload).__name__}")]
        items = payload
    for i, item in enumerate(items):
        found = (_sourced(src[i], profile, "wire/schema", functools.partial(_entry_problems, profile, item, sdk))
                 if src else _entry_problems(profile, item, sdk))
        if found:
            out += [Violation(i, WIRE_SCHEMA, p) for p in found]
    return out


def _anthropic_ids(payload: Any) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """``(calls, results)``: ``(position, id)`` of every ``tool_use`` and every
    ``tool_result``'s ``tool_use_id`` of an Anthropic payload (one pass; a message whose
    content is a string holds neither)."""
    calls: list[tuple[int, str]] = []
    results: list[tuple[int, str]] = []
    for i, m in enumerate(payload.get("messages") or []):
        content = m.get("content") if isinstance(m, dict) else None
        if not isinstance(content, list):
            continue
        for b in content:
            kind = b.get("type") if isinstance(b, dict) else None
            if kind == "tool_use":
                calls.append((i, str(b.get("id"))))
            elif kind == "tool_result":
                results.append((i, str(b.get("tool_use_id"))))
    return calls, results


def _call_ids(payload: Any, profile: ProviderProfile) -> list[tuple[int, str]]:
    """``(position, id)`` of every tool call in a rendered payload."""
    out: list[tuple[int, str]] = []
    if profile.wire == "anthropic":
        out = _anthropic_ids(payload)[0]
    elif profile.wire == "responses":
        out = [(i, str(it.get("call_id"))) for i, it in enumerate(payload)
               if isinstance(it, dict) and it.get("type") == "function_call"]
    else:
        for i, m in enumerate(payload):
            for c in (m.get("tool_calls") or []) if isinstance(m, dict) else []:
                if isinstance(c, dict):
                    out.append((i, str(c.get("id"))))
    return out


def _result_ids(payload: Any, profile: ProviderProfile) -> list[tuple[int, str]]:
    """``(position, id)`` of every tool result's call id in a rendered payload."""
    out: list[tuple[int, str]] = []
    if profile.wire == "anthropic":
        out = _anthropic_ids(payload)[1]
    elif profile.wire == "responses":
        out = [(i, str(it.get("call_id"))) for i, it in enumerate(payload)
               if isinstance(it, dict) and it.get("type") == "function_call_output"]
    else:
        out = [(i, str(m.get("tool_call_id"))) for i, m in enumerate(payload)
               if isinstance(m, dict) and m.get("role") == "tool"]
    return out


def _id_violations(payload: Any, profile: ProviderProfile) -> list[Violation]:
    """``duplicate-tool-call-id``, ``call-id-too-long`` and ``call-id-charset`` (index =
    payload position)."""
    out: list[Violation] = []
    seen: dict[str, int] = {}
    calls, results = (_anthropic_ids(payload) if profile.wire == "anthropic"
                      else (_call_ids(payload, profile), _result_ids(payload, profile)))
    for i, cid in calls:
        if cid in seen:
            out.append(Violation(i, DUPLICATE_TOOL_CALL_ID, f"tool call id {cid!r} already used at {seen[cid]}",
                                 profile.error_text(DUPLICATE_TOOL_CALL_ID, i)))
        seen.setdefault(cid, i)
    for what, ids in (("tool call id", calls), ("tool result's call id", results)):
        for i, cid in ids:
            rule = call_id_problem(cid, profile)
            if rule is not None:
                why = (f"{len(cid)} characters, over {profile.max_call_id_chars}" if rule == CALL_ID_TOO_LONG
                       else f"does not match {profile.call_id_pattern}")
                out.append(Violation(i, rule, f"{what} {cid!r}: {why}", profile.error_text(rule, i)))
    return out


def _messages_of(payload: Any, profile: ProviderProfile) -> list[Any]:
    if profile.wire == "anthropic":
        return list(payload.get("messages") or [])
    return list(payload)


def _has_image(content: Any) -> bool:
    return isinstance(content, list) and any(
        isinstance(p, dict) and p.get("type") in ("image_url", "image", "input_image") for p in content)


def _first_role_violations(items: list[Any], profile: ProviderProfile) -> list[Violation]:
    """``first-message-role``: on Anthropic the first message is a user message, unless it
    opens with the ``compaction`` block standing for the history before it (SDK anthropic 2.17
    ``types/compaction_block_misplaced_error.py``: that block comes first)."""
    if not (profile.first_message_user and profile.wire == "anthropic"):
        return []
    first = next((m for m in items if isinstance(m, dict) and m.get("role") != "system"), None)
    if first is None or first.get("role") == "user":
        return []
    content = first.get("content")
    if isinstance(content, list) and content and isinstance(content[0], dict) and content[0].get("type") == "compaction":
        return []
    k = items.index(first)
    return [Violation(k, FIRST_MESSAGE_ROLE, f"the first message is a {first.get('role')} message",
                      profile.error_text(FIRST_MESSAGE_ROLE, k))]


def _shape_violations(payload: Any, profile: ProviderProfile) -> list[Violation]:
    """``first-message-role``, ``image-not-supported``, ``tool-message-name`` and
    ``thought-signature-missing`` on a rendered payload (index = payload position)."""
    items = _messages_of(payload, profile)
    out = _first_role_violations(items, profile)
    for i, m in enumerate(items):
        if not isinstance(m, dict):
            continue
        if not profile.images and _has_image(m.get("content")):
            out.append(Violation(i, IMAGE_NOT_SUPPORTED, f"{profile.title} takes no images",
                                 profile.error_text(IMAGE_NOT_SUPPORTED, i)))
        if profile.tool_message_name and m.get("role") == "tool" and not m.get("name"):
            out.append(Violation(i, TOOL_MESSAGE_NAME, f"tool message for {m.get('tool_call_id')!r} has no name",
                                 profile.error_text(TOOL_MESSAGE_NAME, i)))
    if profile.thought_signatures:
        out += _signature_violations(items, profile)
    return out


def _signature_violations(items: list[Any], profile: ProviderProfile) -> list[Violation]:
    """Gemini 3: once a step of the current turn (after the last user message) carries a
    thought signature on its first function call, every step of the turn does
    (https://ai.google.dev/gemini-api/docs/thought-signatures)."""
    last_user = max((i for i, m in enumerate(items) if isinstance(m, dict) and m.get("role") == "user"), default=-1)
    steps = [(i, m["tool_calls"][0]) for i, m in enumerate(items) if i > last_user and isinstance(m, dict)
             and isinstance(m.get("tool_calls"), list) and m["tool_calls"] and isinstance(m["tool_calls"][0], dict)]

    def signed(call: dict[str, Any]) -> bool:
        ec = call.get("extra_content")
        google = ec.get("google") if isinstance(ec, dict) else None
        return isinstance(google, dict) and isinstance(google.get("thought_signature"), str)

    if not any(signed(c) for _, c in steps):
        return []
    return [Violation(i, THOUGHT_SIGNATURE_MISSING, f"tool call {c.get('id')!r} of the current turn has no "
                      "extra_content.google.thought_signature", profile.error_text(THOUGHT_SIGNATURE_MISSING, i))
            for i, c in steps if not signed(c)]


def rule_violations(payload: Any, provider: str | ProviderProfile,
                    sources: Sequence[tuple[Message, ...]] | None = None) -> list[Violation]:
    """The provider rules on a rendered ``payload``: tool call ids (``duplicate-tool-call-id``,
    ``call-id-too-long``, ``call-id-charset``), ``first-message-role``,
    ``image-not-supported``, ``tool-message-name``, ``thought-signature-missing`` (index =
    payload position), then :func:`ctxwise.providers.check` and ``system-not-first`` on the
    payload read back (index = position in the read-back list). ``sources``: as for
    :func:`schema_violations` (the read-back of each entry is kept in its messages' memo)."""
    from ..formats import from_anthropic, from_openai, from_responses
    from .checker import check
    from .rules import check_system_position

    profile = get_profile(provider)
    out = _id_violations(payload, profile) + _shape_violations(payload, profile)
    try:
        back = (from_anthropic(payload, strict=False, memo=True, sources=sources) if profile.wire == "anthropic"
                else (from_responses if profile.wire == "responses" else from_openai)(payload, strict=False))
    except (FormatError, ValueError, TypeError, AttributeError) as e:
        return out + [Violation(0, WIRE_SCHEMA, f"the payload cannot be read back: {e}")]
    return out + sorted(check(back, profile) + check_system_position(back, profile), key=lambda v: v.index)


def check_wire(payload: Any, provider: str | ProviderProfile,
               sources: Sequence[tuple[Message, ...]] | None = None) -> list[Violation]:
    """Every problem the provider would reject in the rendered ``payload``: schema violations
    first, then rule violations (see the module docstring). Empty for a payload the API
    accepts. ``sources`` (optional): the messages each payload entry was rendered from, as
    :func:`ctxwise.providers.render_converted` filled it for this very payload; each entry's
    verdict and read-back are then kept in those messages' memo (the same result, without
    re-reading entries a session sends call after call). Raises
    :class:`~ctxwise.errors.PolicyError` for an unknown provider."""
    schema = schema_violations(payload, provider, sources)
    return schema + rule_violations(payload, provider, sources)


def validate_wire(payload: Any, provider: str | ProviderProfile) -> None:
    """None when :func:`check_wire` finds nothing, else :class:`~ctxwise.errors.PayloadInvalid`
    listing every violation."""
    found = check_wire(payload, provider)
    if found:
        raise PayloadInvalid(get_profile(provider).name, found)


_ANTHROPIC_BLOCKS: dict[str, tuple[Any, str]] = {
    "server_tool_use": (own.AServerToolUse, "BetaServerToolUseBlockParam"),
    "web_search_tool_result": (own.AWebSearchToolResult, "BetaWebSearchToolResultBlockParam"),
    "web_fetch_tool_result": (own.AWebFetchToolResult, "BetaWebFetchToolResultBlockParam"),
    "code_execution_tool_result": (own.ACodeExecutionToolResult, "BetaCodeExecutionToolResultBlockParam"),
    "bash_code_execution_tool_result": (own.ABashCodeExecutionToolResult, "BetaBashCodeExecutionToolResultBlockParam"),
    "text_editor_code_execution_tool_result": (own.ATextEditorCodeExecutionToolResult,
                                               "BetaTextEditorCodeExecutionToolResultBlockParam"),
    "tool_search_tool_result": (own.AToolSearchToolResult, "BetaToolSearchToolResultBlockParam"),
    "container_upload": (own.AContainerUpload, "BetaContainerUploadBlockParam"),
    "mcp_tool_use": (own.AMCPToolUse, "BetaMCPToolUseBlockParam"),
    "mcp_tool_result": (own.AMCPToolResult, "BetaRequestMCPToolResultBlockParam"),
    "compaction": (own.ACompaction, "BetaCompactionBlockParam"),
}
"""Each Anthropic block kept verbatim: ctxwise's own type and the SDK's request type for it
(``anthropic/types/beta/beta_<kind>_block_param.py``; the beta types hold every one of them)."""


def _block_types(provider: str, kind: str) -> list[tuple[str, Any]]:
    """The types one verbatim block / item of ``provider`` is checked against, as at
    :func:`schema_violations`: ctxwise's own (Anthropic) and the SDK's when it is in use."""
    if provider == "anthropic":
        pair = _ANTHROPIC_BLOCKS.get(kind)
        if pair is None:
            return []
        out: list[tuple[str, Any]] = [("ctxwise", pair[0])]
        if _always or "anthropic" in sys.modules:
            try:
                from anthropic.types import beta
            except ImportError:
                return out
            out.append(("SDK", getattr(beta, pair[1])))
        return out
    sdk = _sdk_types() or {}
    tp = sdk.get(f"responses:item:{kind}")
    return [("SDK", tp)] if tp is not None else []


def provider_block_problem(provider: str, kind: str, raw: Any) -> str | None:
    """The first way a provider block / item kept verbatim (``provider``: ``anthropic`` or
    ``openai_responses``; ``kind``: its ``type``) breaks its request type, as
    ``"<who> type <Name>: <field>: <message> [<pydantic error type>]"``, or None. The types are
    those the payload check (rule ``wire-schema``) uses for it: ctxwise's own Anthropic block types,
    and the SDK's (``anthropic.types.beta.Beta*BlockParam``, the member of
    ``openai.types.responses.ResponseInputItemParam`` with that ``type``) when the SDK is in use
    (:func:`use_sdk_types`); closed (unknown keys refused) and strict."""
    from pydantic import ValidationError

    for who, tp in _block_types(provider, kind):
        try:
            strict_validator(tp)(raw)
        except ValidationError as e:
            return f"{who} type {getattr(tp, '__name__', kind)}: {_errors(e)[0]}"
    return None
