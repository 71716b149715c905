"""tau2-bench dual-control recordings: the user side calls tools too.

Kind of fault covered: the user's own tool calls (``role: "user"`` messages with
``tool_calls``, tool messages with ``requestor: "user"``) read as agent context, which no
provider accepts, so every session of such a file aborted at ``append()``. The fixture
``tests/fixtures/tau2_dual_control.json`` is hand-written in the tau2 Results shape: user
calls with and without text, a parallel pair of user calls (one an empty error result), user
activity at the very end, agent tool cycles between.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxwise import Policy
from ctxwise.formats import from_tau2, load, to_tau2
from ctxwise.providers import PROFILES, check, check_wire, render
from ctxwise.replay.run import run

FIXTURE = Path(__file__).parent / "fixtures" / "tau2_dual_control.json"


def _doc() -> dict:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


def test_user_tool_activity_stays_out_of_the_agent_context_and_round_trips():
    """The agent context holds no user tool call and no result answering one; the user's
    words are kept; the user-side messages travel in the record and are written back in place
    (the document round-trips exactly)."""
    doc = _doc()
    msgs = from_tau2(doc)[0].messages
    assert not any(m.role == "user" and m.tool_uses for m in msgs)
    user_ids = {c["id"] for m in doc["simulations"][0]["messages"] if m["role"] == "user"
                for c in (m.get("tool_calls") or [])}
    assert not any(r.tool_use_id in user_ids for m in msgs for r in m.tool_results)
    assert "Turning it off now." in [m.text for m in msgs if m.role == "user"]
    carried = [x for m in msgs for x in (m.metadata.get("_tau2") or {}).get("before", [])
               + (m.metadata.get("_tau2") or {}).get("after", [])]
    assert {x.get("id") for x in carried if x["role"] == "tool"} == user_ids
    assert to_tau2(from_tau2(doc)) == doc
    for provider in PROFILES:
        assert check(msgs, provider) == [], provider
        assert check_wire(render(msgs, provider), provider) == [], provider


@pytest.mark.parametrize("provider", tuple(PROFILES))
def test_dual_control_file_replays_on_every_provider(tmp_path, provider):
    """``ctxwise replay`` of the file runs every session to the end: no error, no rule or wire
    violation, nothing over budget, at a budget where compaction fires."""
    policy = Policy.preset("default", provider=provider, unit="tokens", budget=420, reserve_output=60)
    result = run([str(FIXTURE)], policy, db=f"sqlite:///{tmp_path}/r.db", baseline=False)
    assert result.errors == []
    on, _ = result.totals()
    msgs = load(FIXTURE)[0].messages
    first_user = next(i for i, m in enumerate(msgs) if m.role == "user")
    assert on.calls == sum(m.role == "assistant" for m in msgs[first_user:])  # every recorded model call
    assert (on.validator_errors, on.wire_errors, on.over_budget) == (0, 0, 0)
    assert sum(on.events.values()) > 0
