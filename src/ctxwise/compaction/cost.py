"""Whether an edit of the context pays for itself under a prompt-cache price model.

A prompt cache serves the longest unchanged prefix of the previous request at the cached
(read) price. An edit at position ``i`` makes every token from ``i`` on a miss on the next
call (written to the cache again, at the write price), and from then on the edited suffix is
cached again, now smaller by what the edit ``saved``. So, over the next ``calls`` calls, with
``suffix`` the tokens from the first edited message to the end before the edit::

    no edit:  calls * read * suffix
    edit:     write * (suffix - saved) + (calls - 1) * read * (suffix - saved)

and the edit pays when the second is smaller. Prices are multiples of an uncached input
token (``Policy.prices`` when the policy has a price model: read / write; otherwise a flat
cached ratio of 0.1 and no write premium, the measure ``bench/compare.py`` reports).

How many calls are ahead is not known; :func:`calls_ahead` takes as many as the session has
made so far (assistant messages in the context), capped at ``Policy.edit_horizon`` (4 by
default): an edit must pay back within a few calls, since a break is paid at once and
task-oriented sessions end soon.

That saving is an estimate; the break is certain. So an optional edit is made only when an
edit is coming anyway: :func:`limit_ahead` projects the context over the same calls at the rate
it has grown so far (one huge result left out: an event, not a rate), and when it stays under
the hard limit the session may well end before
any edit is needed (then the edit's break is pure loss, as at 12,000 tokens in
``bench/results/compare.md``, where no call of no management is over the budget). When it
crosses, the break would come within the horizon anyway, and making it now, deeper, saves the
calls in between.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..messages import Message

FLAT_READ = 0.1
"""The cached-token price used when the policy has no price model (a multiple of a miss)."""


def cache_prices(policy: Any) -> tuple[float, float]:
    """``(read, write)`` prices of a cached and a re-written input token, as multiples of an
    uncached one: the policy's price model when it has one, else ``(0.1, 1.0)``."""
    prices = getattr(policy, "prices", None)
    if prices is None:
        return FLAT_READ, 1.0
    return float(prices.read), float(getattr(prices, "write", 1.0))


def calls_ahead(messages: Sequence[Message], policy: Any = None) -> int:
    """The number of model calls an optional edit must pay back within: the calls made so far
    (assistant messages in the context, at least 1), capped at ``policy.edit_horizon``."""
    made = max(1, sum(1 for m in messages if m.role == "assistant"))
    horizon = getattr(policy, "edit_horizon", None)
    return min(made, int(horizon)) if horizon else made


def edit_pays(saved: int, suffix: int, calls: int, policy: Any) -> bool:
    """Whether an edit that makes the context ``saved`` smaller and re-bills ``suffix`` (the
    size from the first edited message to the end, before the edit; policy unit) costs less
    than leaving the context alone over the next ``calls`` calls (see the module doc)."""
    if saved <= 0 or calls <= 0:
        return False
    read, write = cache_prices(policy)
    after = max(suffix - saved, 0)
    return write * after + (calls - 1) * read * after < calls * read * suffix


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
