"""Behaviour unchanged, byte for byte (issue 24): the quick subset of ``bench/golden.py``.

Every payload, event list and size ``prepare()`` returns on one recorded conversation per
source (each tau / tau2 file, each folder of long coding-agent sessions), on every provider at
the three budgets of its set, must hash to the digest recorded on the baseline in
``bench/results/golden.json``. ``python bench/golden.py --check`` runs every recording.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from conftest import REPO, SHARED
from ctxwise import ContextManager, Policy
from ctxwise.replay.runner import replay_conversation


def _golden() -> ModuleType:
    spec = importlib.util.spec_from_file_location("golden_bench", REPO / "bench" / "golden.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


golden = _golden()
DATA = SHARED / "data"


def test_quick_subset_matches_the_recorded_digest(shared_dir: Path) -> None:
    digest = golden.read_digest(golden.DIGEST)
    mismatches, summary = golden.check(DATA, digest, quick=True)
    assert summary["data_changed"] == [], "the recordings changed since the digest was made"
    sources = {golden.source_of(k.rel) for k in map(golden.RunKey.parse, digest["runs"])}
    assert len(sources) == 8 and summary["runs"] == 8 * len(digest["meta"]["providers"]) * 3
    assert summary["calls"] > 1000
    if mismatches:
        golden.explain(mismatches[0], digest["meta"]["src_commit"], DATA, "memory")  # its diff, from git
        report = "\n".join(line for m in mismatches for line in m.lines())
        pytest.fail(f"prepare() output changed on {len(mismatches)} runs:\n{report}", pytrace=False)


def test_the_driver_makes_the_calls_ctxwise_replay_makes(tmp_path: Path, shared_dir: Path) -> None:
    rel, index = min(r for r in golden.quick_recordings(DATA) if r[0].startswith("trajectories/tau2"))
    conv = golden.conversations(str(DATA), rel)[index]
    key = golden.RunKey(rel, index, "openai", 3000)
    seen: list[list[dict[str, object]]] = []

    def on_call(i: int, prepared: object) -> bool:
        seen.append([e.model_dump(mode="json") for e in prepared.events])  # type: ignore[attr-defined]
        return True

    assert golden.drive(conv, key, "memory", on_call) == "ok"
    policy = Policy.preset("default", budget=3000, unit="tokens", provider="openai")
    with ContextManager(f"sqlite:///{tmp_path}/replay.db", policy) as cm:
        res = replay_conversation(cm, "u", "s", conv.messages, name="n", source="s", format="f", measure=False)
    assert len(seen) == len(res.calls) > 3
    strip = [[{k: v for k, v in e.items() if k not in ("at", "duration_ms", "rounds")} for e in c.events]
             for c in res.calls]
    assert [[{k: v for k, v in e.items() if k not in ("at", "duration_ms")} for e in s] for s in seen] == strip
    assert any(seen), "the budget is small enough for compaction to act"


def test_compare_names_the_first_differing_call_and_part() -> None:
    width = golden.STEP_HEX * len(golden.PARTS)
    want = {"sha256": "a", "calls": 3, "outcome": "ok", "steps": "0" * width * 3}
    steps = "0" * width + "0" * golden.STEP_HEX + "1" * golden.STEP_HEX + "0" * golden.STEP_HEX + "2" * width
    got = {**want, "sha256": "b", "steps": steps}
    m = golden.compare("k", want, got)
    assert m is not None and m.call == 1 and m.parts == ["events"]
    assert golden.compare("k", want, dict(want)) is None
    shorter = golden.compare("k", want, {**want, "sha256": "c", "calls": 2, "steps": "0" * width * 2,
                                         "outcome": "ContextBudgetExceeded: x"})
    assert shorter is not None and shorter.call == 2 and "outcome now: ContextBudgetExceeded: x" in shorter.lines()[-1]


@pytest.mark.parametrize("text", ["trajectories/tau-bench/x.json#007:openai_responses:3000"])
def test_run_keys_round_trip(text: str) -> None:
    key = golden.RunKey.parse(text)
    assert (key.index, key.provider, key.budget) == (7, "openai_responses", 3000) and str(key) == text
