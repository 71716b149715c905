"""Cache write prices per lifetime and cache expiry (issue 25 item 7)."""

import pytest

from ctxwise.prices import ANTHROPIC, ANTHROPIC_1H, OPENAI, PriceModel


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
