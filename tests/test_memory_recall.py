"""At 3,000 tokens, every identifier, e-mail and amount the user gave stays in the context of
every later call when pinned facts are on (tau2-bench retail, tau-bench airline)."""

from __future__ import annotations

import pytest

from conftest import TRAJECTORIES
from ctxwise import ContextManager
from ctxwise.formats import load
from ctxwise.policy import Policy
from ctxwise.replay.metrics import context_text
from ctxwise.salient import salient_values
from ctxwise.units import is_user_input
from test_engine_acceptance import drive


def user_value_recall(path, tmp_path, facts: bool) -> tuple[int, int, list]:
    policy = Policy.preset("default", budget=3000, unit="tokens", facts=facts, user_memory=False)
    cm = ContextManager(f"sqlite:///{tmp_path / ('on.db' if facts else 'off.db')}", policy)
    need = got = 0
    lost = []
    for conv in load(path):
        s = cm.session(f"u-{conv.id}", conv.id)
        for prepared, history in drive(s, conv.messages, tolerate_over_budget=True):
            sent = context_text(prepared.messages)
            for h in history:
                if is_user_input(h):
                    for v in salient_values(h.text):
                        if any(c.isdigit() for c in v) or "@" in v:
                            need += 1
                            got += v in sent
                            if v not in sent:
                                lost.append((conv.id, v))
    return need, got, lost


@pytest.mark.parametrize("rel", ["tau2-bench/retail_gpt-4.1_1trial.json", "tau-bench/gpt-4o-airline_subset.json"])
def test_user_given_values_survive_every_compaction(rel, tmp_path):
    need, got, lost = user_value_recall(TRAJECTORIES / rel, tmp_path, facts=True)
    assert need > 400
    assert lost == [], f"{len(lost)} of {need} user values lost, e.g. {lost[:5]}"


def test_without_facts_some_user_values_are_lost(tmp_path):
    need, got, lost = user_value_recall(TRAJECTORIES / "tau2-bench/retail_gpt-4.1_1trial.json", tmp_path, facts=False)
    assert lost, "at 3,000 tokens compaction must remove some user turns; the facts block is what keeps them"
