"""The compaction properties at the Hypothesis ``bench`` profile (10,000 examples), once.

    python bench/properties.py [--profile bench|ci|dev] [--jobs N] [--sessions N]   # -> bench/results/properties.md

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
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from _machine import machine, now  # noqa: E402


def shard(profile: str, examples: int, seed: int) -> dict:
    """Run ``examples`` generated sessions (Hypothesis seed ``seed``); counts per property."""
    os.environ["HYPOTHESIS_PROFILE"] = profile
    import conftest  # noqa: F401  (registers and loads the profiles)
    from hypothesis import seed as hseed
    from test_compaction_properties import BUDGET_EXCEEDED, PROPERTIES, run_properties, sessions

    checked: Counter[str] = Counter()
    failures: Counter[str] = Counter()
    first: dict[str, str] = {}
    providers: Counter[str] = Counter()
    raised = 0

    @hseed(seed)
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

    one()
    return {"checked": checked, "failures": failures, "first": first, "providers": providers, "raised": raised,
            "names": [BUDGET_EXCEEDED, *PROPERTIES]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="bench", choices=["bench", "ci", "dev"])
    ap.add_argument("--jobs", type=int, default=1, help="worker processes, each with its own seed and a share of the examples")
    ap.add_argument("--out", default=str(HERE / "results" / "properties.md"))
    ap.add_argument("--sessions", type=int, default=None,
                    help="generated sessions in all (default: the profile's example count)")
    args = ap.parse_args()
    os.environ["HYPOTHESIS_PROFILE"] = args.profile
    import conftest  # noqa: F401

    examples = args.sessions or settings.get_profile(args.profile).max_examples
    n_shards = max(args.jobs, examples // 250, 1)
    shares = [examples // n_shards + (k < examples % n_shards) for k in range(n_shards)]
    t0 = time.perf_counter()
    parts: list[dict] = []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(shard, args.profile, n, k + 1) for k, n in enumerate(shares)]
        for fut in as_completed(futures):
            parts.append(fut.result())
            write(args, examples, n_shards, parts, time.perf_counter() - t0)  # partial results as shards end
    sys.exit(1 if sum(sum(p["failures"].values()) for p in parts) else 0)


def write(args: argparse.Namespace, examples: int, n_shards: int, parts: list[dict], secs: float) -> None:
    """Write (and print) the report for the shards done so far."""
    checked: Counter[str] = Counter()
    failures: Counter[str] = Counter()
    providers: Counter[str] = Counter()
    first: dict[str, str] = {}
    for part in parts:
        checked.update(part["checked"])
        failures.update(part["failures"])
        providers.update(part["providers"])
        for k, v in part["first"].items():
            first.setdefault(k, v)
    raised = sum(part["raised"] for part in parts)
    names = parts[0]["names"]
    total = sum(providers.values())
    done = "" if len(parts) == n_shards else f" **PARTIAL: {len(parts)} of {n_shards} shards done when written.**"
    lines = [
        "# Compaction properties (Hypothesis)",
        "",
        f"`python bench/properties.py --profile {args.profile} --jobs {args.jobs}"
        f"{f' --sessions {args.sessions}' if args.sessions else ''}`: {total:,} generated sessions "
        f"(profile `{args.profile}`, {examples:,} examples, in {n_shards} shards with Hypothesis seeds 1-{n_shards}), "
        "each compacted at a random budget (300-20,000), unit (chars, o200k tokens, estimate) and preset "
        "(default, ragent) and checked against every property of tests/test_compaction_properties.py (the wire "
        "check with the SDK request types). A property is checked on every example where it applies (the others "
        f"only when compact() returned; {raised:,} examples raised ContextBudgetExceeded).{done}",
        "",
        "| property | examples checked | failures | first failure |",
        "| --- | ---: | ---: | --- |",
    ]
    for name in names:
        lines.append(f"| {name} | {checked[name]:,} | {failures[name]:,} | {first.get(name, '').replace('|', '/') or '-'} |")
    lines += [
        "",
        "Examples per provider: " + ", ".join(f"{p} {n:,}" for p, n in sorted(providers.items())) + ".",
        f"Run time: {secs / 60:.1f} min wall clock, {args.jobs} worker process(es).",
        "",
        f"- date: {now()}",
        *machine(("hypothesis", "tiktoken")),
        "",
    ]
    Path(args.out).write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
