"""When an edit of the context pays for itself: the stages' side of :mod:`ctxwise.prices`.

The cost model is :mod:`ctxwise.prices`, the one the replay measures with: a prompt cache
serves the longest unchanged prefix of the previous request (:func:`ctxwise.prices.common_prefix`),
so an edit re-bills everything from its first edited message on (the ``suffix``), and
:meth:`ctxwise.prices.PriceModel.edit_pays` weighs that against what the edit saves over the
calls ahead, under the policy's price model (``Policy.prices``; :data:`ctxwise.prices.FLAT`
without a policy). This module adds what the stages must guess.

How many calls are ahead is not known; :func:`calls_ahead` takes as many as the session has
made so far (assistant messages in the context), capped at ``Policy.edit_horizon`` (4 by
default): an edit must pay back within a few calls, since a break is paid at once and
task-oriented sessions end soon.

That saving is an estimate; the break is certain. So an optional edit is made only when an
edit is coming anyway: :func:`limit_ahead` projects the context over the same calls at the rate
it has grown so far (one huge result left out: an event, not a rate), and when it stays under
the hard limit the session may well end before any edit is needed (then the edit's break is
pure loss). When it crosses, the break would come within the horizon anyway, and making it
now, deeper, saves the calls in between.

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

__all__ = ["FLAT_READ", "TIMESTAMP_KEY", "cache_prices", "calls_ahead", "cold_cache", "cut_cost", "edit_pays",
           "idle_seconds", "invalidated_reasoning", "invalidated_reasoning_items", "limit_ahead", "message_time", "time_of"]

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


def calls_ahead(messages: Sequence[Message], policy: Any = None) -> int:
    """The number of model calls an optional edit must pay back within: the calls made so far
    (assistant messages in the context, at least 1), capped at ``policy.edit_horizon``."""
    made = max(1, sum(1 for m in messages if m.role == "assistant"))
    horizon = getattr(policy, "edit_horizon", None)
    return min(made, int(horizon)) if horizon else made


def edit_pays(saved: int, suffix: int, calls: int, policy: Any, idle: float | None = None) -> bool:
    """Whether an edit that makes the context ``saved`` smaller and re-bills ``suffix`` (the
    size from the first edited message to the end, before the edit; policy unit) costs less
    than leaving the context alone over the next ``calls`` calls, under the policy's price
    model (:meth:`ctxwise.prices.PriceModel.edit_pays`); ``idle`` seconds since the previous
    call (None: unknown, taken as warm)."""
    return prices_of(policy).edit_pays(saved, suffix, calls, idle)


def limit_ahead(size: int, grown: int, made: int, calls: int, hard: int) -> bool:
    """Whether a context of ``size`` that has grown by ``grown`` over the ``made`` model calls
    so far (policy unit) would pass ``hard`` within the next ``calls`` calls at that rate (see
    the module doc: an optional edit is made only when an edit is coming anyway)."""
    rate = grown / max(1, made)
    return size + rate * calls > hard


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
