"""Benchmark: the cost of one more model call as the session grows, ctxwise vs ``trim_messages``.

    python bench/scale.py              # 10, 100, 1,000 and 10,000 messages
    python bench/scale.py --quick      # 10, 100 and 1,000
    python bench/scale.py --profile    # also cProfile ctxwise and list what grows with the history
    python bench/scale.py --reopen-only  # only the reopen section (session open cost vs history)

Synthetic sessions repeat the real tau2-bench retail turns
(../shared/data/trajectories/tau2-bench/retail_gpt-4.1_1trial.json, the first system prompt,
then every conversation's turns from its first user input, again and again) with fresh message
and tool-call ids. The session is driven as the replay drives it: at every recorded model call
the messages that arrived since the last call are appended and ``prepare()`` runs, so ctxwise
compacts along the way and its context stays within the budget while the stored history grows.

At each history length (messages appended so far) the next ``--calls`` model calls are measured:
a call is one ``append()`` of what arrived since the last call plus one ``prepare()`` (ctxwise,
a temporary SQLite file), or one ``trim_messages(strategy="last", include_system=True,
start_on="human")`` over the whole history (LangChain keeps the whole history in its state and
trims a copy per call), both with the o200k counter and the same budget. Time is wall time per
call; memory is the tracemalloc peak of one call above what was allocated before it (a separate
pass, since tracing slows the code). Ratios are against each strategy's own 10-message row.

Reopen: at each history length, the time to open the stored session again in a new
``ContextManager`` (what a stateless server does on every request), median of ``--calls``
opens, against the 10-message row. The contract (issue 14) is a ratio of at most 1.5x from 10
to 10,000 messages: a reopen reads the visible context and the engine's stored state, never
the whole history.

Writes bench/results/scale.md (the reopen section between its markers with ``--reopen-only``).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine, now  # noqa: E402
from _peers import LangChainView  # noqa: E402

from ctxwise import ContextManager  # noqa: E402
from ctxwise.errors import ContextBudgetExceeded  # noqa: E402
from ctxwise.formats import load  # noqa: E402
from ctxwise.messages import Message, ToolResultBlock, ToolUseBlock  # noqa: E402
from ctxwise.policy import Policy  # noqa: E402
from ctxwise.tokens import get_counter  # noqa: E402
from ctxwise.units import is_user_input  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DATA = Path("../shared/data/trajectories/tau2-bench/retail_gpt-4.1_1trial.json")
LENGTHS = (10, 100, 1000, 10000)
BUDGET = 6000
TOKENIZER = "o200k_base"


# --------------------------------------------------------------------------- synthetic session


def fresh(m: Message, n: int, copy: str) -> Message:
    """``m`` with id ``x<n>`` and its tool-call ids suffixed with ``copy``."""
    blocks = []
    for b in m.blocks:
        if isinstance(b, ToolUseBlock):
            b = b.model_copy(update={"id": f"{b.id}.{copy}"})
        elif isinstance(b, ToolResultBlock):
            b = b.model_copy(update={"tool_use_id": f"{b.tool_use_id}.{copy}"})
        blocks.append(b)
    return Message(id=f"x{n}", role=m.role, name=m.name, blocks=blocks, metadata=dict(m.metadata))


def synthetic(path: Path, offset: int = 0) -> Iterator[Message]:
    """An endless session: a system prompt, then the recorded turns over and over (starting
    at conversation ``offset``, so that several sessions are not copies of each other)."""
    convs = load(path)
    convs = convs[offset % len(convs):] + convs[:offset % len(convs)]
    system = next(m for m in convs[0].messages if m.role == "system")
    yield system
    turns: list[tuple[int, Message]] = []
    for k, c in enumerate(convs):
        start = next(i for i, m in enumerate(c.messages) if is_user_input(m))
        turns.extend((k, m) for m in c.messages[start:])
    n = rep = 0
    while True:
        rep += 1
        for k, m in turns:
            n += 1
            yield fresh(m, n, f"{rep}.{k}")


def steps(path: Path, offset: int = 0) -> Iterator[tuple[list[Message], Message]]:
    """Model calls in order: (what arrived since the last call, the recorded output)."""
    pending: list[Message] = []
    seen_user = False
    for m in synthetic(path, offset):
        seen_user = seen_user or is_user_input(m)
        if m.role == "assistant" and seen_user:
            yield pending, m
            pending = [m]
        else:
            pending.append(m)


# --------------------------------------------------------------------------- drivers


class CtxwiseDriver:
    name = "ctxwise"

    def __init__(self, preset: str, budget: int, workdir: str, tag: str = "") -> None:
        self.name = f"ctxwise {preset}"
        policy = Policy.preset(preset, budget=budget, unit="tokens", tokenizer=TOKENIZER)
        self.manager = ContextManager(f"sqlite:///{workdir}/scale-{preset}{tag}.db", policy)
        self.session = self.manager.session("scale", preset)
        self.events = 0
        self.failed = 0
        self.largest_event = 0

    def call(self, batch: list[Message]) -> None:
        self.session.append(batch)
        try:
            p = self.session.prepare()
        except ContextBudgetExceeded:  # the turn alone does not fit: counted; the session goes on
            self.failed += 1
            return
        self.events += len(p.events)
        for e in p.events:  # the size of the event record the store writes and the log line carries
            self.largest_event = max(self.largest_event, len(json.dumps(e.model_dump(mode="json"), ensure_ascii=False)))

    grow = call

    def context_len(self) -> int:
        return len(self.session.messages)

    def facts(self) -> int:
        return len(self.session.memory.book)

    def close(self) -> None:
        self.manager.close()


class TrimDriver:
    name = "trim_messages"

    def __init__(self, budget: int) -> None:
        from langchain_core.messages import trim_messages

        self.trim = trim_messages
        self.budget = budget
        self.view = LangChainView(get_counter(TOKENIZER))
        self.history: list[Message] = []
        self.last = 0

    def call(self, batch: list[Message]) -> None:
        self.history.extend(batch)
        lc = self.view.extend(self.history)
        out = self.trim(lc, strategy="last", include_system=True, start_on="human",
                        token_counter=self.view.count, max_tokens=self.budget)
        self.last = len(out)

    def grow(self, batch: list[Message]) -> None:
        """Between measured lengths: only keep the history (trimming is stateless)."""
        self.history.extend(batch)
        self.view.extend(self.history)

    def context_len(self) -> int:
        return self.last

    def facts(self) -> int:
        return 0

    def close(self) -> None:
        pass


def measure(driver: Any, calls: Iterator[list[Message]], n: int, profile: bool = False) -> tuple[list[float], list[float], list[int], Any]:
    """Time ``n`` calls, then trace the memory of ``n`` more, then (``profile``) run ``n``
    more under cProfile. Returns wall and CPU times (ms), the peaks (bytes) and the pstats
    or None. CPU time (``process_time``) is less disturbed by other load on the machine."""
    times, cpu = [], []
    for _ in range(n):
        batch = next(calls)
        c0, t0 = time.process_time(), time.perf_counter()
        driver.call(batch)
        times.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    peaks = []
    tracemalloc.start()
    try:
        for _ in range(n):
            batch = next(calls)
            tracemalloc.reset_peak()
            before = tracemalloc.get_traced_memory()[0]
            driver.call(batch)
            peaks.append(tracemalloc.get_traced_memory()[1] - before)
    finally:
        tracemalloc.stop()
    stats = None
    if profile:
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(n):
            driver.call(next(calls))
        prof.disable()
        stats = pstats.Stats(prof)
    return times, cpu, peaks, stats


def run(driver: Any, lengths: tuple[int, ...], n: int, path: Path, profile: bool = False, offset: int = 0) -> list[dict[str, Any]]:
    """Grow one session through ``lengths`` and measure ``n`` timed and ``n`` traced calls at
    each (with ``profile``, ``n`` more under cProfile). Returns one row of raw samples per length."""
    rows = []
    appended = 0
    it = steps(path, offset)

    def batches() -> Iterator[list[Message]]:
        nonlocal appended
        for batch, _output in it:
            appended += len(batch)
            yield batch

    calls = batches()
    for length in lengths:
        while appended < length:
            driver.grow(next(calls))
        at = appended
        if hasattr(driver, "largest_event"):
            driver.largest_event = 0
        times, cpu, peaks, stats = measure(driver, calls, n, profile)
        rows.append({"length": at, "end": appended, "times": times, "cpu": cpu, "peaks": peaks, "stats": stats,
                     "event_kb": getattr(driver, "largest_event", 0) / 1000, "context": driver.context_len(),
                     "facts": driver.facts(), "failed": getattr(driver, "failed", 0)})
    return rows


def reopen_rows(preset: str, budget: int, lengths: tuple[int, ...], n: int, path: Path, work: str) -> list[dict[str, Any]]:
    """Grow one session through ``lengths``; at each, open it ``n`` times in a new
    ContextManager (cold: a new store and engine each time) and time the open."""
    driver = CtxwiseDriver(preset, budget, work, "-reopen")
    url, policy = driver.manager.store.url, driver.manager.policy
    rows, appended = [], 0
    it = steps(path)
    for length in lengths:
        while appended < length:
            batch, _ = next(it)
            appended += len(batch)
            driver.call(batch)
        times, cpu = [], []
        for _ in range(n + 1):
            c0, t0 = time.process_time(), time.perf_counter()
            cm = ContextManager(url, policy)
            s = cm.session("scale", preset)
            times.append((time.perf_counter() - t0) * 1000)
            cpu.append((time.process_time() - c0) * 1000)
            assert s.version == driver.session.version
            cm.close()
        times, cpu = times[1:], cpu[1:]  # the first open warms the import and connection caches
        rows.append({"length": appended, "context": len(driver.session.messages), "p50_ms": statistics.median(times),
                     "cpu_p50_ms": statistics.median(cpu), "min_ms": min(times)})
    driver.close()
    return rows


def reopen_section(results: dict[str, list[dict[str, Any]]], n: int) -> list[str]:
    out = [REOPEN_START, "## Reopen cost against history length", "",
           f"Open the stored session again in a new `ContextManager` (new store and engine), median of {n} opens "
           "after one warm-up open; the ratio is against the 10-message row. Contract: at most 1.5x at 10,000 messages.", "",
           "| preset | history (messages) | context (messages) | open ms (p50) | CPU ms (p50) | min ms | x 10-msg p50 | x 10-msg CPU |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    verdict = []
    for name, rows in results.items():
        base = rows[0]
        for r in rows:
            out.append(f"| {name} | {r['length']:,} | {r['context']:,} | {r['p50_ms']:.2f} | {r['cpu_p50_ms']:.2f} | "
                       f"{r['min_ms']:.2f} | {r['p50_ms'] / base['p50_ms']:.2f} | {r['cpu_p50_ms'] / base['cpu_p50_ms']:.2f} |")
        ratio = min(rows[-1]["p50_ms"] / base["p50_ms"], rows[-1]["cpu_p50_ms"] / base["cpu_p50_ms"])
        verdict.append(f"- **{name}**: reopen at {rows[-1]['length']:,} messages is x{ratio:.2f} the 10-message reopen "
                       f"(the lower of the wall and CPU ratios): " + ("within 1.5x." if ratio <= 1.5 else "**over 1.5x**."))
    return out + ["", *verdict, REOPEN_END]


REOPEN_START, REOPEN_END = "<!-- reopen:start -->", "<!-- reopen:end -->"


def write_reopen(out_path: Path, section: list[str]) -> None:
    """Put the reopen section into the report (replacing an older one, or appended)."""
    text = out_path.read_text(encoding="utf-8") if out_path.exists() else "# prepare() cost against history length\n"
    block = "\n".join(section)
    if REOPEN_START in text and REOPEN_END in text:
        head, rest = text.split(REOPEN_START, 1)
        text = head + block + rest.split(REOPEN_END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    out_path.write_text(text, encoding="utf-8")


def merge(runs: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One row per length over several sessions: samples pooled, sizes as ranges or maxima."""
    out = []
    for rows in zip(*runs):
        times = [t for r in rows for t in r["times"]]
        cpu = [t for r in rows for t in r["cpu"]]
        peaks = [p for r in rows for p in r["peaks"]]
        out.append({"length": min(r["length"] for r in rows), "end": max(r["end"] for r in rows),
                    "mean_ms": statistics.mean(times), "p50_ms": statistics.median(times), "cpu_p50_ms": statistics.median(cpu),
                    "peak_kib": statistics.mean(peaks) / 1024, "event_kb": max(r["event_kb"] for r in rows),
                    "context": max(r["context"] for r in rows), "facts": max(r["facts"] for r in rows),
                    "stats": rows[0]["stats"], "samples": len(times), "failed": sum(r["failed"] for r in rows)})
    return out


# --------------------------------------------------------------------------- report


def table(results: dict[str, list[dict[str, Any]]]) -> list[str]:
    out = ["| strategy | history (messages) | context sent (messages) | facts in book | largest event KB | failed prepares | ms / call (mean) | p50 | CPU p50 | "
           "× 10-msg mean | × 10-msg p50 | × 10-msg CPU p50 | peak KiB / call | × 10-msg peak |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, rows in results.items():
        base = rows[0]
        for r in rows:
            out.append(f"| {name} | {r['length']:,}–{r['end']:,} | {r['context']:,} | {r['facts']:,} | {r['event_kb']:,.1f} | {r['failed']} | {r['mean_ms']:.3f} | "
                       f"{r['p50_ms']:.3f} | {r['cpu_p50_ms']:.3f} | {r['mean_ms'] / base['mean_ms']:.2f} | "
                       f"{r['p50_ms'] / base['p50_ms']:.2f} | {r['cpu_p50_ms'] / base['cpu_p50_ms']:.2f} | {r['peak_kib']:,.1f} | {r['peak_kib'] / base['peak_kib']:.2f} |")
    return out


def growth(rows: list[dict[str, Any]], n: int, top: int = 12) -> list[str]:
    """The functions whose own time per call grew most between the second-largest and the
    largest length (cProfile ``tottime``; own time, so callers are not double counted)."""
    if len(rows) < 2 or rows[-1]["stats"] is None:
        return []
    a, b = rows[-2], rows[-1]

    def table_of(st: pstats.Stats) -> dict[str, tuple[int, float]]:
        out = {}
        for (file, line, fn), (cc, nc, tt, ct, callers) in st.stats.items():  # type: ignore[attr-defined]
            short = file.split("/src/")[-1].split("site-packages/")[-1].split("/lib/python3")[-1]
            out[f"{short}:{line} `{fn}`"] = (nc, tt)
        return out

    ta, tb = table_of(a["stats"]), table_of(b["stats"])
    diffs = sorted(((tb[k][1] - ta.get(k, (0, 0.0))[1], k) for k in tb), reverse=True)[:top]
    out = [f"| function (own time) | calls at {a['length']:,} | calls at {b['length']:,} | ms per model call at {a['length']:,} | at {b['length']:,} |",
           "| --- | ---: | ---: | ---: | ---: |"]
    for _, k in diffs:
        out.append(f"| {k} | {ta.get(k, (0, 0.0))[0]:,} | {tb[k][0]:,} | {ta.get(k, (0, 0.0))[1] * 1000 / n:.3f} | {tb[k][1] * 1000 / n:.3f} |")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--quick", action="store_true", help="lengths 10, 100, 1,000 only")
    ap.add_argument("--calls", type=int, default=10, help="calls measured per length and pass (default %(default)s)")
    ap.add_argument("--sessions", type=int, default=3, help="independent sessions per strategy (default %(default)s)")
    ap.add_argument("--budget", type=int, default=BUDGET, help="o200k tokens (default %(default)s)")
    ap.add_argument("--presets", default="default,ragent")
    ap.add_argument("--profile", action="store_true", help="cProfile ctxwise's timed calls and list what grew between the two largest lengths")
    ap.add_argument("--reopen-only", action="store_true", help="measure only the reopen cost and update its section")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "scale.md")
    args = ap.parse_args(argv)
    path = args.data if args.data.is_absolute() else (REPO / args.data).resolve()
    lengths = LENGTHS[:3] if args.quick else LENGTHS
    started = now()
    t_start = time.perf_counter()
    presets = [p for p in args.presets.split(",") if p]
    with tempfile.TemporaryDirectory(prefix="ctxwise-reopen-") as work:
        reopen = {f"ctxwise {p}": reopen_rows(p, args.budget, lengths, args.calls, path, work) for p in presets}
    section = reopen_section(reopen, args.calls)
    cmd = "python bench/scale.py" + ("".join(" " + a for a in (argv if argv is not None else sys.argv[1:])))
    section[1:1] = ["", f"- command: `{cmd}`; date: {started}", *machine(("sqlalchemy", "pydantic")), ""]
    print("\n".join(section))
    if args.reopen_only:
        write_reopen(args.out, section)
        print(f"\nwrote the reopen section of {args.out}")
        return 0

    results: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="ctxwise-scale-") as work:
        presets = [p for p in args.presets.split(",") if p]
        # warm up (lazy imports, first-statement compilation) so the 10-message row is not a cold start
        for d in [*(CtxwiseDriver(p, args.budget, work, "-warmup") for p in presets), TrimDriver(args.budget)]:
            run(d, (10,), 5, path)
            d.close()
        print("measuring", flush=True)
        makers: list[Callable[[int], Any]] = [
            *((lambda r, p=p: CtxwiseDriver(p, args.budget, work, f"-{r}")) for p in presets),
            lambda r: TrimDriver(args.budget)]
        for make in makers:
            runs = []
            for r in range(args.sessions):
                d = make(r)
                runs.append(run(d, lengths, args.calls, path, args.profile and r == 0 and d.name.startswith("ctxwise"),
                                offset=r * 7))
                d.close()
            results[d.name] = merge(runs)
            for row in results[d.name]:
                print(f"  {d.name:<16} {row['length']:>6,} messages: {row['mean_ms']:8.3f} ms/call (p50 {row['p50_ms']:.3f}), "
                      f"{row['peak_kib']:8.1f} KiB peak, context {row['context']} messages", flush=True)
    elapsed = time.perf_counter() - t_start

    lines = table(results)
    print("\n".join(lines))
    grown: list[str] = []
    for name, rows in results.items():
        g = growth(rows, args.calls)
        if g:
            grown += ["", f"**{name}**: the functions whose own time grew most from {rows[-2]['length']:,} to "
                      f"{rows[-1]['length']:,} messages (cProfile over {args.calls} more calls at each length):", "", *g]
    if grown:
        print("\n".join(grown))
    cmd = "python bench/scale.py" + ("".join(" " + a for a in (argv if argv is not None else sys.argv[1:])))
    doc = ["# prepare() cost against history length", "",
           f"- command: `{cmd}`", f"- date: {started}; wall time {elapsed / 60:.1f} min", *machine(("langchain-core", "sqlalchemy", "pydantic")),
           f"- budget {args.budget:,} o200k tokens; {args.sessions} sessions per strategy (each starting at a different "
           f"recorded conversation), {args.calls} timed and {args.calls} traced calls per session and length; "
           f"data `{args.data}` repeated with fresh ids", "",
           "A call = ctxwise `append()` of what arrived since the last model call + `prepare()` (SQLite file store), or one",
           "`trim_messages` over the whole history. The ctxwise context stays within the budget (compaction runs along the",
           "way); the stored session grows to the history length.", "",
           *lines, "", "## Verdict (computed from the rows above)", "", *verdicts(results), *grown, "", NOTES]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(doc) + "\n", encoding="utf-8")
    write_reopen(args.out, section)
    print(f"\nwrote {args.out} in {elapsed:.0f}s")
    return 0


def verdicts(results: dict) -> list[str]:
    """One line per strategy: the 10,000- against the 10-message row, flat or growing."""
    out = []
    for name, rows in results.items():
        first, last = rows[0], rows[-1]
        mean = last["mean_ms"] / max(first["mean_ms"], 1e-9)
        p50 = last["p50_ms"] / max(first["p50_ms"], 1e-9)
        mem = last["peak_kib"] / max(first["peak_kib"], 1e-9)
        flat = p50 <= 2.0 and mem <= 3.0
        out.append(f"- **{name}**: from {first['length']:,} to {last['length']:,} messages the time per call is "
                   f"x{mean:.2f} (mean), x{p50:.2f} (p50) and the peak memory per call x{mem:.2f}: "
                   + ("flat (within 2x time, 3x memory)." if flat else "**grows with the history**."))
    return out


NOTES = """\
## Reading the table

- **history** is the number of messages appended when the measured calls start and when the last
  pass ends (the measured calls themselves add messages; at "10" the window is 10 to about 70).
- **failed prepares** counts, over all sessions so far, the calls where ctxwise raised
  `ContextBudgetExceeded`; the session goes on with the next call.
- **largest event KB** is the biggest compaction-event record (JSON) ctxwise wrote and logged
  during the measured calls.

## What an earlier run found, and what changed

An earlier run (before commit "Facts cost O(new work)") found the `default` preset not flat:
the `facts_evicted` event re-listed every evicted fact on every change (233 KB records at
10,000 messages), `FactBook.add` and `pinned_texts` scanned every fact on every call, and the
digest summary never dropped the user's quotes, so it outgrew the budget (3,700 tokens against a
900 target) and some calls failed. The event now lists only new evictions, the book supersedes by
a key index and adds nothing for a repeated statement, `pinned_texts` is cached by version, and
the digest is bounded (quotes already pinned as facts go first). The verdicts above are computed
from this run's rows.

- **`trim_messages` is O(history) per call by construction**: LangChain keeps the whole history
  in the agent state, and `trim_messages` copies it (`convert_to_messages`, a reversed copy),
  counts all of it first (`token_counter(messages) <= max_tokens` in `_first_max_tokens`), then
  binary-searches prefixes, each counted again. Its time per call grows about 200-350x from 10 to
  10,000 messages and its memory per call about 30x. Part of the constant is our o200k adapter
  (it maps each LangChain message back to the canonical one by id; counts are memoized), but the
  linear growth is the library's: its own `count_tokens_approximately` is also a pass over every
  message.
"""

if __name__ == "__main__":
    raise SystemExit(main())
