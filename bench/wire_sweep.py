"""Acceptance sweep: every recorded conversation, replayed for every provider at three budgets.

    .venv/bin/python bench/wire_sweep.py                 # all -> bench/results/wire_sweep.md
    .venv/bin/python bench/wire_sweep.py --quick         # 3 conversations per file (development)

For each recording file in ``../shared/data/trajectories`` (read with ``ctxwise.formats.load``)
x provider (every name in ``ctxwise.providers.PROFILES``) x budget (3,000 / 6,000 / 12,000
tokens, the ``default`` preset otherwise), each conversation is replayed through the engine
(``ctxwise.replay.runner.replay_conversation``: append what arrived, ``prepare()`` before each
recorded model call). Counted per cell:

* **wire errors**: ``ctxwise.providers.check_wire`` on every rendered payload (the request
  types of the SDKs, unknown keys refused, and the provider rules on what is sent);
* **rule errors**: ``ctxwise.providers.check`` on every canonical payload against the full
  history (pairing, order, reasoning pass-back, thinking, empty content);
* **over budget**: calls whose context is above the effective budget;
* sessions that stopped: ``ContextBudgetExceeded`` split into *irreducible* (the pinned
  content alone is over: no valid request exists) and *reducible left* (the report's whole
  context is larger than its pinned part: something could still have been cut), and any other
  error by class (a fault);
* for thinking recordings replayed as ``anthropic``: calls whose latest assistant message's
  thinking blocks differ from the recorded ones (Anthropic rejects any change; other
  providers may drop that reasoning, so it is not counted for them).

The acceptance target (issue 10): 0 wire errors, 0 rule errors, 0 over budget, no other error,
``ContextBudgetExceeded`` only when irreducible.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine, now  # noqa: E402

from ctxwise.engine import ContextManager, Session  # noqa: E402
from ctxwise.errors import ContextBudgetExceeded, CtxwiseError  # noqa: E402
from ctxwise.formats import load  # noqa: E402
from ctxwise.messages import Message, ThinkingBlock  # noqa: E402
from ctxwise.policy import Policy  # noqa: E402
from ctxwise.providers import PROFILES  # noqa: E402
from ctxwise.replay.runner import replay_conversation  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("CTXWISE_SHARED", REPO.parent / "shared")) / "data" / "trajectories"
BUDGETS = (3000, 6000, 12000)


@dataclass
class Cell:
    """One file x provider x budget."""

    sessions: int = 0
    calls: int = 0
    wire: int = 0
    rules: int = 0
    over: int = 0
    cbe_irreducible: int = 0
    cbe_reducible: int = 0
    other: Counter = field(default_factory=Counter)
    thinking_changed: int = 0
    thinking_calls: int = 0
    seconds: float = 0.0
    examples: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.wire or self.rules or self.over or self.cbe_reducible or self.other or self.thinking_changed)


class Watch:
    """Wraps ``Session.prepare`` to compare the latest assistant message of each request with
    the recorded one (thinking blocks byte-identical)."""

    recorded: dict[str, Message] = {}
    active = False
    changed = 0
    calls = 0

    @classmethod
    def install(cls) -> None:
        original = Session.prepare

        def prepare(self: Session):  # type: ignore[no-untyped-def]
            p = original(self)
            last = next((m for m in reversed(p.messages) if m.role == "assistant"), None)
            rec = cls.recorded.get(last.id) if last is not None else None
            if cls.active and rec is not None and rec.thinking:
                cls.calls += 1
                if [b for b in last.blocks if isinstance(b, ThinkingBlock)] != rec.thinking:
                    cls.changed += 1
            return p

        Session.prepare = prepare  # type: ignore[method-assign]


def sweep_cell(path: Path, convs, provider: str, budget: int, db_dir: str) -> Cell:
    cell = Cell()
    t0 = time.perf_counter()
    policy = Policy.preset("default", provider=provider, unit="tokens", budget=budget)
    cm = ContextManager(f"sqlite:///{db_dir}/{path.stem}-{provider}-{budget}.db", policy)
    Watch.changed = Watch.calls = 0
    Watch.active = PROFILES[provider].reasoning_passback == "signed_blocks"  # Anthropic's rule only
    try:
        for k, conv in enumerate(convs):
            Watch.recorded = {m.id: m for m in conv.messages}
            cell.sessions += 1
            try:
                res = replay_conversation(cm, "sweep", f"{conv.id}-{k}", conv.messages, name=conv.id,
                                          source=str(path), format=conv.format)
            except ContextBudgetExceeded as e:
                r = e.report
                if r.details.get("early") or r.total <= r.pinned:
                    cell.cbe_irreducible += 1
                else:
                    cell.cbe_reducible += 1
                    cell.examples.append(f"{conv.id}: {e}")
                continue
            except CtxwiseError as e:
                cell.other[type(e).__name__] += 1
                cell.examples.append(f"{conv.id}: {type(e).__name__}: {str(e)[:300]}")
                continue
            except Exception as e:  # a bug: report it, keep going
                cell.other[type(e).__name__] += 1
                cell.examples.append(f"{conv.id}: {type(e).__name__}: {str(e)[:300]}")
                continue
            m = res.measures
            cell.calls += m.calls
            cell.wire += m.wire_errors
            cell.rules += m.validator_errors
            cell.over += m.over_budget
            for c in res.calls:
                for v in (c.wire + c.violations)[:1]:
                    if len(cell.examples) < 5:
                        cell.examples.append(f"{conv.id}: {v[:300]}")
    finally:
        cm.close()
    cell.thinking_changed, cell.thinking_calls = Watch.changed, Watch.calls
    cell.seconds = time.perf_counter() - t0
    return cell


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(DATA), help="directory of recorded sessions")
    ap.add_argument("--quick", action="store_true", help="3 conversations per file")
    ap.add_argument("--limit", type=int, default=None, help="conversations per file")
    ap.add_argument("--providers", default=",".join(PROFILES))
    ap.add_argument("--budgets", default=",".join(str(b) for b in BUDGETS))
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "wire_sweep.md"))
    a = ap.parse_args()
    limit = 3 if a.quick else a.limit
    files = sorted(Path(a.data).glob("*/*.json"))
    if not files:
        print(f"no recordings under {a.data} (set CTXWISE_SHARED or --data)", file=sys.stderr)
        return 2
    providers = a.providers.split(",")
    budgets = [int(b) for b in a.budgets.split(",")]
    Watch.install()
    rows: list[tuple[str, str, int, Cell]] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for f in files:
            convs = load(f)[:limit] if limit else load(f)
            for provider in providers:
                for budget in budgets:
                    cell = sweep_cell(f, convs, provider, budget, tmp)
                    rows.append((f.name, provider, budget, cell))
                    print(f"{f.name:50s} {provider:16s} {budget:6d}  sessions {cell.sessions:3d} calls {cell.calls:5d} "
                          f"wire {cell.wire} rules {cell.rules} over {cell.over} cbe {cell.cbe_irreducible}/"
                          f"{cell.cbe_reducible} other {dict(cell.other)} thinking {cell.thinking_changed}/"
                          f"{cell.thinking_calls}  {cell.seconds:.0f}s", flush=True)
    total = Cell()
    for *_, c in rows:
        for k in ("sessions", "calls", "wire", "rules", "over", "cbe_irreducible", "cbe_reducible",
                  "thinking_changed", "thinking_calls"):
            setattr(total, k, getattr(total, k) + getattr(c, k))
        total.other.update(c.other)
    lines = [
        "# Wire sweep: every recording x every provider x 3 budgets",
        "",
        f"- date: {now()}",
        *machine(("anthropic", "openai", "pydantic")),
        f"- command: `.venv/bin/python bench/wire_sweep.py{' --quick' if a.quick else ''}"
        f"{f' --limit {a.limit}' if a.limit else ''}` ({time.perf_counter() - started:.0f} s)",
        f"- data: {', '.join(f.name for f in files)}" + (f" (first {limit} conversations of each)" if limit else ""),
        "- policy: `default` preset, unit tokens, budget as shown; see the docstring of bench/wire_sweep.py",
        "",
        "**Total**: " + (f"{total.sessions:,} sessions, {total.calls:,} model calls: {total.wire} wire errors, "
                         f"{total.rules} rule errors, {total.over} over budget, ContextBudgetExceeded "
                         f"{total.cbe_irreducible} irreducible / {total.cbe_reducible} with reducible content left, "
                         f"other errors {dict(total.other) or 0}, latest-assistant thinking changed "
                         f"{total.thinking_changed} of {total.thinking_calls} calls."),
        "",
        "| file | provider | budget | sessions | calls | wire errors | rule errors | over budget | "
        "CBE irreducible | CBE reducible left | other errors | latest thinking changed | ok |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- |",
    ]
    for name, provider, budget, c in rows:
        lines.append(f"| {name} | {provider} | {budget:,} | {c.sessions} | {c.calls:,} | {c.wire} | {c.rules} | "
                     f"{c.over} | {c.cbe_irreducible} | {c.cbe_reducible} | "
                     f"{', '.join(f'{k} {v}' for k, v in c.other.items()) or 0} | "
                     f"{c.thinking_changed}/{c.thinking_calls} | {'yes' if c.ok else '**no**'} |")
    bad = [(n, p, b, c) for n, p, b, c in rows if c.examples]
    if bad:
        lines += ["", "## Examples of what went wrong (up to 5 per cell)", ""]
        for n, p, b, c in bad:
            lines.append(f"- {n} / {p} / {b:,}:")
            lines += [f"  - `{x}`" for x in c.examples[:5]]
    Path(a.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {a.out}")
    return 0 if all(c.ok for *_, c in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
