"""Run a framework's own test suite with its session store replaced by ctxwise, and classify failures.

Usage: ``python tests/suites/runner.py <suite> [--keep DIR] [-k EXPR] [--budget CHARS]``; exit 0
when every failure is accepted, 1 when any new failure ("defect") remains, 2 on a usage error.

``--budget CHARS`` is the small-budget mode: the plugins' ctxwise budget becomes CHARS
(``CTXWISE_SUITE_BUDGET``; default 10,000,000, where nothing is compacted), so compaction fires.
The frameworks' own assertions on what the model got then no longer hold, so failures are
counted, not classified; what is checked (``tests/suites/budget_check.py``, written by the
plugin to ``CTXWISE_SUITE_REPORT``) is that every request ctxwise prepared is valid
(``check_wire``) and every check of the framework's record found it complete. Exit 1 when a
request was invalid, a record incomplete, or no request was compacted at all. The summary:
``<suite>@<CHARS>: tests=N failed=N requests=N compacted=N invalid=N records=N incomplete=N wall=Ns``.

Contract for a suite module ``tests/suites/suite_<name>.py`` (one module per framework):

- ``DIST: str``            pip requirement of the pinned sdist, e.g. ``"openai-agents==0.24.0"``.
                           The runner runs ``pip download --no-binary :all: --no-deps DIST`` into a
                           temp dir and extracts it (sdists ship ``tests/``).
- ``TEST_PATHS: list[str]`` paths inside the extracted sdist to run, e.g. ``["tests"]``.
- ``PLUGIN: str``          dotted module name of a pytest plugin (importable from ``tests/suites``,
                           which the runner puts on PYTHONPATH) that monkeypatches the framework's
                           session/memory names (in the defining module AND the modules that
                           imported them) with the ctxwise stand-in, at a 10_000_000-char budget
                           with user memory off. Loaded with ``-p PLUGIN``.
- ``ACCEPTED: str``        file name (next to the suite module) of a TOML table
                           ``[accepted]`` mapping pytest node id (relative to the sdist root) to a
                           reason. Accepted only where the test asserts on compaction or on the
                           stand-in's class, never on re-rendering.
- ``NOT_APPLICABLE: dict[str, str]`` (optional) node id -> reason the test does not touch the
                           replaced names; these are deselected and counted "n/a".
- ``PYTEST_ARGS: list[str]`` (optional) extra pytest args (e.g. ``["-p", "no:randomly"]``).
- ``TIMEOUT_S: int``       (optional, default 1200) wall-time cap for the pytest run.
- ``TEST_DEPS: list[str]`` (optional) pinned requirements the sdist's tests need that ctxwise's
                           environment lacks (e.g. ``["pytest-asyncio==1.5.0"]``); installed with
                           ``pip install --no-deps --target <work>/deps`` and put on the pytest
                           run's PYTHONPATH only (ctxwise's own environment is not touched).
- ``ROOT: Path``           (optional) a vendored test tree (with its licence) to run instead of
                           the downloaded sdist, for a framework whose sdist ships no tests.
- ``BASELINE: bool``      (optional, default False) run the same tests once without the plugin
                           first; a test that fails there too is counted "n/a" (it fails with the
                           framework's own classes in this environment: not ctxwise's doing).

A plugin may record, per test, the JUnit property ``ctxwise_stand_ins`` (``item.user_properties``):
how many ctxwise stand-ins the test built. A failing test that recorded ``0`` never ran through
ctxwise and is counted "n/a", not a defect; a test without the property counts as through ctxwise.

The runner parses pytest's JUnit XML and prints one line per non-passing test and a summary
``<suite>: through=N passed=N defect=N accepted=N n/a=N skipped=N wall=Ns`` (``through``: the
tests that ran through ctxwise, passing or not). A test listed in ACCEPTED that
now passes is reported as "stale-accept" (a warning, not a failure). The defects of the first
pytest run are run once more, on their own, in a second pytest run with the plugin: a test that
fails in the first run and passes in the second is reported "flaky" (listed, not a defect, so it
does not fail the run); one that fails both times stays a defect.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

STAND_INS = "ctxwise_stand_ins"
"""The JUnit property a plugin may record: how many ctxwise stand-ins a test built."""
HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


@dataclass
class Outcome:
    """Counts of one suite run; ``defects`` lists the node ids failing without an accepted reason."""

    passed: int = 0
    skipped: int = 0
    accepted: list[str] = field(default_factory=list)
    defects: list[str] = field(default_factory=list)
    not_applicable: int = 0
    through: int = 0
    stale_accepts: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    checks: dict[str, Any] = field(default_factory=dict)
    """Small-budget mode only: the plugin's report (``budget_check``: requests, compacted,
    invalid, records, incomplete, problems)."""
    failed: int = 0
    """Small-budget mode only: the tests that failed (not classified)."""
    flaky: list[str] = field(default_factory=list)
    """Defects of the first pytest run that passed when run again (not defects)."""


PROVIDER_KEYS = frozenset({"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GOOGLE_API_KEY", "GEMINI_API_KEY",
                           "DEEPSEEK_API_KEY", "DASHSCOPE_API_KEY", "AZURE_OPENAI_API_KEY"})
"""Environment variables left out of a suite's run."""


def load_suite(name: str) -> ModuleType:
    """Import ``suite_<name>`` from tests/suites; raises SystemExit(2) when it does not exist."""
    sys.path.insert(0, str(HERE))
    try:
        return importlib.import_module(f"suite_{name}")
    except ModuleNotFoundError as exc:
        print(f"runner: no suite module suite_{name}.py in {HERE} ({exc})", file=sys.stderr)
        raise SystemExit(2) from None


def fetch_sdist(dist: str, dest: Path) -> Path:
    """Download and extract the sdist of ``dist`` into ``dest``; return the extracted root."""
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-binary", ":all:", "--no-deps",
         "-d", str(dest), dist],
        check=True,
    )
    archive = next(p for p in dest.iterdir() if p.name.endswith((".tar.gz", ".tgz")))
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
    return next(p for p in dest.iterdir() if p.is_dir())


def node_id(case: ET.Element) -> str:
    """Turn a JUnit testcase (classname ``tests.test_x.Cls``, name) into a pytest-like node id."""
    parts = case.get("classname", "").split(".")
    mod: list[str] = []
    cls: list[str] = []
    for p in parts:
        (cls if (cls or (p[:1].isupper())) else mod).append(p)
    path = "/".join(mod) + ".py"
    return "::".join([path, *cls, case.get("name", "")])


def failing(xml_path: Path) -> set[str]:
    """The node ids that failed or errored in the JUnit XML at ``xml_path``."""
    return {node_id(c) for c in ET.parse(xml_path).getroot().iter("testcase")
            if c.find("failure") is not None or c.find("error") is not None}


def classify(xml_path: Path, accepted: dict[str, str], out: Outcome, baseline: set[str] | None = None) -> None:
    """Fill ``out`` from the JUnit XML at ``xml_path`` against the ``accepted`` map; a failure of
    a node id in ``baseline`` (failing without ctxwise too) is n/a."""
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        nid = node_id(case)
        failed = case.find("failure") is not None or case.find("error") is not None
        built = [p.get("value") for p in case.iter("property") if p.get("name") == STAND_INS]
        outside = (bool(built) and all(v == "0" for v in built)) or nid in (baseline or set())
        if case.find("skipped") is not None:
            out.skipped += 1
            continue
        if not outside:
            out.through += 1
        if failed and outside:
            out.not_applicable += 1
        elif failed:
            (out.accepted if nid in accepted else out.defects).append(nid)
        else:
            out.passed += 1
            if nid in accepted:
                out.stale_accepts.append(nid)


def passing(xml_path: Path) -> set[str]:
    """The node ids that ran and passed (neither failed, errored nor skipped) in the JUnit XML at ``xml_path``."""
    return {node_id(c) for c in ET.parse(xml_path).getroot().iter("testcase")
            if all(c.find(tag) is None for tag in ("failure", "error", "skipped"))}


def reclassify(out: Outcome, passed_again: set[str]) -> None:
    """Move each defect of ``out`` that is in ``passed_again`` (it passed when run a second time)
    from ``out.defects`` to ``out.flaky``, keeping their order."""
    out.flaky += [nid for nid in out.defects if nid in passed_again]
    out.defects = [nid for nid in out.defects if nid not in passed_again]


def run(name: str, keep: Path | None = None, kexpr: str | None = None, budget: int | None = None) -> Outcome:
    """Run suite ``name`` end to end and return its Outcome; raises CalledProcessError on pip
    failure. ``budget``: the small-budget mode (see the module docstring): ``Outcome.checks``
    and ``Outcome.failed`` are filled instead of the classification."""
    suite = load_suite(name)
    accepted_file = HERE / suite.ACCEPTED
    accepted = tomllib.loads(accepted_file.read_text()).get("accepted", {}) if accepted_file.exists() else {}
    not_applicable: dict[str, str] = getattr(suite, "NOT_APPLICABLE", {})
    out = Outcome(not_applicable=len(not_applicable))
    work = keep or Path(tempfile.mkdtemp(prefix=f"ctxwise-suite-{name}-"))
    work.mkdir(parents=True, exist_ok=True)
    root = getattr(suite, "ROOT", None) or fetch_sdist(suite.DIST, work)
    xml = work / "junit.xml"
    # no model is reachable: without provider keys the frameworks' live-model tests skip, as
    # they do for any contributor without keys (a test of ours may have set a dummy one)
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_KEYS}
    report = work / "budget-checks.json"
    if budget is not None:
        env["CTXWISE_SUITE_BUDGET"] = str(budget)
        env["CTXWISE_SUITE_REPORT"] = str(report)
        report.unlink(missing_ok=True)
    paths = [str(HERE), str(REPO / "src")]
    deps: list[str] = getattr(suite, "TEST_DEPS", [])
    if deps:
        target = work / "deps"
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
                        *deps], check=True)
        paths.append(str(target))
    env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")])
    args = ["-o", "junit_family=xunit1", *getattr(suite, "PYTEST_ARGS", []), *suite.TEST_PATHS]
    args += [f"--deselect={nid}" for nid in not_applicable]
    if kexpr:
        args += ["-k", kexpr]
    timeout = getattr(suite, "TIMEOUT_S", 1200)
    start = time.monotonic()
    baseline: set[str] | None = None
    if getattr(suite, "BASELINE", False) and budget is None:
        base_xml = work / "junit-baseline.xml"
        subprocess.run([sys.executable, "-m", "pytest", "-q", f"--junitxml={base_xml}", *args], cwd=root, env=env,
                       timeout=timeout, check=False, stdout=subprocess.DEVNULL)
        baseline = failing(base_xml)
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", suite.PLUGIN, f"--junitxml={xml}", *args],
                   cwd=root, env=env, timeout=timeout, check=False)
    out.wall_s = time.monotonic() - start
    if budget is not None:
        out.checks = json.loads(report.read_text()) if report.exists() else {}
        out.failed = len(failing(xml))
        out.through = sum(1 for c in ET.parse(xml).getroot().iter("testcase") if c.find("skipped") is None)
        return out
    classify(xml, accepted, out, baseline)
    if out.defects:
        again = work / "junit-again.xml"
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", suite.PLUGIN, f"--junitxml={again}",
                        "-o", "junit_family=xunit1", *getattr(suite, "PYTEST_ARGS", []), *out.defects],
                       cwd=root, env=env, timeout=timeout, check=False)
        if again.exists():
            reclassify(out, passing(again))
        out.wall_s = time.monotonic() - start
    return out


def budget_problems(out: Outcome) -> list[str]:
    """What fails a small-budget run: invalid requests, incomplete records, no report, or no
    compaction at all (the budget did not make it fire)."""
    c = out.checks
    if not c:
        return ["the plugin wrote no budget-checks report"]
    found = list(c.get("problems", []))
    if c.get("invalid") or c.get("incomplete"):
        found.append(f"{c.get('invalid')} invalid request(s), {c.get('incomplete')} incomplete record(s)")
    if not c.get("compacted"):
        found.append(f"no request was compacted at budget {c.get('budget')}: compaction never fired")
    return found


def main(argv: list[str] | None = None) -> int:
    """CLI entry: run one suite, print its failures and summary; exit 1 on any defect."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("suite")
    ap.add_argument("--keep", type=Path, default=None, help="work dir to keep (default: a temp dir)")
    ap.add_argument("-k", dest="kexpr", default=None)
    ap.add_argument("--budget", type=int, default=None, help="small-budget mode: the ctxwise budget in chars")
    args = ap.parse_args(argv)
    out = run(args.suite, args.keep, args.kexpr, args.budget)
    if args.budget is not None:
        problems = budget_problems(out)
        for p in problems:
            print(f"PROBLEM  {p}")
        c = out.checks
        print(f"{args.suite}@{args.budget}: tests={out.through} failed={out.failed} requests={c.get('requests', 0)} "
              f"compacted={c.get('compacted', 0)} invalid={c.get('invalid', 0)} records={c.get('records', 0)} "
              f"incomplete={c.get('incomplete', 0)} wall={out.wall_s:.0f}s")
        return 1 if problems else 0
    for nid in out.defects:
        print(f"DEFECT   {nid}")
    for nid in out.accepted:
        print(f"accepted {nid}")
    for nid in out.stale_accepts:
        print(f"stale-accept {nid}")
    for nid in out.flaky:
        print(f"flaky    {nid} (failed, then passed when run again)")
    print(f"{args.suite}: through={out.through} passed={out.passed} defect={len(out.defects)} accepted={len(out.accepted)} "
          f"flaky={len(out.flaky)} n/a={out.not_applicable} skipped={out.skipped} wall={out.wall_s:.0f}s")
    return 1 if out.defects else 0


if __name__ == "__main__":
    raise SystemExit(main())
