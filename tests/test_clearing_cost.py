"""Clearing only when the context must shrink or the cache is cold, measured with the real chars counter.

Kind of fault covered: an edit that re-bills the prompt cache in a session that would have
ended under its budget (a forecast of the growth, a saving over calls that never come: issue
25, qwen's cheap cache reads edited 42 calls of sessions that fit), and clearing that re-fires
every call because its target lies below what it can never remove.
"""

from __future__ import annotations

from builders import assistant, results, system, tool_turn, user
from ctxwise.compaction import Budgeting, clear_tool_results, compact
from ctxwise.compaction.clearing import growth_so_far
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


PROVIDERS = ("openai", "openai_responses", "anthropic", "deepseek", "qwen", "gemini")


def test_under_the_hard_limit_a_warm_cache_is_never_edited_whatever_the_price_model():
    """DESIGN.md decision 4 and issue 25's acceptance: where the whole history fits, default
    sends what no management sends. A long-running session whose clearing would pay back
    within a few calls under any provider's cache prices (qwen's implicit cache reads at 0.2,
    the cheapest break to repay) is still not edited: the calls that would repay it may never
    come. A cold cache (Anthropic's 5-minute lifetime) edits it; so does the watermark rule."""
    msgs = a_long_session_with_a_manual(1_700, 100)
    for provider in PROVIDERS:
        b = Budgeting(Policy.preset("default", provider=provider, budget=7_000, keep_recent_cycles=1), CHARS)
        size = b.size(msgs)
        assert b.level(0.5) < size < b.level(1.0), provider
        # the batch the watermark rule makes would repay its break well within 12 calls
        w = clear_tool_results(msgs, Budgeting(b.policy.model_copy(update={"edit_when": "watermark"}), CHARS), size)
        assert [e.stage for e in w.events] == ["clearing"], provider
        first = min(i for i, m in enumerate(msgs) if m.id in w.events[0].affected_ids)
        suffix = sum(b.size_of(m) for m in msgs[first:])
        if provider in ("qwen", "anthropic", "openai"):
            assert b.policy.prices.edit_pays(size - w.events[0].size_after, suffix, 12), provider
        out = clear_tool_results(msgs, b, size)
        assert out.events == [] and out.messages is msgs, provider
        assert compact(msgs, b, DigestSummarizer()).events == [], provider
    cold = Budgeting(Policy.preset("default", provider="anthropic", budget=7_000, keep_recent_cycles=1), CHARS, idle=301.0)
    out = clear_tool_results(msgs, cold, cold.size(msgs))
    assert [e.stage for e in out.events] == ["clearing"] and "cold" in out.events[0].trigger


def test_one_huge_result_is_an_event_not_a_growth_rate():
    # The growth rate sets how deep a cut inside a turn goes (low_watermark): one huge tool
    # result is an event, not a rate; a step over a quarter of the hard limit is left out with
    # its call, so a 5,000-token result does not make every later cut clear everything.
    b = budgeting(budget=7_000, keep_recent_cycles=1)
    hard = b.level(1.0)
    slow = a_long_session_with_a_manual(3_000, 0)
    grown, calls = growth_so_far(slow, b, hard)
    all_grown, all_calls = growth_so_far(slow, b, 10**9)
    assert calls == all_calls - 1 and all_grown - grown > 3_000  # the manual's call is left out with it
    size = b.size(slow)
    assert b.level(0.5) < size < b.level(0.8)
    assert clear_tool_results(slow, b, size).events == []
    wb = budgeting(budget=7_000, keep_recent_cycles=1, edit_when="watermark")
    assert [e.stage for e in clear_tool_results(slow, wb, size).events] == ["clearing"]


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


def test_a_context_on_course_to_the_hard_limit_is_not_edited_before_it_gets_there():
    """A session growing steadily towards the hard limit (it would pass it within four calls at
    its rate so far) may still end first: nothing is edited under the limit, for any provider;
    once the context is over it, the cut is made."""
    for shape in SHAPES:
        msgs = _slow_session(*shape)
        size = CHARS.count(msgs)
        budget = int((size + _projected(msgs, size)) / 2)
        for provider in PROVIDERS:
            b = budgeting(budget=budget, keep_recent_cycles=1, provider=provider)
            assert b.level(0.5) < size < budget < _projected(msgs, budget), shape
            assert clear_tool_results(msgs, b, size).events == [], (shape, provider)
            assert compact(msgs, b, DigestSummarizer()).events == [], (shape, provider)
        over = budgeting(budget=int(size * 0.95), keep_recent_cycles=1)
        out = compact(msgs, over, DigestSummarizer())
        assert out.events and "hard limit" in out.events[0].trigger, shape
        assert over.size(out.messages) <= over.level(1.0), shape


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

