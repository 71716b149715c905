"""Incremental summaries (issue 11, item 4): a new pass appends a segment; segments roll up
only past ``summary_rollup_share`` of the budget. Measured with the real chars counter.

Kind of fault covered: a summary rewritten whole on every pass, which re-bills the prompt
cache from the first summarized message on every summarizing event.
"""

from __future__ import annotations

from builders import system, tool_turn, user
from ctxwise.compaction import Budgeting, compact
from ctxwise.policy import Policy
from ctxwise.providers import check
from ctxwise.summarizers import DigestSummarizer
from ctxwise.tokens import get_counter

CHARS = get_counter("chars")


def turns(start: int, n: int) -> list:
    out = []
    for k in range(start, start + n):
        out += tool_turn(f"Round {k}: order #W{1000 + k}, refund $1{k}.00?", [("lookup", {"q": k}, f"result {k} " + "x" * 900)],
                         f"Answer {k}: refund of $1{k}.00 for #W{1000 + k} approved.")
    return out


def passes(policy: Policy, n: int) -> list[list]:
    """Compact after each block of 3 new turns; returns the summaries after each pass."""
    b = Budgeting(policy, CHARS)
    ctx = [system()]
    seen = []
    for k in range(n):
        ctx = ctx + turns(3 * k, 3) + [user(f"Next step {k}?")]
        out = compact(ctx, b, DigestSummarizer())
        assert check(out.messages, "openai") == []
        ctx = out.messages
        seen.append([m for m in ctx if m.kind == "summary"])
    return seen


def test_a_new_pass_appends_a_segment_and_earlier_text_stays_byte_identical():
    seen = passes(Policy.preset("default", budget=9_000, keep_tools=["lookup"], summary_rollup_share=0.6), 8)
    grew = [k for k in range(1, len(seen)) if len(seen[k]) > len(seen[k - 1])]
    assert grew, [len(s) for s in seen]
    for k in grew:
        # every earlier segment is still there, unchanged and in the same order
        assert seen[k][: len(seen[k - 1])] == seen[k - 1]
    assert len(seen[-1]) >= 3
    assert all("#W10" in m.text for m in seen[-1])  # each segment keeps its own rounds' ids


def test_segments_roll_up_when_they_outgrow_their_share():
    seen = passes(Policy.preset("default", budget=9_000, keep_tools=["lookup"], summary_rollup_share=0.3,
                                summary_target=0.15), 8)  # segments big enough to outgrow the share in 8 passes
    counts = [len(s) for s in seen]
    assert max(counts) >= 2, counts                      # segments were appended first
    assert any(b < a for a, b in zip(counts, counts[1:])), counts   # then rolled into one
    rolled = seen[-1] if len(seen[-1]) == 1 else next(s for a, s in zip(counts, seen[1:]) if len(s) < a)
    assert "#W1000" in "\n".join(m.text for m in rolled)  # the oldest segment's values survive the roll
    assert all(not m.text.count("[Summary of the earlier") > 1 for m in rolled)  # one header, not pasted segments
