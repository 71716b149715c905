"""The replay driver on the built-in demo and a real recording, through the real engine."""

from __future__ import annotations

import io

import pytest

from rich.console import Console

from ctxwise import ContextManager
from ctxwise.formats import load
from ctxwise.policy import Policy
from ctxwise.replay import metrics
from ctxwise.replay.run import DEMO_POLICY, run
from ctxwise.messages import text_message
from ctxwise.replay.render import change_text, measures_table, session_table, title_lines
from ctxwise.replay.runner import Measures, _span, describe, replay_conversation, rounds_text
from ctxwise.replay.sources import builtin, conversation_label
from ctxwise.tokens import get_counter
from tests.conftest import TRAJECTORIES


def demo_policy() -> Policy:
    return Policy.preset("default", **DEMO_POLICY)


def test_demo_rounds_calls_and_actions(tmp_path):
    conv = load(builtin("demo"))[0]
    cm = ContextManager(f"sqlite:///{tmp_path / 'r.db'}", demo_policy())
    r = replay_conversation(cm, "u", "s", conv.messages, name="demo", source="demo", format=conv.format)
    assistants = sum(1 for m in conv.messages if m.role == "assistant")
    assert len(r.rounds) == 14
    assert r.measures.calls == len(r.calls) == assistants
    assert [x.calls for x in r.rounds][:2] == [4, 1]
    assert "query_order!" in r.rounds[3].tools          # the failed look-up of round 4
    assert r.rounds[-1].full == sum(x.growth for x in r.rounds)
    actions = " ".join(a for x in r.rounds for a in x.actions)
    # At the demo's budget every layer has work: thinking the provider lets go is pruned, old
    # results are cleared and old rounds summarized once the hard limit is crossed.
    assert "summarized rounds 1–" in actions and "pruned thinking" in actions and "cleared" in actions
    assert r.measures.cost < r.measures.reference_fb * 1.2  # compaction off: 1.63 x F(B) on the demo
    assert r.measures.recall >= 0.95  # the demo target of issue 11
    assert all(c.size <= demo_policy().effective_budget for c in r.calls)
    assert r.measures.validator_errors == 0
    # The stored context is the one the engine keeps: reopening the session sees the same messages.
    again = cm.session("u", "s")
    assert again.messages[-1].id == conv.messages[-1].id
    assert any(e["stage"] == "summarizing" for e in again.events())


def test_run_measures_agree_with_the_pure_functions(tmp_path):
    """The per-call numbers the driver keeps equal what metrics.* compute from the payloads."""
    conv = load(builtin("demo"))[0]
    policy = demo_policy()
    cm = ContextManager(f"sqlite:///{tmp_path / 'r.db'}", policy)
    s = cm.session("u", "s2")
    payloads, histories, outputs, history, pending = [], [], [], [], []
    seen_user = False
    for m in conv.messages:
        seen_user |= m.role == "user"
        if m.role == "assistant" and seen_user:
            s.append(pending)
            pending = []
            payloads.append(list(s.prepare().messages))
            histories.append(list(history))
            outputs.append(m)
            s.append([m])
        else:
            pending.append(m)
        history.append(m)
    tok = get_counter("o200k_base")
    r = replay_conversation(ContextManager(f"sqlite:///{tmp_path / 'r2.db'}", policy), "u", "s",
                            conv.messages, name="demo", source="demo", format="agentscope")
    assert r.measures.input_tokens == metrics.input_tokens(payloads, tok)
    assert round(r.measures.cost, 3) == round(metrics.cache_adjusted_cost(payloads, tok, 0.1), 3)
    rec = metrics.support_recall(histories, payloads, outputs)
    assert (r.measures.supported, r.measures.needed) == (rec.supported, rec.needed)


def test_run_with_baseline_on_a_real_file(tmp_path):
    f = TRAJECTORIES / "tau2-bench" / "retail_gpt-4.1_1trial.json"
    policy = Policy.preset("default", unit="tokens", budget=6000)
    res = run([str(f)], policy, db=f"sqlite:///{tmp_path / 'r.db'}", limit=5)
    assert len(res.sessions) + len(res.errors) == 5
    on, off = res.totals()
    assert off is not None and off.calls == on.calls
    assert off.recall == 1.0 and off.events == {}
    assert on.input_tokens <= off.input_tokens
    assert on.over_budget == 0


def test_describe_merges_events_by_stage():
    evs = [{"stage": "thinking", "affected_ids": ["a", "b"]},
           {"stage": "clearing", "affected_ids": ["x"], "detail": {"cleared": 3}},
           {"stage": "clearing", "affected_ids": ["y"], "detail": {"cleared": 1}},
           {"stage": "summarizing", "rounds": [1, 7]},
           {"stage": "trimming", "rounds": [8, 8]}]
    assert describe(evs) == ["pruned thinking (2)", "cleared 4 results", "summarized rounds 1–7", "trimmed round 8"]


def test_describe_names_the_rounds_of_every_trim():
    """A trim always says which rounds it dropped: the opening before round 1 (tau2's greeting)
    included, several trims in one round merged; never a bare ``trimmed round``."""
    assert describe([{"stage": "trimming", "rounds": [0, 0]}]) == ["trimmed the opening (before round 1)"]
    assert describe([{"stage": "trimming", "rounds": [2, 2]}, {"stage": "trimming", "rounds": [3, 3]}]) == [
        "trimmed rounds 2–3"]
    assert describe([{"stage": "trimming", "rounds": [1, 2]}, {"stage": "trimming", "rounds": [5, 5]}]) == [
        "trimmed rounds 1–2, 5"]
    assert describe([{"stage": "trimming", "rounds": [], "affected_ids": ["x", "y"]}]) == ["trimmed 2 messages"]
    assert describe([{"stage": "trimming", "rounds": [0, 0]}, {"stage": "trimming", "rounds": [1, 1]}]) == [
        "trimmed the opening and round 1"]
    assert rounds_text([]) == "" and rounds_text([0, 1, 2]) == "the opening and rounds 1–2"


def test_span_puts_messages_before_round_1_in_the_opening():
    round_of = {"m0": 0, "m1": 0, "m2": 1, "m3": 2}
    assert _span({"affected_ids": ["m1"]}, round_of) == [0, 0]
    assert _span({"affected_ids": ["m1", "m2", "m3"]}, round_of) == [1, 2]
    assert _span({"affected_ids": ["unknown"]}, round_of) == []


def test_trimming_the_greeting_names_the_opening(tmp_path):
    """A real tau2 recording at a tight chars budget trims its opening greeting (before any user
    round): the action used to read a bare ``trimmed round``."""
    conv = next(c for c in load(TRAJECTORIES / "tau2-bench" / "retail_gpt-4.1_1trial.json")
                if conversation_label(c) == "task 60")
    cm = ContextManager(f"sqlite:///{tmp_path / 'r.db'}", Policy.preset("default", unit="chars", budget=8000))
    r = replay_conversation(cm, "u", "s", conv.messages, name="t60", source="t60", format=conv.format)
    trims = [a for x in r.rounds for a in x.actions if a.startswith("trimmed")]
    assert any(a.startswith("trimmed the opening") for a in trims), trims
    assert all(any(ch.isdigit() for ch in a) for a in trims), trims


def test_a_round_without_a_model_call_has_no_size(tmp_path):
    """The last user message got no recorded answer: no call, so no size (not 0), and the
    session's start (system prompt) plus the rounds' growth is the full record."""
    r = _no_call_session(tmp_path)
    first, last = r.rounds
    assert first.calls == 1 and first.size and first.chars
    assert last.calls == 0 and (last.size_before, last.size, last.chars) == (None, None, None)
    assert r.last_call is r.calls[-1] and r.last_call.size == first.size
    assert r.start > 0
    assert r.start + first.growth + last.growth == last.full
    assert r.as_dict()["rounds"][1]["size"] is None


def _no_call_session(tmp_path):
    msgs = [text_message("s", "system", "You are a shop assistant. " * 20),
            text_message("u1", "user", "Where is my order #W123?"),
            text_message("a1", "assistant", "It ships tomorrow."),
            text_message("u2", "user", "Thanks, bye!")]
    cm = ContextManager(f"sqlite:///{tmp_path / 'r.db'}", Policy.preset("default", unit="chars", budget=10_000))
    return replay_conversation(cm, "u", "s", msgs, name="n", source="n", format="openai")


def _text(renderable) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def test_session_table_shows_no_call_and_the_last_calls_size(tmp_path):
    r = _no_call_session(tmp_path)
    lines = _text(session_table(r, "chars")).splitlines()
    row2 = next(ln for ln in lines if ln.startswith("│     2 "))
    cells = [c.strip() for c in row2.split("│")]
    assert cells[3:7] == ["0", "–", "–", "–"] and cells[8] == "no model call"
    total = next(ln for ln in lines if ln.startswith("│ total"))
    cells = [c.strip() for c in total.split("│")]
    after, chars = cells[5], cells[6]
    assert after == f"{r.calls[-1].size:,}" and chars == f"{r.calls[-1].chars:,}"
    # the total row says what the full record counts: start (system prompt) + the rounds' growth
    text = "\n".join(lines)
    growth = sum(x.growth for x in r.rounds)
    assert f"full record {r.start + growth:,} chars" in text
    assert f"= start {r.start:,} + growth {growth:,}" in text and f"+{growth:,}" in total


def test_changes_that_round_to_nothing_read_0():
    m = Measures(calls=1, input_tokens=1000, cost=100.0, priced=50.0, supported_norm=3, needed_norm=3,
                 supported=3, needed=3)
    same = Measures(calls=1, input_tokens=1001, cost=100.2, priced=50.1, supported_norm=3, needed_norm=3,
                    supported=3, needed=3)
    assert [change_text(k, m, same) for k in ("input_tokens", "cost", "priced", "recall", "recall_exact",
                                              "over_budget")] == ["0%", "0%", "0%", "0 pt", "0 pt", "0"]
    less = Measures(calls=1, input_tokens=330, cost=109.0, priced=40.0, supported_norm=2, needed_norm=3,
                    supported=1, needed=3)
    assert [change_text(k, less, m) for k in ("input_tokens", "cost", "priced", "recall", "recall_exact")] == [
        "-67%", "+9%", "-20%", "-33.3 pt", "-66.7 pt"]


def test_summary_title_breaks_only_between_groups():
    title = ("summary: 40 session(s) replayed, 2 failed, policy default, budget 4,000 tokens (o200k_base), "
             "provider anthropic")
    lines = title_lines(title).splitlines()
    assert len(lines) > 1 and all(len(ln) <= 64 for ln in lines)
    assert " ".join(lines) == title
    assert any("provider anthropic" in ln for ln in lines)
    text = _text(measures_table(Measures(), None, sessions=1, unit="tokens", title=title))
    assert "provider anthropic" in text and "omitted" not in text
    many = _text(measures_table(Measures(), None, sessions=4, unit="tokens", title=title))
    assert "4 sessions: per-session tables omitted; use --json or --report" in many


# -- the provider of each recording; the same calls priced under any model ---------------------

LONG = TRAJECTORIES.parent / "long"
KINDS = [
    # (recording, provider, what decides): the model it names wins over what its reasoning looks like
    (TRAJECTORIES / "tau2-bench" / "airline_claude-sonnet-4-5-thinking_subset.json", "anthropic",
     "names model claude-sonnet-4-5, and has signed thinking"),
    (TRAJECTORIES / "tau2-bench" / "retail_gpt-4.1_1trial.json", "openai", "names model gpt-4.1"),
    (LONG / "claude-code_spotter" / "cc_8463c716-a2ea-4c14-9efa-87158ebd9f20__agent-a7be2f0.json", "anthropic",
     "names model claude-haiku-4-5"),
    (LONG / "mini-swe-agent_gemini-3-pro" / "msa_django__django-12155.json", "gemini", "names model google/gemini"),
    (LONG / "openhands_multi-swe-bench" / "oh_ponylang__ponyc-4593.json", "openai",
     "(openai/openrouter-llama-4-maverick) has no profile of its own"),
    (TRAJECTORIES / "tau-bench" / "gpt-4o-airline_subset.json", "openai", "has no reasoning to send back"),
]


@pytest.mark.parametrize("path, provider, why", KINDS, ids=lambda x: getattr(x, "name", None))
def test_each_kind_of_recording_gets_its_own_provider(path, provider, why):
    """Issue 28 item 4, per kind of real recording: tau2 (Claude with signed thinking, GPT-4.1),
    a Claude Code subagent (no reasoning: its content alone reads as OpenAI), mini-swe-agent on
    Gemini (unsigned reasoning, which alone reads as DeepSeek), OpenHands on Llama (a model with no profile: judged by its content) and
    tau-bench (no model field)."""
    from ctxwise.replay.defaults import guess_provider, recording_provider

    conv = load(path)[0]
    got, reason = recording_provider(conv)
    assert got == provider and why in reason, reason
    if path.parent.name in ("claude-code_spotter", "mini-swe-agent_gemini-3-pro"):
        assert guess_provider([conv])[0] != provider  # its content alone reads as another provider


def test_calls_priced_under_any_model_agree_with_the_run(tmp_path):
    """The cost table's figures are the run's: pricing the recorded calls under the provider's
    own model gives the measured provider cost, and under the flat model the cache-adjusted cost."""
    from ctxwise.prices import DEEPSEEK, FLAT

    res = run([], demo_policy(), db=f"sqlite:///{tmp_path / 'r.db'}")
    for m in (res.sessions[0].measures, res.sessions[0].baseline):
        assert m is not None and len(m.usage) == m.calls == 32
        assert m.prices == "deepseek" and m.cost_under(DEEPSEEK) == pytest.approx(m.priced)
        assert m.cost_under(FLAT) == pytest.approx(m.cost)
        assert set(m.costs_by_model()) == {"flat 0.1", "openai", "openai gpt-5.6", "openai gpt-5.6 12h", "anthropic",
                                           "anthropic 1h", "deepseek", "gemini", "qwen"}


LONG = TRAJECTORIES.parent / "long"


def test_replay_keeps_the_long_loop_measures_of_bench_long(tmp_path):
    """On a recorded coding loop the replay's task recall, edit-anchor recall, working-file
    freshness, cache breaks and re-billed tokens are metrics.*'s over the same payloads (the
    functions bench/long.py scores with), and --json and the table carry them."""
    from tests.longloops import drive

    f = LONG / "openhands_multi-swe-bench" / "oh_ponylang__ponyc-4593.json"
    conv = load(str(f))
    conv = conv[0] if isinstance(conv, list) else conv
    histories, payloads, outputs, _ = drive(f, 8000)
    policy = Policy.preset("default", budget=8000, unit="tokens", provider="openai")
    r = replay_conversation(ContextManager(f"sqlite:///{tmp_path / 'r.db'}", policy), "u", "s", conv.messages,
                            name="oh", source=str(f), format=conv.format)
    m, tok = r.measures, get_counter("o200k_base")
    task = metrics.task_recall(histories, payloads)
    anchors = metrics.edit_anchor_recall(histories, payloads, outputs)
    fresh = metrics.working_file_freshness(histories, payloads, outputs)
    breaks = metrics.cache_breaks(payloads, tok)
    assert task.needed > 0 and anchors.needed > 0 and fresh.needed > 0 and breaks.calls  # the loop exercises them
    assert (m.task_supported, m.task_needed) == (task.supported, task.needed)
    assert (m.anchors_supported, m.anchors_needed) == (anchors.supported, anchors.needed)
    assert (m.fresh_supported, m.fresh_needed) == (fresh.supported, fresh.needed)
    assert (tuple(m.bought), m.rebilled) == (breaks.calls, breaks.rebilled) and sum(m.bought) <= m.calls
    d = m.as_dict()
    assert d["task_recall"] == round(task.value, 4) and d["edit_anchor_recall"] == round(anchors.value, 4)
    assert d["working_file_freshness"] == round(fresh.value, 4) and d["rebilled_tokens"] == breaks.rebilled
    assert d["cache_breaks"] == len(breaks.calls) and d["calls_per_break_median"] == round(breaks.median, 1)
    # F(B) is a reference, never named a floor
    assert "reference_fb" in d and not any("floor" in k for k in d)
    text = _text(measures_table(m, None, sessions=1, unit="tokens", title="t"))
    assert f"({task.supported}/{task.needed})" in text and f"({anchors.supported}/{anchors.needed})" in text
    assert f"{len(breaks.calls)}, {breaks.median:.1f}" in text and f"{breaks.rebilled:,}" in text
    assert "floor" not in text
    # the session table names the provider it was replayed as, beside the recording's format
    assert f"format {conv.format}, provider openai" in _text(session_table(r, "tokens"))


def test_a_run_with_no_edit_shows_no_anchor_recall():
    text = _text(measures_table(Measures(calls=1, task_supported=2, task_needed=2), None, sessions=1,
                                unit="tokens", title="t"))
    row = next(ln for ln in text.splitlines() if "edit-anchor recall" in ln)
    assert "– (none)" in row and "100.0%  (2/2)" in text
    assert change_text("anchor_recall", Measures(), Measures()) == ""  # no edit on either side: no change shown


def test_bench_long_puts_every_budgets_rows_under_a_table_header(tmp_path):
    """Kind (fresh report, item 11): the 64k and 128k rows of bench/results/long.md had no
    header row, so markdown did not render them as tables."""
    import importlib.util
    import sys
    from pathlib import Path

    from conftest import REPO

    spec = importlib.util.spec_from_file_location("long_bench", REPO / "bench" / "long.py")
    assert spec is not None and spec.loader is not None
    long = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = long
    spec.loader.exec_module(long)
    files = [Path("a/x.json"), Path("a/y.json")]
    results = {b: {f"a/{f.name}": {s: long.Score(calls=3, tokens=10, cost=5.0) for s in long.STRATEGIES}
                   for f in files} for b in (32_000, 64_000, 128_000)}
    lines = long.report(results, files, tmp_path, "auto").splitlines()
    totals = lines[lines.index("## Totals"):lines.index("## Per session (ctxwise)")]
    for k, line in enumerate(totals):
        if line.startswith("| ") and not line.startswith(("| budget", "| ---")):
            above = totals[k - 1]
            assert above.startswith("| "), f"a row outside a table: {line[:40]}"
    assert sum(1 for ln in totals if ln.startswith("| budget | strategy")) == 3
