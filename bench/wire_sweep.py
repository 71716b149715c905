"""Acceptance sweep: every recorded conversation, replayed for every provider at three budgets.

    .venv/bin/python bench/wire_sweep.py                 # all -> bench/results/wire_sweep.md
    .venv/bin/python bench/wire_sweep.py --quick         # 3 conversations per file (development)
    .venv/bin/python bench/wire_sweep.py --sets long     # only the coding-agent sessions

For each recording file under ``../shared/data/`` (``--sets``: the tau recordings of
``trajectories/`` and the coding-agent sessions of ``long/``, both by default; read with
``ctxwise.formats.load``) x provider (every name in ``ctxwise.providers.PROFILES``) x budget (3,000 / 6,000 / 12,000
tokens, the ``default`` preset otherwise), each conversation is replayed as a user of its own
(no long-term memory carried between recordings, as in ``bench/golden.py``) through the engine
(the loop of ``ctxwise replay``: append what arrived, ``prepare()`` before each recorded model
call, then append the recorded output). Counted per cell:

* **wire errors**: ``ctxwise.providers.check_wire`` on every rendered payload (ctxwise's own
  request types and the SDKs' (``use_sdk_types()``), unknown keys refused, and the provider
  rules on what is sent);
* **rule errors**: ``ctxwise.providers.check`` on every canonical payload against the full
  history (pairing, order, reasoning pass-back, thinking, empty content);
* **over budget**: calls whose context is above the effective budget;
* sessions that stopped: ``ContextBudgetExceeded`` split into *irreducible* (the pinned
  content alone is over: no valid request exists) and *reducible left* (the report's whole
  context is larger than its pinned part: something could still have been cut), and any other
  error by class (a fault);
* **edited while it fit**: in sessions where no management made valid fits the budget (at
  every call: it sends 0 calls over budget), the calls where default sends anything else.
  No management made valid is the same replay under the same policy with a budget no history
  reaches (``REFERENCE_BUDGET``): everything, with the render-time conversions a provider
  requires (empty results marked, ...); in such a session default's payload must be
  byte-identical to it at every call (0 edits; issue 25). Shown beside it, not a failure:
  *paid edits below the budget*, calls of the other sessions where everything would still
  have fit that call and default edited (a cold prompt cache, where an edit re-bills nothing;
  DESIGN.md decision 4);
* **not allowed**: sessions the provider refuses at append (e.g. ``deepseek`` on tool-using
  turns that carry no reasoning): a provider allows a recording when its messages append
  without error (the rule of ``bench/golden.py``); such a session is counted by the error's
  class, its calls up to the refusal are scored, and it is not a failure;
* for thinking recordings replayed as ``anthropic``: calls whose latest assistant message's
  thinking blocks differ from the recorded ones (Anthropic rejects any change; other
  providers may drop that reasoning, so it is not counted for them).

The acceptance target (issues 10 and 25): 0 wire errors, 0 rule errors, 0 over budget, 0 edited
while it fit, no other error, ``ContextBudgetExceeded`` only when irreducible.
"""

from __future__ import annotations

import argparse
import ast
import multiprocessing
import os
import re
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine, now  # noqa: E402

from ctxwise import ContextManager  # noqa: E402
from ctxwise.errors import ContextBudgetExceeded  # noqa: E402
from ctxwise.formats import load  # noqa: E402
from ctxwise.messages import Message, ThinkingBlock  # noqa: E402
from ctxwise.policy import Policy  # noqa: E402
from ctxwise.providers import PROFILES  # noqa: E402
from ctxwise.providers import check, check_wire  # noqa: E402
from ctxwise.providers.wire import use_sdk_types  # noqa: E402
from ctxwise.units import is_user_input  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("CTXWISE_SHARED", REPO.parent / "shared")) / "data"
SETS = ("long", "trajectories")
BUDGETS = (3000, 6000, 12000)
REFERENCE_BUDGET = 10**9
"""The budget of the no-management reference replay: no recording comes near it."""


class Refused(Exception):
    """A provider refused a recording's messages at append (it does not allow the recording)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(f"{type(error).__name__}: {error}")
        self.error = error


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
    fit_sessions: int = 0
    fit_calls: int = 0
    edited_fit: int = 0
    paid_edits: int = 0
    refused: Counter = field(default_factory=Counter)
    refused_examples: list[str] = field(default_factory=list)
    seconds: float = 0.0
    examples: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.wire or self.rules or self.over or self.cbe_reducible or self.other or self.thinking_changed
                    or self.edited_fit)


def _latest_thinking_changed(sent: list[Message], recorded: dict[str, Message]) -> bool | None:
    """None when the latest assistant message of the request had no recorded thinking, else
    whether its thinking blocks differ from the record's. Left out whole, with every other
    block as recorded, is no change when a user message follows it (a completed turn: its
    thinking may be omitted, preserved-thinking "remove the thinking in the kept turns";
    extended-thinking, "Preserving thinking blocks"), as after a note that closed the loop."""
    last = next((m for m in reversed(sent) if m.role == "assistant"), None)
    rec = recorded.get(last.id) if last is not None else None
    if last is None or rec is None or not rec.thinking:
        return None
    sent_thinking = [b for b in last.blocks if isinstance(b, ThinkingBlock)]
    if not sent_thinking and last.blocks == [b for b in rec.blocks if not isinstance(b, ThinkingBlock)]:
        k = sent.index(last)
        if any(m.role == "user" and not m.tool_results for m in sent[k + 1:]):
            return False
    return sent_thinking != rec.thinking


def _append(sessions: list[Any], batch: list[Message]) -> None:
    try:
        for s in sessions:
            s.append(batch)
    except ContextBudgetExceeded:
        raise
    except Exception as e:  # noqa: BLE001  the provider's rules refuse the recording
        raise Refused(e) from e


def replay(cm: ContextManager, ref: ContextManager, sid: str, messages: list[Message], cell: Cell,
           anthropic: bool) -> None:
    """The replay loop of ``ctxwise replay`` (append what arrived, prepare before each recorded
    model call, then append the recorded output), scoring each request as it is sent, beside
    the same replay under ``ref`` (no management made valid). Raises :class:`Refused` when an
    append is refused."""
    s = cm.session(sid, sid)  # a user of its own: no long-term memory carried from another recording
    r = ref.session(sid, sid)
    provider = cm.policy.provider
    recorded = {m.id: m for m in messages}
    fits, first = True, cell.calls  # everything fit every call so far
    edited_at: list[int] = []  # the session's calls that fit and default edited
    history: list[Message] = []
    pending: list[Message] = []
    seen_user = False
    for m in messages:
        seen_user = seen_user or is_user_input(m)
        if m.role == "assistant" and seen_user:
            if pending:
                _append([s, r], pending)
                pending = []
            p = s.prepare()
            sent = list(p.messages)
            cell.calls += 1
            everything = r.prepare()
            if everything.size > cm.policy.effective_budget:
                fits = False
            elif p.payload != everything.payload:
                edited_at.append(cell.calls - 1 - first)
            wire = check_wire(p.payload, provider)
            rules = check(sent, provider, reference=history)
            cell.wire += len(wire)
            cell.rules += len(rules)
            cell.over += int(p.size > cm.policy.effective_budget)
            for v in (wire + rules)[:1]:
                if len(cell.examples) < 5:
                    cell.examples.append(f"{sid}: {v}"[:300])
            if anthropic:
                changed = _latest_thinking_changed(sent, recorded)
                if changed is not None:
                    cell.thinking_calls += 1
                    cell.thinking_changed += int(changed)
            _append([s, r], [m])
        else:
            pending.append(m)
        history.append(m)
    if pending:
        _append([s, r], pending)
    if not fits:
        cell.paid_edits += len(edited_at)
        return
    cell.fit_sessions += 1
    cell.fit_calls += cell.calls - first
    cell.edited_fit += len(edited_at)
    if edited_at and len(cell.examples) < 5:
        cell.examples.append(f"{sid}: no management made valid fits every call and default edited "
                             f"{len(edited_at)} call(s), the first call {edited_at[0]}")


def sweep_cell(job: tuple[str, str, int, int | None, str]) -> tuple[str, str, int, Cell]:
    """One file x provider x budget (a picklable job for the process pool)."""
    path_s, provider, budget, limit, db_dir = job
    path = Path(path_s)
    convs = load(path)[:limit] if limit else load(path)
    use_sdk_types()  # the SDK request types check every payload too (the test extra installs them)
    cell = Cell()
    t0 = time.perf_counter()
    policy = Policy.preset("default", provider=provider, unit="tokens", budget=budget)
    anthropic = PROFILES[provider].reasoning_passback == "signed_blocks"  # Anthropic's rule only
    reference = Policy.preset("default", provider=provider, unit="tokens", budget=REFERENCE_BUDGET)
    with ContextManager(f"sqlite:///{db_dir}/{path.stem}-{provider}-{budget}.db", policy) as cm, \
            ContextManager("memory://", reference) as ref:
        for k, conv in enumerate(convs):
            cell.sessions += 1
            try:
                replay(cm, ref, f"{conv.id}-{k}", conv.messages, cell, anthropic)
            except Refused as e:
                cell.refused[type(e.error).__name__] += 1
                if len(cell.refused_examples) < 2:
                    cell.refused_examples.append(f"{conv.id}: {e}"[:300])
            except ContextBudgetExceeded as e:
                r = e.report
                if r.details.get("early") or r.total <= r.pinned:
                    cell.cbe_irreducible += 1
                else:
                    cell.cbe_reducible += 1
                    cell.examples.append(f"{conv.id}: {e}"[:300])
            except Exception as e:  # a fault (ctxwise's own error or a bug): report it, keep going
                cell.other[type(e).__name__] += 1
                cell.examples.append(f"{conv.id}: {type(e).__name__}: {e}"[:300])
    cell.seconds = time.perf_counter() - t0
    return str(path.relative_to(path.parents[2])), provider, budget, cell


_LINE = re.compile(
    r"^(?P<name>\S+)\s+(?P<provider>\S+)\s+(?P<budget>\d+)\s+sessions\s+(?P<sessions>\d+) calls\s+(?P<calls>\d+) "
    r"wire (?P<wire>\d+) rules (?P<rules>\d+) over (?P<over>\d+) cbe (?P<cbe_irreducible>\d+)/(?P<cbe_reducible>\d+) "
    r"other (?P<other>\{.*?\}) thinking (?P<thinking_changed>\d+)/(?P<thinking_calls>\d+) "
    r"edited-fit (?P<edited>\d+)/(?P<edited_of>\d+)(?: \((?P<fit_sessions>\d+) sessions\) paid (?P<paid>\d+))? "
    r"refused (?P<refused>\{.*?\})\s+(?P<seconds>\d+)s$")


def cells_from_log(path: str) -> list[tuple[str, str, int, Cell]]:
    """The cells a run printed, one line each (a run stopped before its table was written),
    read back from its output. A line printed before the per-session rule (``edited-fit E/F``
    counted per call, no session count) is read by that rule for a one-session cell (a
    coding-agent recording): the session fit when all its calls did and it ran to its end,
    its edits are then failures, else paid edits below the budget; such a line of a cell of
    several sessions cannot be read so and raises ValueError, as does a line of another shape."""
    rows = []
    for k, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines()):
        if not line.strip() or line.startswith("wrote "):
            continue
        m = _LINE.match(line)
        if m is None:
            raise ValueError(f"{path}:{k + 1}: not a cell line: {line[:80]!r}")
        g = m.groupdict()
        cell = Cell(**{f: int(g[f]) for f in ("sessions", "calls", "wire", "rules", "over", "cbe_irreducible",
                                               "cbe_reducible", "thinking_changed", "thinking_calls")},
                    other=Counter(ast.literal_eval(g["other"])), refused=Counter(ast.literal_eval(g["refused"])),
                    seconds=float(g["seconds"]))
        edited, of = int(g["edited"]), int(g["edited_of"])
        if g["fit_sessions"] is not None:
            cell.fit_sessions, cell.fit_calls, cell.edited_fit, cell.paid_edits = (
                int(g["fit_sessions"]), of, edited, int(g["paid"]))
        elif cell.sessions != 1:
            raise ValueError(f"{path}:{k + 1}: a per-call count of {cell.sessions} sessions cannot be read per session")
        elif of == cell.calls and not (cell.cbe_irreducible or cell.cbe_reducible or cell.refused or cell.other):
            cell.fit_sessions, cell.fit_calls, cell.edited_fit = 1, of, edited
        else:
            cell.paid_edits = edited
        rows.append((g["name"], g["provider"], int(g["budget"]), cell))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(DATA), help="the shared data directory (holding trajectories/ and long/)")
    ap.add_argument("--sets", default=",".join(SETS), help="which recordings: trajectories, long or both")
    ap.add_argument("--quick", action="store_true", help="3 conversations per file")
    ap.add_argument("--limit", type=int, default=None, help="conversations per file")
    ap.add_argument("--providers", default=",".join(PROFILES))
    ap.add_argument("--budgets", default=",".join(str(b) for b in BUDGETS))
    ap.add_argument("--jobs", type=int, default=2, help="worker processes")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "wire_sweep.md"))
    ap.add_argument("--from-log", default=None, metavar="LOG",
                    help="write the table of the cells a run printed (its stdout saved in LOG) instead of running")
    ap.add_argument("--log-note", default="", help="with --from-log: which run printed the cells (a line of the report)")
    a = ap.parse_args()
    limit = 3 if a.quick else a.limit
    sets = a.sets.split(",")
    files = [f for st in sets for f in sorted((Path(a.data) / st).glob("*/*.json"))]
    if not files:
        print(f"no recordings under {a.data} (set CTXWISE_SHARED or --data)", file=sys.stderr)
        return 2
    providers = a.providers.split(",")
    budgets = [int(b) for b in a.budgets.split(",")]
    rows: list[tuple[str, str, int, Cell]] = cells_from_log(a.from_log) if a.from_log else []
    started = time.perf_counter()
    if a.from_log:
        done = {n for n, *_ in rows}
        files = [f for f in files if str(f.relative_to(f.parents[2])) in done]
    with tempfile.TemporaryDirectory() as tmp:
        jobs = [] if a.from_log else [(str(f), p, b, limit, tmp) for f in files for p in providers for b in budgets]
        with multiprocessing.Pool(a.jobs) as pool:
            for name, provider, budget, cell in pool.imap(sweep_cell, jobs):
                rows.append((name, provider, budget, cell))
                print(f"{name:60s} {provider:16s} {budget:6d}  sessions {cell.sessions:3d} calls {cell.calls:5d} "
                      f"wire {cell.wire} rules {cell.rules} over {cell.over} cbe {cell.cbe_irreducible}/"
                      f"{cell.cbe_reducible} other {dict(cell.other)} thinking {cell.thinking_changed}/"
                      f"{cell.thinking_calls} edited-fit {cell.edited_fit}/{cell.fit_calls} ({cell.fit_sessions} sessions) "
                      f"paid {cell.paid_edits} refused {dict(cell.refused)}  "
                      f"{cell.seconds:.0f}s", flush=True)
    total = Cell()
    for *_, c in rows:
        for k in ("sessions", "calls", "wire", "rules", "over", "cbe_irreducible", "cbe_reducible",
                  "thinking_changed", "thinking_calls", "fit_sessions", "fit_calls", "edited_fit", "paid_edits"):
            setattr(total, k, getattr(total, k) + getattr(c, k))
        total.other.update(c.other)
        total.refused.update(c.refused)
    lines = [
        "# Wire sweep: every recording x every provider x 3 budgets (tau and coding-agent sessions)",
        "",
        f"- date: {now()}",
        *machine(("anthropic", "openai", "pydantic")),
        f"- command: `.venv/bin/python bench/wire_sweep.py{' --quick' if a.quick else ''}"
        f"{f' --sets {a.sets}' if a.sets != ','.join(SETS) else ''}"
        f"{f' --providers {a.providers}' if a.providers != ','.join(PROFILES) else ''}"
        f"{f' --budgets {a.budgets}' if a.budgets != ','.join(str(b) for b in BUDGETS) else ''}"
        f"{f' --from-log {Path(a.from_log).name}' if a.from_log else ''}"
        f"{f' --limit {a.limit}' if a.limit else ''}` ({time.perf_counter() - started:.0f} s)",
        *([f"- cells: {a.log_note or 'read from ' + a.from_log}"] if a.from_log else []),
        f"- data: {', '.join(f.name for f in files)}" + (f" (first {limit} conversations of each)" if limit else ""),
        "- policy: `default` preset, unit tokens, budget as shown; see the docstring of bench/wire_sweep.py",
        "",
        "**Total**: " + (f"{total.sessions:,} sessions, {total.calls:,} model calls: {total.wire} wire errors, "
                         f"{total.rules} rule errors, {total.over} over budget, ContextBudgetExceeded "
                         f"{total.cbe_irreducible} irreducible / {total.cbe_reducible} with reducible content left, "
                         f"other errors {dict(total.other) or 0}, latest-assistant thinking changed "
                         f"{total.thinking_changed} of {total.thinking_calls} calls; in the {total.fit_sessions:,} sessions "
                         f"where no management made valid fits the budget ({total.fit_calls:,} calls) default sent "
                         f"anything else on {total.edited_fit} calls (paid edits below the budget in the other "
                         f"sessions: {total.paid_edits}); "
                         f"sessions a provider does not allow (refused at append): "
                         f"{sum(total.refused.values())} ({dict(total.refused) or 0})."),
        "",
        "| file | provider | budget | sessions | calls | wire errors | rule errors | over budget | "
        "CBE irreducible | CBE reducible left | other errors | latest thinking changed | edited while it fit "
        "(calls / calls of sessions that fit) | paid edits below the budget | not allowed | ok |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- | --- |",
    ]
    for name, provider, budget, c in rows:
        lines.append(f"| {name} | {provider} | {budget:,} | {c.sessions} | {c.calls:,} | {c.wire} | {c.rules} | "
                     f"{c.over} | {c.cbe_irreducible} | {c.cbe_reducible} | "
                     f"{', '.join(f'{k} {v}' for k, v in c.other.items()) or 0} | "
                     f"{c.thinking_changed}/{c.thinking_calls} | {c.edited_fit}/{c.fit_calls} | {c.paid_edits} | "
                     f"{', '.join(f'{k} {v}' for k, v in c.refused.items()) or 0} | {'yes' if c.ok else '**no**'} |")
    bad = [(n, p, b, c) for n, p, b, c in rows if c.examples]
    if bad:
        lines += ["", "## Examples of what went wrong (up to 5 per cell)", ""]
        for n, p, b, c in bad:
            lines.append(f"- {n} / {p} / {b:,}:")
            lines += [f"  - `{x}`" for x in c.examples[:5]]
    refused = [(n, p, b, c) for n, p, b, c in rows if c.refused_examples]
    if refused:
        lines += ["", "## Recordings a provider does not allow (the first refusals)", ""]
        for n, p, b, c in refused:
            lines += [f"- {n} / {p} / {b:,}: `{x}`" for x in c.refused_examples[:1]]
    Path(a.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {a.out}")
    return 0 if all(c.ok for *_, c in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
