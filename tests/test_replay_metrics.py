"""The replay measures on hand-made message lists, with values worked out by hand."""

from __future__ import annotations

import pytest

from ctxwise.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock, text_message
from ctxwise.replay import metrics
from ctxwise.tokens import get_counter


class Len:
    """A counter where a message costs the length of its text (no framing), to make sums exact."""

    def count_message(self, m: Message) -> int:
        return len(metrics.message_text(m))

    def count(self, messages) -> int:
        return sum(self.count_message(m) for m in messages)


def u(i: str, text: str) -> Message:
    return text_message(i, "user", text)


def a(i: str, text: str) -> Message:
    return text_message(i, "assistant", text)


def test_input_tokens_sums_every_call():
    p1 = [u("1", "x" * 10)]
    p2 = p1 + [a("2", "y" * 5), u("3", "z" * 7)]
    assert metrics.input_tokens([p1, p2], Len()) == 10 + 22


def test_input_tokens_with_o200k_counts_framing():
    c = get_counter("o200k_base")
    p = [u("1", "hello world")]
    assert metrics.input_tokens([p, p], c) == 2 * c.count(p)
    assert c.count(p) > c.count_text("hello world")


def test_cache_cost_counts_only_the_identical_prefix_at_the_ratio():
    m1, m2, m3 = u("1", "a" * 100), a("2", "b" * 50), u("3", "c" * 10)
    calls = [[m1], [m1, m2, m3]]
    costs = metrics.call_costs(calls, Len(), cache_ratio=0.1)
    assert [c.cached for c in costs] == [0, 100]
    assert costs[1].cost == pytest.approx(100 * 0.1 + 60)
    assert metrics.cache_adjusted_cost(calls, Len(), 0.1) == pytest.approx(100 + 10 + 60)


def test_an_edited_message_breaks_the_prefix_even_with_the_same_id():
    m1, m2 = u("1", "a" * 100), a("2", "b" * 50)
    edited = m1.model_copy(update={"blocks": [TextBlock(text="a" * 99)]})
    calls = [[m1, m2], [edited, m2]]
    costs = metrics.call_costs(calls, Len(), 0.5)
    assert costs[1].cached == 0          # first message changed: nothing after it is reusable
    assert costs[1].cost == 149


def test_equal_copies_count_as_cached():
    m1 = u("1", "a" * 40)
    copy = Message.model_validate(m1.model_dump())
    assert metrics.common_prefix([m1], [copy]) == 1


def test_cache_ratio_out_of_range_is_refused():
    with pytest.raises(ValueError):
        metrics.call_costs([[u("1", "x")]], Len(), 1.5)


def _cycle(call_id: str, order_text: str) -> list[Message]:
    call = Message(id="a" + call_id, role="assistant",
                   blocks=[ToolUseBlock(id=call_id, name="query_order", input={"order_id": "W123"})])
    res = Message(id="t" + call_id, role="tool",
                  blocks=[ToolResultBlock(tool_use_id=call_id, name="query_order",
                                          output=[TextBlock(text=order_text)])])
    return [call, res]


def test_support_recall_counts_values_lost_from_the_prepared_context():
    history = [u("1", "My order is #W123, e-mail ann@example.com")] + _cycle(
        "c1", "Order W123 delivered 2025-09-09, total 189.00 USD")
    out = a("o", "Order W123 (delivered 2025-09-09, 189.00 USD) - I'll write to ann@example.com. "
                 "New ticket RMA-77 opened.")
    # The prepared context lost the tool result body: the date and amount are no longer there.
    cleared = history[:2] + [Message(id="tc1", role="tool", blocks=[ToolResultBlock(
        tool_use_id="c1", name="query_order", output=[TextBlock(text="[cleared]")])])]
    s = metrics.call_support(history, cleared, out)
    # RMA-77 was never in the history: not needed. W123, ann@..., 2025-09-09, 189.00 USD are.
    assert set(s.needed) == {"W123", "ann@example.com", "2025-09-09", "189.00 USD"}
    assert set(s.missing) == {"2025-09-09", "189.00 USD"}
    r = metrics.support_recall([history, history], [cleared, history], [out, out])
    assert (r.supported, r.needed) == (2 + 4, 8)
    assert r.value == pytest.approx(0.75)


def test_recall_is_one_when_nothing_is_needed_and_lengths_must_match():
    assert metrics.support_recall([], [], []).value == 1.0
    with pytest.raises(ValueError):
        metrics.support_recall([[]], [], [])


def test_validator_errors_flag_an_orphaned_tool_result():
    ok = [u("1", "hi")] + _cycle("c1", "found")
    orphan = [u("1", "hi"), _cycle("c1", "found")[1]]
    errs = metrics.validator_errors([ok, orphan], "openai")
    assert errs and all(i == 1 for i, _ in errs)
    assert metrics.validator_errors([ok], "openai") == []


def test_events_by_stage_and_percentiles():
    evs = [{"stage": "clearing"}, {"stage": "summarizing"}, {"stage": "clearing"}]
    assert metrics.events_by_stage(evs) == {"clearing": 2, "summarizing": 1}
    assert metrics.percentile([1, 2, 3, 4], 50) == pytest.approx(2.5)
    assert metrics.percentile([10, 20], 95) == pytest.approx(19.5)
    assert metrics.percentile([], 95) == 0.0


def test_floor_is_the_issue_formula_under_flat_prices_and_prices_each_ideal_call():
    # H = 100, 250, 400 at B = 300: S = 100, 250, 300; n = 100, 150, 150; m = 100, 150, 150
    flat = 100 + (150 + 0.1 * 100) + (150 + 0.1 * 150)
    assert metrics.floor_cost([100, 250, 400], 300) == pytest.approx(flat)
    # nothing over budget: the floor is what no management pays
    hist = [u("1", "a" * 50)]
    calls = [hist, hist + [a("2", "b" * 30)], hist + [a("2", "b" * 30), u("3", "c" * 20)]]
    nm = metrics.cache_adjusted_cost(calls, Len(), 0.1)
    assert metrics.floor_cost([Len().count(c) for c in calls], 10_000) == pytest.approx(nm)
    # under Anthropic prices the new tokens are written at 1.25 once the prompt reaches 1,024
    from ctxwise.prices import ANTHROPIC
    assert metrics.floor_cost([2000, 2500], 3000, ANTHROPIC) == pytest.approx(2000 * 1.25 + 2000 * 0.1 + 500 * 1.25)
    with pytest.raises(ValueError, match="one budget per call"):
        metrics.floor_cost([1, 2], [3])


def test_priced_cost_under_flat_prices_is_the_cache_adjusted_cost():
    from ctxwise.prices import DEEPSEEK, FLAT
    p1 = [u("1", "x" * 100)]
    p2 = p1 + [a("2", "y" * 50)]
    costs = metrics.call_costs([p1, p2], Len(), 0.1)
    assert metrics.priced_cost(costs, FLAT) == pytest.approx(metrics.cache_adjusted_cost([p1, p2], Len(), 0.1))
    assert metrics.priced_cost(costs, DEEPSEEK) == pytest.approx(100 + 100 * 0.02 + 50)


def test_normalized_recall_compares_amounts_and_dates_by_value():
    """Kind: the same amount or date spelled two ways ($466.75 / 466.75, $39 / 39.00,
    May 5, 2024 / 2024-05-05) is one value; identifiers stay exact."""
    hist = [u("1", "order #W123"), text_message("2", "tool", '{"price": 466.75, "fee": 39, "date": "2024-05-05"}')]
    out = a("3", "Order W123: $466.75 plus a $39.00 fee, shipped May 5, 2024.")
    s = metrics.call_support(hist, hist, out)
    assert s.needed == ["W123"]  # the old figure cannot see the amounts and the date at all
    assert set(s.needed_norm) == {"W123", "$466.75", "$39.00", "May 5, 2024"} and not s.missing_norm
    lost = metrics.call_support(hist, hist[:1], out)
    assert set(lost.missing_norm) == {"$466.75", "$39.00", "May 5, 2024"} and lost.recoverable == []


def test_recoverable_counts_missing_values_whose_original_a_placeholder_names():
    use = Message(id="a1", role="assistant", blocks=[ToolUseBlock(id="call_9", name="get_order", input={})])
    body = ToolResultBlock(tool_use_id="call_9", name="get_order", output=[TextBlock(text='{"total": 120.50, "id": "W77"}')])
    hist = [u("1", "my order"), use, Message(id="t1", role="tool", blocks=[body])]
    cleared = body.model_copy(update={"output": [TextBlock(text="[cleared; recall_tool_result('call_9')]")]})
    silent = body.model_copy(update={"output": [TextBlock(text="[cleared]")]})
    out = a("2", "Your order W77 costs $120.50.")
    named = metrics.call_support(hist, hist[:2] + [Message(id="t1", role="tool", blocks=[cleared])], out)
    assert set(named.missing_norm) == {"W77", "$120.50"} and set(named.recoverable) == {"W77", "$120.50"}
    unnamed = metrics.call_support(hist, hist[:2] + [Message(id="t1", role="tool", blocks=[silent])], out)
    assert unnamed.recoverable == []
    figs = metrics.recall_figures([hist], [hist[:2] + [Message(id="t1", role="tool", blocks=[cleared])]], [out])
    assert (figs.normalized.value, figs.recoverable.value) == (0.0, 1.0)


def test_as_sent_measures_only_the_thinking_the_target_sends():
    """Kind of fault: a measure counting tokens the request never carries. Anthropic takes
    thinking only with its signature, Responses reasoning only with its rs_ item id, Chat none:
    the replay and the benchmarks count what ``prepare()`` sizes and the render sends."""
    from ctxwise.messages import ThinkingBlock

    unsigned = Message(id="a1", role="assistant", blocks=[ThinkingBlock(thinking="ponder " * 200), TextBlock(text="ok")])
    signed = Message(id="a2", role="assistant", blocks=[ThinkingBlock(thinking="ponder " * 200, signature="sig"),
                                               TextBlock(text="ok")])
    tok = get_counter("o200k_base")
    for provider in ("anthropic", "openai_responses", "openai"):
        [view] = metrics.as_sent([unsigned], provider)
        assert [b.type for b in view.blocks] == ["text"], provider
        assert tok.count([view]) < tok.count([unsigned]) - 100, provider
    [kept] = metrics.as_sent([signed], "anthropic")
    assert kept.blocks == signed.blocks
