"""The replay driver on the built-in demo and a real recording, through the real engine."""

from __future__ import annotations

from ctxwise.engine import ContextManager
from ctxwise.formats import load
from ctxwise.policy import Policy
from ctxwise.replay import metrics
from ctxwise.replay.run import DEMO_POLICY, run
from ctxwise.replay.runner import describe, replay_conversation
from ctxwise.replay.sources import builtin
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
    assert "cleared" in actions and "summarized rounds 1–" in actions
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
