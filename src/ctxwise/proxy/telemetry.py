"""OpenTelemetry spans of proxied calls (the ``otel`` extra: ``opentelemetry-api``).

One span per managed call, ``chat <model>`` (kind CLIENT), following the GenAI semantic
conventions (https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/):
``gen_ai.operation.name`` (``chat``), ``gen_ai.provider.name`` (``openai`` / ``anthropic``),
``gen_ai.request.model``, ``gen_ai.request.max_tokens`` / ``temperature`` when sent,
``gen_ai.conversation.id`` (the ctxwise session), ``gen_ai.response.id`` / ``model`` and
``gen_ai.usage.input_tokens`` / ``output_tokens`` from the reply, ``error.type`` (the status)
when the upstream refused; and ctxwise's own: ``gen_ai.conversation.compacted`` (whether this
call's prepare edited the context), ``ctxwise.context.size_before`` / ``size`` / ``unit``,
``ctxwise.prepare.ms``, ``ctxwise.session.branched_from``. Each compaction event of the call is
a span event ``gen_ai.conversation.compaction`` with its stage, trigger, sizes before and after
(``ctxwise.compaction.tokens_before`` / ``tokens_after``, in the policy unit), the cleared or
summarized ids and the stage's numbers. No message text and no key is ever an attribute.

Without the extra installed, or with no tracer provider configured, :func:`tracer` gives
None or a no-op tracer and nothing is recorded.
"""
from __future__ import annotations

import json
from typing import Any

from .. import __version__
from .conversation import Call

SCOPE = "ctxwise.proxy"


def tracer(provider: Any = None) -> Any:
    """A tracer from ``provider`` (default: the global one), or None without opentelemetry-api."""
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    return trace.get_tracer(SCOPE, __version__, tracer_provider=provider)


def start(tracer_: Any, call: Call) -> Any:
    """Start the span of ``call`` (before its upstream request), or None without a tracer."""
    if tracer_ is None:
        return None
    from opentelemetry.trace import SpanKind

    body = call.body
    model = str(body.get("model") or "")
    attrs: dict[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": call.route.family,
                             "gen_ai.request.model": model, "gen_ai.conversation.id": call.session_id,
                             "ctxwise.route": call.route.path}
    for key, name in (("max_tokens", "gen_ai.request.max_tokens"), ("max_output_tokens", "gen_ai.request.max_tokens"),
                      ("max_completion_tokens", "gen_ai.request.max_tokens"), ("temperature", "gen_ai.request.temperature"),
                      ("top_p", "gen_ai.request.top_p")):
        if isinstance(body.get(key), (int, float)) and not isinstance(body.get(key), bool):
            attrs[name] = body[key]
    p = call.prepared
    if p is not None:
        attrs.update({"gen_ai.conversation.compacted": bool(p.events), "ctxwise.context.size_before": p.size_before,
                      "ctxwise.context.size": p.size, "ctxwise.context.unit": p.unit,
                      "ctxwise.prepare.ms": round(p.latency_ms, 3)})
    if call.branched_from is not None:
        attrs["ctxwise.session.branched_from"] = call.branched_from
    span = tracer_.start_span(f"chat {model}".strip(), kind=SpanKind.CLIENT, attributes=attrs)
    for e in (p.events if p is not None else []):
        span.add_event("gen_ai.conversation.compaction", attributes=_event_attributes(e))
    return span


def _event_attributes(e: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"ctxwise.compaction.stage": e.stage, "ctxwise.compaction.trigger": e.trigger,
                           "ctxwise.compaction.unit": e.unit, "ctxwise.compaction.tokens_before": e.size_before,
                           "ctxwise.compaction.tokens_after": e.size_after,
                           "ctxwise.compaction.cleared_ids": [str(i) for i in e.affected_ids]}
    if e.summary_id:
        out["ctxwise.compaction.summary_id"] = e.summary_id
    numbers = {k: v for k, v in (e.detail or {}).items() if isinstance(v, (int, float, bool))}
    if numbers:
        out["ctxwise.compaction.detail"] = json.dumps(numbers, sort_keys=True)
    return out


def end(span: Any, status: int, reply: dict[str, Any] | None) -> None:
    """End ``span`` (None: nothing) with the upstream ``status`` and what the reply says."""
    if span is None:
        return
    if reply is not None:
        raw_usage = reply.get("usage")
        usage: dict[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
        ins = usage.get("input_tokens", usage.get("prompt_tokens"))
        outs = usage.get("output_tokens", usage.get("completion_tokens"))
        for name, value in (("gen_ai.response.id", reply.get("id")), ("gen_ai.response.model", reply.get("model")),
                            ("gen_ai.usage.input_tokens", ins), ("gen_ai.usage.output_tokens", outs)):
            if isinstance(value, (str, int)) and not isinstance(value, bool):
                span.set_attribute(name, value)
    if not 200 <= status < 300:
        from opentelemetry.trace import Status, StatusCode

        span.set_attribute("error.type", str(status))
        span.set_status(Status(StatusCode.ERROR))
    span.end()
