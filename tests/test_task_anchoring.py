"""Task anchoring in long tool loops, on real recordings of each agent kind (../shared/data/long):
the harness's notices are told from the user's own instructions, the task lines keep the
protocol (a submit command) and no bare list marker, and a replay keeps every task line of the
instruction in force at every call while no summary or facts block quotes harness text."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxwise import ContextManager, Policy
from ctxwise.compaction.context import anchored_indices, task_end
from ctxwise.formats import load
from ctxwise.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock, text_message
from ctxwise.replay import metrics
from ctxwise.task import instruction_indices, is_harness_text, latest_instruction_run, task_lines

from conftest import SHARED

LONG = SHARED / "data" / "long"
MSA = LONG / "mini-swe-agent_gemini-3-pro" / "msa_django__django-11087.json"
CC = LONG / "claude-code_spotter" / "cc_258c7280-ae70-4798-800f-63464d01a85d.json"
SKILL = LONG / "claude-code_spotter" / "cc_subagent.json"
OH = LONG / "openhands_multi-swe-bench" / "oh_ponylang__ponyc-4588.json"
SA = LONG / "swe-agent" / "sa_test-repo-i1.json"


def messages(path: Path) -> list[Message]:
    conv = load(str(path))
    conv = conv[0] if isinstance(conv, list) else conv
    return list(conv.messages)


def user_inputs(ms: list[Message]) -> list[int]:
    return [i for i, m in enumerate(ms) if m.role == "user" and not m.tool_results]


@pytest.mark.parametrize("path, own", [(MSA, [1]), (CC, [0, 341]), (SKILL, [0, 1, 23]), (OH, [1]), (SA, [1, 2])])
def test_own_instructions_are_told_from_harness_notices(path, own):
    ms = messages(path)
    assert instruction_indices(ms) == own
    notices = [i for i in user_inputs(ms) if i not in own]
    for i in notices:  # format errors, interruptions, task notifications, argument errors
        earlier = [ms[j].text for j in user_inputs(ms) if j < i]
        assert is_harness_text(ms[i].text, earlier), ms[i].text[:80]


def test_a_person_saying_the_same_short_thing_twice_is_no_boilerplate():
    assert not is_harness_text("yes, go ahead", ["yes, go ahead"])
    assert not is_harness_text("Please fix the failing test in utils.py.")
    assert is_harness_text("<task-notification>\n<status>completed</status>\n</task-notification>\nRead it: /tmp/x")


def test_long_task_lines_keep_the_head_and_the_submit_command():
    text = messages(MSA)[1].text
    lines = task_lines(text)
    assert "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached" in lines
    assert "Optimize .delete() to use only required fields." in lines
    assert sum(map(len, lines)) < len(text) / 2  # head plus protocol, not the whole traceback
    assert not any(line.rstrip(".)").isdigit() for line in lines)


def test_skill_prompt_lines_have_no_bare_list_markers():
    lines = task_lines(messages(SKILL)[1].text)
    assert lines and not any(line in ("1.", "2.", "3.", "-", "*") for line in lines)
    assert any("DO NOT create any beads" in line for line in lines)


def test_the_latest_instruction_stays_anchored_after_harness_notices():
    call = Message(id="a1", role="assistant", blocks=[ToolUseBlock(id="c1", name="bash", input={"command": "ls"})])
    res = Message(id="t1", role="tool", blocks=[ToolResultBlock(tool_use_id="c1", name="bash",
                                                                output=[TextBlock(text="x")])])
    notice = text_message("u2", "user", "[Request interrupted by user for tool use]")
    ms = [text_message("s", "system", "sys"), text_message("u1", "user", "Fix the bug"), call, res, notice,
          text_message("a2", "assistant", "ok")]
    assert latest_instruction_run(ms) == [1]
    assert 1 in anchored_indices(ms) and task_end(ms) == 2
    ms.append(text_message("u3", "user", "now push it"))  # a new own instruction: the old one is a turn
    assert anchored_indices(ms) == {6} and task_end(ms) == 1


def replay(path: Path, provider: str, budget: int) -> tuple[list, list, list]:
    # Reasoning binding off: a Claude Code session is one open tool loop, and with Anthropic's
    # preserved thinking nothing in it may be edited until the turn ends (the loop raises
    # ContextBudgetExceeded at 32k; tests/test_bound_reasoning.py); task anchoring is the subject here.
    policy = Policy.preset("default", budget=budget, unit="tokens", provider=provider, bound_reasoning="off")
    histories, payloads, outputs = [], [], []
    with ContextManager("memory://", policy) as cm:
        s = cm.session("t", "r")
        for new, history, m in metrics.model_calls(messages(path)):
            if new:
                s.append(new)
            p = s.prepare()
            histories.append(history)
            payloads.append(list(p.messages))
            outputs.append(m)
            s.append([m])
    return histories, payloads, outputs


@pytest.mark.parametrize("path, provider, budget", [(MSA, "openai", 32_000), (CC, "anthropic", 32_000),
                                                    (OH, "gemini", 12_000)])
def test_every_task_line_is_in_every_call(path, provider, budget):
    histories, payloads, _ = replay(path, provider, budget)
    r = metrics.task_recall(histories, payloads)
    assert r.needed > 0 and r.supported == r.needed
    # the budget is small enough that compaction acts: some call sends less than the history
    assert any(len(metrics.context_text(p)) < len(metrics.context_text(h)) for h, p in zip(histories, payloads))
    for p in payloads:
        for m in p:
            if m.kind in ("summary", "facts"):
                assert "EXACTLY ONE action" not in m.text and "Request interrupted" not in m.text
