"""Clearing only when it pays (issue 11, item 2), measured with the real chars counter.

Kind of fault covered: an edit that re-bills the prompt cache for less than it saves (clearing
below the hard limit when no costlier stage fires and the batch does not pay), and clearing
that re-fires every call because its target lies below what it can never remove.
"""

from __future__ import annotations

from builders import assistant, results, system, tool_turn, user
from ctxwise.compaction import Budgeting, clear_tool_results, compact
from ctxwise.compaction.clearing import growth_so_far
from ctxwise.compaction.cost import calls_ahead, edit_pays, limit_ahead
from ctxwise.policy import Policy
from ctxwise.summarizers import DigestSummarizer
from ctxwise.tokens import get_counter

CHARS = get_counter("chars")


def budgeting(**kw) -> Budgeting:
    return Budgeting(Policy.preset("default", **kw), CHARS)


def two_turns_then_a_tool_loop(body: int = 500) -> list:
    """Two answered turns with one tool result each and long answers, then a current turn in
    flight: clearing saves the two results but re-bills the long answers after them."""
    msgs = [system()]
    for k in range(2):
        msgs += tool_turn(f"Round {k}: order #W{k} status?", [("lookup", {"order": k}, f"order {k} " + "x" * body)],
                          f"Order {k} is on its way. " + "w" * 1200)
    msgs.append(user("And the third order?"))
    a = assistant(calls=[("lookup", {"order": 2})])
    msgs += [a, *results(a, ["order 2 " + "y" * 300])]
    return msgs


def test_edit_pays_weighs_the_saving_over_the_calls_ahead_against_the_rebilled_suffix():
    p = Policy.preset("default")
    # cached at 0.1: saving 100 of a 1,000 suffix re-bills 900 at full price; 100 x 0.1 per call
    assert not edit_pays(100, 1000, 10, p)
    # nearly the whole suffix goes: 50 re-billed, 950 x 0.1 saved per call
    assert edit_pays(950, 1000, 3, p)
    assert not edit_pays(0, 1000, 100, p)


def test_optional_clearing_does_not_fire_when_no_summary_is_due_and_it_does_not_pay():
    msgs = two_turns_then_a_tool_loop()
    b = budgeting(budget=6_000, keep_recent_cycles=1)
    size = b.size(msgs)
    assert b.level(0.5) < size < b.level(0.8)  # above clear_at, below summarize_at, mid-turn
    out = clear_tool_results(msgs, b, size)
    assert out.events == [] and out.messages is msgs
    # Ragent's rule (edit_when="watermark") clears the same context: the decision, not the
    # eligibility, is what changed.
    wb = budgeting(budget=6_000, keep_recent_cycles=1, edit_when="watermark")
    assert [e.stage for e in clear_tool_results(msgs, wb, size).events] == ["clearing"]


def a_long_session_with_a_manual(manual: int, answer_pad: int) -> list:
    """Twelve short answered rounds (answers padded by ``answer_pad`` characters), then a
    manual of ``manual`` characters loaded, and a tool loop in flight."""
    msgs = [system()]
    for k in range(12):
        msgs += tool_turn(f"Round {k}: order #W{k} status?", [("lookup", {"order": k}, f"order {k} short")],
                          f"Order {k} is fine. " + "v" * answer_pad)
    big = assistant(calls=[("manual", {"part": "all"})])
    msgs += [user("Load the manual."), big, *results(big, ["manual " + "z" * manual]), assistant("Loaded."),
             user("Thanks."), assistant("You are welcome."), user("One more: the warranty?")]
    a = assistant(calls=[("warranty", {})])
    msgs += [a, *results(a, ["warranty: 2 years"])]
    return msgs


def test_optional_clearing_fires_when_it_pays():
    # After many calls the saving is repaid many times over, and the context grows steadily
    # enough to pass the hard limit within the calls ahead: the edit is coming anyway.
    msgs = a_long_session_with_a_manual(1_700, 100)
    # An agent known to run long (edit_horizon raised): the saving is repaid over the calls ahead.
    b = budgeting(budget=7_000, keep_recent_cycles=1, edit_horizon=50)
    size = b.size(msgs)
    assert b.level(0.5) < size < b.level(0.8) and calls_ahead(msgs, b.policy) > 12
    out = clear_tool_results(msgs, b, size)
    assert [e.stage for e in out.events] == ["clearing"]
    assert "saving over the calls ahead" in out.events[0].trigger
    # The default horizon caps the calls ahead at 4, however long the session has run.
    d = budgeting(budget=7_000, keep_recent_cycles=1)
    assert calls_ahead(msgs, d.policy) == d.policy.edit_horizon == 4


def test_one_huge_result_is_an_event_not_a_growth_rate():
    # Kind of fault: an optional clearing forecast from one huge tool result, in a session
    # that grows slowly otherwise and may end before the hard limit (bench/compare.py at
    # 12,000 tokens: no management never passes the budget, yet a 5,000-token result made
    # the average rate cross it). A step over a quarter of the hard limit is left out of the
    # rate; the same saving with a steady rate that crosses still fires (test above).
    b = budgeting(budget=7_000, keep_recent_cycles=1, edit_horizon=50)
    hard = b.level(1.0)
    slow = a_long_session_with_a_manual(3_000, 0)
    size = b.size(slow)
    assert b.level(0.5) < size < b.level(0.8)
    grown, calls = growth_so_far(slow, b, hard)
    assert calls == calls_ahead(slow, b.policy) - 1  # the manual's call is left out with it
    assert not limit_ahead(size, grown, calls, calls_ahead(slow, b.policy), hard)
    # counted in, the manual alone would make the average rate cross the limit
    assert limit_ahead(size, *growth_so_far(slow, b, 10**9), calls_ahead(slow, b.policy), hard)
    assert clear_tool_results(slow, b, size).events == []
    # The watermark rule (Ragent's) clears it: the forecast, not the eligibility, decides.
    wb = budgeting(budget=7_000, keep_recent_cycles=1, edit_horizon=50, edit_when="watermark")
    assert [e.stage for e in clear_tool_results(slow, wb, size).events] == ["clearing"]


def test_an_optional_clear_of_an_early_result_must_pay_back_within_the_horizon():
    # An early large result under a long suffix: clearing saves ~half of the suffix, which the
    # flat prices repay only after ~10 calls. With the session's own length as the horizon it
    # fires; within the default horizon (4 calls) it does not: nothing is edited.
    msgs = [system()]
    big = assistant(calls=[("manual", {"part": "all"})])
    msgs += [user("Load the manual."), big, *results(big, ["manual " + "z" * 2400]), assistant("Loaded.")]
    for k in range(14):
        msgs += tool_turn(f"Round {k}: order #W{k} status?", [("lookup", {"order": k}, f"order {k} short")],
                          f"Order {k} is fine. " + "v" * 120)
    msgs.append(user("One more: the warranty?"))
    long = budgeting(budget=7_000, keep_recent_cycles=1, edit_horizon=1000)
    size = long.size(msgs)
    assert long.level(0.5) < size < long.level(0.8)
    assert [e.stage for e in clear_tool_results(msgs, long, size).events] == ["clearing"]
    assert clear_tool_results(msgs, budgeting(budget=7_000, keep_recent_cycles=1), size).events == []


def test_the_cut_over_the_hard_limit_reaches_its_target_and_does_not_refire():
    start = [system()]
    for k in range(4):
        start += tool_turn(f"Round {k}: order #W{k}?", [("lookup", {"order": k}, f"order {k} " + "x" * 1400)], f"Answer {k}.")
    start.append(user("next"))
    # Clearing alone (no summary to choose instead): it reaches its target; and by default,
    # whichever cut is cheaper: either way small follow-ups edit nothing.
    for b, stages in ((budgeting(budget=5_500, keep_recent_cycles=1, summarize=False), {"clearing"}),
                      (budgeting(budget=5_500, keep_recent_cycles=1), {"clearing", "summarizing"})):
        assert b.size(start) > b.level(1.0)
        out = compact(start, b, DigestSummarizer())
        assert out.events and out.events[0].stage in stages
        cuts = [e for e in out.events if e.stage == out.events[0].stage]
        if cuts[0].stage == "clearing":
            assert "hard limit is crossed" in cuts[0].trigger
            assert cuts[0].size_after <= cuts[0].detail["target"]
        ctx = out.messages
        for k in range(3):
            ctx = ctx + [assistant(f"Reply {k}."), user(f"small follow-up {k}")]
            again = compact(ctx, b, DigestSummarizer())
            assert again.events == [], (stages, k)
            ctx = again.messages


def test_nothing_is_edited_between_the_watermarks_when_no_edit_pays():
    # Above summarize_at at a turn boundary, under the hard limit: the context fits, so neither
    # a summary nor the clearing before it fires (the watermark rule would do both).
    b = budgeting(budget=9_000, keep_recent_cycles=1)
    ctx = [system()]
    for k in range(4):
        ctx += tool_turn(f"Round {k}: order #W{k}?", [("lookup", {"order": k}, f"order {k} " + "x" * 1400)], f"Answer {k}. " + "w" * 600)
    ctx.append(user("next"))
    assert b.level(0.8) < b.size(ctx) <= b.level(1.0)
    assert compact(ctx, b, DigestSummarizer()).events == []
    wb = budgeting(budget=9_000, keep_recent_cycles=1, edit_when="watermark")
    assert compact(ctx, wb, DigestSummarizer()).events != []


def test_a_small_batch_is_held_back_above_summarize_at_too():
    # Only one short result is eligible: clearing it saves under clear_min_batch of the
    # budget, so it is not worth a cache break even with a summary due (the summary cuts more).
    msgs = [system("s" * 2000)]
    msgs += tool_turn("Round 0: order #W0?", [("lookup", {"order": 0}, "order 0 " + "x" * 400)], "Answer 0. " + "a" * 2000)
    msgs += tool_turn("Round 1: order #W1?", [("lookup", {"order": 1}, "order 1 ok")], "Answer 1. " + "b" * 2000)
    msgs.append(user("next"))
    b = budgeting(budget=8_000, keep_recent_cycles=1)
    size = b.size(msgs)
    assert size > b.level(0.8)
    out = clear_tool_results(msgs, b, size)
    assert out.events == []


def _slow_session(system_chars: int, turns: int, big: int) -> list:
    """A long-running session whose context grows slowly: short answered turns, one large
    result in the middle, the current input last."""
    msgs = [system("s" * system_chars)]
    for k in range(turns):
        msgs += tool_turn(f"Round {k}: order #W{k}?", [("lookup", {"order": k}, f"order {k} ok")], f"Order {k} is fine.")
        if k == turns // 2:
            a = assistant(calls=[("manual", {"part": "all"})])
            msgs += [user("Load the manual."), a, *results(a, ["manual " + "z" * big]), assistant("Loaded.")]
    msgs.append(user("One more question."))
    return msgs


def _projected(msgs: list, hard: int, calls: int = 4) -> float:
    """The context's size (chars) after ``calls`` more calls at the rate it grew so far: each
    call's step (its assistant message and the inputs after it, from the first question on),
    a step over a quarter of ``hard`` (one huge result) left out with its call."""
    size = CHARS.count(msgs)
    steps: list[int] = []
    for m in msgs[2:]:  # after the system prompt and the first question
        if m.role == "assistant":
            steps.append(0)
        steps[-1] += CHARS.count([m])
    kept = [x for x in steps if x <= hard // 4]
    return size + calls * sum(kept) / len(kept)


SHAPES = ((1_500, 12, 3_000), (4_000, 20, 4_000), (500, 8, 2_500), (300, 30, 6_000))


def test_a_paying_clear_waits_while_the_context_will_not_reach_the_hard_limit():
    # The batch would pay back within the horizon, but at the rate the context has grown it
    # stays under the hard limit over those calls: the session may end before any edit is
    # needed, so nothing is edited (12,000 tokens in bench/results/compare.md: no call of
    # "no management" is over the budget, and the one clearing there lost money).
    for shape in SHAPES:
        msgs = _slow_session(*shape)
        size = CHARS.count(msgs)
        budget = int(size / 0.55)
        b = budgeting(budget=budget, keep_recent_cycles=1)
        assert b.size(msgs) == size and b.level(0.5) < size < b.level(0.8) and _projected(msgs, budget) < budget, shape
        # the batch the watermark rule makes pays for itself within the default horizon
        w = clear_tool_results(msgs, budgeting(budget=budget, keep_recent_cycles=1, edit_when="watermark"), size)
        first = min(i for i, m in enumerate(msgs) if m.id in w.events[0].affected_ids)
        suffix = sum(b.size_of(m) for m in msgs[first:])
        assert edit_pays(size - w.events[0].size_after, suffix, calls_ahead(msgs, b.policy), b.policy), shape
        out = clear_tool_results(msgs, b, size)
        assert out.events == [] and out.messages is msgs, shape
        assert compact(msgs, b, DigestSummarizer()).events == [], shape
        # Under a budget the context would pass within the default 4 calls at its rate so
        # far (under the hard limit now), the break is coming anyway: it is taken now, deep.
        budget = int((size + _projected(msgs, size)) / 2)
        b = budgeting(budget=budget, keep_recent_cycles=1)
        assert b.level(0.5) < size < budget < _projected(msgs, budget), shape
        out = clear_tool_results(msgs, b, size)
        assert [e.stage for e in out.events] == ["clearing"], shape
        assert "saving over the calls ahead" in out.events[0].trigger


def _stages(msgs, b):
    return [e.stage for e in compact(msgs, b, DigestSummarizer(), size=b.size(msgs)).events]


def test_over_the_hard_limit_a_summary_is_chosen_when_clearing_would_rebill_more_per_unit_of_room():
    """Over the hard limit, clearing old results deep in the history re-bills everything after
    the oldest one and leaves little room (long answers cannot be cleared); folding the old
    turns into a summary re-bills only the summary and what follows its cut, for more room."""
    msgs = [system()]
    for k in range(6):
        msgs += tool_turn(f"Round {k}: order #W{k} status?", [("lookup", {"order": k}, f"order {k} " + "x" * 400)],
                          f"Order {k} is on its way. " + "w" * 900)
    msgs.append(user("And the next order?"))
    b = budgeting(budget=8_000)
    assert b.size(msgs) > b.level(1.0)
    assert _stages(msgs, b)[0] == "summarizing"
    # Ragent's rule (edit_when="watermark") keeps the old order: clearing first.
    assert _stages(msgs, budgeting(budget=8_000, edit_when="watermark"))[0] == "clearing"


def test_over_the_hard_limit_clearing_stays_when_it_is_the_cheaper_cut():
    """Plain dialogue, then one tool turn whose first result is large: clearing that result
    re-bills only what follows it in its own turn and frees most of the overflow, while a
    summary would re-bill itself for the dialogue it folds."""
    msgs = [system()]
    for k in range(8):
        msgs += [user(f"Question {k} about the policy?"), assistant(f"Answer {k}: " + "w" * 500)]
    msgs += tool_turn("Look up order #W9 and its items.",
                      [("lookup", {"order": 9}, "order 9 " + "x" * 4000), ("items", {"order": 9}, "2 items"),
                       ("status", {"order": 9}, "shipped")], "Order 9 shipped with 2 items.")
    msgs.append(user("And the next order?"))
    b = budgeting(budget=8_000)
    assert b.size(msgs) > b.level(1.0)
    assert _stages(msgs, b)[0] == "clearing"


def _order_loop() -> list:
    ctx = [system(), user("Check orders #W0 to #W5 and tell me which shipped.")]
    for k in range(6):
        a = assistant(calls=[("lookup", {"order": k})])
        ctx += [a, *results(a, [f"order {k}: status shipped, total ${k}0.50 " + "x" * 1000])]
    return ctx


def test_one_tool_loop_over_the_hard_limit_is_summarized_in_turn_so_the_next_calls_fit():
    """One long tool loop alone over the hard limit, no turn before it: the loop's own
    completed cycles after the instruction are the summary's material (one edit that buys
    many calls), the instruction and the in-flight cycle stay verbatim, and the next results
    fit without another cut."""
    b = budgeting(budget=6_000)
    ctx = _order_loop()
    assert b.size(ctx) > b.level(1.0)
    out = compact(ctx, b, DigestSummarizer())
    assert [e.stage for e in out.events] == ["summarizing"]
    assert out.messages[1] == ctx[1] and out.messages[2].kind == "summary"  # the task, then the summary
    assert out.messages[-2:] == ctx[-2:]  # the in-flight cycle
    assert all(f"${k}0.50" in out.messages[2].text for k in range(5))  # what the loop found is in the summary
    assert_next_results_fit(out.messages, b)


def assert_next_results_fit(ctx, b) -> None:
    """The loop's next two results (orders 6 and 7, ~1,000 characters each) fit without another cut."""
    for k in range(6, 8):
        a = assistant(calls=[("lookup", {"order": k})])
        ctx = ctx + [a, *results(a, [f"order {k}: status pending " + "x" * 1000])]
        again = compact(ctx, b, DigestSummarizer())
        assert again.events == [], k
        ctx = again.messages


def test_the_last_resort_clears_every_completed_cycle_of_the_current_turn_so_the_next_calls_fit():
    """One long tool loop alone over the hard limit with summaries off (nothing to summarize or
    trim): clearing just enough re-billed the turn from its oldest cycle on every new result;
    clearing every completed cycle re-bills from the same place once and leaves room for the
    calls ahead."""
    b = budgeting(budget=6_000, summarize=False)
    ctx = [system(), user("Check orders #W0 to #W5 and tell me which shipped.")]
    for k in range(6):
        a = assistant(calls=[("lookup", {"order": k})])
        ctx += [a, *results(a, [f"order {k}: status shipped, total ${k}0.50 " + "x" * 1000])]
    assert b.size(ctx) > b.level(1.0)
    out = compact(ctx, b, DigestSummarizer())
    assert [e.stage for e in out.events] == ["clearing"] and out.events[0].detail["last_resort"]
    cleared = [r.text for m in out.messages for r in m.tool_results if "result cleared" in r.text]
    assert len(cleared) == 5  # every completed cycle; the in-flight one (the last) stays
    assert all(f"{k}0.50" in text for k, text in enumerate(cleared))  # their key values stay inline
    assert_next_results_fit(out.messages, b)


def test_over_the_hard_limit_a_parallel_batch_is_cleared_whole_once_its_first_result_is():
    # One model call fetched three orders at once (three tool messages, one cycle). Clearing
    # the first result is enough to get under the hard limit; the other two are cleared in the
    # same batch: they come after the first edit, so they re-bill nothing more, and a batch
    # stopped just under the limit makes the next call cut the cache again.
    a = assistant(calls=[("lookup", {"order": k}) for k in range(3)])
    msgs = [system(), user("Where are my three orders?"), a,
            *results(a, [f"order {k} " + "x" * 1_000 for k in range(3)]),
            assistant("All three are on their way."), user("Thanks, and the refund?")]
    size = CHARS.count(msgs)
    b = budgeting(budget=size - 200, keep_recent_cycles=1)
    hard = b.level(b.policy.hard_limit)
    assert hard < size < hard + 900  # one result's saving is enough
    out = clear_tool_results(msgs, b, size, over_hard=True)
    cleared = [m for m in out.messages if m.role == "tool" and "x" * 1_000 not in m.blocks[0].text]
    assert len(cleared) == 3
    assert out.events[0].size_after < hard - 1_500

