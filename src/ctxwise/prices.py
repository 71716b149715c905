"""Prompt-cache price models: what a model call costs when part of its prefix is cached.

Every provider with a prompt cache bills the input of one call in up to three parts, each as a
multiple of the provider's normal input-token price (so the units are "uncached tokens"):

* ``read``: a token of the prefix the cache serves (a cache hit);
* ``write``: a token not served from the cache but written to it for the next call (providers
  that charge nothing to write bill it as an ordinary input token, 1.0);
* ``miss``: a token of a prompt too short to be cached at all (always 1.0 here).

A prefix shorter than ``min_prefix`` tokens is never cached (it is neither read nor written),
and a hit is counted in whole ``increment``-token steps. :func:`call_cost` applies a model to
one call; :data:`PRICE_MODELS` holds the published defaults per provider, with their sources.
Prices change: the numbers below were checked against the sources named in each entry in
December 2026; override them per policy (``cache_read_price`` and friends in
:class:`~ctxwise.policy.Policy`) when your model's differ.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ANTHROPIC", "DEEPSEEK", "FLAT", "GEMINI", "OPENAI", "PRICE_MODELS", "QWEN", "PriceModel", "price_model"]


@dataclass(frozen=True)
class PriceModel:
    """A provider's prompt-cache prices, each a multiple of its normal input-token price.

    ``read`` (cache hit), ``write`` (a token written to the cache), ``miss`` (a token of a
    prompt below ``min_prefix``, never cached); ``min_prefix`` the shortest cacheable prefix in
    tokens; ``increment`` the step, in tokens, in which hits are counted. ``source`` says where
    the numbers come from. Raises ``ValueError`` for a negative price or size.
    """

    name: str
    read: float
    write: float = 1.0
    miss: float = 1.0
    min_prefix: int = 0
    increment: int = 1
    source: str = ""

    def __post_init__(self) -> None:
        if min(self.read, self.write, self.miss) < 0 or self.min_prefix < 0 or self.increment < 1:
            raise ValueError(f"price model {self.name!r}: prices and sizes must not be negative, increment >= 1")

    def cached_tokens(self, tokens: int, reused: int) -> int:
        """Of a ``tokens``-token prompt whose first ``reused`` tokens repeat the previous
        call's, how many the cache serves: none below ``min_prefix``, else ``reused`` rounded
        down to a multiple of ``increment``."""
        reused = min(reused, tokens)
        if reused < max(self.min_prefix, 1):
            return 0
        return reused - reused % self.increment

    def call_cost(self, tokens: int, reused: int) -> float:
        """The cost of one call in uncached-token units: cached tokens at ``read``; the rest
        at ``write`` when the prompt is long enough to be cached (``min_prefix``), else at
        ``miss``."""
        cached = self.cached_tokens(tokens, reused)
        rest = tokens - cached
        return cached * self.read + rest * (self.write if tokens >= self.min_prefix else self.miss)


FLAT = PriceModel(
    "flat 0.1", read=0.1,
    source="ctxwise's comparison model: every reused token at 0.1, no write premium, no minimum "
           "(the ratio DESIGN.md's cache-adjusted cost uses)")

ANTHROPIC = PriceModel(
    "anthropic", read=0.1, write=1.25, min_prefix=1024,
    source="Anthropic prompt caching (docs.anthropic.com/en/docs/build-with-claude/prompt-caching): "
           "5-minute cache writes cost 1.25x the base input price, cache reads 0.1x; the minimum "
           "cacheable prompt is 1,024 tokens for Claude Sonnet 4.5 / 4 and Opus 4.1 / 4 (2,048 for "
           "Haiku 3.x, 4,096 for Opus 4.5+ and Haiku 4.5). A 1-hour TTL writes at 2x.")

OPENAI = PriceModel(
    "openai", read=0.1, min_prefix=1024, increment=128,
    source="OpenAI prompt caching (platform.openai.com/docs/guides/prompt-caching and the pricing "
           "page, Nov 2026): automatic for prompts of 1,024 tokens or more, hits counted in "
           "128-token increments, no charge to write; cached input is 0.1x on the GPT-5 family "
           "(0.25x GPT-4.1, 0.5x GPT-4o and o-series).")

DEEPSEEK = PriceModel(
    "deepseek", read=0.02, min_prefix=64,
    source="DeepSeek context caching on disk (api-docs.deepseek.com/guides/kv_cache and "
           "/quick_start/pricing): on by default, no write fee, prefixes under 64 tokens are not "
           "cached; cache-hit input is about 2 % of cache-miss input for deepseek-v4-flash "
           "($0.0028 vs $0.14 per 1M tokens; $0.003 vs $0.15 off-peak on V4.1 Flash).")

GEMINI = PriceModel(
    "gemini", read=0.1, min_prefix=2048,
    source="Gemini API implicit caching (ai.google.dev/gemini-api/docs/caching): on by default "
           "for Gemini 2.5 and newer, no write fee, minimum 2,048 input tokens for Gemini 2.5 "
           "Flash / Pro (4,096 for Gemini 3.x); cached tokens are billed at up to a 90 % discount.")

QWEN = PriceModel(
    "qwen", read=0.2, min_prefix=256,
    source="Alibaba Cloud Model Studio context cache (alibabacloud.com/help/en/model-studio/context-cache): implicit "
           "caching bills hit tokens at 20 % of the input price, no write fee, for prompts of at "
           "least 256 tokens (explicit caching: 0.1x read, 1.25x write, 1,024 minimum).")

PRICE_MODELS: dict[str, PriceModel] = {
    "flat": FLAT,
    "openai": OPENAI,
    "openai_responses": OPENAI,
    "anthropic": ANTHROPIC,
    "deepseek": DEEPSEEK,
    "gemini": GEMINI,
    "qwen": QWEN,
}
"""The default price model of each provider profile (and ``flat``, the 0.1 comparison ratio)."""


def price_model(name: str) -> PriceModel:
    """The price model named ``name`` (a provider or ``flat``). Raises ``KeyError`` naming the
    known ones."""
    try:
        return PRICE_MODELS[name]
    except KeyError:
        raise KeyError(f"unknown price model {name!r}; known: {', '.join(PRICE_MODELS)}") from None
