"""OpenTelemetry spans of proxied calls, recorded with the SDK's in-memory exporter: GenAI
semantic-convention attributes, and a compaction event when prepare() edited the context."""
from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxwise.proxy.telemetry import tracer

from .conftest import PROVIDER_KEY, Live
from .stub import Reply
from .test_routes import anthropic_client


def test_spans_follow_genai_conventions_and_carry_compaction(live: Live) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    live.app.proxy.tracer = tracer(provider)
    client = anthropic_client(live, **{"X-Ctxwise-Session": "otel"})
    big = "log line with numbers 12345 and words\n" * 400  # a tool result large enough to be cleared
    msgs: list[Any] = [{"role": "user", "content": "check the logs"}]
    for k in range(6):
        live.stub.queue("messages", Reply(calls=[(f"toolu_o{k}", "read_log", {"n": k})]))
        r = client.messages.create(model="claude-sonnet-4-5", max_tokens=256, messages=msgs,
                                   tools=[{"name": "read_log", "input_schema": {"type": "object"}}])
        msgs += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in r.content]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_o{k}", "content": big}]}]
    live.stub.status = 500
    try:
        client.messages.create(model="claude-sonnet-4-5", max_tokens=256, messages=msgs,
                               tools=[{"name": "read_log", "input_schema": {"type": "object"}}])
    except Exception:
        pass
    spans = exporter.get_finished_spans()
    assert len(spans) == 7
    first = spans[0].attributes or {}
    assert spans[0].name == "chat claude-sonnet-4-5"
    assert first["gen_ai.operation.name"] == "chat" and first["gen_ai.provider.name"] == "anthropic"
    assert first["gen_ai.request.model"] == "claude-sonnet-4-5" and first["gen_ai.request.max_tokens"] == 256
    assert first["gen_ai.conversation.id"] == "otel"
    assert first["gen_ai.usage.input_tokens"] == 10 and first["gen_ai.usage.output_tokens"] == 5
    assert str(first["gen_ai.response.id"]).startswith("msg_")
    compacted = [s for s in spans if (s.attributes or {}).get("gen_ai.conversation.compacted")]
    assert compacted, "the budget (6000 tokens) is outgrown: some call compacted"
    ev = next(e for s in compacted for e in s.events if e.name == "gen_ai.conversation.compaction")
    attrs = ev.attributes or {}
    assert attrs["ctxwise.compaction.tokens_before"] > attrs["ctxwise.compaction.tokens_after"]
    assert attrs["ctxwise.compaction.stage"] and attrs["ctxwise.compaction.trigger"]
    assert list(attrs["ctxwise.compaction.cleared_ids"])
    assert (spans[-1].attributes or {})["error.type"] == "500"
    for s in spans:  # neither keys nor message text in the telemetry
        text = repr(dict(s.attributes or {})) + repr([dict(e.attributes or {}) for e in s.events])
        assert PROVIDER_KEY not in text and live.keys["a"] not in text and "log line" not in text
