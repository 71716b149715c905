"""The inspector's chart per model call is rebuilt from the store (no row is written per
prepare()); these tests hold the rebuilt sizes against what the replay measured at each call.

Kind covered: a chart that draws something other than what was sent (a call's size before
compaction, the size sent, or its events put on the wrong call).
"""

from __future__ import annotations

import pytest

from ctxwise import Policy, open_store
from ctxwise.compaction.events import EMITTED_ONLY
from ctxwise.replay.run import run
from ctxwise.server.calls import session_calls
from tests.conftest import TRAJECTORIES

CASES = {
    "demo (deepseek thinking, summary and facts block)": ([], Policy.preset("default", unit="tokens", budget=5000,
                                                                            provider="deepseek")),
    "tau2 retail (greeting before the first input, unanswered last input)": (
        [TRAJECTORIES / "tau2-bench" / "retail_gpt-4.1_1trial.json"], Policy.preset("default", unit="tokens",
                                                                                    budget=4000)),
    "tau2 airline, Claude signed thinking": (
        [TRAJECTORIES / "tau2-bench" / "airline_claude-sonnet-4-5-thinking_subset.json"],
        Policy.preset("default", unit="tokens", budget=4000, provider="anthropic",
                      bound_reasoning="off")),  # the inspector's sizes; binding has its own tests
}


def replayed(tmp_path, paths, policy, limit=4):
    db = f"sqlite:///{tmp_path / 'r.db'}"
    res = run([str(p) for p in paths], policy, db=db, limit=limit, baseline=False)
    assert not res.errors, res.errors
    store = open_store(db)
    out = []
    for i, s in enumerate(res.sessions):
        user, sid = f"replay/recorded-user/{res.run_id}/{i:04d}", f"{res.run_id}/{i:04d}"
        state = store.load(user, sid, include_hidden=True)
        out.append((s, session_calls(state, store.events(user, sid), store.transcript(user, sid))))
    store.close()
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_rebuilt_sizes_are_the_sizes_the_replay_measured(tmp_path, name):
    paths, policy = CASES[name]
    sessions = replayed(tmp_path, paths, policy)
    fired = 0
    for s, calls in sessions:
        assert [c.message_id is not None for c in calls[:len(s.calls)]] == [True] * len(s.calls)
        # a last user input with no recorded answer is one more bar: what the next call reads
        assert len(calls) - len(s.calls) in (0, 1)
        for c, measured in zip(calls, s.calls):
            got = (c.size_before, c.size, [e["stage"] for e in c.events])
            want = (measured.size_before, measured.size,
                    [e["stage"] for e in measured.events if e["stage"] not in EMITTED_ONLY])
            assert got == want, f"{s.name} call {c.number}"
            fired += bool(measured.events)
    assert fired > 0, "the case must make compaction fire, or it tests nothing"


def test_a_session_with_no_user_input_has_no_calls(tmp_path):
    from ctxwise import ContextManager

    with ContextManager(f"sqlite:///{tmp_path / 's.db'}", Policy(budget=2000, unit="chars")) as cm:
        s = cm.session("u", "s")
        s.append_openai([{"role": "system", "content": "be brief"}])
        store = cm.store
        state = store.load("u", "s", include_hidden=True)
        assert session_calls(state, store.events("u", "s"), store.transcript("u", "s")) == []
        s.append_openai([{"role": "user", "content": "hello"}])
        state = store.load("u", "s", include_hidden=True)
        calls = session_calls(state, store.events("u", "s"), store.transcript("u", "s"))
        assert len(calls) == 1 and calls[0].message_id is None            # the call to come
        assert calls[0].size == s.prepare().size
