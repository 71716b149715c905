"""Benchmark: ctxwise inside agent frameworks against each framework's own context handling.

    python bench/integrations.py                          # every section
    python bench/integrations.py --section agents --quick # one section, 5 sessions per file

Each section drives the framework's own runner over the same recorded sessions (the tau2-bench
retail recordings in ../shared/data/trajectories, ``--data`` to change) at the same budget
(4,000 o200k tokens), with a scripted model playing back the recorded assistant turns and real
tools returning the recorded results, once with ctxwise and once per built-in alternative. Every
request the framework sends is captured and scored by the same functions
(``ctxwise.replay.metrics``): input tokens (o200k, instructions included), cache-adjusted cost
(cached prefix at 0.1) and the same calls under OpenAI's prompt-cache prices
(``ctxwise.prices``), support recall (salient values of the recorded answer present in what the
model was sent; amounts and dates normalized), calls over budget, and invalid requests
(``ctxwise.providers.check_wire`` on what was sent).

Writes bench/results/integrations.md; ``--section NAME`` rewrites that section only and keeps
the others (one section per framework: each helper owns its own function below).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "bench"), str(REPO / "examples"), str(REPO / "src")]

from _machine import machine, now  # noqa: E402

from ctxwise import Message, get_counter  # noqa: E402
from ctxwise.formats import from_responses, load  # noqa: E402
from ctxwise.prices import price_model  # noqa: E402
from ctxwise.providers import check_wire  # noqa: E402
from ctxwise.replay.metrics import cache_adjusted_cost, call_costs, priced_cost, recall_figures  # noqa: E402
from ctxwise.units import is_user_input  # noqa: E402

SHARED = Path(os.environ.get("CTXWISE_SHARED", REPO.parent / "shared"))
DATA = SHARED / "data" / "trajectories" / "tau2-bench"
FILES = ("retail_gpt-4.1_1trial.json", "retail_ft-gpt-4.1_1trial.json")
BUDGET = 4000
OUT = REPO / "bench" / "results" / "integrations.md"


# -- shared: what each arm produced and how it is scored -------------------------------------


@dataclass
class Arm:
    """One strategy's run over the sessions: per session, the requests sent (canonical
    messages, instructions first), the raw wire payloads, and the recorded calls they answer."""

    name: str
    payloads: list[list[list[Message]]]
    wire: list[list[Any]]
    provider: str
    failed: int = 0
    seconds: float = 0.0


def recorded_calls(messages: Sequence[Message]) -> tuple[list[list[Message]], list[Message]]:
    """Per recorded model call (an assistant message after the first user input): the full
    history before it and the recorded output."""
    histories, outputs, seen = [], [], False
    for i, m in enumerate(messages):
        seen = seen or is_user_input(m)
        if m.role == "assistant" and seen:
            histories.append(list(messages[:i]))
            outputs.append(m)
    return histories, outputs


def score(arm: Arm, convs: Sequence[Any], budget: int) -> dict[str, Any]:
    """The measures of one arm over the sessions it completed."""
    counter = get_counter("o200k_base")
    openai = price_model("openai")
    tokens = cost = priced = 0.0
    over = invalid = calls = 0
    hs: list[list[Message]] = []
    ps: list[list[Message]] = []
    os_: list[Message] = []
    for conv, payloads, wire in zip(convs, arm.payloads, arm.wire):
        histories, outputs = recorded_calls(conv.messages)
        if len(payloads) != len(outputs):  # the run stopped early: scored calls only
            histories, outputs = histories[:len(payloads)], outputs[:len(payloads)]
        calls += len(payloads)
        tokens += sum(counter.count(p) for p in payloads)
        cost += cache_adjusted_cost(payloads, counter, 0.1)
        priced += priced_cost(call_costs(payloads, counter, 0.1), openai)
        over += sum(counter.count(p) > budget for p in payloads)
        invalid += sum(bool(check_wire(w, arm.provider)) for w in wire)
        hs += histories
        ps += payloads
        os_ += outputs
    rec = recall_figures(hs, ps, os_)
    return {"calls": calls, "tokens": tokens, "cost": cost, "priced": priced, "over": over, "invalid": invalid,
            "recall": rec.normalized, "recoverable": rec.recoverable, "failed": arm.failed, "seconds": arm.seconds}


def table(arms: Sequence[Arm], convs: Sequence[Any], budget: int, base: str) -> list[str]:
    rows = {a.name: score(a, convs, budget) for a in arms}
    b = rows[base]
    out = ["| strategy | model calls | input tokens (o200k) | cache-adjusted cost (0.1) | cost, OpenAI prices "
           "| support recall | recoverable recall | calls over budget | invalid requests | runs failed |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, r in rows.items():
        rel = "" if name == base else f" ({r['tokens'] / b['tokens'] - 1:+.0%})"
        relc = "" if name == base else f" ({r['cost'] / b['cost'] - 1:+.0%})"
        relp = "" if name == base else f" ({r['priced'] / b['priced'] - 1:+.0%})"
        out.append(f"| {name} | {r['calls']:,} | {r['tokens']:,.0f}{rel} | {r['cost']:,.0f}{relc} | "
                   f"{r['priced']:,.0f}{relp} | {r['recall'].value:.1%} ({r['recall'].supported}/{r['recall'].needed}) | "
                   f"{r['recoverable'].value:.1%} | {r['over']:,} | {r['invalid']:,} | {r['failed']} |")
    within = [name for name, r in rows.items() if r["over"] == 0 and not r["failed"]]
    out += ["", "Every call within the budget: " + (", ".join(within) if within else "none") + "."]
    return out


# -- OpenAI Agents SDK (integ-agents) ----------------------------------------------------------


def agents_sdk_section(convs: Sequence[Any], budget: int = BUDGET) -> list[str]:
    """ctxwise's ``CtxwiseSession`` against the Agents SDK's own handling, all through
    ``Runner.run``: the whole history (``SQLiteSession``), ``session_settings.limit`` (the newest
    N items of history at the start of each run), the SDK's ``ToolOutputTrimmer`` (a
    ``call_model_input_filter`` that shortens older tool outputs), and both."""
    os.environ.setdefault("OPENAI_API_KEY", "sk-offline-bench")
    from agents import SessionSettings, SQLiteSession, set_tracing_disabled
    from agents.extensions.tool_output_trimmer import ToolOutputTrimmer
    from agents.run_config import RunConfig
    from openai_agents_playback import PlaybackModel, agent_for, play, split

    from ctxwise import ContextManager, Policy
    from ctxwise.integrations.openai_agents import CtxwiseSession

    set_tracing_disabled(True)
    tmp = Path(tempfile.mkdtemp())
    limit = 10

    def requests_of(model: PlaybackModel) -> tuple[list[list[Message]], list[Any]]:
        canon, wire = [], []
        for r in model.requests:
            head = [Message(id="instructions", role="system", blocks=[{"type": "text", "text": r["instructions"]}])] \
                if r["instructions"] else []
            canon.append(head + from_responses(r["input"], strict=False))
            wire.append(([{"role": "system", "content": r["instructions"]}] if r["instructions"] else []) + r["input"])
        return canon, wire

    def arm(name: str, make: Callable[[Any, Any], tuple[Any, Any, bool]]) -> Arm:
        a = Arm(name, [], [], "openai_responses")
        t0 = time.perf_counter()
        for k, conv in enumerate(convs):
            rec = split(conv.messages)
            model = PlaybackModel()
            session, run_config, system_in_input = make(conv, k)
            agent = agent_for(rec, model, instructions=not system_in_input)
            try:
                asyncio.run(play(rec, agent, model, session=session, run_config=run_config,
                                 system_in_input=system_in_input))
            except Exception as e:  # noqa: BLE001 - a failed run is counted, its calls so far scored
                a.failed += 1
                print(f"  {name}: {conv.id}: {type(e).__name__}: {str(e)[:120]}", file=sys.stderr)
            canon, wire = requests_of(model)
            a.payloads.append(canon)
            a.wire.append(wire)
        a.seconds = time.perf_counter() - t0
        return a

    managers = {p: ContextManager(f"sqlite:///{tmp / f'ctxwise-{p}.db'}",
                                  Policy.preset(p, budget=budget, unit="tokens", tokenizer="o200k_base",
                                                provider="openai_responses")) for p in ("default", "lean")}

    def ctxwise_arm(preset: str) -> Callable[[Any, Any], tuple[Any, Any, bool]]:
        def make(conv: Any, k: int) -> tuple[Any, Any, bool]:
            s = CtxwiseSession(managers[preset].session("bench", f"{conv.id}-{k}"))
            return s, s.run_config(), True
        return make

    def sdk(limit_items: int | None, trim: bool) -> Callable[[Any, Any], tuple[Any, Any, bool]]:
        def make(conv: Any, k: int) -> tuple[Any, Any, bool]:
            settings = SessionSettings(limit=limit_items) if limit_items else None
            s = SQLiteSession(f"{conv.id}-{k}", str(tmp / f"sdk-{limit_items}-{trim}.db"), session_settings=settings)
            return s, RunConfig(call_model_input_filter=ToolOutputTrimmer()) if trim else None, False
        return make

    arms = [arm("SDK, whole history (SQLiteSession)", sdk(None, False)),
            arm(f"SDK, session_settings.limit={limit}", sdk(limit, False)),
            arm("SDK, ToolOutputTrimmer()", sdk(None, True)),
            arm(f"SDK, limit={limit} + ToolOutputTrimmer()", sdk(limit, True)),
            arm("ctxwise CtxwiseSession (default preset)", ctxwise_arm("default")),
            arm("ctxwise CtxwiseSession (lean preset)", ctxwise_arm("lean"))]
    for cm in managers.values():
        cm.close()
    base = arms[0].name
    import agents

    lines = [
        "## OpenAI Agents SDK",
        "",
        f"`python bench/integrations.py --section agents`; {len(convs)} recorded sessions "
        f"({', '.join(FILES)}), budget {budget:,} o200k tokens, openai-agents {agents.__version__}, "
        f"every run through `Runner.run` with the playback model and real `FunctionTool`s "
        "(examples/openai_agents_playback.py). Each request = the agent's instructions + the input items the "
        "Runner sent the model; the ctxwise run keeps the system prompt in the session (counted in its "
        "budget) and passes `run_config=session.run_config()`, so every model call gets the prepared view.",
        "",
        *table(arms, convs, budget, base),
        "",
        f"Percentages against the first row. `session_settings.limit={limit}` keeps the newest {limit} items "
        "of history when a run starts; within a run (a tool loop) the SDK sends everything generated since. "
        "`ToolOutputTrimmer()` (defaults: the last 2 user turns kept whole, older outputs over 500 characters "
        "cut to a 200-character preview) runs before every call. The SDK's `OpenAIResponsesCompactionSession` "
        "calls OpenAI's `responses.compact` endpoint, so it cannot run offline and is not measured. "
        "Support recall: the salient values (ids, amounts, dates, e-mails) of each recorded answer that were in "
        "the full history and also in what the model was sent. Invalid: requests with a `check_wire` "
        "violation (openai_responses). Wall time per arm: "
        + "; ".join(f"{a.name} {a.seconds:.0f} s" for a in arms) + ".",
    ]
    return lines


# -- the file -----------------------------------------------------------------------------------

from integrations_lc_as import agentscope_section, langchain_section  # noqa: E402  (integ-lc-as)

SECTIONS: dict[str, tuple[str, Callable[..., list[str]]]] = {
    "agents": ("OpenAI Agents SDK", agents_sdk_section),
    "langchain": ("LangChain v1", langchain_section),
    "agentscope": ("AgentScope 2", agentscope_section),
}
"""``--section`` name -> (the section's heading, its function(convs, budget) -> markdown lines)."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--section", choices=sorted(SECTIONS), action="append", help="only these sections")
    ap.add_argument("--quick", action="store_true", help="5 sessions per file")
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--budget", type=int, default=BUDGET)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    convs = []
    for f in FILES:
        got = load(args.data / f)
        convs += got[:5] if args.quick else got
    old = args.out.read_text() if args.out.exists() else ""
    parts = {h: body for h, body in re.findall(r"(?ms)^## (.+?)\n(.*?)(?=^## |\Z)", old)}
    for name in args.section or sorted(SECTIONS):
        heading, fn = SECTIONS[name]
        print(f"section {heading} ...", file=sys.stderr)
        lines = fn(convs, args.budget)
        parts[heading] = "\n".join(lines[1:]).strip("\n") + "\n\n"
    head = ["# ctxwise inside agent frameworks", "",
            f"- date: {now()}", *machine(("openai-agents", "langchain", "agentscope", "tiktoken")), "",
            "Written by `python bench/integrations.py` (see its docstring for the measures). Sections are "
            "rewritten one at a time (`--section`).", ""]
    body = "".join(f"## {h}\n{parts[h]}" for h in [s[0] for s in SECTIONS.values()] + sorted(set(parts) - {
        s[0] for s in SECTIONS.values()}) if h in parts)
    args.out.write_text("\n".join(head) + "\n" + body)
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
