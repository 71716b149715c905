"""Unit tests for the reasoning rules: DeepSeek reasoning_content pass-back, Anthropic thinking
blocks, open tool turn, and what each provider lets compaction drop."""

from __future__ import annotations

import pytest

from ctxwise.messages import Message, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock, text_message
from ctxwise.providers import check, droppable_thinking, open_tool_turn, thinking_mode


def th(text: str, sig: str | None = None) -> ThinkingBlock:
    return ThinkingBlock(thinking=text, signature=sig)


def user(i: str) -> Message:
    return text_message(i, "user", f"question {i}")


def asst(i: str, *, think: str | None = None, calls: tuple[str, ...] = (), text: str = "") -> Message:
    blocks: list = [th(think, f"sig-{i}")] if think else []
    if text:
        blocks.append(TextBlock(text=text))
    blocks += [ToolUseBlock(id=c, name="f") for c in calls]
    return Message(id=i, role="assistant", blocks=blocks)


def res(i: str, cid: str) -> Message:
    return Message(id=i, role="tool", blocks=[ToolResultBlock(tool_use_id=cid, output=[TextBlock(text="r")])])


def strip(m: Message) -> Message:
    return m.model_copy(update={"blocks": [b for b in m.blocks if not isinstance(b, ThinkingBlock)]})


def rules_at(violations) -> list[tuple[int, str]]:
    return [(v.index, v.rule) for v in violations]


def b11_like() -> list[Message]:
    """B11's shape: a chat span, then a tool-using span, then the new user input."""
    return [
        text_message("s", "system", "sys"),
        user("u1"),
        asst("a1", think="greeting", text="Hello!"),
        user("u2"),
        asst("a2", think="call twice", calls=("c1", "c2")),
        res("t1", "c1"),
        res("t2", "c2"),
        asst("a3", think="27 > 25", text="Hangzhou."),
        user("u3"),
    ]


# -- DeepSeek ---------------------------------------------------------------------------------


def test_deepseek_full_record_passes():
    assert check(b11_like(), "deepseek") == []


def test_deepseek_chat_span_may_lose_reasoning():
    msgs = b11_like()
    msgs[2] = strip(msgs[2])
    assert check(msgs, "deepseek") == []
    assert check(msgs, "deepseek", reference=b11_like()) == []


@pytest.mark.parametrize("idx", [4, 7])
def test_deepseek_tool_span_must_keep_reasoning(idx):
    msgs = b11_like()
    msgs[idx] = strip(msgs[idx])
    v = check(msgs, "deepseek")
    assert rules_at(v) == [(idx, "reasoning-content-missing")]
    assert f"message index {idx}" in v[0].provider_error
    assert "must be passed back" in v[0].provider_error
    assert rules_at(check(msgs, "deepseek", reference=b11_like())) == [(idx, "reasoning-content-missing")]


def test_deepseek_all_reasoning_stripped_needs_reference_or_flag():
    msgs = [strip(m) for m in b11_like()]
    # without a reference nothing says the session thinks: the rule stays silent (documented)
    assert check(msgs, "deepseek") == []
    assert rules_at(check(msgs, "deepseek", reference=b11_like())) == [
        (4, "reasoning-content-missing"), (7, "reasoning-content-missing")]
    assert [v.rule for v in check(msgs, "deepseek", thinking=True)] == ["reasoning-content-missing"] * 2
    assert check(b11_like(), "deepseek", thinking=False) == []


def test_deepseek_changed_reasoning_is_caught_with_reference():
    msgs = b11_like()
    msgs[4] = msgs[4].model_copy(update={"blocks": [th("edited", "sig-a2")] + msgs[4].blocks[1:]})
    assert check(msgs, "deepseek") == []
    assert rules_at(check(msgs, "deepseek", reference=b11_like())) == [(4, "reasoning-content-changed")]


def test_deepseek_reference_span_counts_even_if_payload_span_lost_its_calls():
    # a broken transform that removed the tool cycle 4..6 but kept the final answer 7 stripped
    ref = b11_like()
    msgs = ref[:4] + [strip(ref[7]), ref[8]]
    assert check(msgs, "deepseek") == []  # the payload alone shows no tool span
    assert rules_at(check(msgs, "deepseek", reference=ref)) == [(4, "reasoning-content-missing")]


def test_deepseek_current_tool_loop_must_carry_reasoning():
    msgs = [user("u1"), asst("a1", think="t", calls=("c1",)), res("t1", "c1"),
            asst("a2", calls=("c2",)), res("t2", "c2")]
    assert rules_at(check(msgs, "deepseek")) == [(3, "reasoning-content-missing")]


def test_deepseek_rule_is_not_applied_to_other_providers():
    msgs = b11_like()
    msgs[4] = strip(msgs[4])
    assert check(msgs, "openai") == []
    assert check(msgs, "qwen") == []


# -- Anthropic --------------------------------------------------------------------------------


def b12_like() -> list[Message]:
    """B12's shape: the open tool turn holds thinking + tool_use; its result is last."""
    return [
        text_message("s", "system", "You are a weather agent."),
        user("u1"),
        asst("a1", think="call get_weather", calls=("toolu_1",)),
        res("t1", "toolu_1"),
    ]


def test_open_tool_turn():
    assert open_tool_turn(b12_like()) == 2
    assert open_tool_turn(b12_like() + [asst("a2", text="Sunny")]) is None
    assert open_tool_turn(b12_like() + [asst("a2", text="Sunny"), user("u2")]) is None
    assert open_tool_turn([user("u")]) is None


def test_anthropic_open_tool_turn_keeps_thinking_first():
    assert check(b12_like(), "anthropic", reference=b12_like()) == []
    msgs = b12_like()
    msgs[2] = strip(msgs[2])
    v = check(msgs, "anthropic", reference=b12_like())
    assert rules_at(v) == [(2, "thinking-removed"), (2, "thinking-not-first")]
    assert "Expected `thinking` or `redacted_thinking`" in v[1].provider_error
    # without a reference, thinking mode must be stated
    assert check(msgs, "anthropic") == []
    assert rules_at(check(msgs, "anthropic", thinking=True)) == [(2, "thinking-not-first")]


def test_anthropic_thinking_after_text_is_not_first():
    m = Message(id="a1", role="assistant", blocks=[TextBlock(text="Let me check."), th("x", "s1"),
                                                   ToolUseBlock(id="c", name="f")])
    msgs = [user("u"), m, res("t", "c")]
    assert rules_at(check(msgs, "anthropic")) == [(1, "thinking-not-first")]


def test_anthropic_redacted_thinking_counts_as_first():
    m = Message(id="a1", role="assistant", blocks=[
        ThinkingBlock(thinking="OPAQUE", redacted=True), ToolUseBlock(id="c", name="f")])
    assert check([user("u"), m, res("t", "c")], "anthropic", thinking=True) == []


@pytest.mark.parametrize("change", [
    {"thinking": "edited"}, {"signature": "forged"}, {"redacted": True}, {"extra": {"x": 1}}])
def test_anthropic_modified_thinking_is_caught(change):
    ref = b12_like()
    msgs = b12_like()
    blk = msgs[2].blocks[0].model_copy(update=change)
    msgs[2] = msgs[2].model_copy(update={"blocks": [blk] + msgs[2].blocks[1:]})
    v = check(msgs, "anthropic", reference=ref)
    assert rules_at(v) == [(2, "thinking-modified")]
    assert "signature" in v[0].provider_error


def test_anthropic_thinking_moved_to_another_message_is_caught():
    ref = [user("u1"), asst("a1", think="old", text="done"), user("u2"),
           asst("a2", calls=("c",)), res("t", "c")]
    moved = ref[3].model_copy(update={"blocks": [ref[1].blocks[0]] + ref[3].blocks})
    msgs = [ref[0], strip(ref[1]), ref[2], moved, ref[4]]
    assert rules_at(check(msgs, "anthropic", reference=ref)) == [(3, "thinking-modified")]


def test_anthropic_older_turn_may_drop_thinking_whole():
    ref = [user("u1"), asst("a1", think="t1", calls=("c1",)), res("t1", "c1"),
           asst("a2", think="t2", text="answer"), user("u2"),
           asst("a3", think="t3", calls=("c2",)), res("t2", "c2")]
    msgs = [ref[0], strip(ref[1]), ref[2], strip(ref[3]), ref[4], ref[5], ref[6]]
    assert check(msgs, "anthropic", reference=ref) == []


def test_anthropic_current_turn_interleaved_thinking_must_stay():
    ref = [user("u1"), asst("a1", think="t1", calls=("c1",)), res("t1", "c1"),
           asst("a2", think="t2", calls=("c2",)), res("t2", "c2")]
    msgs = [ref[0], strip(ref[1]), ref[2], ref[3], ref[4]]
    # the turn's first reply lost its blocks: removed, and the turn no longer starts thinking
    assert rules_at(check(msgs, "anthropic", reference=ref)) == [(1, "thinking-removed"), (1, "thinking-not-first")]


# -- Anthropic: one thinking configuration per assistant turn (issue 15: a session whose
# thinking was switched between turns, or a tool loop without interleaved thinking, was
# accepted at append and then every prepare() raised thinking-not-first) ---------------------

def _turns_switched():
    """A first turn with thinking, then a turn run with thinking off (its replies carry none)."""
    return [user("u1"), asst("a1", think="t1", text="hello"), user("u2"),
            asst("a2", calls=("c1",)), res("t1", "c1"), asst("a3", calls=("c2",)), res("t2", "c2")]


@pytest.mark.parametrize("with_reference", [False, True])
def test_anthropic_turn_run_without_thinking_after_a_thinking_turn_is_valid(with_reference):
    msgs = _turns_switched()
    assert check(msgs, "anthropic", reference=msgs if with_reference else None) == []


def test_anthropic_tool_loop_thinks_once_at_its_start():
    # without interleaved thinking only the loop's first reply carries thinking
    msgs = [user("u1"), asst("a1", think="t1", calls=("c1",)), res("t1", "c1"),
            asst("a2", calls=("c2",)), res("t2", "c2"), asst("a3", calls=("c3",)), res("t3", "c3")]
    assert check(msgs, "anthropic", reference=msgs) == []
    # dropping the first reply's thinking is still caught, with or without the record
    bad = [msgs[0], strip(msgs[1])] + msgs[2:]
    assert (1, "thinking-not-first") in rules_at(check(bad, "anthropic", reference=msgs))
    assert rules_at(check(bad, "anthropic", thinking=True)) == [(1, "thinking-not-first")]


def test_anthropic_turn_mode_comes_from_the_record_not_the_payload():
    ref = [user("u1"), asst("a1", think="t1", calls=("c1",)), res("t1", "c1")]
    assert rules_at(check([ref[0], strip(ref[1]), ref[2]], "anthropic", reference=ref)) == [
        (1, "thinking-removed"), (1, "thinking-not-first")]


def test_anthropic_thinking_in_message_missing_from_reference_is_modified():
    extra = asst("new", think="invented", text="hi")
    assert rules_at(check([user("u"), extra, user("u2")], "anthropic", reference=[user("u")])) == [
        (1, "thinking-modified")]


def test_thinking_mode_inference():
    assert thinking_mode(b12_like()) is True
    assert thinking_mode([strip(m) for m in b12_like()]) is False
    assert thinking_mode([strip(m) for m in b12_like()], reference=b12_like()) is True
    assert thinking_mode(b12_like(), thinking=False) is False


# -- droppable thinking ------------------------------------------------------------------------


def test_droppable_deepseek_only_completed_spans_without_tools():
    assert droppable_thinking(b11_like(), "deepseek") == {(2, 0)}
    # the current span (after the last user input) never drops
    assert droppable_thinking(b11_like()[:3], "deepseek") == set()


def test_droppable_completed_turns_for_openai_qwen_gemini_anthropic():
    msgs = b11_like()
    for p in ("openai", "qwen", "gemini"):
        assert droppable_thinking(msgs, p) == {(2, 0), (4, 0), (7, 0)}, p
    # Anthropic: message 7 is the request's latest assistant message, whose thinking "cannot be
    # modified" (extended-thinking docs), although its turn is completed
    assert droppable_thinking(msgs, "anthropic") == {(2, 0), (4, 0)}


def test_droppable_never_includes_open_tool_turn():
    msgs = [user("u1"), asst("a1", think="old", text="x"), user("u2"),
            asst("a2", think="open", calls=("c",)), res("t", "c")]
    for p in ("anthropic", "deepseek", "openai"):
        assert (3, 0) not in droppable_thinking(msgs, p)
    assert droppable_thinking(msgs, "anthropic") == {(1, 0)}


def test_droppable_whole_message_for_anthropic():
    m = Message(id="a1", role="assistant", blocks=[th("one", "s1"), TextBlock(text="x"), th("two", "s2")])
    later = [user("u2"), asst("a2", text="y"), user("u3")]
    assert droppable_thinking([user("u1"), m, *later], "anthropic") == {(1, 0), (1, 2)}
    # the latest assistant message keeps both (it is never edited, so never pruned alone either)
    assert droppable_thinking([user("u1"), m, user("u2")], "anthropic") == set()


def test_dropping_what_is_droppable_keeps_the_payload_valid():
    for p in ("deepseek", "anthropic", "openai", "qwen", "openai_responses"):
        ref = b11_like()
        drop = droppable_thinking(ref, p)
        out = [m.model_copy(update={"blocks": [b for k, b in enumerate(m.blocks) if (i, k) not in drop]})
               if any(i == d[0] for d in drop) else m
               for i, m in enumerate(ref)]
        assert check(out, p, reference=ref) == [], p


# -- OpenAI Responses ---------------------------------------------------------------------------


def responses_like() -> list[Message]:
    """B14's shape: reasoning + function_call, its output, reasoning + message, new user input."""
    return [user("u1"), asst("a1", think="r1", calls=("call_inv",)), res("t1", "call_inv"),
            asst("a2", think="r2", text="2 open invoices"), user("u2")]


def test_responses_full_record_passes():
    assert check(responses_like(), "openai_responses", reference=responses_like()) == []


def test_responses_reasoning_needs_following_item():
    lone = Message(id="r", role="assistant", blocks=[th("r", "enc")])
    msgs = [user("u1"), lone, user("u2")]
    v = check(msgs, "openai_responses")
    assert rules_at(v) == [(1, "reasoning-without-following-item")]
    assert "without its required following item" in v[0].provider_error


def test_responses_function_call_keeps_its_reasoning_item():
    ref = responses_like()
    msgs = list(ref)
    msgs[1] = strip(msgs[1])
    v = check(msgs, "openai_responses", reference=ref)
    assert rules_at(v) == [(1, "reasoning-item-missing")]
    # the message answer may lose its reasoning item
    msgs = list(ref)
    msgs[3] = strip(msgs[3])
    assert check(msgs, "openai_responses", reference=ref) == []


def test_responses_droppable_spares_function_call_reasoning():
    assert droppable_thinking(responses_like(), "openai_responses") == {(3, 0)}
