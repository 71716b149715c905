"""A tool loop that stays in one user turn is summarized, not thrashed (issue 26 item 3).

Fault kind covered: *one instruction, then hundreds of tool calls* (the README's own agent
loop; any agent that gets one task and calls tools until done) never got a summary, as only
turns before the current one were material: clearing fired again and again, placeholders
piled up, the hard trim fired, and from about call 100 on every call broke the prompt cache
(146 of 250 calls edited the context at 32,000 tokens). The loop's own completed tool cycles,
after the instruction and before the in-flight cycle, are now the summary's material, cut
between whole cycles, incrementally (a later pass appends a segment).
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import assistant, results, system, user
from ctxwise import ContextManager, Policy
from ctxwise.compaction import Budgeting
from ctxwise.compaction.context import current_turn_start, in_flight_start
from ctxwise.compaction.summarizing import plan_summary
from ctxwise.messages import Message
from ctxwise.providers import check, check_wire
from ctxwise.replay import metrics
from ctxwise.tokens import get_counter
from ctxwise.units import cycle_boundaries

TASK = "Read every module under src/pkg, then refactor.\nNever edit tests/ and always keep the public names."


def module(n: int) -> str:
    return "\n".join(f"{i}\tdef fn_{n}_{i}(x): return x + {i}" for i in range(60))


def read(n: int, tool: str = "open_file", arg: str = "path", thinking: str | None = None) -> list[Message]:
    a = assistant(thinking=thinking, signature=None if thinking is None else f"sig{n}",
                  calls=[(tool, {arg: f"src/pkg/mod_{n}.py"})])
    return [a, *results(a, [module(n)])]


def one_turn(provider: str, calls: int, *, thinking: bool = False, tool: str = "open_file", arg: str = "path",
             **policy: object) -> dict:
    """Drive one instruction and ``calls`` file reads at 32,000 tokens through a session: per
    call the record before it, the canonical list sent, the reply, the events, the payload."""
    pol = Policy.preset("default", budget=32_000, unit="tokens", tokenizer="estimate", provider=provider, **policy)
    out: dict = {"histories": [], "payloads": [], "outputs": [], "events": [], "wire": [], "policy": pol}
    history = [system("You are a coding agent."), user(TASK)]
    with ContextManager("memory://", pol) as cm:
        s = cm.session("u", f"one-turn-{provider}")
        s.append(history)
        for n in range(calls):
            p = s.prepare()
            cycle = read(n, tool, arg, thinking=f"read module {n} next" if thinking else None)
            out["histories"].append(list(history))
            out["payloads"].append(metrics.as_sent(list(p.messages), provider))
            out["outputs"].append(cycle[0])
            out["events"].append(list(p.events))
            out["wire"].append(p.payload)
            s.append(cycle)
            history += cycle
    return out


@pytest.mark.parametrize("provider,tool,arg", [("openai", "open_file", "path"), ("anthropic", "Read", "file_path"),
                                               ("openai_responses", "open_file", "path"), ("gemini", "open_file", "path")])
def test_a_one_turn_loop_is_summarized_and_each_break_buys_many_calls(provider, tool, arg):
    run = one_turn(provider, 130, tool=tool, arg=arg)
    stages = metrics.events_by_stage(e for evs in run["events"] for e in evs)
    assert stages.get("summarizing", 0) >= 3, stages
    assert stages.get("trimming", 0) == 0 and stages.get("clearing", 0) <= 1, stages
    breaks = metrics.cache_breaks(run["payloads"], get_counter("estimate"))
    assert breaks.median >= 8, breaks.calls
    # the task is verbatim at every call (its protocol line too), and no rule is broken
    assert metrics.task_recall(run["histories"], run["payloads"]).value == 1.0
    assert all(TASK in metrics.context_text(p) for p in run["payloads"])
    assert metrics.validator_errors(run["payloads"], provider, run["histories"]) == []
    assert all(check_wire(w, provider) == [] for w in run["wire"])
    assert all(p[1].text == TASK for p in run["payloads"])  # the instruction stays where it stood
    # every summary stands right after the instruction, and names files the loop read and
    # no longer holds verbatim
    for p in run["payloads"]:
        summaries = [i for i, m in enumerate(p) if m.kind == "summary"]
        assert summaries == list(range(2, 2 + len(summaries)))
    last = run["payloads"][-1]
    summary = "\n".join(m.text for m in last if m.kind == "summary")
    verbatim = set(re.findall(r"mod_(\d+)\.py", json.dumps([m.model_dump(mode="json") for m in last
                                                            if m.kind != "summary"])))
    named = set(re.findall(r"src/pkg/mod_(\d+)\.py", summary))
    assert named - verbatim, "the summary names none of the files it stands for"
    assert all(p[-1].role == "tool" and p[-2].tool_uses for p in run["payloads"][1:])  # the in-flight cycle stays


def test_a_later_pass_appends_a_segment_and_leaves_the_earlier_one_byte_identical():
    run = one_turn("openai", 70)
    seen: dict[str, str] = {}
    appended = 0
    for p in run["payloads"]:
        segs = [m for m in p if m.kind == "summary"]
        for m in segs:
            assert seen.setdefault(m.id, m.text) == m.text  # a segment's text never changes
        appended += len(segs) >= 2
    assert appended, "no pass appended a second segment"


def test_summaries_off_the_loop_is_still_kept_under_the_budget_by_clearing():
    run = one_turn("openai", 60, summarize=False)
    stages = metrics.events_by_stage(e for evs in run["events"] for e in evs)
    assert "summarizing" not in stages and stages.get("clearing", 0) >= 1
    assert metrics.task_recall(run["histories"], run["payloads"]).value == 1.0


def test_an_anthropic_thinking_loop_still_closes_and_keeps_bound_reasoning_valid():
    """Preserved thinking binds each reply's thinking to its prefix (platform.claude.com/docs/
    en/build-with-claude/preserved-thinking): the open loop is frozen and closed by a note when
    it outgrows the budget, its cycles cleared as before: the loop's own cycles are never
    summary material while its reasoning is bound, and no payload sends thinking after a
    changed prefix."""
    run = one_turn("anthropic", 90, thinking=True, tool="Read", arg="file_path")
    stages = metrics.events_by_stage(e for evs in run["events"] for e in evs)
    assert stages.get("loop_closed", 0) >= 1, stages
    assert metrics.bound_reasoning_violations(run["payloads"], run["outputs"]) == []
    assert metrics.validator_errors(run["payloads"], "anthropic", run["histories"]) == []
    assert all(check_wire(w, "anthropic") == [] for w in run["wire"])
    assert metrics.task_recall(run["histories"], run["payloads"]).value == 1.0
    assert "summarizing" not in metrics.events_by_stage(
        e for evs in run["events"][:next(i for i, evs in enumerate(run["events"]) if any(e.stage == "loop_closed" for e in evs)) + 1]
        for e in evs)  # up to the first close the turn is the instruction's own: no in-turn summary


def test_a_deepseek_thinking_loop_is_never_split_by_a_summary():
    """DeepSeek thinking mode wants reasoning passed back for the whole tool-using span after
    the user's message (api-docs.deepseek.com/guides/thinking_mode): summarizing the loop's
    head while its later replies keep their reasoning would split that span."""
    b = Budgeting(Policy.preset("default", budget=6_000, unit="chars", provider="deepseek"), get_counter("chars"))
    ctx = [system(), user(TASK)]
    for n in range(8):
        a = assistant(thinking=f"module {n}", calls=[("open_file", {"path": f"src/pkg/mod_{n}.py"})])
        ctx += [a, *results(a, ["x" * 1_000])]
    assert b.size(ctx) > b.level(1.0)
    assert plan_summary(ctx, b, b.size(ctx)) is None
    # the same loop without reasoning is summarized inside the turn
    plain = [m.model_copy(update={"blocks": [x for x in m.blocks if x.type != "thinking"]}) for m in ctx]
    plan = plan_summary(plain, b, b.size(plain))
    assert plan is not None and plan.start == 2


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sizes=st.lists(st.integers(50, 2_500), min_size=2, max_size=25),
       batch=st.lists(st.integers(1, 3), min_size=25, max_size=25),
       budget=st.integers(3_000, 12_000))
def test_an_in_turn_cut_falls_between_whole_cycles_after_the_instruction(sizes, batch, budget):
    """Any one-turn loop over the hard limit: the material starts after the instruction, ends
    at a cycle boundary (a parallel batch is one cycle) before the in-flight cycle, and the
    pinned instruction is never in it."""
    b = Budgeting(Policy.preset("default", budget=budget, unit="chars", provider="openai"), get_counter("chars"))
    ctx = [system(), user(TASK)]
    for n, size in enumerate(sizes):
        a = assistant(calls=[("open_file", {"path": f"src/pkg/mod_{n}_{k}.py"}) for k in range(batch[n])])
        ctx += [a, *results(a, ["y" * (size // batch[n])] * batch[n])]
    size = b.size(ctx)
    plan = plan_summary(ctx, b, size)
    if plan is None:
        return
    assert plan.start >= 2 and current_turn_start(ctx) == 1
    assert plan.cut in cycle_boundaries(ctx) and plan.start < plan.cut <= in_flight_start(ctx)
    replaced = plan.replaced(ctx)
    assert ctx[1].id not in replaced and not set(replaced) & {m.id for m in ctx[in_flight_start(ctx):]}
    assert check(ctx[:plan.start] + ctx[plan.cut:], "openai") == []
