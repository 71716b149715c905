"""Kind of fault: per-session state that grows with the history and is rewritten on every
append (issue 15, found by a fresh-user check: 5.6 MB of stored state at a 2,000,000-character
budget, 0.4 s per append). The fact book is bounded by MAX_BOOK_CHARS whatever the budget, so
the stored state stops growing once it is full."""

from __future__ import annotations

from ctxwise.core import state_of
import json

from ctxwise import ContextManager, Policy
from ctxwise.memory.session import MAX_BOOK_CHARS


def _say(s, k: int) -> None:
    s.append_openai([{"role": "user", "content": (
        f"My order #W{k:06d} must arrive before 2025-0{k % 9 + 1}-1{k % 9} and cost no more than "
        f"${k}.{k % 100:02d}; customer id C{k * 7:07d}, exactly {k % 5 + 1} items, no more than {k % 3 + 2} steps.")}])
    s.append_openai([{"role": "assistant", "content": "Noted."}])


def test_fact_state_is_bounded_at_a_huge_budget(store_url):
    cm = ContextManager(store_url, Policy.preset("default", budget=2_000_000, unit="chars", provider="openai"))
    s = cm.session("u", "s")
    s.append_openai([{"role": "system", "content": "You are a shop assistant."}])
    sizes = []
    for k in range(180):
        _say(s, k)
        if k in (119, 179):
            sizes.append(len(json.dumps(state_of(s.view, s._deps.size_key))))
    kept = sum(len(ln["text"]) + 3 for ln in s.memory.book._lines())  # as FactBook.prune counts
    assert kept <= MAX_BOOK_CHARS
    assert sizes[1] < 1.15 * sizes[0]  # full: 60 more fact-bearing messages add (almost) nothing
    # the stored state is what a reopen restores
    again = cm.session("u", "s")
    assert json.dumps(state_of(again.view, again._deps.size_key)) == json.dumps(state_of(s.view, s._deps.size_key))
