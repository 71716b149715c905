"""A slice of the acceptance sweep (bench/wire_sweep.py runs all of it): the first recorded
conversation of every file in ../shared/data/trajectories, replayed for every provider at
3,000 / 6,000 / 12,000 tokens.

Kinds of fault covered: a request the API would reject (wire-schema or rule errors on what is
sent), a request over budget, a session that stops for any reason but an irreducible budget
(``ContextBudgetExceeded`` while something could still be cut), and for thinking recordings
replayed as ``anthropic`` a latest assistant message whose thinking differs from the record
(the rule check runs against the full history, so ``thinking-modified`` / ``thinking-removed``
count as rule errors).
"""

from __future__ import annotations

import anthropic  # noqa: F401  importing the SDKs turns the SDK half of the wire check on
import openai  # noqa: F401
import pytest

from conftest import TRAJECTORIES
from ctxwise import ContextManager, Policy
from ctxwise.errors import ContextBudgetExceeded
from ctxwise.formats import load
from ctxwise.providers import PROFILES
from ctxwise.replay.runner import replay_conversation


def _files():
    return sorted(TRAJECTORIES.glob("*/*.json"))


@pytest.mark.parametrize("provider", tuple(PROFILES))
def test_first_conversation_of_every_recording_on_every_provider_and_budget(tmp_path, shared_dir, provider):
    files = _files()
    assert len(files) >= 4
    checked = 0
    for budget in (3000, 6000, 12000):
        policy = Policy.preset("default", provider=provider, unit="tokens", budget=budget)
        with ContextManager(f"sqlite:///{tmp_path}/{budget}.db", policy) as cm:
            for f in files:
                conv = load(f)[0]
                try:
                    res = replay_conversation(cm, "t", f"{f.stem}-{budget}", conv.messages, name=conv.id,
                                              source=str(f), format=conv.format)
                except ContextBudgetExceeded as e:
                    r = e.report
                    assert r.details.get("early") or r.total <= r.pinned, (f.name, budget, str(e))
                    continue
                m = res.measures
                bad = [v for c in res.calls for v in c.wire + c.violations][:3]
                assert (m.wire_errors, m.validator_errors, m.over_budget) == (0, 0, 0), (f.name, budget, bad)
                assert m.calls > 0
                checked += 1
    assert checked >= 10


def test_sweep_covers_the_long_recordings_and_checks_no_edit_where_everything_fits(shared_dir, tmp_path):
    """bench/wire_sweep.py's cell on a short coding-agent session (data/long/): every call
    checked, and in a session where no management made valid fits the budget (every call)
    default sends exactly that payload at every call (issue 25: "where no management fits the
    budget, default sends exactly what no management made valid sends")."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import wire_sweep

    assert "long" in wire_sweep.SETS
    path = shared_dir / "data" / "long" / "swe-agent" / "sa_ctf_flash.json"
    name, provider, budget, cell = wire_sweep.sweep_cell((str(path), "openai", 12000, None, str(tmp_path)))
    assert name == "long/swe-agent/sa_ctf_flash.json" and (provider, budget) == ("openai", 12000)
    assert cell.calls > 0 and cell.fit_sessions == 1 and cell.fit_calls == cell.calls, cell
    assert cell.ok and cell.edited_fit == 0, cell.examples


def test_cells_from_log_reads_a_stopped_run_per_session(tmp_path):
    """A run's printed lines read back (``--from-log``): an old per-call line of one session is
    read per session (all calls fit and it ran to its end: its edits fail the cell; else they are
    paid edits), a per-call line of several sessions cannot be, and is refused."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import wire_sweep

    head = "long/x/a.json   qwen   12000  sessions   1 calls    {c} wire 0 rules 0 over 0 cbe 0/0 other {{}} "
    log = tmp_path / "run.log"
    log.write_text(head.format(c=5) + "thinking 0/0 edited-fit 2/5 refused {}  3s\n"
                   + head.format(c=9) + "thinking 0/0 edited-fit 2/4 refused {}  3s\n"
                   + head.format(c=5) + "thinking 0/0 edited-fit 0/5 (1 sessions) paid 3 refused {'PayloadInvalid': 1}  3s\n")
    fit, overflow, new = [c for *_, c in wire_sweep.cells_from_log(str(log))]
    assert (fit.fit_sessions, fit.edited_fit, fit.paid_edits, fit.ok) == (1, 2, 0, False)
    assert (overflow.fit_sessions, overflow.edited_fit, overflow.paid_edits, overflow.ok) == (0, 0, 2, True)
    assert (new.paid_edits, dict(new.refused), new.ok) == (3, {"PayloadInvalid": 1}, True)
    log.write_text(head.replace("sessions   1", "sessions   2").format(c=5)
                   + "thinking 0/0 edited-fit 2/5 refused {}  3s\n")
    with pytest.raises(ValueError, match="cannot be read per session"):
        wire_sweep.cells_from_log(str(log))
