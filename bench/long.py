"""Benchmark: long tool loops (coding agents) at 32,000 / 64,000 / 128,000 tokens, one run.

    python bench/long.py                       # every recording under $CTXWISE_SHARED/data/long
    python bench/long.py --budgets 32000 --limit 3

Every recording under ``../shared/data/long`` (Claude Code, mini-swe-agent, OpenHands,
SWE-agent; ``--data`` to change) is replayed the way ``ctxwise replay`` drives one: before each
recorded assistant message after the first user input, what arrived since the last call is
appended and ``prepare()`` runs (``Policy.preset("default", budget=B, unit="tokens",
provider=P)``, a fresh in-memory store, the offline digest summarizer). ``P`` is
``anthropic`` for the Claude Code sessions and ``openai`` for the others. Beside it, **no
management made valid** (``bench/_peers.py`` ``EverythingValid``: the whole history every
call, an empty result marked) is scored on the same calls by the same functions
(``ctxwise.replay.metrics``, o200k tokens):

* input tokens and cache-adjusted cost (cached prefix at 0.1), calls over the budget;
* **task recall**: the task lines of the instruction in force present at every call;
* **edit-anchor recall**: for every edit call (``Edit.old_string``, ``str_replace`` ``old_str``,
  a literal ``sed -i s/…/`` pattern) whose anchor the history held, whether the payload it was
  produced from held it;
* **working-file freshness**: for every edit of a file viewed before, whether the latest view
  was in the payload whole;
* support recall (salient values, amounts and dates normalized), as in ``bench/compare.py``;
* for ctxwise, validator errors (provider rules, against the full history), and prepare p50 / p95.

No management is over the budget wherever the history is: its cost is the price of sending
everything, not a strategy that fits. Writes ``bench/results/long.md`` (``--out``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "bench"))

from _peers import EverythingValid  # noqa: E402

from ctxwise import ContextManager, Message, Policy  # noqa: E402
from ctxwise.formats import load  # noqa: E402
from ctxwise.replay import metrics  # noqa: E402
from ctxwise.tokens import get_counter  # noqa: E402

SHARED = Path(os.environ.get("CTXWISE_SHARED", REPO.parent / "shared"))
BUDGETS = (32_000, 64_000, 128_000)
STRATEGIES = ("ctxwise", "no management, valid")


@dataclass
class Score:
    """One strategy on one session at one budget."""

    calls: int = 0
    tokens: int = 0
    cost: float = 0.0
    over: int = 0
    task: metrics.Recall = metrics.Recall(0, 0)
    anchors: metrics.Recall = metrics.Recall(0, 0)
    fresh: metrics.Recall = metrics.Recall(0, 0)
    support: metrics.Recall = metrics.Recall(0, 0)
    invalid: int = 0
    latencies: list[float] = field(default_factory=list)
    error: str = ""


def provider_of(path: Path) -> str:
    """``anthropic`` for the Claude Code recordings, ``openai`` for the others."""
    return "anthropic" if "claude-code" in str(path) else "openai"


def drive(msgs: Sequence[Message], budget: int, provider: str) -> tuple[list, list, list, list[float], str]:
    """``(histories, ctxwise payloads as sent, outputs, prepare latencies in ms, error)``."""
    policy = Policy.preset("default", budget=budget, unit="tokens", provider=provider)
    histories: list[list[Message]] = []
    payloads: list[list[Message]] = []
    outputs: list[Message] = []
    latencies: list[float] = []
    history: list[Message] = []
    with ContextManager("memory://", policy) as cm:
        s = cm.session("long", "run")
        pending: list[Message] = []
        seen = False
        try:
            for m in msgs:
                seen = seen or (m.role == "user" and not m.tool_results)
                if m.role == "assistant" and seen:
                    if pending:
                        s.append(pending)
                        pending = []
                    t0 = time.perf_counter()
                    p = s.prepare()
                    latencies.append((time.perf_counter() - t0) * 1000)
                    histories.append(list(history))
                    payloads.append(metrics.as_sent(list(p.messages), provider))
                    outputs.append(m)
                    s.append([m])
                else:
                    pending.append(m)
                history.append(m)
        except Exception as e:  # a failed call ends the session; reported, never hidden
            return histories, payloads, outputs, latencies, f"{type(e).__name__}: {e}"[:200]
    return histories, payloads, outputs, latencies, ""


def score(histories: list, payloads: list, outputs: list, budget: int, provider: str, *, check: bool) -> Score:
    """The measures of one strategy's payloads (see the module doc)."""
    tok = get_counter("o200k_base")
    costs = metrics.call_costs(payloads, tok, 0.1)
    sc = Score(calls=len(payloads), tokens=sum(c.tokens for c in costs), cost=sum(c.cost for c in costs),
               over=sum(1 for c in costs if c.tokens > budget))
    sc.task = metrics.task_recall(histories, payloads)
    sc.anchors = metrics.edit_anchor_recall(histories, payloads, outputs)
    sc.fresh = metrics.working_file_freshness(histories, payloads, outputs)
    sc.support = metrics.recall_figures(histories, payloads, outputs).normalized
    if check:
        sc.invalid = len(metrics.validator_errors(payloads, provider, references=histories))
    return sc


def run_session(path: Path, budget: int) -> dict[str, Score]:
    """Both strategies on one recording at one budget."""
    conv = load(str(path))
    conv = conv[0] if isinstance(conv, list) else conv
    provider = provider_of(path)
    histories, payloads, outputs, lat, err = drive(list(conv.messages), budget, provider)
    ours = score(histories, payloads, outputs, budget, provider, check=True)
    ours.latencies, ours.error = lat, err
    peer = EverythingValid()
    theirs = [metrics.as_sent(peer.prepare(list(h))[0], provider) for h in histories]
    return {"ctxwise": ours, "no management, valid": score(histories, theirs, outputs, budget, provider, check=False)}


def _r(r: metrics.Recall) -> str:
    return f"{r.value:.3f} ({r.supported}/{r.needed})" if r.needed else "–"


def _add(a: metrics.Recall, b: metrics.Recall) -> metrics.Recall:
    return metrics.Recall(a.supported + b.supported, a.needed + b.needed)


def report(results: dict[int, dict[str, dict[str, Score]]], files: list[Path], data: Path) -> str:
    """The markdown page: totals per budget and strategy, then one row per session."""
    out = ["# Long tool loops: ctxwise against no management made valid", "",
           f"Recordings: {len(files)} sessions under `{data.name}/` (Claude Code, mini-swe-agent, OpenHands, "
           "SWE-agent); `python bench/long.py` (one run). Tokens are o200k; cost is cache-adjusted "
           "(cached prefix at 0.1). Providers: `anthropic` for Claude Code, `openai` for the others. "
           "No management sends the whole history: wherever it is over the budget it is not a strategy "
           "that fits, only the price of sending everything.", ""]
    head = ("| budget | strategy | calls | input tokens | cost | calls over budget | task recall | "
            "edit-anchor recall | working-file freshness | support recall | validator errors | prepare p50 / p95 ms |")
    out += ["## Totals", "", head, "|" + " --- |" * 12]
    for budget, per in results.items():
        for strat in STRATEGIES:
            tot = Score()
            lat: list[float] = []
            for sc in (per[f][strat] for f in per):
                tot.calls += sc.calls
                tot.tokens += sc.tokens
                tot.cost += sc.cost
                tot.over += sc.over
                tot.invalid += sc.invalid
                tot.task, tot.anchors = _add(tot.task, sc.task), _add(tot.anchors, sc.anchors)
                tot.fresh, tot.support = _add(tot.fresh, sc.fresh), _add(tot.support, sc.support)
                lat += sc.latencies
            ms = (f"{metrics.percentile(lat, 50):.1f} / {metrics.percentile(lat, 95):.1f}" if lat else "–")
            out.append(f"| {budget:,} | {strat} | {tot.calls:,} | {tot.tokens:,} | {tot.cost:,.0f} | {tot.over:,} | "
                       f"{_r(tot.task)} | {_r(tot.anchors)} | {_r(tot.fresh)} | {_r(tot.support)} | "
                       f"{tot.invalid if strat == 'ctxwise' else '–'} | {ms if strat == 'ctxwise' else '–'} |")
    errors = [f"- {b:,} {f}: {per[f]['ctxwise'].error}" for b, per in results.items() for f in per
              if per[f]["ctxwise"].error]
    out += ["", "Failed sessions (ctxwise raised; the session stops there): " + ("none" if not errors else ""), *errors]
    out += ["", "## Per session", "", "| budget | session | ctxwise cost | no management cost | ctxwise ÷ no mgmt | "
            "no mgmt calls over budget | task recall | edit-anchor recall | working-file freshness |",
            "|" + " --- |" * 9]
    for budget, per in results.items():
        for f, sc in per.items():
            us, them = sc["ctxwise"], sc["no management, valid"]
            ratio = us.cost / them.cost if them.cost else 0.0
            out.append(f"| {budget:,} | {f} | {us.cost:,.0f} | {them.cost:,.0f} | {ratio:.3f} | {them.over} | "
                       f"{_r(us.task)} | {_r(us.anchors)} | {_r(us.fresh)} |")
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=SHARED / "data" / "long")
    ap.add_argument("--budgets", type=int, nargs="+", default=list(BUDGETS))
    ap.add_argument("--limit", type=int, default=0, help="at most N recordings (development)")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "long.md")
    a = ap.parse_args(argv)
    files = sorted(a.data.glob("*/*.json"))
    if a.limit:
        files = files[: a.limit]
    results: dict[int, dict[str, dict[str, Score]]] = {}
    for budget in a.budgets:
        results[budget] = {}
        for f in files:
            t0 = time.perf_counter()
            results[budget][f"{f.parent.name}/{f.name}"] = res = run_session(f, budget)
            us = res["ctxwise"]
            print(f"{budget:>7} {f.name[:44]:44} calls {us.calls:4} task {_r(us.task)} anchors {_r(us.anchors)} "
                  f"fresh {_r(us.fresh)} {time.perf_counter() - t0:.1f}s{' ERROR ' + us.error if us.error else ''}",
                  flush=True)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(report(results, files, a.data), encoding="utf-8")
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
