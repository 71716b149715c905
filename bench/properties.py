"""The compaction properties at the Hypothesis ``bench`` profile (10,000 examples), once.

    python bench/properties.py [--profile bench|ci|dev]   # -> bench/results/properties.md

Runs the same generator and the same checks as tests/test_compaction_properties.py
(``sessions()`` and ``run_properties()``, imported from there so the two cannot drift), but
never stops at a failure: every example is checked against every property and each failure is
counted, with the first one's text kept. The CI test runs the ``ci`` profile (1,000 examples)
and stops at the first failure.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from _machine import machine, now  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="bench", choices=["bench", "ci", "dev"])
    ap.add_argument("--out", default=str(HERE / "results" / "properties.md"))
    args = ap.parse_args()
    os.environ["HYPOTHESIS_PROFILE"] = args.profile
    import conftest  # noqa: F401  (registers and loads the profiles)
    from test_compaction_properties import BUDGET_EXCEEDED, PROPERTIES, run_properties, sessions

    examples = settings.get_profile(args.profile).max_examples
    checked: Counter[str] = Counter()
    failures: Counter[str] = Counter()
    first: dict[str, str] = {}
    providers: Counter[str] = Counter()
    raised = 0

    @settings(max_examples=examples, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(sessions(), st.integers(min_value=300, max_value=20_000), st.sampled_from(["chars", "o200k_base", "estimate"]),
           st.sampled_from(["default", "ragent"]))
    def one(session, budget, counter_name, preset):
        nonlocal raised
        providers[session[1]] += 1
        try:
            result = run_properties(session, budget, counter_name, preset)
        except Exception as e:  # a crash is a failure of every property of that example
            result = {name: f"{type(e).__name__}: {e}" for name in [BUDGET_EXCEEDED, *PROPERTIES]}
        raised += len(result) == 1
        for name, failure in result.items():
            checked[name] += 1
            if failure:
                failures[name] += 1
                first.setdefault(name, f"{session[1]}, budget {budget} {counter_name}, {preset}: {failure}"[:400])

    t0 = time.perf_counter()
    one()
    secs = time.perf_counter() - t0
    total = sum(providers.values())
    lines = [
        "# Compaction properties (Hypothesis)",
        "",
        f"`python bench/properties.py --profile {args.profile}`: {total:,} generated sessions "
        f"(profile `{args.profile}`, {examples:,} examples), each compacted at a random budget (300-20,000), "
        "unit (chars, o200k tokens, estimate) and preset (default, ragent) and checked against every "
        "property of tests/test_compaction_properties.py. A property is checked on every example where it "
        f"applies (the others only when compact() returned; {raised:,} examples raised ContextBudgetExceeded).",
        "",
        "| property | examples checked | failures | first failure |",
        "| --- | ---: | ---: | --- |",
    ]
    for name in [BUDGET_EXCEEDED, *PROPERTIES]:
        lines.append(f"| {name} | {checked[name]:,} | {failures[name]:,} | {first.get(name, '').replace('|', '/') or '-'} |")
    lines += [
        "",
        "Examples per provider: " + ", ".join(f"{p} {n:,}" for p, n in sorted(providers.items())) + ".",
        f"Run time: {secs / 60:.1f} min ({secs / max(total, 1) * 1000:.0f} ms per example).",
        "",
        f"- date: {now()}",
        *machine(("hypothesis", "tiktoken")),
        "",
    ]
    Path(args.out).write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    sys.exit(1 if sum(failures.values()) else 0)


if __name__ == "__main__":
    main()
