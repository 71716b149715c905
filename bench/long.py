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
  OpenCode ``oldString``, MCP ``edit_file`` ``oldText``, a diff's ``SEARCH`` block, a patch
  hunk's old lines, a literal ``sed -i s/…/`` pattern; ``metrics.edit_anchors``) whose anchor
  the history held, whether the payload it was produced from held it;
* **working-file freshness**: for every edit of a file viewed before, whether the latest view
  was in the payload whole;
* support recall (salient values, amounts and dates normalized), as in ``bench/compare.py``;
* validator errors (provider rules, against the full history) and **bound-reasoning
  violations** (``metrics.bound_reasoning_violations``: a reply's reasoning sent after a prefix
  that differs from the payload it was produced on, from the payloads alone), and for ctxwise
  prepare p50 / p95.

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
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "bench"))

from _peers import (  # noqa: E402
    ClearAllButLast,
    EverythingValid,
    HeadAndTailObservations,
    LangChainSummarizationEditing,
    ObservationMasking,
    OpenHandsCondenser,
)

from ctxwise import ContextManager, Message, Policy  # noqa: E402
from ctxwise.formats import load  # noqa: E402
from ctxwise.providers import get_profile  # noqa: E402
from ctxwise.replay import metrics  # noqa: E402
from ctxwise.tokens import get_counter  # noqa: E402

SHARED = Path(os.environ.get("CTXWISE_SHARED", REPO.parent / "shared"))
BUDGETS = (32_000, 64_000, 128_000)
PEERS = ("observation masking (10)", "OpenHands condenser", "LangChain Summarization+ContextEditing",
         "clear all but last 5", "mini-swe-agent head-and-tail")
STRATEGIES = ("ctxwise", "no management, valid", *PEERS)


def peer(name: str, budget: int) -> Any:
    """A fresh peer strategy (``bench/_peers.py``) set up as its users run it."""
    tok = get_counter("o200k_base")
    return {"observation masking (10)": lambda: ObservationMasking(10),
            "OpenHands condenser": lambda: OpenHandsCondenser(keep_first=1, max_size=100),
            "LangChain Summarization+ContextEditing": lambda: LangChainSummarizationEditing(budget, tok),
            "clear all but last 5": lambda: ClearAllButLast(budget, tok, 5),
            "mini-swe-agent head-and-tail": lambda: HeadAndTailObservations(10_000)}[name]()


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
    bound: int = 0
    latencies: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    """Each prepare()'s process CPU time in ms (beside its wall time, :attr:`latencies`)."""
    error: str = ""
    bought: tuple[int, ...] = ()
    rebilled: int = 0
    history: int = 0


def provider_of(path: Path) -> str:
    """``anthropic`` for the Claude Code recordings, ``openai`` for the others."""
    return "anthropic" if "claude-code" in str(path) else "openai"


def drive(msgs: Sequence[Message], budget: int, provider: str,
          bound: str = "auto", cpu: list[float] | None = None) -> tuple[list, list, list, list[float], str]:
    """``(histories, ctxwise payloads (the canonical lists prepare() returned), outputs, prepare latencies in ms, error)``;
    ``cpu``, when given, receives each prepare()'s process CPU time in ms."""
    policy = Policy.preset("default", budget=budget, unit="tokens", provider=provider, bound_reasoning=bound)
    histories: list[list[Message]] = []
    payloads: list[list[Message]] = []
    outputs: list[Message] = []
    latencies: list[float] = []
    with ContextManager("memory://", policy) as cm:
        s = cm.session("long", "run")
        try:
            for new, history, m in metrics.model_calls(msgs):
                if new:
                    s.append(new)
                t0, c0 = time.perf_counter(), time.process_time()
                p = s.prepare()
                latencies.append((time.perf_counter() - t0) * 1000)
                if cpu is not None:
                    cpu.append((time.process_time() - c0) * 1000)
                histories.append(history)
                payloads.append(list(p.messages))
                outputs.append(m)
                s.append([m])
        except Exception as e:  # a failed call ends the session; reported, never hidden
            return histories, payloads, outputs, latencies, f"{type(e).__name__}: {e}"[:200]
    return histories, payloads, outputs, latencies, ""


def score(histories: list, payloads: list, outputs: list, budget: int, provider: str, *, check: bool) -> Score:
    """The measures of one strategy's payloads (see the module doc): ``payloads`` are the
    canonical lists it would send; the measures read them as the provider receives them
    (:func:`ctxwise.replay.metrics.as_sent`: reasoning the target leaves out is not counted), the
    validator and the bound-reasoning check read the canonical lists (without reasoning for a
    target that takes none back)."""
    tok = get_counter("o200k_base")
    canonical = payloads
    payloads = [metrics.as_sent(p, provider) for p in canonical]
    costs = metrics.call_costs(payloads, tok, 0.1)
    sc = Score(calls=len(payloads), tokens=sum(c.tokens for c in costs), cost=sum(c.cost for c in costs),
               over=sum(1 for c in costs if c.tokens > budget))
    sc.task = metrics.task_recall(histories, payloads)
    sc.anchors = metrics.edit_anchor_recall(histories, payloads, outputs)
    sc.fresh = metrics.working_file_freshness(histories, payloads, outputs)
    sc.support = metrics.recall_figures(histories, payloads, outputs).normalized
    br = metrics.cache_breaks(payloads, tok)
    sc.bought, sc.rebilled = br.calls, br.rebilled
    sc.history = tok.count(histories[-1]) if histories else 0
    if check:
        # a target that takes reasoning back is checked on the lists it is sent (thinking it
        # leaves out included: the rules say which it must keep); one that takes none on its view
        checked = canonical if get_profile(provider).sends_reasoning else payloads
        sc.invalid = len(metrics.validator_errors(checked, provider, references=histories))
        sc.bound = len(metrics.bound_reasoning_violations(checked, outputs))
    return sc


def run_session(path: Path, budget: int, bound: str = "auto", peers: Sequence[str] = PEERS) -> dict[str, Score]:
    """Every strategy on one recording at one budget, on the calls ctxwise made (all of them
    unless it raised)."""
    conv = load(str(path))
    conv = conv[0] if isinstance(conv, list) else conv
    provider = provider_of(path)
    cpu: list[float] = []
    histories, payloads, outputs, lat, err = drive(list(conv.messages), budget, provider, bound, cpu)
    ours = score(histories, payloads, outputs, budget, provider, check=True)
    ours.latencies, ours.cpu, ours.error = lat, cpu, err
    out = {"ctxwise": ours}
    for name in ("no management, valid", *peers):
        strat = EverythingValid() if name == "no management, valid" else peer(name, budget)
        theirs = [strat.prepare(list(h))[0] for h in histories]
        out[name] = score(histories, theirs, outputs, budget, provider, check=True)
    return out


def _r(r: metrics.Recall) -> str:
    return f"{r.value:.3f} ({r.supported}/{r.needed})" if r.needed else "–"


def _add(a: metrics.Recall, b: metrics.Recall) -> metrics.Recall:
    return metrics.Recall(a.supported + b.supported, a.needed + b.needed)


def _total(scores: list[Score]) -> Score:
    tot = Score()
    for sc in scores:
        tot.calls += sc.calls
        tot.tokens += sc.tokens
        tot.cost += sc.cost
        tot.over += sc.over
        tot.invalid += sc.invalid
        tot.bound += sc.bound
        tot.rebilled += sc.rebilled
        tot.bought += sc.bought
        tot.task, tot.anchors = _add(tot.task, sc.task), _add(tot.anchors, sc.anchors)
        tot.fresh, tot.support = _add(tot.fresh, sc.fresh), _add(tot.support, sc.support)
        tot.latencies += sc.latencies
    return tot


def p95_ratio(per: dict[str, dict[str, Score]], cpu: bool = False) -> str:
    """ctxwise's prepare p95 on the longest session over its p95 on the session whose history
    is nearest 10,000 tokens (both of one run); by wall time, or with ``cpu`` by process CPU
    time (steadier when other processes share the machine)."""
    runs = [(sc["ctxwise"].history, f, sc["ctxwise"]) for f, sc in per.items() if sc["ctxwise"].latencies]
    if len(runs) < 2:
        return "–"
    longest = max(runs, key=lambda r: r[0])
    short = min(runs, key=lambda r: abs(r[0] - 10_000))
    of = (lambda sc: sc.cpu) if cpu else (lambda sc: sc.latencies)
    a, b = metrics.percentile(of(longest[2]), 95), metrics.percentile(of(short[2]), 95)
    return (f"{a / b:.2f} ({longest[1].split('/')[-1]} {longest[0]:,} tokens: {a:.1f} ms; "
            f"{short[1].split('/')[-1]} {short[0]:,} tokens: {b:.1f} ms)")


def report(results: dict[int, dict[str, dict[str, Score]]], files: list[Path], data: Path, bound: str) -> str:
    """The markdown page: totals per budget and strategy, then one row per session."""
    out = ["# Long tool loops: ctxwise against no management made valid and the coding agents' strategies", "",
           f"Recordings: {len(files)} sessions under `{data.name}/` (Claude Code, mini-swe-agent, OpenHands, "
           f"SWE-agent); `python bench/long.py` (one run, `bound_reasoning={bound}`). Tokens are o200k; cost is "
           "cache-adjusted (cached prefix at 0.1). Providers: `anthropic` for Claude Code, `openai` for the "
           "others. Every strategy is scored on the calls ctxwise made (a session where ctxwise raised stops "
           "there for all). No management sends the whole history: wherever it is over the budget it is not a "
           "strategy that fits, only the price of sending everything. Peers (`bench/_peers.py`) run as their "
           "users run them: observation masking keeps the last 10 observations; the OpenHands condenser "
           "(keep_first=1, max_size=100 events) and LangChain's SummarizationMiddleware (trigger at the budget, "
           "keep 20 messages) write their summaries with ctxwise's offline digest; LangChain's "
           "ContextEditingMiddleware (ClearToolUsesEdit at the budget) runs after it; \"clear all but last 5\" "
           "clears every older result once the history passes the budget; mini-swe-agent cuts an observation "
           "over 10,000 characters to its head and tail.", "",
           "*Breaks*: calls whose payload is not the previous one plus new messages (a prompt-cache break); "
           "*calls per break*: the median calls from one break to the next; *re-billed*: tokens sent again "
           "uncached after a break. *÷ no mgmt*: cost over no management made valid's on the same calls.", ""]
    head = ("| budget | strategy | calls | input tokens | cost | ÷ no mgmt | calls over budget | task recall | "
            "edit-anchor recall | working-file freshness | support recall | breaks | calls per break (median) | "
            "re-billed tokens | validator errors | bound-reasoning violations | prepare p50 / p95 ms |")
    out += ["## Totals", ""]
    for budget, per in results.items():
        out += [head, "|" + " --- |" * 17]  # each budget's rows under their own header (text follows them)
        base = _total([per[f]["no management, valid"] for f in per]).cost
        for strat in [s for s in STRATEGIES if all(s in per[f] for f in per)]:
            tot = _total([per[f][strat] for f in per])
            lat = tot.latencies
            ms = (f"{metrics.percentile(lat, 50):.1f} / {metrics.percentile(lat, 95):.1f}" if lat else "–")
            med = metrics.percentile(tot.bought, 50) if tot.bought else 0.0
            out.append(f"| {budget:,} | {strat} | {tot.calls:,} | {tot.tokens:,} | {tot.cost:,.0f} | "
                       f"{tot.cost / base if base else 0:.3f} | {tot.over:,} | "
                       f"{_r(tot.task)} | {_r(tot.anchors)} | {_r(tot.fresh)} | {_r(tot.support)} | {len(tot.bought)} | "
                       f"{med:.1f} | {tot.rebilled:,} | {tot.invalid} | {tot.bound} | "
                       f"{ms if strat == 'ctxwise' else '–'} |")
        out.append("")
        out.append(f"prepare p95 ratio at {budget:,}, longest session / ~10k-token session: {p95_ratio(per)}")
        out.append("")
        out.append(f"the same by process CPU time (the calls' own work, whatever else runs on the machine; "
                   f"load average {os.getloadavg()[0]:.1f} at the end of the run): {p95_ratio(per, cpu=True)}")
        out.append("")
    errors = [f"- {b:,} {f}: {per[f]['ctxwise'].error}" for b, per in results.items() for f in per
              if per[f]["ctxwise"].error]
    out += ["", "Failed sessions (ctxwise raised; the session stops there): " + ("none" if not errors else ""), *errors]
    out += ["", "## Per session (ctxwise)", "", "| budget | session | ctxwise cost | no management cost | ctxwise ÷ no mgmt | "
            "no mgmt calls over budget | task recall | edit-anchor recall | working-file freshness | calls per break |",
            "|" + " --- |" * 10]
    for budget, per in results.items():
        for f, sc in per.items():
            us, them = sc["ctxwise"], sc["no management, valid"]
            ratio = us.cost / them.cost if them.cost else 0.0
            out.append(f"| {budget:,} | {f} | {us.cost:,.0f} | {them.cost:,.0f} | {ratio:.3f} | {them.over} | "
                       f"{_r(us.task)} | {_r(us.anchors)} | {_r(us.fresh)} | {' '.join(map(str, us.bought)) or '–'} |")
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=SHARED / "data" / "long")
    ap.add_argument("--budgets", type=int, nargs="+", default=list(BUDGETS))
    ap.add_argument("--limit", type=int, default=0, help="at most N recordings (development)")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "long.md")
    ap.add_argument("--bound-reasoning", default="auto", choices=("auto", "on", "off"),
                    help="Policy.bound_reasoning for ctxwise (auto: as the provider binds)")
    ap.add_argument("--no-peers", action="store_true", help="ctxwise and no management only (development)")
    a = ap.parse_args(argv)
    files = sorted(a.data.glob("*/*.json"))
    if not files:
        ap.error(f"--data {a.data}: no recordings (<agent>/<session>.json) under it; "
                 "point it at the long set, e.g. ../shared/data/long")
    if a.limit:
        files = files[: a.limit]
    results: dict[int, dict[str, dict[str, Score]]] = {}
    for budget in a.budgets:
        results[budget] = {}
        for f in files:
            t0 = time.perf_counter()
            results[budget][f"{f.parent.name}/{f.name}"] = res = run_session(f, budget, a.bound_reasoning, () if a.no_peers else PEERS)
            us = res["ctxwise"]
            print(f"{budget:>7} {f.name[:44]:44} calls {us.calls:4} task {_r(us.task)} anchors {_r(us.anchors)} "
                  f"fresh {_r(us.fresh)} {time.perf_counter() - t0:.1f}s{' ERROR ' + us.error if us.error else ''}",
                  flush=True)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(report(results, files, a.data, a.bound_reasoning), encoding="utf-8")
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
