"""What the proxy reads from and writes into each provider's request and reply: pure functions.

Three routes (:data:`ROUTES`): OpenAI Chat Completions (``messages``), OpenAI Responses
(``input`` items, ``instructions`` passed through) and Anthropic Messages (``system`` +
``messages``). For each:

* :func:`history` -- the conversation a request carries, one dict per message or item, in the
  order the client sent it (Anthropic's ``system`` first, as ``{"role": "system", "content"}``);
* :func:`fingerprint` -- one message as the bytes that decide whether two calls share a prefix:
  only what the model reads (roles, texts, tool calls and results, reasoning), not what
  clients add or drop when they send a reply back (``cache_control``, item ``id``/``status``,
  ``annotations``, ``None`` fields, a string vs a list of one text part);
* :func:`heads` -- the SHA-256 chain over those fingerprints: ``heads(...)[k-1]`` names the
  first ``k`` messages; the leading system prompts count by their role only (an agent that
  puts the time or its working state in its system prompt keeps one conversation; the
  proxy replaces the stored prompt, :func:`ctxwise.proxy.conversation.begin`);
* :func:`managed_body` -- the request with ctxwise's payload (:attr:`ctxwise.Prepared.payload`)
  in place of the client's history, every other parameter as sent;
* :func:`reply_items` -- the reply as the client will send it back next call.

Sources for the shapes: ``openai/types/chat/completion_create_params.py``,
``openai/types/responses/response_create_params.py``, ``openai/types/responses/response.py``,
``anthropic/types/message_create_params.py``, ``anthropic/types/message.py`` (openai 3.63.0,
anthropic 2.17.0).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Literal

from .auth import Family

Kind = Literal["chat", "responses", "messages", "count_tokens"]


@dataclass(frozen=True)
class Route:
    """One proxied route: ``path`` (as the client calls it, after any ``/k/<key>`` segment), the
    provider ``family`` (error shapes, upstream), the ``kind`` of body, the ctxwise ``provider``
    profile its sessions are created with, and ``upstream`` (the path appended to the family's
    upstream base URL: OpenAI's base URL ends in ``/v1``, Anthropic's does not)."""

    path: str
    family: Family
    kind: Kind
    provider: str
    upstream: str


ROUTES: dict[str, Route] = {r.path: r for r in (
    Route("/v1/chat/completions", "openai", "chat", "openai", "/chat/completions"),
    Route("/v1/responses", "openai", "responses", "openai_responses", "/responses"),
    Route("/v1/messages", "anthropic", "messages", "anthropic", "/v1/messages"),
    Route("/v1/messages/count_tokens", "anthropic", "count_tokens", "anthropic", "/v1/messages/count_tokens"),
)}
"""The proxied routes by path."""


class WireError(ValueError):
    """A request body the proxy cannot read as its route's shape (the message names the field)."""


def history(kind: Kind, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The conversation of a request body, one dict per message (chat, messages) or input item
    (responses; a string ``input`` is one user message). Raises :class:`WireError` naming the
    field when it is missing or not a list of objects."""
    if kind == "chat":
        items = body.get("messages")
        field = "messages"
    elif kind == "responses":
        items = body.get("input")
        field = "input"
        if isinstance(items, str):
            return [{"role": "user", "content": items}]
    else:
        items = body.get("messages")
        field = "messages"
    if not isinstance(items, list) or not all(isinstance(m, dict) for m in items):
        raise WireError(f"{field}: expected a list of objects")
    if kind in ("messages", "count_tokens") and body.get("system") not in (None, "", []):
        return [{"role": "system", "content": body["system"]}, *items]
    return list(items)


def _text_parts(content: Any) -> Any:
    """Content as a comparable value: None / "" / [] -> ""; a list of text parts -> their texts
    joined; any other list -> its parts normalised; a string as it is."""
    if content is None or content == [] or content == "":
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [_part(p) for p in content]
        if all(isinstance(p, tuple) and p[0] == "text" for p in parts):
            return "".join(p[1] for p in parts)
        return parts
    return _clean(content)


_DROP = frozenset({"cache_control", "citations", "annotations", "logprobs", "id", "status"})


def _clean(value: Any) -> Any:
    """A JSON value without the keys clients add or drop (:data:`_DROP`) and without None fields."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in sorted(value.items()) if k not in _DROP and v is not None}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def _part(p: Any) -> Any:
    if isinstance(p, dict) and p.get("type") in ("text", "input_text", "output_text") and isinstance(p.get("text"), str):
        return ("text", p["text"])
    if isinstance(p, dict) and p.get("type") == "tool_result":
        return ("tool_result", p.get("tool_use_id"), bool(p.get("is_error")), _text_parts(p.get("content")))
    if isinstance(p, dict) and p.get("type") == "tool_use":
        return ("tool_use", p.get("id"), p.get("name"), _clean(p.get("input")))
    return _clean(p)


def _args(raw: Any) -> Any:
    """Tool-call arguments as their JSON value when they parse (clients re-serialize them:
    ``{"a":1}`` and ``{"a": 1}`` are one call), else as sent."""
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _normal(kind: Kind, m: dict[str, Any]) -> Any:
    if kind == "chat":
        calls = [(c.get("id"), (c.get("function") or {}).get("name"), _args((c.get("function") or {}).get("arguments")))
                 for c in (m.get("tool_calls") or []) if isinstance(c, dict)]
        return [m.get("role"), m.get("name"), _text_parts(m.get("content")), calls, m.get("tool_call_id")]
    if kind == "responses":
        t = m.get("type") or ("message" if "role" in m else None)
        if t == "message":
            return [t, m.get("role"), _text_parts(m.get("content"))]
        if t == "function_call":
            return [t, m.get("call_id"), m.get("name"), _args(m.get("arguments"))]
        if t == "function_call_output":
            return [t, m.get("call_id"), _text_parts(m.get("output"))]
        if t == "reasoning":
            return [t, [s.get("text") for s in (m.get("summary") or []) if isinstance(s, dict)],
                    m.get("encrypted_content")]
        return _clean(m)
    return [m.get("role"), _text_parts(m.get("content"))]


def fingerprint(kind: Kind, message: dict[str, Any]) -> bytes:
    """The bytes two copies of ``message`` share whenever the model would read them the same
    (see the module docstring); ``kind`` is the route's (count_tokens reads as messages)."""
    k: Kind = "messages" if kind == "count_tokens" else kind
    return json.dumps(_normal(k, message), ensure_ascii=False, separators=(",", ":"),
                      sort_keys=True, default=str).encode("utf-8")


def seed(kind: Kind, body: dict[str, Any]) -> str:
    """The head of the empty conversation: the route kind (Responses ``instructions`` are passed
    through as sent and not stored: like a system prompt, a change of them continues the
    conversation)."""
    k = "messages" if kind == "count_tokens" else kind
    return hashlib.sha256(json.dumps([k, None], default=str).encode("utf-8")).hexdigest()


def response_head(response_id: str) -> str:
    """The head naming the conversation that ends with the Responses reply ``response_id`` (what
    a client's ``previous_response_id`` continues): SHA-256 hex, apart from every message chain."""
    return hashlib.sha256(b"previous_response_id\x00" + response_id.encode("utf-8")).hexdigest()


_LINKS: dict[tuple[str, bytes], str] = {}
"""Links of chains already computed: ``(head, BLAKE2b-128 of repr(message))`` -> the next head.
A client re-sends its history on every call, so all but its newest messages were linked by
its previous call. ``repr`` of a JSON value determines the value (types included: ``1``,
``1.0`` and ``true`` differ), so the cached link is the one :func:`fingerprint` gives; a
message written differently (keys reordered) is only a miss. Cleared when full."""

_LINKS_MAX = 65536


def heads(kind: Kind, body: dict[str, Any], messages: list[dict[str, Any]], start: str | None = None) -> list[str]:
    """SHA-256 hex chain over the fingerprints of ``messages`` (JSON values, as parsed from a
    request or reply), starting from ``start`` (default: :func:`seed` of the body): element
    ``k-1`` names the first ``k`` messages."""
    out: list[str] = []
    h = start if start is not None else seed(kind, body)
    lead = start is None
    for m in messages:
        lead = lead and is_system(kind, m)
        if lead:
            h = hashlib.sha256(h.encode("ascii") + b"\x00" + json.dumps(["system", m.get("role")]).encode("utf-8")
                               ).hexdigest()
        else:
            link = (h, hashlib.blake2b(repr(m).encode("utf-8", "surrogatepass"), digest_size=16).digest())
            known = _LINKS.get(link)
            if known is None:
                known = hashlib.sha256(h.encode("ascii") + b"\x00" + fingerprint(kind, m)).hexdigest()
                if len(_LINKS) >= _LINKS_MAX:
                    _LINKS.clear()
                _LINKS[link] = known
            h = known
        out.append(h)
    return out


def is_system(kind: Kind, message: dict[str, Any]) -> bool:
    """Whether ``message`` is a system prompt (role ``system`` or ``developer``; Anthropic's
    ``system`` parameter reads as one, :func:`history`)."""
    return message.get("role") in ("system", "developer") and message.get("type") in (None, "message")


def leading_system(kind: Kind, messages: list[dict[str, Any]]) -> int:
    """How many messages at the start of ``messages`` are system prompts (:func:`is_system`)."""
    n = 0
    while n < len(messages) and is_system(kind, messages[n]):
        n += 1
    return n


def managed_body(kind: Kind, body: dict[str, Any], payload: Any) -> dict[str, Any]:
    """``body`` with its history replaced by ``payload`` (``Prepared.payload`` of a session of
    the route's provider): chat ``messages``; responses ``input`` (and no
    ``previous_response_id``: the payload is the whole context); messages ``system`` (left out
    when the payload has none) and ``messages``. Every other key is kept as sent."""
    if kind == "chat":
        return {**body, "messages": payload}
    if kind == "responses":
        return {**{k: v for k, v in body.items() if k != "previous_response_id"}, "input": payload}
    out = {k: v for k, v in body.items() if k != "system"}
    if isinstance(payload, dict) and payload.get("system") not in (None, "", []):
        out["system"] = payload["system"]
    out["messages"] = payload["messages"] if isinstance(payload, dict) else payload
    return client_marks(body, out)


def _has_mark(blocks: Any) -> bool:
    return isinstance(blocks, list) and any(
        isinstance(b, dict) and ("cache_control" in b or (b.get("type") == "tool_result" and _has_mark(b.get("content"))))
        for b in blocks)


def _unmarked(blocks: Any) -> Any:
    """``blocks`` without ``cache_control`` marks (tool_result content included): the blocks
    that carry one are copied, the others and the list itself kept when none does."""
    if not _has_mark(blocks):
        return blocks
    out = []
    for b in blocks:
        if isinstance(b, dict) and ("cache_control" in b or b.get("type") == "tool_result"):
            b = {k: (_unmarked(v) if k == "content" else v) for k, v in b.items() if k != "cache_control"}
        out.append(b)
    return out


def _mark(target: Any, marked: list[Any]) -> Any:
    """``target`` (a content list or string) with the ``cache_control`` marks of ``marked`` (the
    client's content list of the same message) on the blocks at the same places."""
    blocks = [{"type": "text", "text": target}] if isinstance(target, str) else list(target)
    for k, b in enumerate(marked):
        if k >= len(blocks) or not isinstance(b, dict) or not isinstance(blocks[k], dict):
            continue
        if "cache_control" in b:
            blocks[k] = {**blocks[k], "cache_control": b["cache_control"]}
        if b.get("type") == "tool_result" and _has_mark(b.get("content")) and isinstance(blocks[k].get("content"),
                                                                                       (list, str)):
            blocks[k] = {**blocks[k], "content": _mark(blocks[k]["content"], b["content"])}
    return blocks


def client_marks(body: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """The managed Anthropic request ``out`` with the prompt-cache marks (``cache_control``) of
    the client's request ``body`` and no others: the stored marks of earlier calls are removed,
    and each mark the client put on a system block or a message is put on the same block of the
    managed request where that block still stands (a system text block of the same text; the
    newest message of the same :func:`fingerprint`, in request order); a mark on content ctxwise
    compacted away is dropped. The client's marks keep their order (tools, system, messages),
    so the rule that a longer TTL comes before a shorter one (``ttl`` "1h" before "5m",
    https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching) holds whenever it
    held in the client's request, and there are never more marks than the client sent."""
    system, messages = out.get("system"), out.get("messages")
    if not isinstance(messages, list):
        return out
    if isinstance(system, list):
        system = _unmarked(system)
    messages = [{**m, "content": _unmarked(m.get("content"))} if isinstance(m, dict) and _has_mark(m.get("content"))
                else m for m in messages]
    sent = body.get("system")
    if isinstance(sent, list) and _has_mark(sent) and system is not None:
        texts = [b.get("text") if isinstance(b, dict) else None for b in
                 ([{"type": "text", "text": system}] if isinstance(system, str) else system)]
        system = [{"type": "text", "text": system}] if isinstance(system, str) else list(system)
        for b in sent:
            if isinstance(b, dict) and "cache_control" in b and b.get("text") in texts:
                k = texts.index(b.get("text"))
                system[k] = {**system[k], "cache_control": b["cache_control"]}
    client = body.get("messages")
    marked = [m for m in client if isinstance(m, dict) and _has_mark(m.get("content"))] \
        if isinstance(client, list) else []
    hi = len(messages)
    prints: dict[int, bytes] = {}
    for cm in reversed(marked):
        want = fingerprint("messages", cm)
        j = hi - 1
        while j >= 0 and prints.setdefault(j, fingerprint("messages", messages[j])) != want:
            j -= 1
        if j < 0:
            continue
        messages[j] = {**messages[j], "content": _mark(messages[j].get("content"), cm["content"])}
        hi = j
    result = {**out, "messages": messages}
    if system is not None:
        result["system"] = system
    return result


def reply_items(kind: Kind, reply: dict[str, Any]) -> list[dict[str, Any]]:
    """The reply of a completed call as the client sends it back on its next call: chat the first
    choice's ``message`` (None fields left out); responses the ``output`` items; messages one
    ``{"role": "assistant", "content"}``. Raises :class:`WireError` when the reply has none."""
    if kind == "chat":
        choices = reply.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0].get("message"), dict):
            raise WireError("choices[0].message: missing in the reply")
        msg = {k: v for k, v in choices[0]["message"].items() if v is not None and k not in ("annotations", "refusal")}
        msg.setdefault("content", None)
        return [msg]
    if kind == "responses":
        output = reply.get("output")
        if not isinstance(output, list):
            raise WireError("output: missing in the reply")
        return [o for o in output if isinstance(o, dict)]
    content = reply.get("content")
    if not isinstance(content, list):
        raise WireError("content: missing in the reply")
    return [{"role": "assistant", "content": content}]


def error_body(family: Family, status: int, message: str) -> dict[str, Any]:
    """An error body in the provider's own shape for a request ctxwise refuses (``status`` 400:
    ``invalid_request_error``; 404: ``not_found_error``; 409: Anthropic's ``invalid_request_error``,
    its SDK's ConflictError; 5xx: ``api_error``). Sources:
    ``openai/types/shared/error_object.py``, ``anthropic/types/shared/error_response.py``."""
    kind = {400: "invalid_request_error", 404: "not_found_error", 409: "invalid_request_error", 413: "request_too_large",
            429: "rate_limit_error"}.get(status, "api_error")
    if family == "openai":
        return {"error": {"message": message, "type": "invalid_request_error" if status < 500 else "server_error",
                          "param": None, "code": None}}
    return {"type": "error", "error": {"type": kind, "message": message}}
