"""Trimming down to ``trim_target`` ("cut deep once") and the ``lean`` preset built on it.

Kind of fault covered: a hard trim that drops the shortest run that fits leaves the context at
the limit, so the next call trims again and re-bills the whole suffix after the system prompt
on nearly every call (issue 11: the prompt cache is re-billed by each cut). A trim to a lower
target drops more at once and the following calls append to an unchanged prefix.
"""

from __future__ import annotations

import pytest

from builders import assistant, results, system, tool_turn, user
from ctxwise.compaction import Budgeting, compact
from ctxwise.errors import PolicyError
from ctxwise.policy import Policy
from ctxwise.providers import check
from ctxwise.summarizers import DigestSummarizer
from ctxwise.tokens import get_counter

CHARS = get_counter("chars")


def old_turns(n: int, body: int = 300) -> list:
    out = []
    for k in range(n):
        out += tool_turn(f"Round {k}: order #W{k}?", [("lookup", {"order": k}, f"order {k} " + "x" * body)],
                         f"Order #W{k} is on its way. " + "a" * 100)
    return out


def grow(ctx: list, b: Budgeting, calls: int) -> list[int]:
    """Append small turns one call at a time; the number of trimming events on each call."""
    fired = []
    for k in range(calls):
        ctx = ctx + [assistant(f"Reply {k}. " + "r" * 60), user(f"Follow-up {k}: " + "q" * 60)]
        out = compact(ctx, b, DigestSummarizer())
        fired.append(sum(e.stage == "trimming" for e in out.events))
        ctx = out.messages
    return fired


@pytest.mark.parametrize("turns,body,budget", [(9, 300, 4_000), (14, 120, 3_000), (6, 900, 5_500)])
def test_a_deep_trim_is_not_followed_by_a_trim_on_the_next_calls(turns, body, budget):
    ctx = [system()] + old_turns(turns, body) + [user("Next step?")]
    shallow = Budgeting(Policy.preset("default", budget=budget, summarize=False, clearable_tools=[]), CHARS)
    deep = Budgeting(Policy.preset("default", budget=budget, summarize=False, clearable_tools=[], trim_target=0.0), CHARS)
    assert shallow.size(ctx) > shallow.level(1.0)
    a, z = compact(ctx, shallow, DigestSummarizer()), compact(ctx, deep, DigestSummarizer())
    assert a.size_after <= shallow.level(1.0) and z.size_after <= deep.level(1.0)
    # deep: every old turn went at once, the kept window is the system prompt and the input
    assert [m.kind or m.role for m in z.messages] == ["system", "user"]
    assert not check(z.messages, "openai", reference=ctx)
    # shallow: the window is left near the limit and the next small turns trim again
    assert sum(grow(a.messages, shallow, 8)) >= 1
    assert sum(grow(z.messages, deep, 8)) == 0


def test_a_deep_trim_inside_one_long_turn_drops_the_completed_cycles_at_once():
    # One turn of many tool cycles (no old turn to drop): the last resort drops the current
    # turn's completed cycles down to the target, never the in-flight one.
    ctx = [system(), user("Check every order.")]
    for k in range(8):
        a = assistant(calls=[("lookup", {"order": k})])
        ctx += [a, *results(a, [f"order {k} " + "x" * 500])]
    for target, left in ((None, None), (0.0, 1)):
        b = Budgeting(Policy.preset("default", budget=3_000, summarize=False, clearable_tools=[],
                                    **({} if target is None else {"trim_target": target})), CHARS)
        out = compact(ctx, b, DigestSummarizer())
        cycles = sum(1 for m in out.messages if m.role == "assistant")
        assert out.size_after <= b.level(1.0) and out.messages[-1].id == ctx[-1].id
        if left is None:
            assert cycles > 1  # the shortest drop that fits keeps some completed cycles
        else:
            assert cycles == left  # only the in-flight cycle is left


def test_trim_target_above_the_hard_limit_is_a_policy_error():
    with pytest.raises(PolicyError, match="trim_target"):
        Policy(trim_target=1.2)
    assert Policy(trim_target=0.5, hard_limit=0.9).trim_target == 0.5


def test_the_lean_preset_restarts_small_when_something_must_go():
    # lean: old turns are dropped whole and all at once (no summary, no clearing), so the
    # context restarts at the current turn and the next calls do not cut again.
    b = Budgeting(Policy.preset("lean", budget=4_000), CHARS)
    ctx = [system()] + old_turns(9) + [user("Next step?")]
    assert b.size(ctx) > b.level(1.0)
    out = compact(ctx, b, DigestSummarizer())
    assert [m.kind or m.role for m in out.messages] == ["system", "user"]
    assert {e.stage for e in out.events} == {"trimming"}
    assert sum(grow(out.messages, b, 4)) == 0
