"""Support recall with memory (pinned facts) on and off, on real recorded sessions.

Replays tau2-bench retail (gpt-4.1) and tau-bench airline (gpt-4o) at a 3,000-token budget
(o200k) with the ``default`` preset, facts on and off (``facts=False``), and reports:

* **support recall** (ARCHITECTURE.md, "Measures"): salient values of each recorded output that were in the
  history must be in the prepared context;
* **user-value recall**: every identifier, e-mail and amount *the user gave* (in their own
  messages) must be in the context of every later call.

Usage: python bench/memory.py [--data ../shared/data/trajectories] [--out bench/results/memory.md]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO / "bench")]

from _machine import machine, now  # noqa: E402

from ctxwise import ContextManager  # noqa: E402
from ctxwise.errors import ContextBudgetExceeded  # noqa: E402
from ctxwise.formats import load  # noqa: E402
from ctxwise.policy import Policy  # noqa: E402
from ctxwise.replay import metrics  # noqa: E402
from ctxwise.salient import salient_values  # noqa: E402
from ctxwise.units import is_user_input  # noqa: E402

FILES = ("tau2-bench/retail_gpt-4.1_1trial.json", "tau-bench/gpt-4o-airline_subset.json")


def user_values(text: str) -> list[str]:
    """Identifiers, e-mails and amounts (not bare dates) the user stated."""
    return [v for v in salient_values(text) if any(c.isdigit() for c in v) or "@" in v]


def replay(conv, policy: Policy, url: str) -> dict:
    """Replay one conversation; count both recalls and calls over budget."""
    cm = ContextManager(url, policy)
    s = cm.session(f"u-{conv.id}", conv.id)
    pending, history, seen = [], [], False
    need = got = u_need = u_got = failed = calls = 0
    for m in conv.messages:
        seen = seen or is_user_input(m)
        if m.role == "assistant" and seen:
            if pending:
                s.append(pending)
                pending = []
            calls += 1
            try:
                p = s.prepare()
            except ContextBudgetExceeded:
                failed += 1
            else:
                sup = metrics.call_support(history, p.messages, m)
                need += len(sup.needed)
                got += sup.supported
                sent = metrics.context_text(p.messages)
                for h in history:
                    if is_user_input(h):
                        for v in user_values(h.text):
                            u_need += 1
                            u_got += v in sent
        pending.append(m)
        history.append(m)
    if pending:
        s.append(pending)
    cm.close()
    return {"need": need, "got": got, "u_need": u_need, "u_got": u_got, "failed": failed, "calls": calls}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data" / "trajectories"))
    ap.add_argument("--budget", type=int, default=3000)
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "memory.md"))
    args = ap.parse_args()
    rows = []
    t0 = time.perf_counter()
    for rel in FILES:
        convs = load(Path(args.data) / rel)
        for label, facts in (("memory on", True), ("memory off", False)):
            policy = Policy.preset("default", budget=args.budget, unit="tokens", facts=facts, user_memory=False)
            tot = {"need": 0, "got": 0, "u_need": 0, "u_got": 0, "failed": 0, "calls": 0}
            with tempfile.TemporaryDirectory() as d:
                url = f"sqlite:///{d}/memory.db"
                for conv in convs:
                    for k, v in replay(conv, policy, url).items():
                        tot[k] += v
            rows.append((rel, label, len(convs), tot))
            print(rel, label, tot, flush=True)
    took = time.perf_counter() - t0
    lines = [
        "# Support recall with memory on and off",
        "",
        f"Command: `python bench/memory.py --budget {args.budget}`  ",
        f"Date: {now()}, {took:.0f} s  ",
        "Machine:",
        "",
        *machine(),
        "",
        f"Policy: `default` preset, budget {args.budget} tokens (o200k, system prompt included), digest summarizer; "
        "memory on = pinned facts block (`facts=True`, sent once a summary or trim has removed user turns), "
        "memory off = `facts=False`. Long-term user memory is off in both (one session per user here).",
        "",
        "| recording | memory | sessions | calls | support recall | user-value recall | calls over budget |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for rel, label, n, t in rows:
        sr = t["got"] / t["need"] if t["need"] else 1.0
        ur = t["u_got"] / t["u_need"] if t["u_need"] else 1.0
        lines.append(f"| {rel} | {label} | {n} | {t['calls']} | {sr:.1%} ({t['got']}/{t['need']}) | "
                     f"{ur:.1%} ({t['u_got']}/{t['u_need']}) | {t['failed']} |")
    lines += [
        "",
        "*Support recall*: of the salient values (ids with a digit, e-mails, amounts, dates) in each recorded "
        "assistant output that were already in the history, the share present in the prepared context. "
        "*User-value recall*: of the identifiers, e-mails and amounts the user stated in earlier messages, "
        "the share present in the context of every later call.",
        "",
        "Reading: with the facts block every value the user gave is still sent at every later call, however",
        "much was cleared, summarized or trimmed. The block's room (up to 8 % of the budget) comes out of the",
        "same budget, so where support recall is lower with memory on, it is values the recorded agent took",
        "from older tool results, which are cleared a little earlier to make that room.",
    ]
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
