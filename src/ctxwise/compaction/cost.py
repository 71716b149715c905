"""When an edit of the context is free, and what a forced one costs: the stages' side of :mod:`ctxwise.prices`.

The cost model is :mod:`ctxwise.prices`, the one the replay measures with: a prompt cache
serves the longest unchanged prefix of the previous request (:func:`ctxwise.prices.common_prefix`),
so an edit re-bills everything from its first edited message on.

Under ``edit_when="pays"`` (the default) a context under the hard limit is not edited while
the prompt cache is warm. What an optional edit saves depends on how many calls the session
still makes, which is not known; its cache break is certain. A session that ends under the
budget is then sent exactly as no management would send it (``bench/wire_sweep.py`` counts the
calls of such sessions that were edited anyway: a projection of the growth rate a few calls
ahead edited sessions that ended first, on qwen's 0.2 cache-read price in particular). When
the context must shrink, the cut is made deep enough to buy many calls (the low watermark,
``Policy.shrink_calls``) and placed where it re-bills least per unit of room (:func:`cut_cost`).

Time: a prompt cache lives ``PriceModel.lifetime`` seconds unused. When the previous call is
longer ago than that (:func:`idle_seconds`, from message timestamps or ``prepare(now=...)``),
nothing is served from the cache whatever is sent, so an edit re-bills nothing and pays
whenever it saves something (:func:`cold_cache`; Claude Code clears old tool results on idle
for that reason).
"""

from __future__ import annotations

from typing import Any, Sequence

from ..messages import Marker, Message, ThinkingBlock
from ..prices import FLAT, TIMESTAMP_KEY, idle_seconds, message_time, prices_of, time_of

__all__ = ["FLAT_READ", "TIMESTAMP_KEY", "cache_prices", "cold_cache", "cut_cost",
           "idle_seconds", "invalidated_reasoning", "invalidated_reasoning_items", "message_time", "time_of"]

def cold_cache(policy: Any, idle: float | None) -> str | None:
    """Why an edit costs nothing on this call, or None: the cache has gone unused for ``idle``
    seconds, past the price model's ``lifetime`` (:meth:`ctxwise.prices.PriceModel.is_cold`),
    so the whole prompt is written again whatever is sent."""
    prices = prices_of(policy)
    if idle is None or not prices.is_cold(idle):
        return None
    return f"the prompt cache is cold (idle {idle:,.0f} s, past its {prices.lifetime:,.0f} s lifetime): the edit re-bills nothing"

FLAT_READ = FLAT.read
"""The cached-token price used when the policy has no price model (a multiple of a miss)."""


def cache_prices(policy: Any) -> tuple[float, float]:
    """``(read, write)`` prices of a cached and a re-written input token, as multiples of an
    uncached one: those of :func:`ctxwise.prices.prices_of` ``(policy)``."""
    prices = prices_of(policy)
    return float(prices.read), float(prices.write)


def cut_cost(rebilled: int, size_after: int, hard: int) -> float:
    """What a forced cut (the context is over the hard limit) costs per unit of room it buys:
    the suffix it re-bills (``rebilled``: the size from its first edited message to the end,
    after the edit) over the headroom it leaves under ``hard`` (all policy unit). The context
    grows back towards the hard limit at its own pace whatever the cut, so the cut with the
    lower figure pays fewer re-billed tokens per call until the next one; ``inf`` when the
    cut does not bring the context under ``hard``."""
    if size_after > hard:
        return float("inf")
    return rebilled / max(hard - size_after, 1)


def invalidated_reasoning(messages: Sequence[Message], first: int, size_of: Any) -> int:
    """The size (policy unit, by ``size_of``) of the reasoning bound to its prefix that an edit
    at index ``first`` invalidates: the reasoning of every later assistant message whose marker
    holds the prefix it was produced on (``Marker.bound_prefix``, written only when the
    provider binds reasoning). That reasoning is then dropped
    (:mod:`ctxwise.compaction.bound`): the model re-does it, so an edit counts it as re-billed,
    never as saved. 0 on providers that do not bind."""
    return invalidated_reasoning_items(messages, first, size_of)[1]


def invalidated_reasoning_items(messages: Sequence[Message], first: int, size_of: Any) -> tuple[int, int]:
    """``(blocks, size)``: how many reasoning blocks (Anthropic thinking blocks, Responses
    reasoning items) :func:`invalidated_reasoning` counts for an edit at index ``first``, and
    their size (policy unit, by ``size_of``). The provider drops or refuses each of them
    (Responses: "reasoning items ... are dropped" when the prefix before them changed,
    https://platform.openai.com/docs/guides/reasoning; Anthropic: thinking bound to a changed
    prefix, which :mod:`ctxwise.compaction.bound` leaves out)."""
    from .context import sent_view

    blocks = total = 0
    for m in messages[first + 1:]:
        if m.role == "assistant" and m.thinking and Marker.read(m).bound_prefix:
            blocks += sum(1 for x in m.blocks if isinstance(x, ThinkingBlock))
            total += size_of(m) - size_of(sent_view(m))
    return blocks, total
