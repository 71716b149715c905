"""Kind: a ContextBudgetExceeded that does not say what takes the room or how to get out
(issue 28, "Errors that say what to do").

It failed by 2 tokens on a real recording with no breakdown by part, and after a 5 MB user
message its hint said "send less" although the message was already stored and only ``pop()``
helps. Now the report carries the context's sizes by part (summing to the whole), the message
that takes the most room, and the budget at which the pinned content fits; the hint names the
message to pop, or the part to shorten, and that budget. Every case runs the real engine, real
tokenizers and, for the first, a real recording; the way out each hint gives is then taken and
works."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxwise import ContextBudgetExceeded, ContextManager, Policy
from ctxwise.errors import with_hint
from ctxwise.formats import load
from ctxwise.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock, text_message
from ctxwise.replay.runner import replay_conversation
from ctxwise.tokens import get_counter

AIRLINE = Path("trajectories") / "tau2-bench" / "airline_claude-sonnet-4-5-thinking_subset.json"


def _replay(shared_dir: Path, budget: int) -> ContextManager:
    """Conversation 9 of the tau2 airline recording replayed at ``budget`` tokens (Anthropic, its
    reasoning not bound: the breakdown is the subject here, binding has its own tests);
    the manager is returned open, for a look at what was stored."""
    conv = load(str(shared_dir / "data" / AIRLINE))[9]
    cm = ContextManager("memory://", Policy.preset("default", provider="anthropic", unit="tokens", budget=budget,
                                                   bound_reasoning="off"))
    replay_conversation(cm, "u", "s", conv.messages, name=conv.id, source=str(AIRLINE), format=conv.format)
    return cm


def test_a_recording_two_tokens_over_gets_its_parts_and_a_budget_that_fits(shared_dir: Path) -> None:
    # 2,014 tokens: the largest budget at which this recording's pinned content is still over
    with pytest.raises(ContextBudgetExceeded) as err:
        _replay(shared_dir, 2014)
    r = err.value.report
    hard = r.details["hard_limit"]
    assert (r.pinned - hard, r.budget, r.unit) == (2, 2014, "tokens")
    assert sum(r.parts.values()) == r.total
    assert {"system", "user input", "in-flight calls"} <= set(r.parts)
    system = load(str(shared_dir / "data" / AIRLINE))[9].messages[0]
    assert r.parts["system"] == get_counter("o200k_base").count_message(system)
    text = with_hint(err.value)
    assert f"system {r.parts['system']}" in text and f"in-flight calls {r.parts['in-flight calls']}" in text, text
    assert "2 tokens over the hard limit 2014" in err.value.hint
    assert "message 0 (the system prompt" in err.value.hint and "shorten it" in err.value.hint, err.value.hint
    assert f"raise Policy.budget to {r.fits_at} tokens" in err.value.hint and r.fits_at > 2014
    _replay(shared_dir, r.fits_at).close()  # the budget the hint names replays the whole recording


def _five_mb_session(cm: ContextManager) -> None:
    s = cm.session("u", "s")
    s.append([text_message("sys", "system", "You are a support agent."), text_message("u1", "user", "Hi")])
    s.prepare()
    s.append([text_message("a1", "assistant", "Hello, how can I help?")])
    s.append([text_message("u2", "user", "x" * 5_000_000)])


def test_a_5_mb_user_message_says_it_is_stored_and_to_pop_it(tmp_path: Path) -> None:
    policy = Policy.preset("default", provider="openai", unit="chars", budget=20_000)
    with ContextManager(f"sqlite:///{tmp_path / 'c.db'}", policy) as cm:
        _five_mb_session(cm)
        s = cm.session("u", "s")
        with pytest.raises(ContextBudgetExceeded) as err:
            s.prepare()
        r = err.value.report
        assert r.parts["user input"] == 5_000_000 and sum(r.parts.values()) == r.total
        assert r.pinned > r.budget and r.culprit is not None
        assert (r.culprit["index"], r.culprit["id"], r.culprit["newest"]) == (3, "u2", True)
        hint = err.value.hint
        assert "message 3 (the user's input, id 'u2', 5000000 chars)" in hint, hint
        assert "it is stored: call session.pop() to remove it" in hint and "send less" not in hint, hint
        assert f"raise Policy.budget to {r.fits_at} chars" in hint and r.fits_at > 5_000_000
        # the way out the hint names: pop it, then a shorter input goes through
        assert s.pop().id == "u2"
        s.append([text_message("u3", "user", "My order is W123.")])
        assert [m.id for m in s.prepare().messages] == ["sys", "u1", "a1", "u3"]


def test_an_in_flight_result_that_may_not_be_cut_names_pop_and_truncate_in_flight() -> None:
    policy = Policy.preset("default", provider="openai", unit="chars", budget=20_000, truncate_in_flight=False)
    with ContextManager("memory://", policy) as cm:
        s = cm.session("u", "s")
        s.append([text_message("sys", "system", "You are a support agent."), text_message("u1", "user", "Logs?")])
        s.prepare()
        s.append([Message(id="a1", role="assistant", blocks=[ToolUseBlock(id="c1", name="logs", input={})]),
                  Message(id="t1", role="tool", blocks=[ToolResultBlock(
                      tool_use_id="c1", name="logs", output=[TextBlock(text="line\n" * 40_000)])])])
        with pytest.raises(ContextBudgetExceeded) as err:
            s.prepare()
        r = err.value.report
        assert r.parts["in-flight calls"] >= 200_000 and r.culprit is not None and r.culprit["id"] == "t1"
        hint = err.value.hint
        assert "message 3 (a tool result in flight, id 't1'" in hint and "session.pop()" in hint, hint
        assert "truncate_in_flight=True" in hint, hint


def test_tool_schemas_that_fill_the_budget_are_named() -> None:
    policy = Policy.preset("default", provider="openai", unit="chars", budget=20_000, tools_size=25_000)
    with ContextManager("memory://", policy) as cm:
        s = cm.session("u", "s")
        s.append([text_message("sys", "system", "You are a support agent."), text_message("u1", "user", "Hi")])
        with pytest.raises(ContextBudgetExceeded) as err:
            s.prepare()
        r = err.value.report
        assert r.parts["tools"] >= 25_000 and sum(r.parts.values()) == r.total
        assert "tool schemas" in err.value.hint and f"raise Policy.budget to {r.fits_at} chars" in err.value.hint
        assert "by part (chars): system" in str(err.value)
