"""Last resort for the summary: shorten it, then drop it, before the budget is declared exceeded.

A summary is pinned against the ordinary stages, but it is not irreducible: when the hard trim
has removed every old unit and the call still does not fit, the summary is the oldest content
left. This stage (run after the hard trim and the last-resort clearing, before the current
turn's completed cycles are dropped) first cuts the summary's text so the call fits (its header
stays, a note says it was shortened and that the full summary is kept in the store), and when
not even the header fits, hides it (state ``trimmed``). Each is one ``trimming`` event with
``detail["summary"]`` ``"shortened"`` or ``"dropped"``, so
:class:`~ctxwise.errors.ContextBudgetExceeded` is raised only when nothing reducible is left.
"""

from __future__ import annotations

import time

from ..changes import Hide, Replace
from ..messages import Marker, Message, TextBlock
from ..summarizers.base import SUMMARY_HEADER
from .context import Budgeting, StageResult
from .stage import StageInput

SHORTENED_NOTE = ("\n[ctxwise shortened this summary from {total} to {kept} characters to fit the context "
                  "budget; the full summary is kept in the store]")


def fit_summary(messages: list[Message], b: Budgeting, size: int) -> StageResult:
    """Shorten, or else drop, the summary when the size is over the hard limit (policy unit,
    overhead included). Returns one ``Replace`` (state ``cleared``, the original stays in the
    store) or one ``Hide`` (state ``trimmed``), with a ``trimming`` event; nothing when the size
    fits or there is no summary."""
    hard = b.level(b.policy.hard_limit)
    if size <= hard:
        return StageResult(messages)
    found = next((m for m in messages if m.kind == "summary"), None)
    if found is None:
        return StageResult(messages)
    t0 = time.perf_counter()
    own = b.size_of(found)
    room = hard - (size - own)
    trigger = f"last resort: size {size} > hard_limit {hard} with the summary ({own} {b.unit}) left"
    short = _shorten(found, b, room) if room > 0 else None
    if short is not None:
        after = size - own + b.size_of(short)
        ev = b.event("trimming", trigger, size, after, [found.id], t0,
                     detail={"summary": "shortened", "summary_chars": len(short.text)})
        return StageResult(messages, [ev], [Replace(found.id, short, "cleared")])
    ev = b.event("trimming", trigger, size, size - own, [found.id], t0, detail={"summary": "dropped"})
    return StageResult(messages, [ev], [Hide([found.id], "trimmed")])


def _shorten(summary: Message, b: Budgeting, room: int) -> Message | None:
    """``summary`` with its body cut so its size is at most ``room``, or None when even a few
    words of it do not fit (then it is dropped)."""
    text = summary.text
    body = text[len(SUMMARY_HEADER) + 1:] if text.startswith(SUMMARY_HEADER) else text
    ratio = room / max(b.size_of(summary), 1)
    for _ in range(10):
        keep = int(len(body) * ratio) - len(SHORTENED_NOTE) - 20
        if keep < 40:  # a few words of a summary are not worth their header
            return None
        new_text = f"{SUMMARY_HEADER}\n{body[:keep]}" + SHORTENED_NOTE.format(total=len(body), kept=keep)
        new = summary.model_copy(update={"blocks": [TextBlock(text=new_text)],
                                         "metadata": Marker.with_(summary, shortened_from=len(body))})
        if b.size_of(new) <= room:
            return new
        ratio *= 0.8
    return None


class SummaryFitStage:
    """The summary's last resort as a pipeline stage (:func:`fit_summary`)."""

    name = "summary_fit"

    def run(self, inp: StageInput) -> StageResult:
        return fit_summary(inp.messages, inp.budgeting, inp.size)
