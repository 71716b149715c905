"""Prompt-cache price models (ctxwise.prices) and the policy fields that choose and override them."""

from __future__ import annotations

import pytest

from ctxwise.errors import PolicyError
from ctxwise.policy import PROVIDERS, Policy
from ctxwise.prices import ANTHROPIC, DEEPSEEK, FLAT, OPENAI, PRICE_MODELS, PriceModel, price_model


def test_every_provider_has_a_sourced_price_model():
    for p in PROVIDERS:
        assert Policy.preset("default", provider=p).prices is PRICE_MODELS[p]
        assert PRICE_MODELS[p].source, p


def test_flat_model_is_the_old_cache_ratio_formula():
    # cached prefix at 0.1, the rest at 1: cost = cached * 0.1 + (tokens - cached)
    for tokens, reused in [(100, 0), (5000, 4000), (3, 3), (700, 900)]:
        cached = min(reused, tokens)
        assert FLAT.call_cost(tokens, reused) == pytest.approx(cached * 0.1 + tokens - cached)


def test_anthropic_bills_writes_at_1_25_and_nothing_below_the_minimum_prefix():
    # 2,000-token prompt, 1,500 reused: 1,500 read at 0.1, 500 written at 1.25
    assert ANTHROPIC.call_cost(2000, 1500) == pytest.approx(1500 * 0.1 + 500 * 1.25)
    # a prefix below 1,024 tokens is not cached; the prompt itself is long enough to be written
    assert ANTHROPIC.call_cost(2000, 1000) == pytest.approx(2000 * 1.25)
    # a prompt below the minimum is neither read nor written: plain input price
    assert ANTHROPIC.call_cost(900, 800) == pytest.approx(900)


def test_openai_counts_hits_in_128_token_steps_and_deepseek_hits_cost_2_percent():
    assert OPENAI.cached_tokens(3000, 1100) == 1024
    assert OPENAI.call_cost(3000, 1100) == pytest.approx(1024 * 0.1 + 1976)
    assert DEEPSEEK.call_cost(1000, 900) == pytest.approx(900 * 0.02 + 100)


def test_policy_overrides_and_errors():
    p = Policy.preset("default", provider="anthropic", cache_read_price=0.05, cache_min_prefix=2048)
    assert (p.prices.read, p.prices.write, p.prices.min_prefix) == (0.05, 1.25, 2048)
    assert Policy.preset("default", provider="deepseek", price_model="flat").prices is FLAT
    assert Policy.from_env({"CTXWISE_PRICE_MODEL": "anthropic"}).prices is ANTHROPIC
    with pytest.raises(PolicyError, match="price_model"):
        Policy.preset("default", price_model="nope")
    with pytest.raises(PolicyError, match="cache_read_price"):
        Policy.preset("default", cache_read_price=-1)
    with pytest.raises(KeyError, match="unknown price model"):
        price_model("nope")
    with pytest.raises(ValueError, match="must not be negative"):
        PriceModel("bad", read=-0.1)
