"""Each framework's own test suite, run with ctxwise standing in (``tests/suites/runner.py``).

One test per ``suite_<name>.py``: it downloads the pinned sdist (network to PyPI), runs the
framework's tests with the suite's plugin, and fails on any failure that is neither accepted
(``accepted_<name>.toml``, with its reason) nor n/a. The suites in :data:`SMALL_BUDGET` run once
more at a budget where compaction fires (``runner.py --budget``): every request valid, every
record complete. The classification itself is checked on a JUnit file written here.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import runner  # noqa: E402

SUITES = sorted(p.stem.removeprefix("suite_") for p in HERE.glob("suite_*.py"))

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
 <testcase classname="tests.memory.test_session" name="test_ok"/>
 <testcase classname="tests.memory.test_session.TestCls" name="test_bad[x]"><failure message="boom"/></testcase>
 <testcase classname="tests.test_runner" name="test_known"><failure message="compaction"/></testcase>
 <testcase classname="tests.test_runner" name="test_stale"/>
 <testcase classname="tests.test_other" name="test_outside"><properties><property name="ctxwise_stand_ins" value="0"/>
  </properties><failure message="not ours"/></testcase>
 <testcase classname="tests.test_other" name="test_inside"><properties><property name="ctxwise_stand_ins" value="2"/>
  </properties><error message="ours"/></testcase>
 <testcase classname="tests.test_other" name="test_env"><failure message="fails without ctxwise"/></testcase>
 <testcase classname="tests.test_other" name="test_skip"><skipped message="s"/></testcase>
</testsuite></testsuites>
"""


def test_classify_counts_each_outcome(tmp_path: Path) -> None:
    xml = tmp_path / "junit.xml"
    xml.write_text(JUNIT)
    accepted = {"tests/test_runner.py::test_known": "asserts on compaction",
                "tests/test_runner.py::test_stale": "asserts on compaction"}
    out = runner.Outcome()
    runner.classify(xml, accepted, out, baseline={"tests/test_other.py::test_env"})
    assert out.defects == ["tests/memory/test_session.py::TestCls::test_bad[x]", "tests/test_other.py::test_inside"]
    assert out.accepted == ["tests/test_runner.py::test_known"]
    assert out.stale_accepts == ["tests/test_runner.py::test_stale"]
    assert (out.passed, out.skipped, out.not_applicable, out.through) == (2, 1, 2, 5)
    assert runner.failing(xml) == {"tests/memory/test_session.py::TestCls::test_bad[x]", "tests/test_runner.py::test_known",
                                   "tests/test_other.py::test_outside", "tests/test_other.py::test_inside",
                                   "tests/test_other.py::test_env"}


AGAIN = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
 <testcase classname="tests.memory.test_session.TestCls" name="test_bad[x]"/>
 <testcase classname="tests.test_other" name="test_inside"><error message="ours again"/></testcase>
 <testcase classname="tests.test_other" name="test_skip"><skipped message="s"/></testcase>
</testsuite></testsuites>
"""


def test_a_defect_that_passes_when_run_again_is_flaky_not_a_defect(tmp_path: Path) -> None:
    xml, again = tmp_path / "junit.xml", tmp_path / "junit-again.xml"
    xml.write_text(JUNIT)
    again.write_text(AGAIN)
    out = runner.Outcome()
    runner.classify(xml, {}, out)
    assert runner.passing(again) == {"tests/memory/test_session.py::TestCls::test_bad[x]"}
    runner.reclassify(out, runner.passing(again))
    assert out.flaky == ["tests/memory/test_session.py::TestCls::test_bad[x]"]
    assert "tests/test_other.py::test_inside" in out.defects
    assert "tests/memory/test_session.py::TestCls::test_bad[x]" not in out.defects


def test_unknown_suite_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as e:
        runner.main(["no_such_framework"])
    assert e.value.code == 2


IN_CI = ["agentscope", "agentscope_agents", "langchain", "langchain_first", "openai_agents"]
"""The suites run here: every suite (``python tests/suites/runner.py <name>`` runs one)."""

SMALL_BUDGET = {"agentscope": 600, "langchain": 400}
"""The small-budget runs made here (``runner.py <name> --budget CHARS``): suite -> budget in
chars at which compaction fires on the suite's conversations. Every request ctxwise prepared
must pass the wire check and every check of the framework's record find it complete."""


def test_every_suite_is_run_here() -> None:
    assert set(SUITES) == set(IN_CI)


@pytest.mark.parametrize("name", IN_CI)
def test_suite_has_no_defects(name: str, tmp_path: Path) -> None:
    out = runner.run(name, keep=tmp_path / name)
    assert out.through > 0, f"{name}: no test ran through ctxwise"
    assert not out.defects, f"{name}: {len(out.defects)} failure(s) neither accepted nor n/a:\n" + "\n".join(out.defects)


@pytest.mark.parametrize("name", sorted(SMALL_BUDGET))
def test_suite_at_a_small_budget_sends_only_valid_requests_and_keeps_the_record(name: str, tmp_path: Path) -> None:
    out = runner.run(name, keep=tmp_path / name, budget=SMALL_BUDGET[name])
    c = out.checks
    assert c.get("requests", 0) > 0 and c.get("compacted", 0) > 0, f"{name}: compaction never fired: {c}"
    assert c.get("records", 0) > 0, f"{name}: the framework's record was never checked: {c}"
    assert runner.budget_problems(out) == [], f"{name}: {runner.budget_problems(out)}"


def test_budget_problems_names_each_failure() -> None:
    ok = runner.Outcome(checks={"requests": 3, "compacted": 1, "invalid": 0, "records": 3, "incomplete": 0,
                                "budget": 600, "problems": []})
    assert runner.budget_problems(ok) == []
    bad = runner.Outcome(checks={"requests": 3, "compacted": 0, "invalid": 1, "records": 3, "incomplete": 2,
                                 "budget": 600, "problems": ["invalid request (x): [...]"]})
    found = runner.budget_problems(bad)
    assert found[0] == "invalid request (x): [...]" and "1 invalid request(s), 2 incomplete record(s)" in found[1]
    assert "compaction never fired" in found[2]
    assert runner.budget_problems(runner.Outcome()) == ["the plugin wrote no budget-checks report"]
