"""The cost model's prediction for one model call beside the provider's reported cache tokens.

:class:`SentCall` is what a ``prepare()`` sent (and the call before it); :func:`usage_event`
makes the ``cache_usage`` event that puts the reply's reported usage
(:func:`ctxwise.usage.reported_usage`) beside what :mod:`ctxwise.prices` predicted for that
call: the tokens of the payload and how many of them the cache serves (the prefix unchanged
since the previous call, counted by the price model's rule; none when the cache was cold).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..compaction import CompactionEvent
from ..messages import Message
from ..policy import Policy
from ..prices import common_prefix
from ..tokens import Counter
from ..usage import CacheUsage


@dataclass(frozen=True)
class SentCall:
    """One ``prepare()``'s messages as sent (``sent``), the previous call's (``previous``,
    empty for the first), and the seconds the cache had gone unused (``idle``, None: unknown)."""

    previous: Sequence[Message]
    sent: Sequence[Message]
    idle: float | None = None


def predicted_cache(call: SentCall, policy: Policy, counter: Counter) -> tuple[int, int]:
    """``(tokens, cached)`` the cost model predicts for ``call`` in ``counter``'s tokens: the
    payload's size and the part the cache serves under ``policy.prices``
    (:meth:`ctxwise.prices.PriceModel.cached_tokens` of the unchanged prefix; 0 when the
    cache was cold, :meth:`ctxwise.prices.PriceModel.is_cold`)."""
    prices = policy.prices
    tokens = counter.count(list(call.sent))
    if call.idle is not None and prices.is_cold(call.idle):
        return tokens, 0
    k = common_prefix(call.previous, call.sent)
    reused = sum(counter.count_message(m) for m in call.sent[:k])
    return tokens, prices.cached_tokens(tokens, reused)


def usage_event(call: SentCall | None, policy: Policy, counter: Counter, reported: CacheUsage,
                reply_id: str | None, size: int) -> CompactionEvent:
    """The ``cache_usage`` event of one reply: ``detail["reported"]`` the provider's figures
    (:meth:`CacheUsage.as_dict`), ``detail["predicted"]`` ``{"tokens", "cached", "idle",
    "prices"}`` (:func:`predicted_cache`; tokens by ``counter``, the provider's own tokenizer may
    differ; None when ``call`` is None: no ``prepare()`` of this call is known), the trigger
    both in one line. ``size`` (policy unit) is the context's, unchanged."""
    predicted = None
    if call is not None:
        tokens, cached = predicted_cache(call, policy, counter)
        predicted = {"tokens": tokens, "cached": cached, "idle": call.idle, "prices": policy.prices.name}
    why = f"; miss: {reported.miss_reason}" if reported.miss_reason else ""
    if reported.missed_tokens is not None:
        why += f" ({reported.missed_tokens:,} tokens)"
    cached_said = "?" if reported.cached_tokens is None else f"{reported.cached_tokens:,}"
    trigger = (f"reported {cached_said} of {reported.input_tokens:,} input tokens cached"
               + (f", {reported.cache_write_tokens:,} written" if reported.cache_write_tokens is not None else "")
               + (f"; predicted {predicted['cached']:,} of {predicted['tokens']:,}" if predicted else "; no prediction")
               + why)
    return CompactionEvent(
        stage="cache_usage", trigger=trigger, unit=policy.unit, size_before=size, size_after=size,
        affected_ids=[reply_id] if reply_id else [], detail={"reported": reported.as_dict(), "predicted": predicted})
