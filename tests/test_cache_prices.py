"""Cache write prices per lifetime and cache expiry (issue 25 item 7)."""

import typing

import pytest
from openai.types.responses.response_create_params import PromptCacheOptions as ResponsesCacheOptions
from openai.types.responses.response_input_text_param import ResponseInputTextParam

from ctxwise.prices import ANTHROPIC, ANTHROPIC_1H, OPENAI, OPENAI_GPT56, OPENAI_GPT56_12H, PriceModel, price_model


def test_anthropic_write_price_per_lifetime() -> None:
    """Anthropic bills cache writes at 1.25x input for the 5-minute TTL and 2x for the 1-hour TTL,
    reads at 0.1x (docs.anthropic.com/en/docs/build-with-claude/prompt-caching; the TTL values
    are anthropic.types.CacheControlEphemeralParam.ttl: "5m" | "1h")."""
    assert (ANTHROPIC.write, ANTHROPIC.lifetime) == (1.25, 300.0)
    assert (ANTHROPIC_1H.write, ANTHROPIC_1H.lifetime) == (2.0, 3600.0)
    assert ANTHROPIC_1H.read == ANTHROPIC.read == 0.1
    # the same uncached 2,000-token call costs more to write under the 1-hour lifetime
    assert ANTHROPIC_1H.call_cost(2000, 0) == 4000 > ANTHROPIC.call_cost(2000, 0) == 2500


def test_cache_goes_cold_only_past_its_lifetime() -> None:
    """An idle prefix expires after the lifetime (5 min / 1 h for Anthropic, same source as above);
    a model without a lifetime never goes cold."""
    assert not ANTHROPIC.is_cold(300.0) and ANTHROPIC.is_cold(301.0)
    assert not ANTHROPIC_1H.is_cold(301.0) and ANTHROPIC_1H.is_cold(3601.0)
    assert OPENAI.lifetime == 0 and not OPENAI.is_cold(10**9)


def test_negative_lifetime_is_refused() -> None:
    with pytest.raises(ValueError, match="lifetime"):
        PriceModel("bad", read=0.1, lifetime=-1)


def test_openai_gpt56_bills_cache_writes_at_1_25() -> None:
    """GPT-5.6 and later bill cache writes at 1.25x the uncached input rate, reads at 0.1x, prompts
    of 1,024+ tokens, hits in 128-token steps (developers.openai.com/api/docs/guides/prompt-caching);
    models before it write for free (OPENAI)."""
    assert (OPENAI_GPT56.read, OPENAI_GPT56.write, OPENAI_GPT56.min_prefix, OPENAI_GPT56.increment) == (0.1, 1.25, 1024, 128)
    # 3,000 tokens, 1,100 reused: 1,024 read, 1,976 written
    assert OPENAI_GPT56.call_cost(3000, 1100) == pytest.approx(1024 * 0.1 + 1976 * 1.25)
    assert OPENAI.call_cost(3000, 1100) == pytest.approx(1024 * 0.1 + 1976)
    assert price_model("openai_gpt56") is OPENAI_GPT56


def test_openai_gpt56_lifetimes_are_the_sdk_ttls() -> None:
    """The lifetimes are openai 3.63 PromptCacheOptions.ttl '30m' (default) and '12h'
    (types/responses/response_create_params.py); the write price is the same for both."""
    ttls = typing.get_args(typing.get_type_hints(ResponsesCacheOptions)["ttl"])
    assert {"30m": 1800.0, "12h": 43200.0} == {t: m.lifetime for t, m in zip(ttls, (OPENAI_GPT56, OPENAI_GPT56_12H))}
    assert OPENAI_GPT56_12H.write == OPENAI_GPT56.write
    assert OPENAI_GPT56.is_cold(1801) and not OPENAI_GPT56_12H.is_cold(1801)


def test_breakpoints_per_request() -> None:
    """Four explicit breakpoints per request: OpenAI PromptCacheOptions doc ('Each request can
    write up to four breakpoints', openai 3.63) and Anthropic prompt caching (up to 4
    cache_control blocks); providers that cache by themselves have none to place."""
    assert "prompt_cache_breakpoint" in ResponseInputTextParam.__annotations__
    assert OPENAI_GPT56.breakpoints == ANTHROPIC.breakpoints == ANTHROPIC_1H.breakpoints == 4
    assert OPENAI.breakpoints == 0
    with pytest.raises(ValueError, match="breakpoints"):
        PriceModel("bad", read=0.1, breakpoints=-1)


def test_cold_cache_edit_pays_whatever_the_suffix() -> None:
    """An edit made while the cache is cold (idle past its lifetime) re-bills nothing: nothing
    would be served anyway (issue 25 item 7; Anthropic 5-minute TTL, docs above). Warm, the same
    edit does not pay; unknown idle time counts as warm."""
    args = (100, 10_000, 4)  # saves 100 tokens, re-bills a 10,000-token suffix, 4 calls ahead
    assert not ANTHROPIC.edit_pays(*args)
    assert not ANTHROPIC.edit_pays(*args, idle=200.0)
    assert ANTHROPIC.edit_pays(*args, idle=301.0)
    assert not ANTHROPIC.edit_pays(0, 10_000, 4, idle=301.0)  # nothing saved: no edit
    assert not OPENAI.edit_pays(*args, idle=10**9)  # no lifetime modelled: never cold
