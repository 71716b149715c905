"""The cost model: prompt-cache prices, the cached-prefix rule, what calls cost, whether an edit pays.

One model serves both sides of ctxwise: the compaction stages *decide* with it whether an edit
of the context pays (:meth:`PriceModel.edit_pays`, through :mod:`ctxwise.compaction.cost`) and
the replay and the benchmarks *measure* with it what the calls cost (:func:`call_costs`,
:func:`priced_cost`, :func:`floor_cost`). Both use the same :class:`PriceModel` objects (a
policy's :attr:`~ctxwise.policy.Policy.prices`, :data:`FLAT` when there is none) and the same
prefix rule (:func:`common_prefix`): a call's leading messages identical to the previous
call's are what the cache serves, so an edit re-bills everything from its first edited
message on.

Every provider with a prompt cache bills the input of one call in up to three parts, each as a
multiple of the provider's normal input-token price (so the units are "uncached tokens"):

* ``read``: a token of the prefix the cache serves (a cache hit);
* ``write``: a token not served from the cache but written to it for the next call (providers
  that charge nothing to write bill it as an ordinary input token, 1.0);
* ``miss``: a token of a prompt too short to be cached at all (always 1.0 here).

A prefix shorter than ``min_prefix`` tokens is never cached (it is neither read nor written),
and a hit is counted in whole ``increment``-token steps. :func:`call_cost` applies a model to
one call, :meth:`PriceModel.edit_pays` weighs an edit; :data:`PRICE_MODELS` holds the published defaults per provider, with their sources.
Prices change: the numbers below were checked against the sources named in each entry in
December 2026; override them per policy (``cache_read_price`` and friends in
:class:`~ctxwise.policy.Policy`) when your model's differ.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from .messages import fold_on

if TYPE_CHECKING:
    from .messages import Message
    from .tokens import Counter

__all__ = ["ANTHROPIC", "ANTHROPIC_1H", "DEEPSEEK", "FLAT", "GEMINI", "OPENAI", "OPENAI_GPT56", "OPENAI_GPT56_12H",
           "PRICE_MODELS", "QWEN", "CallCost", "Payloads",
           "PriceModel", "TIMESTAMP_KEY", "cache_adjusted_cost", "call_costs", "common_prefix", "floor_cost",
           "idle_seconds", "message_time", "price_model", "prices_of", "priced_cost", "time_of"]


@dataclass(frozen=True)
class PriceModel:
    """A provider's prompt-cache prices, each a multiple of its normal input-token price.

    ``read`` (cache hit), ``write`` (a token written to the cache), ``miss`` (a token of a
    prompt below ``min_prefix``, never cached); ``min_prefix`` the shortest cacheable prefix in
    tokens; ``increment`` the step, in tokens, in which hits are counted. ``source`` says where
    the numbers come from. ``lifetime``: seconds an unused cached prefix lives (0: not
    modelled, never cold; see :meth:`is_cold`). ``breakpoints``: how many explicit cache
    breakpoints one request may write (Anthropic ``cache_control``, OpenAI
    ``prompt_cache_breakpoint``; 0: the provider caches the longest matching prefix by itself,
    no breakpoint to place). Raises ``ValueError`` for a negative price, size or lifetime.
    """

    name: str
    read: float
    write: float = 1.0
    miss: float = 1.0
    min_prefix: int = 0
    increment: int = 1
    source: str = ""
    lifetime: float = 0.0
    breakpoints: int = 0

    def __post_init__(self) -> None:
        if min(self.read, self.write, self.miss) < 0 or self.min_prefix < 0 or self.increment < 1 or self.lifetime < 0 \
                or self.breakpoints < 0:
            raise ValueError(f"price model {self.name!r}: prices, sizes, lifetime and breakpoints must not be "
                             "negative, increment >= 1")

    def is_cold(self, idle: float) -> bool:
        """Whether a cached prefix idle for ``idle`` seconds has expired (``idle`` past
        ``lifetime``); always False when ``lifetime`` is 0 (not modelled)."""
        return self.lifetime > 0 and idle > self.lifetime

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

    def edit_pays(self, saved: int, suffix: int, calls: int, idle: float | None = None) -> bool:
        """Whether an edit that makes the context ``saved`` smaller and re-bills ``suffix`` (the
        size from its first edited message to the end, before the edit; see
        :func:`common_prefix`) costs less than no edit over the next ``calls`` calls.

        The prefix before the edit is served from the cache either way, so only the suffix is
        weighed: left alone it is read from the cache on every call (``calls * read * suffix``);
        edited it is written once, smaller, then read (``write * after + (calls - 1) * read *
        after``, ``after = suffix - saved``). False when nothing is saved or no call is ahead.
        Sizes in any one unit; ``min_prefix`` and ``increment`` play no part (the prompt
        before the suffix is not known here).

        ``idle``: seconds since the cache was last used (None: unknown, taken as warm). When
        the cache is cold (:meth:`is_cold`) nothing is served whatever is sent, so the edit
        re-bills nothing: it pays whenever it saves something and a call is ahead."""
        if saved <= 0 or calls <= 0:
            return False
        if idle is not None and self.is_cold(idle):
            return True
        after = max(suffix - saved, 0)
        return self.write * after + (calls - 1) * self.read * after < calls * self.read * suffix


FLAT = PriceModel(
    "flat 0.1", read=0.1,
    source="ctxwise's comparison model: every reused token at 0.1, no write premium, no minimum "
           "(the ratio of the cache-adjusted cost, ARCHITECTURE.md 'Measures')")

ANTHROPIC = PriceModel(
    "anthropic", read=0.1, write=1.25, min_prefix=1024,
    source="Anthropic prompt caching (docs.anthropic.com/en/docs/build-with-claude/prompt-caching): "
           "5-minute cache writes cost 1.25x the base input price, cache reads 0.1x; the minimum "
           "cacheable prompt is 1,024 tokens for Claude Sonnet 4.5 / 4 and Opus 4.1 / 4 (2,048 for "
           "Haiku 3.x, 4,096 for Opus 4.5+ and Haiku 4.5). A 1-hour TTL writes at 2x. Up to 4 "
           "cache_control breakpoints per request; the TTL values are "
           "anthropic.types.CacheControlEphemeralParam.ttl '5m' | '1h'.",
    lifetime=300.0, breakpoints=4)

ANTHROPIC_1H = PriceModel(
    "anthropic 1h", read=0.1, write=2.0, min_prefix=1024, lifetime=3600.0,
    source="Anthropic prompt caching (docs.anthropic.com/en/docs/build-with-claude/prompt-caching): "
           "with cache_control ttl '1h' cache writes cost 2x the base input price, reads 0.1x; "
           "same minimum cacheable prompt and breakpoints as the 5-minute cache.",
    breakpoints=4)

OPENAI = PriceModel(
    "openai", read=0.1, min_prefix=1024, increment=128,
    source="OpenAI prompt caching (platform.openai.com/docs/guides/prompt-caching and the pricing "
           "page, Nov 2026): automatic for prompts of 1,024 tokens or more, hits counted in "
           "128-token increments, no charge to write; cached input is 0.1x on the GPT-5 family "
           "(0.25x GPT-4.1, 0.5x GPT-4o and o-series). Models before the GPT-5.6 family; see "
           "OPENAI_GPT56 for the gpt-5.6 family.")

OPENAI_GPT56 = PriceModel(
    "openai gpt-5.6", read=0.1, write=1.25, min_prefix=1024, increment=128, lifetime=1800.0, breakpoints=4,
    source="OpenAI prompt caching guide (developers.openai.com/api/docs/guides/prompt-caching, Dec 2026): "
           "for GPT-5.6 models and later families cache writes cost 1.25x the uncached input rate "
           "(reported as cache_write_tokens), cached reads 0.1x (cached_tokens); prompts of 1,024 "
           "tokens or more, implicit hits in 128-token steps. openai 3.63 types "
           "responses/response_create_params.py PromptCacheOptions: ttl '30m' (the default) | "
           "'12h', the minimum lifetime of every breakpoint the request writes; up to four "
           "breakpoints written per request (content-part prompt_cache_breakpoint "
           "{'mode': 'explicit'}, whose boundary is not rounded to a token block).")

OPENAI_GPT56_12H = PriceModel(
    "openai gpt-5.6 12h", read=0.1, write=1.25, min_prefix=1024, increment=128, lifetime=43200.0, breakpoints=4,
    source="As OPENAI_GPT56 with prompt_cache_options.ttl '12h' (openai 3.63 "
           "responses/response_create_params.py PromptCacheOptions.ttl; usage reports it in "
           "input_tokens_details.cache_write_tokens_details.ttl_12h_tokens); Responses API only "
           "(chat/completion_create_params.py PromptCacheOptions.ttl is '30m' alone); the guide names one "
           "write price, 1.25x, for the gpt-5.6 family whatever the TTL.")

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
    "openai_gpt56": OPENAI_GPT56,
    "openai_gpt56_12h": OPENAI_GPT56_12H,
    "anthropic": ANTHROPIC,
    "anthropic_1h": ANTHROPIC_1H,
    "deepseek": DEEPSEEK,
    "gemini": GEMINI,
    "qwen": QWEN,
}
"""The default price model of each provider profile (and ``flat``, the 0.1 comparison ratio),
and the models a policy may name instead (``price_model``): ``openai_gpt56`` /
``openai_gpt56_12h`` (the gpt-5.6 family's write price and lifetimes) and ``anthropic_1h``."""


def price_model(name: str) -> PriceModel:
    """The price model named ``name`` (a provider or ``flat``). Raises ``KeyError`` naming the
    known ones."""
    try:
        return PRICE_MODELS[name]
    except KeyError:
        raise KeyError(f"unknown price model {name!r}; known: {', '.join(PRICE_MODELS)}") from None


def prices_of(policy: Any = None) -> PriceModel:
    """The price model edits are weighed with: ``policy.prices`` (a
    :class:`~ctxwise.policy.Policy`'s model, overrides applied), or :data:`FLAT` when
    ``policy`` is None or has no ``prices``."""
    prices = getattr(policy, "prices", None)
    return prices if isinstance(prices, PriceModel) else FLAT


# -- measuring calls: the same model and prefix rule, over recorded payloads ----------------------

Payloads = Sequence[Sequence["Message"]]
"""One prepared message list per model call, in call order."""


def common_prefix(previous: Sequence[Message], current: Sequence[Message]) -> int:
    """How many leading messages of ``current`` are identical to ``previous``'s (same id and
    same content, i.e. equal canonical JSON). A prompt cache can serve exactly these; an edit
    re-bills every message from the first one that differs."""
    n = 0
    for a, b in zip(previous, current):
        if a is not b and a.fingerprint() != b.fingerprint():
            break
        n += 1
    return n


@dataclass(frozen=True)
class CallCost:
    """The cost of one call: ``tokens`` sent, of which ``cached`` in the reused prefix, and
    ``cost`` = ``cached * ratio + (tokens - cached)`` (the flat model at the call's ratio)."""

    tokens: int
    cached: int
    cost: float


def call_costs(payloads: Payloads, counter: Counter, cache_ratio: float = 0.1) -> list[CallCost]:
    """The :class:`CallCost` of every call: ``counter.count`` of the payload, its
    :func:`common_prefix` with the previous payload as the cached part, priced by the flat
    model at ``cache_ratio`` (:data:`FLAT` at 0.1). The first call has nothing cached.
    Raises ``ValueError`` when ``cache_ratio`` is not between 0 and 1."""
    if not 0 <= cache_ratio <= 1:
        raise ValueError(f"cache_ratio must be between 0 and 1, got {cache_ratio}")
    flat = FLAT if cache_ratio == FLAT.read else PriceModel(f"flat {cache_ratio}", read=cache_ratio)
    out: list[CallCost] = []
    previous: Sequence[Message] = ()
    for p in payloads:
        tokens = counter.count(p)
        k = common_prefix(previous, p)
        cached = sum(counter.count_message(m) for m in p[:k])
        out.append(CallCost(tokens, cached, flat.call_cost(tokens, cached)))
        previous = p
    return out


def cache_adjusted_cost(payloads: Payloads, counter: Counter, cache_ratio: float = 0.1) -> float:
    """Input tokens priced with a prompt cache: cached prefix tokens at ``cache_ratio``, the
    rest at 1 (the sum of :func:`call_costs`)."""
    return sum(c.cost for c in call_costs(payloads, counter, cache_ratio))


def priced_cost(costs: Iterable[CallCost], prices: PriceModel) -> float:
    """The calls of :func:`call_costs` priced under ``prices`` (``CallCost.cached`` is the
    reused prefix; the model decides how much of it the cache serves and what a write costs).
    In uncached-token units; :data:`FLAT` gives back the 0.1-ratio cost."""
    return sum(prices.call_cost(c.tokens, c.cached) for c in costs)


def floor_cost(history_tokens: Sequence[int], budget: float | Sequence[float], prices: PriceModel = FLAT) -> float:
    """The reference F(B) of one conversation (ARCHITECTURE.md, "Measures"), in uncached-token units.

    ``history_tokens[t]`` is H_t, the tokens of the full history as sent at call t (what no
    management sends); ``budget`` B in the same tokens, or one B per call. With n_t = H_t -
    H_(t-1) the tokens new since the previous call, S_t = min(H_t, B) and m_t = min(n_t, S_t),
    the reference call t sends S_t tokens of which S_t - m_t repeat the previous call's prefix:
    every token is billed once in full when new and cached afterwards, and what does not fit
    falls off the front for free. Each call is priced by ``prices`` like a real one, so under
    :data:`FLAT` F(B) = sum_t [m_t + 0.1 (S_t - m_t)]. Raises ``ValueError`` when a list of
    budgets does not have one entry per call.
    """
    budgets = [float(budget)] * len(history_tokens) if isinstance(budget, (int, float)) else list(budget)
    if len(budgets) != len(history_tokens):
        raise ValueError(f"one budget per call needed, got {len(budgets)} for {len(history_tokens)} calls")
    total = 0.0
    previous = 0
    for h, b in zip(history_tokens, budgets):
        n = max(h - previous, 0)
        s = min(h, b)
        m = min(n, s)
        total += prices.call_cost(int(s), int(s - m))
        previous = h
    return total


# -- time: how long the cache has gone unused -----------------------------------------------------

TIMESTAMP_KEY = "timestamp"
"""The ``Message.metadata`` key holding when a message was made (ISO 8601 text, epoch
seconds, or a ``datetime``; the recorded formats keep theirs there)."""


def time_of(value: object) -> float | None:
    """``value`` as epoch seconds: a number as is, a ``datetime`` or ISO 8601 text (a ``Z``
    suffix allowed) converted, read as UTC when it names no zone; None for anything else (no
    time known). Booleans are not times."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            return None
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).timestamp()
    return None


def message_time(m: Message) -> float | None:
    """When ``m`` was made, epoch seconds (:func:`time_of` of ``metadata["timestamp"]``), or
    None when it carries no readable time."""
    return time_of(m.metadata.get(TIMESTAMP_KEY)) if m.metadata else None


def _newest(newest: float | None, _: int, m: Message) -> float | None:
    """One message of the fold that finds the newest :func:`message_time` of a list."""
    t = message_time(m)
    return t if newest is None or (t is not None and t > newest) else newest


def newest_time(messages: Sequence[Message]) -> float | None:
    """The newest :func:`message_time` among ``messages`` (epoch seconds), None when none
    carries a readable time; a left fold resumed from the last list this one extends."""
    return fold_on(messages, "prices/newest", None, None, _newest)


def idle_seconds(messages: Sequence[Message], now: float | None = None, last_call: float | None = None) -> float | None:
    """Seconds the prompt cache has gone unused at the call about to be made: from the
    previous model call (the latest assistant message's timestamp, else ``last_call``: when
    the previous ``prepare`` said it ran) to ``now`` (else the newest timestamp among the
    messages). None when either end is unknown or there is no previous call; never negative."""
    last = next((m for m in reversed(messages) if m.role == "assistant"), None)
    if last is None:
        return None
    then = message_time(last)
    if then is None:
        then = last_call
    if now is None:
        now = newest_time(messages)
    if then is None or now is None:
        return None
    return max(0.0, now - then)
