"""Anthropic extended thinking: the latest assistant message of every request keeps its thinking
and redacted_thinking blocks byte-identical (older completed turns may drop thinking whole,
never edit it).

Source: https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking -- "thinking or
redacted_thinking blocks in the latest assistant message cannot be modified", and, with tool
use, the thinking of the assistant turn being continued must be passed back unchanged.

Fault kind covered: *compaction editing the reasoning of the latest assistant message* -- the
thinking stage treated every message before the latest user input as an older turn, so the
previous turn's final answer (which is the request's latest assistant message whenever a new
user message opens a turn) lost its thinking. Before the fix, replaying the Claude thinking
recording as ``anthropic`` changed it on 9-43 % of calls; the validator did not see it.
"""

from __future__ import annotations

import pytest

from builders import assistant, system, user
from conftest import TRAJECTORIES
from test_engine_acceptance import drive
from ctxwise.compaction import Budgeting, prune_thinking
from ctxwise import ContextManager
from ctxwise.formats import load
from ctxwise.messages import ThinkingBlock
from ctxwise.policy import Policy
from ctxwise.providers import bound_profile, check, droppable_thinking
from ctxwise.tokens import get_counter

CLAUDE = TRAJECTORIES / "tau2-bench" / "airline_claude-sonnet-4-5-thinking_subset.json"


def latest_assistant(messages):
    return next((m for m in reversed(messages) if m.role == "assistant"), None)


def omitted_whole(last, recorded, messages) -> bool:
    """Reasoning bound to its prefix: a completed turn's latest reply may leave out all of its
    thinking (preserved thinking: "remove the thinking in the kept turns"), never part of it."""
    u = max(i for i, m in enumerate(messages) if m.role == "user" and not m.tool_results)
    return messages.index(last) < u and not last.thinking and last.blocks == [
        b for b in recorded.blocks if not isinstance(b, ThinkingBlock)]


@pytest.mark.parametrize("budget", [3_000, 6_000, 12_000])
@pytest.mark.parametrize("binding", ["off", "auto"])
def test_claude_recording_replayed_as_anthropic_never_changes_the_latest_assistant_thinking(tmp_path, budget, binding):
    policy = Policy.preset("default", budget=budget, unit="tokens", tokenizer="o200k_base", provider="anthropic",
                           bound_reasoning=binding)
    cm = ContextManager(f"sqlite:///{tmp_path / 'c.db'}", policy)
    calls = pruned = 0
    differs: list[tuple[str, int, str]] = []
    for conv in load(CLAUDE):
        recorded = {m.id: m for m in conv.messages}
        s = cm.session("u", conv.id)
        for k, (prepared, _) in enumerate(drive(s, conv.messages, none_over_budget=True)):
            if prepared is None:
                continue
            calls += 1
            pruned += any(e.stage == "thinking" for e in prepared.events)
            last = latest_assistant(prepared.messages)
            if last is not None and last.blocks != recorded[last.id].blocks:  # thinking, text and calls
                if not (binding == "auto" and omitted_whole(last, recorded[last.id], prepared.messages)):
                    differs.append((conv.id, k, last.id))
    cm.close()
    assert calls > 50
    assert differs == [], f"{len(differs)} of {calls} calls changed the latest assistant message"
    if budget <= 6_000:
        assert pruned > 0, "the budget must make the thinking stage act, or the test proves nothing"


def test_the_thinking_stage_never_offers_the_latest_assistant_message():
    sig = iter(range(100))
    a1 = assistant("first answer", thinking="t1 " * 400, signature=f"s{next(sig)}")
    a2 = assistant("second answer", thinking="t2 " * 400, signature=f"s{next(sig)}")
    msgs = [system(), user("q1"), a1, user("q2"), a2, user("q3")]
    drop = droppable_thinking(msgs, "anthropic")
    assert {i for i, _ in drop} == {2}  # a2 (index 4) is the latest assistant message: kept
    b = Budgeting(Policy.preset("default", budget=1_000, provider="anthropic"), get_counter("chars"))
    out = prune_thinking(msgs, b, b.size(msgs)).messages
    assert out[4] is a2 and not out[2].thinking


def test_the_validator_reports_a_latest_assistant_message_without_its_thinking():
    a1 = assistant("first answer", thinking="t1", signature="s1")
    msgs = [system(), user("q1"), a1, user("q2")]
    stripped = a1.model_copy(update={"blocks": [b for b in a1.blocks if not isinstance(b, ThinkingBlock)]})
    older = bound_profile("anthropic", "off")  # models without preserved thinking
    found = check([msgs[0], msgs[1], stripped, msgs[3]], older, reference=msgs)
    assert [v.rule for v in found] == ["latest-assistant-thinking"]
    assert found[0].index == 2
    # preserved thinking: a completed turn's latest reply may leave out all of its thinking
    assert check([msgs[0], msgs[1], stripped, msgs[3]], "anthropic", reference=msgs) == []
