"""Recall by id through the proxy (``X-Ctxwise-Recall: on``): the recall tool added to the
request, and its calls answered by the proxy against the upstream, out of the client's sight.

For a Chat Completions, Responses or Anthropic Messages call, streamed or not: :func:`with_tool`
adds the recall tool (:func:`ctxwise.recall_tool_schema`) to ``tools``; when the upstream's
reply calls only the recall tool, the reply and :func:`results` (the tool results:
:func:`ctxwise.recall_tool_output` reads the original back) are appended to the session, and
the proxy prepares and asks the upstream again, up to :data:`MAX_ROUNDS` times; the client gets
the first reply that calls no recall. A streamed call's rounds are streamed too, and read whole
before the proxy knows whether a round is one the client must not see: the answer's stream is
passed on as the upstream sent it, once it is complete (its first byte waits for the whole
reply). Limits: a reply that calls the recall tool beside the client's own tools is passed on
as it is; the recall rounds are in the session's context and transcript, not in the client's
history.
"""
from __future__ import annotations

import json
from typing import Any

from .. import RECALL_TOOL_NAME, Session, recall_tool_output, recall_tool_schema
from .wire import Kind

MAX_ROUNDS = 4
"""Recall rounds answered inside one client call at most."""

HEADER = "x-ctxwise-recall"


_SCHEMA = {"chat": "openai", "responses": "openai_responses", "messages": "anthropic"}


def with_tool(kind: Kind, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with the recall tool appended to its ``tools``, in ``kind``'s tool shape."""
    return {**body, "tools": [*(body.get("tools") or []), recall_tool_schema(_SCHEMA.get(kind, "anthropic"))]}


def calls(kind: Kind, reply: dict[str, Any]) -> list[tuple[Any, Any, Any]] | None:
    """``(id, name, arguments)`` of the reply's tool calls; None when the reply has none."""
    if kind == "chat":
        msg = ((reply.get("choices") or [{}])[0] or {}).get("message") or {}
        found = [(c.get("id"), (c.get("function") or {}).get("name"), (c.get("function") or {}).get("arguments"))
                 for c in msg.get("tool_calls") or []]
    elif kind == "responses":
        found = [(o.get("call_id"), o.get("name"), o.get("arguments")) for o in reply.get("output") or []
                 if isinstance(o, dict) and o.get("type") == "function_call"]
    else:
        found = [(b.get("id"), b.get("name"), b.get("input")) for b in reply.get("content") or []
                 if isinstance(b, dict) and b.get("type") == "tool_use"]
    return found or None


def only_recall(kind: Kind, reply: dict[str, Any]) -> bool:
    """Whether the reply calls tools and every call is to the recall tool."""
    found = calls(kind, reply)
    return bool(found) and all(name == RECALL_TOOL_NAME for _, name, _ in found or [])


def results(kind: Kind, session: Session, reply: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool results answering the reply's recall calls, in ``kind``'s wire shape."""
    out: list[dict[str, Any]] = []
    for call_id, _, args in calls(kind, reply) or []:
        text, error = recall_tool_output(session, args if isinstance(args, (str, dict)) else json.dumps(args))
        if kind == "chat":
            out.append({"role": "tool", "tool_call_id": call_id, "content": text})
        elif kind == "responses":
            out.append({"type": "function_call_output", "call_id": call_id, "output": text})
        else:
            out.append({"type": "tool_result", "tool_use_id": call_id, "content": text, "is_error": error})
    return out if kind in ("chat", "responses") else [{"role": "user", "content": out}]
