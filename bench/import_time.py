"""How long importing ctxwise takes, against `python -c pass` measured in the same run.

Each statement runs in a fresh interpreter, N times, interleaved with the baseline so load on
the machine hits both alike. Per statement: the whole process's wall time and its ratio to the
baseline process, and, measured inside the process around the statement alone, wall time and
CPU time (CPU time is what a shared, loaded machine distorts least). The last column lists the
heavy packages the statement loaded (`sys.modules` after it).

    .venv/bin/python bench/import_time.py            # writes bench/results/import_time.md
    .venv/bin/python bench/import_time.py --runs 40
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _machine import REPO, machine, now

STATEMENTS = {
    "python -c pass (baseline)": "pass",
    "import ctxwise": "import ctxwise",
    "from ctxwise import ContextManager, Policy, Message": "from ctxwise import ContextManager, Policy, Message",
    "… and open a SQLite store": "from ctxwise import ContextManager\nContextManager('sqlite://').close()",
}
HEAVY = ("sqlalchemy", "alembic", "tiktoken", "tokenizers", "openai", "httpx", "typer", "rich", "psycopg", "asyncio")
GOAL_S = 0.3
"""The target of issue 14: `import ctxwise` under 0.3 s."""

PROBE = """
import sys, time, json
w0, c0 = time.perf_counter(), time.process_time()
{code}
w1, c1 = time.perf_counter(), time.process_time()
print(json.dumps({{"wall": w1 - w0, "cpu": c1 - c0, "heavy": [m for m in {heavy!r} if m in sys.modules]}}))
"""


def one(code: str) -> dict:
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", PROBE.format(code=code, heavy=HEAVY)], check=True,
                         capture_output=True, text=True).stdout
    return {**json.loads(out), "process": time.perf_counter() - t0}


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "import_time.md")
    args = ap.parse_args()

    for code in STATEMENTS.values():  # warm the file cache and write the .pyc files
        one(code)
    runs: dict[str, list[dict]] = {name: [] for name in STATEMENTS}
    for _ in range(args.runs):
        for name, code in STATEMENTS.items():
            runs[name].append(one(code))

    def med(name: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[name])

    base = "python -c pass (baseline)"
    rows = ["| statement | process wall, median (s) | ÷ baseline | statement wall, median (s) | statement CPU, median (s) | heavy packages loaded |",
            "| --- | ---: | ---: | ---: | ---: | --- |"]
    for name in STATEMENTS:
        heavy = ", ".join(runs[name][-1]["heavy"]) or "none"
        rows.append(f"| `{name}` | {med(name, 'process'):.3f} | {med(name, 'process') / med(base, 'process'):.2f}× | "
                    f"{med(name, 'wall'):.3f} | {med(name, 'cpu'):.3f} | {heavy} |")
    imp = "import ctxwise"
    usual = "from ctxwise import ContextManager, Policy, Message"
    verdict = "meets" if med(imp, "cpu") < GOAL_S and med(imp, "process") - med(base, "process") < GOAL_S else "misses"
    text = "\n".join([
        "# import time",
        "",
        f"Command: `.venv/bin/python bench/import_time.py --runs {args.runs}` (each statement in a fresh interpreter, "
        f"{args.runs} runs interleaved with the baseline; medians).",
        "",
        *rows,
        "",
        f"`import ctxwise` adds {med(imp, 'process') - med(base, 'process'):.3f} s of wall time to the bare "
        f"interpreter ({med(imp, 'cpu'):.3f} s CPU): it {verdict} the {GOAL_S} s goal. Importing what a program "
        f"usually needs takes {med(usual, 'cpu'):.3f} s CPU ({med(usual, 'wall'):.3f} s wall). "
        "SQLAlchemy and Alembic load only when a store is opened (last row), a tokenizer only when its "
        "counter is built, the OpenAI SDK only with the OpenAI summarizer.",
        "",
        f"- date: {now()}",
        *machine(("pydantic", "sqlalchemy", "alembic")),
        "",
    ])
    args.out.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
