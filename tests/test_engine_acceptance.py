"""Engine acceptance on real recorded sessions.

* every tau2-bench retail conversation replayed at 4,000 tokens (o200k, system prompt
  included): each prepared payload is valid, within budget, and no pinned item changed;
* every recorded conversation, on SQLite and PostgreSQL: after the replay, a new process that
  opens the same store and prepares gets the same payload, byte for byte.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, TRAJECTORIES
from ctxwise.compaction.context import pinned_indices
from ctxwise import ContextManager
from ctxwise.errors import ContextBudgetExceeded
from ctxwise.formats import load
from ctxwise.policy import Policy
from ctxwise.providers import check
from ctxwise.units import is_user_input

FILES = {
    "retail_gpt": TRAJECTORIES / "tau2-bench" / "retail_gpt-4.1_1trial.json",
    "retail_ft": TRAJECTORIES / "tau2-bench" / "retail_ft-gpt-4.1_1trial.json",
    "airline_claude": TRAJECTORIES / "tau2-bench" / "airline_claude-sonnet-4-5-thinking_subset.json",
    "taubench": TRAJECTORIES / "tau-bench" / "gpt-4o-airline_subset.json",
}
PROVIDER = {"airline_claude": "anthropic"}


def drive(session, messages, *, tolerate_over_budget=False, none_over_budget=False):
    """Replay like the agent ran: before each model call, append what arrived and prepare.
    Yields (prepared, history so far). With ``tolerate_over_budget`` a call whose pinned
    content cannot fit (ContextBudgetExceeded) is passed over, as an agent would stop; with
    ``none_over_budget`` it is yielded as ``(None, history)``."""
    pending, history, seen_user = [], [], False
    for m in messages:
        seen_user = seen_user or is_user_input(m)
        if m.role == "assistant" and seen_user:
            if pending:
                session.append(pending)
                pending = []
            try:
                prepared = session.prepare()
            except ContextBudgetExceeded:
                if none_over_budget:
                    yield None, list(history)
                elif not tolerate_over_budget:
                    raise
            else:
                yield prepared, list(history)
        pending.append(m)
        history.append(m)
    if pending:
        session.append(pending)


def test_tau2_retail_at_4000_tokens_valid_within_budget_pins_unchanged(tmp_path):
    policy = Policy.preset("default", budget=4000, unit="tokens", tokenizer="o200k_base")
    cm = ContextManager(f"sqlite:///{tmp_path / 'r.db'}", policy)
    convs = load(FILES["retail_gpt"])
    assert len(convs) == 40
    calls = fired = 0
    for conv in convs:
        s = cm.session("acceptance", conv.id)
        for prepared, history in drive(s, conv.messages):
            calls += 1
            fired += bool(prepared.events)
            assert check(prepared.messages, "openai", reference=history) == [], conv.id
            assert prepared.size <= policy.effective_budget, (conv.id, prepared.size)
            sent = {m.id: m for m in prepared.messages}
            for i in pinned_indices(history):
                assert sent.get(history[i].id) == history[i] or history[i].role == "tool", (conv.id, i)
            # in-flight results may only be cut as the very last resort, never dropped
            for i in pinned_indices(history):
                assert history[i].id in sent, (conv.id, i)
    assert calls == 476
    assert fired > 20, "a 4,000-token budget must make the engine act"


DUMP = """
import json, sys
from ctxwise import ContextManager
from ctxwise.errors import ContextBudgetExceeded
from ctxwise.policy import Policy
url, provider, ids = sys.argv[1], sys.argv[2], json.loads(sys.stdin.read())
cm = ContextManager(url, Policy.preset("default", budget=3000, unit="tokens", provider=provider))
out = {}
for sid in ids:
    p = cm.session(f"user-{sid}", sid).prepare()
    out[sid] = [json.dumps(p.payload, ensure_ascii=False, sort_keys=False), [e.stage for e in p.events]]
print(json.dumps(out))
"""


@pytest.mark.parametrize("name", sorted(FILES))
def test_reload_in_a_new_process_prepares_the_same_payload(name, store_url):
    provider = PROVIDER.get(name, "openai")
    policy = Policy.preset("default", budget=3000, unit="tokens", provider=provider)
    cm = ContextManager(store_url, policy)
    expected = {}
    for conv in load(FILES[name]):
        s = cm.session(f"user-{conv.id}", conv.id)
        for _ in drive(s, conv.messages, tolerate_over_budget=True):
            pass
        if s.messages and s.messages[-1].role == "assistant" and s.messages[-1].tool_uses:
            continue  # ends on an unanswered call: no valid request exists to compare
        try:
            expected[conv.id] = json.dumps(s.prepare().payload, ensure_ascii=False, sort_keys=False)
        except ContextBudgetExceeded:
            continue
    cm.close()
    assert expected
    proc = subprocess.run([sys.executable, "-c", DUMP, store_url, provider], input=json.dumps(list(expected)),
                          capture_output=True, text=True, cwd=REPO, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout)
    for sid, payload in expected.items():
        assert got[sid][0] == payload, sid
        assert got[sid][1] == [], f"{sid}: a reload must not compact again ({got[sid][1]})"
