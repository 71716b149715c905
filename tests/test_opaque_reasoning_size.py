"""Opaque reasoning payloads count as what is sent (issue 25): a Responses ``reasoning`` item's
``encrypted_content``, Anthropic ``redacted_thinking`` and provider-block ``encrypted_content``
on one rule (:func:`ctxwise.tokens.base.opaque_size`), and not at all on a target that leaves
them out. Real sessions, real SDK types, the ``estimate`` tokenizer."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai.types.responses import Response

from ctxwise import ContextManager, Policy, ProviderBlock, ThinkingBlock, get_counter
from ctxwise.tokens.base import OPAQUE_CHARS_PER_TOKEN, opaque_size

_N = [0]


def sess(provider: str, budget: int = 60000, **kw: Any) -> Any:
    _N[0] += 1
    pol = Policy(budget=budget, unit="tokens", tokenizer="estimate", provider=provider, **kw)
    return ContextManager("memory://", pol).session("u", f"s{_N[0]}")


def with_reasoning(provider: str, enc_chars: int) -> Any:
    s = sess(provider)
    s.append_responses([
        {"role": "user", "content": "hi"},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "g" * enc_chars},
        {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
         "content": [{"type": "output_text", "text": "hello", "annotations": []}]},
        {"role": "user", "content": "x"}])
    return s.prepare()


def reply(i: int, enc_chars: int, reasoning_tokens: int | None) -> Response:
    usage = None if reasoning_tokens is None else {
        "input_tokens": 100, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": reasoning_tokens + 10, "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
        "total_tokens": reasoning_tokens + 110}
    return Response.model_validate({
        "id": f"resp_{i}", "object": "response", "created_at": 1, "model": "gpt-5.6",
        "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "usage": usage,
        "output": [{"type": "reasoning", "id": f"rs_{i}", "summary": [], "encrypted_content": "g" * enc_chars},
                   {"type": "message", "role": "assistant", "id": f"msg_{i}", "status": "completed",
                    "content": [{"type": "output_text", "text": "ok", "annotations": []}]}]})


def test_encrypted_reasoning_size_grows_with_its_payload_on_responses():
    small, big = with_reasoning("openai_responses", 10), with_reasoning("openai_responses", 20000)
    assert big.size - small.size == opaque_size("tokens", "g" * 20000) - opaque_size("tokens", "g" * 10)
    assert big.size - small.size == 20000 // OPAQUE_CHARS_PER_TOKEN - 3
    assert any(it.get("encrypted_content") == "g" * 20000 for it in big.payload)


@pytest.mark.parametrize("provider", ["openai", "anthropic", "deepseek"])
def test_encrypted_reasoning_not_sent_does_not_count(provider):
    small, big = with_reasoning(provider, 10), with_reasoning(provider, 20000)
    assert "g" * 20000 not in json.dumps(big.payload)
    assert big.size == small.size


def test_redacted_thinking_counts_on_anthropic_only():
    def size(provider: str, n: int) -> int:
        s = sess(provider)
        s.append_anthropic([{"role": "user", "content": "hi"},
                            {"role": "assistant", "content": [{"type": "redacted_thinking", "data": "d" * n},
                                                              {"type": "text", "text": "hello"}]},
                            {"role": "user", "content": "x"}])
        return s.prepare().size
    assert size("anthropic", 20000) - size("anthropic", 10) == 5000 - 3
    assert size("deepseek", 20000) == size("deepseek", 10)


def test_reported_reasoning_tokens_are_the_size_and_a_budget_compacts_before_going_over():
    s = sess("openai_responses", budget=3000, bound_reasoning="on")
    s.append_responses([{"role": "user", "content": "hi"}])
    for i in range(5):
        s.prepare()
        s.append_responses(reply(i, 12000, 2000))
        s.append_responses([{"role": "user", "content": f"q{i}"}])
    counter = get_counter("estimate")
    last = [m for m in s.view.messages if m.role == "assistant"][-1]
    block = next(b for b in last.blocks if isinstance(b, ThinkingBlock))
    without = counter.count_message(last.model_copy(update={"blocks": [b for b in last.blocks if b is not block]}))
    assert counter.count_message(last) - without == counter.frame.per_thinking + 2000  # the provider's figure
    p = s.prepare()
    sent = [it for it in p.payload if it.get("type") == "reasoning"]
    assert p.size <= 3000
    assert 1 <= len(sent) < 5  # 5 x 2,000 reasoning tokens cannot all fit in 3,000
    assert p.size >= 2000 * len(sent)


def test_without_usage_the_payload_length_is_the_estimate():
    s = sess("openai_responses")
    s.append_responses([{"role": "user", "content": "hi"}])
    s.append_responses(reply(0, 12000, None))
    last = s.view.messages[-1]
    block = next(b for b in last.blocks if isinstance(b, ThinkingBlock))
    counter = get_counter("estimate")
    assert counter.count_block(block) == counter.frame.per_thinking + 12000 // OPAQUE_CHARS_PER_TOKEN
    assert get_counter("chars").count_block(block) == 12000


def test_provider_block_encrypted_content_is_on_the_same_rule():
    def block(n: int) -> ProviderBlock:
        return ProviderBlock(provider="anthropic", kind="web_search_tool_result", call_id="srvtoolu_1", raw={
            "type": "web_search_tool_result", "tool_use_id": "srvtoolu_1",
            "content": [{"type": "web_search_result", "url": "https://a", "title": "A",
                         "encrypted_content": "e" * n, "page_age": None}]})
    counter = get_counter("estimate")
    assert counter.count_block(block(40000)) - counter.count_block(block(0)) == 10000


@pytest.mark.parametrize("price_model,setting,binds", [
    (None, "auto", False),  # model not known: earlier models default to current_turn
    ("openai", "auto", False),
    ("openai_gpt56", "auto", True),  # gpt-5.6 family: reasoning.context defaults to all_turns
    ("openai_gpt56_12h", "auto", True),
    ("openai_gpt56", "off", False),
    (None, "on", True),
])
def test_auto_binds_responses_reasoning_on_the_gpt56_family(price_model, setting, binds):
    pol = Policy(provider="openai_responses", price_model=price_model, bound_reasoning=setting)
    assert pol.profile.binds_reasoning is binds
    assert Policy(provider="openai", price_model=price_model, bound_reasoning=setting).profile.binds_reasoning is False
    assert Policy(provider="anthropic", price_model=price_model).profile.binds_reasoning is True
