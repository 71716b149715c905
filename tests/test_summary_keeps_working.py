"""A summary keeps the files the agent works with (issue 26, working-file freshness): the whole
tool cycles of the material whose calls are working views (``ctxwise.resources.working_views``)
are left out of the summary and follow it verbatim; the rest is folded. Real chars counter,
real digest summarizer, the provider check on the result."""

from __future__ import annotations

import pytest

from builders import assistant, results, system, user
from ctxwise.compaction import Budgeting, compact
from ctxwise.compaction.summarizing import plan_summary, summarize_range, working_cycles
from ctxwise.policy import Policy
from ctxwise.providers import check
from ctxwise.summarizers import DigestSummarizer
from ctxwise.tokens import get_counter

CHARS = get_counter("chars")
SCRIPT = "cat <<'EOF' > repro.py\nfrom app import parse\nprint(parse('1,2'))\nEOF"


def session(run_script_lately: bool) -> list:
    ctx = [system("You fix bugs with a shell."), user("Fix parse() in app.py; reproduce first.")]
    for k in range(8):
        cmd = SCRIPT if k == 1 else f"grep -rn parse src/mod{k}.py"
        a = assistant(f"Step {k}.", calls=[("bash", {"command": cmd})])
        ctx += [a, *results(a, ["(no output)" if k == 1 else f"src/mod{k}.py:{k}: parse " + "x" * 1500])]
    ctx.append(user("Please always provide EXACTLY ONE action."))
    for k in range(8, 12):
        cmd = "python3 repro.py" if run_script_lately and k == 11 else f"ls dir{k}"
        a = assistant(f"Step {k}.", calls=[("bash", {"command": cmd})])
        ctx += [a, *results(a, [f"out {k} " + "y" * 1500])]
    return ctx


def test_the_summary_leaves_the_script_being_run_verbatim_after_it():
    ctx = session(run_script_lately=True)
    b = Budgeting(Policy.preset("default", budget=14_000, provider="openai", keep_tools=["bash"]), CHARS)
    write = next(m for m in ctx if any(u.input.get("command") == SCRIPT for u in m.tool_uses))
    plan = plan_summary(ctx, b, CHARS.count(ctx))
    assert plan is not None and write.id in plan.kept
    assert write.id not in plan.replaced(ctx)
    out = compact(ctx, b, DigestSummarizer())
    ids = [m.id for m in out.messages]
    summary = next(i for i, m in enumerate(out.messages) if m.kind == "summary")
    assert write.id in ids and ids.index(write.id) > summary  # kept whole, after the summary
    assert out.messages[ids.index(write.id)] == write
    assert check(out.messages, "openai") == []


def test_a_script_no_longer_named_is_folded_like_the_rest():
    ctx = session(run_script_lately=False)
    b = Budgeting(Policy.preset("default", budget=14_000, provider="openai", keep_tools=["bash"]), CHARS)
    write = next(m for m in ctx if any(u.input.get("command") == SCRIPT for u in m.tool_uses))
    plan = plan_summary(ctx, b, CHARS.count(ctx))
    assert plan is not None and write.id in plan.replaced(ctx)
    out = compact(ctx, b, DigestSummarizer())
    assert write.id not in [m.id for m in out.messages]


def test_the_first_message_of_the_material_cannot_be_kept():
    ctx = session(run_script_lately=True)
    b = Budgeting(Policy.preset("default", budget=14_000, provider="openai", keep_tools=["bash"]), CHARS)
    kept = working_cycles(ctx, 2, 20, b)
    assert kept  # the write's cycle
    with pytest.raises(ValueError, match="starts the material"):
        summarize_range(ctx, b, CHARS.count(ctx), DigestSummarizer(), 2, 20, kept=frozenset({ctx[2].id}),
                        trigger="t", t0=0.0)
