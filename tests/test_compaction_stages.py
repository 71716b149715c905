"""The stages and the pipeline on hand-built sessions, measured with the real chars counter."""

from __future__ import annotations

import pytest

from builders import assistant, results, system, tool_turn, user
from ctxwise.compaction import Budgeting, Pipeline, compact, placeholder_text
from ctxwise.compaction.context import pinned_indices
from ctxwise.errors import ContextBudgetExceeded
from ctxwise.messages import TextBlock, ToolResultBlock
from ctxwise.policy import Policy
from ctxwise.providers import check
from ctxwise.summarizers import DigestSummarizer
from ctxwise.tokens import get_counter

CHARS = get_counter("chars")
SEED_QUERY = "AirPods Pro 3 单侧（左耳）耳机没有声音，放回充电盒也没用，应该怎么排查？"


def budgeting(**kw) -> Budgeting:
    return Budgeting(Policy.preset("default", **kw), CHARS)


def session(n_turns: int, body: int = 1500) -> list:
    msgs = [system()]
    for k in range(n_turns):
        msgs += tool_turn(
            f"Round {k}: order #W{1000 + k} still broken, budget under 500 USD.",
            [("search_knowledge", {"query": f"q{k}"}, f"result {k} " + "x" * body)],
            f"Answer {k}: try step {k}.",
        )
    return msgs


def test_ragent_placeholder_is_77_characters_for_the_seed_example():
    p = Policy.preset("ragent")
    body = ToolResultBlock(tool_use_id="call_00_hksq", name="search_knowledge",
                           output=[TextBlock(text="针" * 630)])
    text = placeholder_text(p, body, {"query": SEED_QUERY})
    assert text == f"[历史工具结果已省略，原长 630 字符，原入参 {{query={SEED_QUERY}}}]"
    assert len(text) == 77


def test_ragent_placeholder_input_cut_to_120_characters():
    p = Policy.preset("ragent")
    body = ToolResultBlock(tool_use_id="c", name="search_knowledge", output=[TextBlock(text="y" * 900)])
    text = placeholder_text(p, body, {"query": "z" * 500})
    inner = text.split("原入参 ", 1)[1][:-1]
    assert len(inner) == 120 and inner.endswith("…")


def test_identity_below_the_clearing_watermark():
    msgs = session(2)
    b = budgeting(budget=100_000)
    out = compact(msgs, b, DigestSummarizer())
    assert out.messages is msgs and out.events == []


def test_clearing_edits_in_place_and_keeps_ids_and_pairing():
    msgs = session(6) + [user("And now?")]
    b = budgeting(budget=12_000, summarize=False, edit_when="watermark")  # the mechanics, not the pay rule
    out = compact(msgs, b, DigestSummarizer())
    assert [e.stage for e in out.events] == ["clearing"]
    assert len(out.messages) == len(msgs)
    assert [m.id for m in out.messages] == [m.id for m in msgs]
    cleared = set(out.events[0].affected_ids)
    for old, new in zip(msgs, out.messages):
        if old.id in cleared:
            r_old, r_new = old.tool_results[0], new.tool_results[0]
            assert (r_new.tool_use_id, r_new.name, r_new.state) == (r_old.tool_use_id, r_old.name, r_old.state)
            assert r_old.tool_use_id in r_new.text and len(r_new.text) < len(r_old.text)
        elif old.role != "tool":
            assert new == old
    assert check(out.messages, "openai") == []
    # the last two cycles and the current turn are untouched
    tool_ids = [m.id for m in msgs if m.role == "tool"]
    assert not cleared & set(tool_ids[-2:])
    assert out.size_after <= b.level(b.policy.clear_target) or len(cleared) == len(tool_ids) - 2


def test_clearing_fires_once_then_not_again_for_several_calls():
    p = Policy.preset("default", budget=12_000, summarize=False)  # crosses the hard limit: clearing must fire
    b = Budgeting(p, CHARS)
    ctx = [system()]
    fired_at = []
    for k in range(14):
        ctx = ctx + tool_turn(f"Round {k}: what about order #W{k}?", [("search", {"q": k}, "r" * 1200)], f"Answer {k}.")
        ctx.append(user(f"next {k}"))
        out = compact(ctx, b, DigestSummarizer())
        if any(e.stage == "clearing" for e in out.events):
            fired_at.append(k)
        ctx = out.messages
    assert fired_at, "clearing never fired"
    gaps = [b2 - a for a, b2 in zip(fired_at, fired_at[1:])]
    assert all(g >= 3 for g in gaps), f"clearing fired at calls {fired_at}"


def test_placeholders_are_byte_stable_and_prepare_is_idempotent():
    msgs = session(8) + [user("next")]
    b = budgeting(budget=14_000, summarize=False)
    first = compact(msgs, b, DigestSummarizer())
    again = compact(first.messages, b, DigestSummarizer())
    assert again.events == [] and again.messages == first.messages


def test_failed_results_are_kept_by_default():
    msgs = [system(), user("Find order 123")]
    a = assistant(calls=[("find_order", {"id": "123"})])
    msgs += [a, *results(a, ["Error: order not found " + "!" * 400], state="error")]
    msgs += [assistant("Not found."), *session(5)[1:], user("ok")]
    out = compact(msgs, budgeting(budget=10_000, summarize=False), DigestSummarizer())
    err = next(m for m in out.messages if m.tool_results and m.tool_results[0].state == "error")
    assert err.tool_results[0].text.startswith("Error: order not found")


def test_summary_stands_where_the_turns_stood_as_a_user_message():
    msgs = session(10) + [user("Book the cheapest one that meets every constraint.")]
    b = budgeting(budget=9_000, keep_tools=["search_knowledge"])
    out = compact(msgs, b, DigestSummarizer())
    stages = [e.stage for e in out.events]
    assert "summarizing" in stages
    s_idx = next(i for i, m in enumerate(out.messages) if m.kind == "summary")
    assert s_idx == 1 and out.messages[s_idx].role == "user"
    assert out.messages[s_idx].text.startswith("[Summary of the earlier conversation")
    assert out.messages[s_idx + 1].role == "user"  # the first kept turn starts on a user message
    assert out.messages[-1] == msgs[-1]
    assert check(out.messages, "openai") == []
    ev = next(e for e in out.events if e.stage == "summarizing")
    kept_ids = {m.id for m in out.messages}
    assert not kept_ids & set(ev.affected_ids)
    assert "budget under 500 USD" in out.messages[s_idx].text


def test_no_summary_in_the_middle_of_a_turn_under_the_watermark_rule():
    msgs = session(10)
    a = assistant(calls=[("search", {"q": 1})])
    msgs += [user("more"), a, *results(a, ["r" * 2000])]
    b = budgeting(budget=9_000, keep_tools=["search_knowledge"], edit_when="watermark")
    out = compact(msgs, b, DigestSummarizer())
    assert "summarizing" not in [e.stage for e in out.events]


def test_completed_turns_are_summarized_while_a_turn_is_in_flight():
    # Issue 11, item 7: over the hard limit mid-turn, the completed turns are folded into a
    # summary (the cut between whole turns, the current turn untouched) instead of trimmed
    # with no trace.
    msgs = session(10)
    a = assistant(calls=[("search", {"q": 1})])
    msgs += [user("more"), a, *results(a, ["r" * 2000])]
    b = budgeting(budget=9_000, keep_tools=["search_knowledge"])
    assert b.size(msgs) > b.level(1.0)
    out = compact(msgs, b, DigestSummarizer())
    stages = [e.stage for e in out.events]
    assert "summarizing" in stages and "trimming" not in stages, stages
    assert out.messages[-3:] == msgs[-3:] and out.messages[-4].kind == "summary"
    assert "#W1000" in next(m for m in out.messages if m.kind == "summary").text


def test_summary_segments_keep_constraints_through_two_passes():
    msgs = [system(), user("Hard limits: total budget 1,200 EUR, 14 attendees, date 2025-03-14, no more than 2 steps.")]
    msgs += session(8)[1:]
    msgs.append(user("Go on."))
    b = budgeting(budget=9_000, keep_tools=["search_knowledge"])
    out = compact(msgs, b, DigestSummarizer())
    ctx = out.messages + session(8)[1:] + [user("And book it.")]
    out2 = compact(ctx, b, DigestSummarizer())
    # the second pass appends a segment: the first stays byte-identical (issue 11, item 3)
    first = [m for m in out.messages if m.kind == "summary"]
    summaries = [m for m in out2.messages if m.kind == "summary"]
    assert len(first) == 1 and len(summaries) == 2 and summaries[0] == first[0]
    s = "\n".join(m.text for m in summaries)
    for needle in ("1,200 EUR", "14 attendees", "2025-03-14", "no more than 2 steps"):
        assert needle in s
    assert any(e.stage == "summarizing" and not e.detail["rolled_previous"] for e in out2.events)


def test_hard_trim_drops_whole_turns_and_keeps_pins():
    msgs = session(10) + [user("current question")]
    b = budgeting(budget=8_000, summarize=False, keep_tools=["search_knowledge"])
    out = compact(msgs, b, DigestSummarizer())
    assert "trimming" in [e.stage for e in out.events]
    assert out.messages[0] == msgs[0] and out.messages[-1] == msgs[-1]
    assert out.messages[1].role == "user"
    assert check(out.messages, "openai") == []
    assert out.size_after <= b.level(1.0)


def test_budget_exceeded_when_pinned_content_alone_does_not_fit():
    msgs = [system("rules " * 2000), user("hi")]
    b = budgeting(budget=1_000)
    with pytest.raises(ContextBudgetExceeded) as e:
        compact(msgs, b, DigestSummarizer())
    assert e.value.report.pinned > e.value.report.budget


def test_pinned_items_never_change():
    msgs = session(12) + [user("current")]
    b = budgeting(budget=6_000)
    out = compact(msgs, b, DigestSummarizer())
    before = {msgs[i].id: msgs[i] for i in pinned_indices(msgs)}
    after = {m.id: m for m in out.messages}
    for mid, m in before.items():
        assert after[mid] == m


def test_disabled_policy_is_pass_through():
    msgs = session(12) + [user("current")]
    out = compact(msgs, budgeting(budget=1_000, enabled=False), DigestSummarizer())
    assert out.messages is msgs and out.events == []


def test_hard_trim_can_drop_the_turn_tail_a_summary_left_behind():
    """A summary cut between the cycles of a turn leaves that turn's answer after it; the
    summary stays pinned but the tail must still be trimmable (found on tau2 airline #13)."""
    from ctxwise.messages import Message, TextBlock

    summary = Message(id="summary-x", role="user", blocks=[TextBlock(text="[Summary] earlier turns")],
                      metadata={"ctxwise": {"kind": "summary"}})
    tail = assistant("a long answer " * 300)
    msgs = [system(), summary, tail, user("current question")]
    b = budgeting(budget=2_000, summarize=False)
    # the trim itself (the default pipeline first cuts a reply over half the hard limit
    # head-and-tail, ctxwise.compaction.oversize, and then has nothing to trim)
    trim_only = Pipeline([s for s in Pipeline.default().stages if s.name != "oversized_replies"])
    out = compact(msgs, b, DigestSummarizer(), pipeline=trim_only)
    ids = [m.id for m in out.messages]
    assert tail.id not in ids and summary.id in ids and ids[-1] == msgs[-1].id
    assert check(out.messages, "openai") == []
    cut = compact(msgs, b, DigestSummarizer())
    assert [m.id for m in cut.messages] == [m.id for m in msgs] and "from the middle of this reply" in cut.messages[2].text
    assert check(cut.messages, "openai") == []
