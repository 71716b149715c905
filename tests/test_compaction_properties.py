"""Property tests: generated sessions, many budgets, every provider profile.

For every generated session and budget, ``compact`` either raises ContextBudgetExceeded or
returns a context that (1) passes the provider validator against the input as reference,
(2) fits the hard limit, (3) keeps the input order, (4) keeps every pinned item
byte-identical, and (5) is stable: compacting the output again changes nothing.
"""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxwise.compaction import Budgeting, compact
from ctxwise.compaction.context import pinned_indices
from ctxwise.errors import ContextBudgetExceeded
from ctxwise.messages import ImageBlock, Message, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from ctxwise.policy import Policy
from ctxwise.providers import check
from ctxwise.summarizers import DigestSummarizer
from ctxwise.tokens import get_counter

WORDS = ["order", "#W2378156", "refund", "500 USD", "2025-03-14", "not", "耳机", "没有声音", "退货", "かな", "ok"]
PNG_1x1 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="

text_st = st.lists(st.sampled_from(WORDS), min_size=1, max_size=40).map(" ".join)
body_st = st.integers(min_value=10, max_value=3000)


@st.composite
def sessions(draw):
    """(messages, provider, thinking_on) for a random tool-using session."""
    provider = draw(st.sampled_from(["openai", "deepseek", "anthropic", "qwen"]))
    thinking_on = provider in ("deepseek", "anthropic") and draw(st.booleans())
    ids = itertools.count()
    nid = lambda p: f"{p}{next(ids)}"  # noqa: E731
    msgs = [Message(id=nid("s"), role="system", blocks=[TextBlock(text=draw(text_st))])]

    def assistant(blocks):
        if thinking_on:
            sig = "sig-" + str(next(ids)) if provider == "anthropic" else None
            blocks = [ThinkingBlock(thinking=draw(text_st), signature=sig)] + blocks
        return Message(id=nid("a"), role="assistant", blocks=blocks)

    for _ in range(draw(st.integers(1, 9))):
        msgs.append(Message(id=nid("u"), role="user", blocks=[TextBlock(text=draw(text_st))]))
        for _ in range(draw(st.integers(0, 3))):
            n_par = draw(st.integers(1, 3))
            uses = [ToolUseBlock(id=nid("call_"), name=draw(st.sampled_from(["search", "get_order", "screenshot"])),
                            input={"q": draw(text_st)}) for _ in range(n_par)]
            msgs.append(assistant(list(uses)))
            for u in uses:
                out = [TextBlock(text="r" * draw(body_st) + " " + draw(text_st))]
                if u.name == "screenshot":
                    out.append(ImageBlock(media_type="image/png", data=PNG_1x1))
                state = draw(st.sampled_from(["success", "success", "error"]))
                msgs.append(Message(id=nid("t"), role="tool", blocks=[
                    ToolResultBlock(tool_use_id=u.id, name=u.name, state=state, output=out)]))
        msgs.append(assistant([TextBlock(text=draw(text_st))]))
    if draw(st.booleans()):
        msgs.append(Message(id=nid("u"), role="user", blocks=[TextBlock(text=draw(text_st))]))
    return msgs, provider, thinking_on


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(sessions(), st.integers(min_value=300, max_value=20_000), st.sampled_from(["chars", "o200k_base", "estimate"]),
       st.sampled_from(["default", "ragent"]))
def test_prepared_context_is_valid_within_budget_ordered_and_pinned(session, budget, counter_name, preset):
    msgs, provider, thinking_on = session
    unit = "chars" if counter_name == "chars" else "tokens"
    policy = Policy.preset(preset, budget=budget, unit=unit, tokenizer=counter_name if unit == "tokens" else "o200k_base",
                           provider=provider, clearable_tools=["*"])
    b = Budgeting(policy, get_counter(policy.counter_name))
    try:
        out = compact(msgs, b, DigestSummarizer())
    except ContextBudgetExceeded as e:
        assert e.report.total > b.level(policy.hard_limit)
        return
    ctx = out.messages
    assert check(ctx, provider, reference=msgs, thinking=thinking_on or None) == []
    assert out.size_after <= b.level(policy.hard_limit)
    assert b.size(ctx) == out.size_after
    pos = {m.id: i for i, m in enumerate(msgs)}
    kept = [pos[m.id] for m in ctx if m.id in pos]
    assert kept == sorted(kept)
    by_id = {m.id: m for m in ctx}
    for i in pinned_indices(msgs):
        assert by_id[msgs[i].id] == msgs[i]
    again = compact(ctx, b, DigestSummarizer())
    assert again.events == [] and again.messages == ctx
