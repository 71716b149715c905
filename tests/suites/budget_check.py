"""The checks a suite plugin makes at a small budget (``CTXWISE_SUITE_BUDGET``): compaction fires,
so the frameworks' own assertions on what the model got no longer hold; what must still hold is
that **every request ctxwise prepared is valid** and **the framework's record is complete**.

A plugin calls :func:`request` with each :class:`ctxwise.Prepared` it got (checked with
:func:`ctxwise.providers.check_wire` for the session's provider) and :func:`record` with each
check of the framework's own record (``ok``: it holds every item / message written, none
changed). At the end of the run the counts go to the JSON file named by
``CTXWISE_SUITE_REPORT`` (when set), which ``tests/suites/runner.py --budget N`` reads:
``{"requests", "compacted", "invalid", "records", "incomplete", "problems": [...]}``
(``compacted``: requests smaller than the context they came from).
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

DEFAULT_BUDGET = 10_000_000
BUDGET = int(os.environ.get("CTXWISE_SUITE_BUDGET", str(DEFAULT_BUDGET)))
"""The ctxwise budget in characters: 10,000,000 (nothing compacted) unless the runner sets one."""
SMALL = BUDGET < DEFAULT_BUDGET
"""Whether this run is a small-budget run (the checks below are made)."""
REPORT = os.environ.get("CTXWISE_SUITE_REPORT")

counts = {"requests": 0, "compacted": 0, "invalid": 0, "records": 0, "incomplete": 0}
problems: list[str] = []
_guard = threading.Lock()
MAX_PROBLEMS = 50


def request(prepared: Any, provider: str, where: str) -> None:
    """Count one prepared request and check its payload; a violation is a problem named by
    ``where`` (the test's node id or the session)."""
    if prepared is None:
        return
    from ctxwise.providers import check_wire

    found = check_wire(prepared.payload, provider)
    with _guard:
        counts["requests"] += 1
        counts["compacted"] += prepared.size < prepared.size_before
        if found:
            counts["invalid"] += 1
            if len(problems) < MAX_PROBLEMS:
                problems.append(f"invalid request ({where}): {found[:3]}")


def record(ok: bool, where: str, detail: str = "") -> None:
    """Count one check of the framework's record; ``ok`` False is a problem."""
    with _guard:
        counts["records"] += 1
        if not ok:
            counts["incomplete"] += 1
            if len(problems) < MAX_PROBLEMS:
                problems.append(f"incomplete record ({where}): {detail}")


def write() -> None:
    """Write the counts to ``CTXWISE_SUITE_REPORT`` (when set)."""
    if REPORT:
        with open(REPORT, "w", encoding="utf-8") as f:
            json.dump({**counts, "budget": BUDGET, "problems": problems}, f, indent=1)


def summary() -> str:
    """One line of counts for the terminal summary."""
    return (f"ctxwise small-budget checks (budget {BUDGET} chars): " +
            " ".join(f"{k}={v}" for k, v in counts.items()))
