"""The LangChain v1 and AgentScope 2 sections of bench/integrations.py (integ-lc-as).

Each arm drives the framework's own runner over the recorded sessions: LangChain's
``create_agent(...).invoke`` with an ``InMemorySaver`` (one thread per session), AgentScope's
``Agent.reply``. The model plays back the recorded assistant turns (examples/langchain_agent.py,
examples/agentscope_agent.py), the tools return the recorded results. Every request the model
receives is converted to the OpenAI chat wire shape the framework's OpenAI integration sends
(LangChain's OpenAI message conversion; AgentScope's ``OpenAIChatFormatter``), read back into
canonical messages and scored by bench/integrations.py's ``score``: the same measures as the
Agents SDK section. The built-in summarizers get a scripted summary model that writes ctxwise's
own offline digest of the messages they hand it, so the summaries compared are equally good and
the strategies differ only in what they keep, when they edit and what they send.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
for p in (REPO / "bench", REPO / "examples", REPO / "src"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from ctxwise import ContextManager, DigestSummarizer, Message, Policy  # noqa: E402
from ctxwise.formats import from_openai  # noqa: E402


def _digest(messages: Sequence[Message], previous: str | None = None, target_chars: int = 4000) -> str:
    return DigestSummarizer().summarize([m for m in messages if m.role != "system"], previous, target_chars).text


def _calls_of(rec: Any) -> Any:
    """A stand-in conversation holding the recorded messages a playback goes through, so the
    scorer pairs each model call with the recorded answer it played."""
    from types import SimpleNamespace

    return SimpleNamespace(id=rec.id, messages=rec.played())


def _tokens(wire: Any) -> int:
    from ctxwise import get_counter

    return get_counter("o200k_base").count_text(json.dumps(wire, ensure_ascii=False))


class _Summaries:
    """Counts ctxwise's summarizing events (``ContextManager(on_event=...)``)."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, event: Any) -> None:
        self.n += event.stage == "summarizing"


def _presets() -> dict[str, Policy]:
    return {p: Policy.preset(p, budget=4000, unit="tokens", tokenizer="o200k_base", provider="openai")
            for p in ("default", "lean")}


# -- LangChain v1 --------------------------------------------------------------------------------


def langchain_section(convs: Sequence[Any], budget: int = 4000) -> list[str]:
    """ctxwise's ``CtxwiseMiddleware`` against LangChain's own ``ContextEditingMiddleware``
    (``ClearToolUsesEdit``) + ``SummarizationMiddleware``, and against the whole history, all
    through ``create_agent(...).invoke``."""
    import integrations as shared
    import langchain
    from langchain.agents import create_agent
    from langchain.agents.middleware import ClearToolUsesEdit, ContextEditingMiddleware, SummarizationMiddleware
    from langchain_agent import ScriptedChatModel, recorded_tools, run_turns
    from langchain_core.messages import BaseMessage, convert_to_messages, convert_to_openai_messages
    from langchain_core.runnables import RunnableLambda
    from langgraph.checkpoint.memory import InMemorySaver
    from playback import recording

    from ctxwise.integrations.langchain import CtxwiseMiddleware

    tmp = Path(tempfile.mkdtemp())
    recs = [recording(c) for c in convs]
    kept: dict[str, list[int]] = {}

    def to_wire(messages: list[BaseMessage]) -> list[dict[str, Any]]:
        out = []
        for d in convert_to_openai_messages(messages):
            if d.get("role") == "tool":  # as langchain-openai sends a ToolMessage
                d = {k: d[k] for k in ("role", "content", "tool_call_id")}
            out.append(d)
        return out

    asked = [0, 0]  # summarizer calls, their input tokens

    def summarize(messages: list[BaseMessage]) -> str:
        asked[0] += 1
        asked[1] += _tokens(to_wire(messages))
        return _digest(from_openai(to_wire(messages), strict=False))

    def arm(name: str, middleware: Callable[[int], list[Any]]) -> Any:
        a = shared.Arm(name, [], [], "openai")
        kept[name] = [0, 0]
        t0 = time.perf_counter()
        for k, rec_conv in enumerate(convs):
            rec = recording(rec_conv)
            model = ScriptedChatModel()
            agent = create_agent(model, recorded_tools(rec), system_prompt=rec.system, middleware=middleware(k),
                                 checkpointer=InMemorySaver())
            config = {"configurable": {"thread_id": f"{rec.id}-{k}"}}
            try:
                run_turns(agent, model, rec, config)
            except Exception as e:  # noqa: BLE001 - a failed run is counted, its calls so far scored
                a.failed += 1
                print(f"  {name}: {rec.id}: {type(e).__name__}: {str(e)[:160]}", file=sys.stderr)
            wire = [to_wire(s) for s in model.seen]
            a.wire.append(wire)
            a.payloads.append([from_openai(w, strict=False) for w in wire])
            state = agent.get_state(config).values
            kept[name][0] += len(state.get("messages", []))
            kept[name][1] += len(rec.opening) + sum(len(t.messages) for t in rec.turns)
        a.seconds = time.perf_counter() - t0
        return a

    def builtin(k: int) -> list[Any]:
        # LangChain's own handling at the same budget: clear old tool results above 50 %, keep
        # the 3 newest (ctxwise's clear_at); summarize above 80 %, keeping ~40 % of the budget
        return [ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=budget // 2, keep=3)]),
                SummarizationMiddleware(model=ScriptedChatModel(), trigger=("tokens", int(budget * 0.8)),
                                        keep=("tokens", int(budget * 0.4)), summarizer=RunnableLambda(summarize))]

    counted = {p: _Summaries() for p in ("default", "lean")}
    managers = {p: ContextManager(f"sqlite:///{tmp / f'lc-{p}.db'}", pol, on_event=counted[p])
                for p, pol in _presets().items()}

    def ctxwise_mw(preset: str) -> Callable[[int], list[Any]]:
        return lambda k: [CtxwiseMiddleware(managers[preset], user_id=f"bench-{k}")]

    arms = [arm("LangChain, whole history", lambda k: []),
            arm("LangChain, ContextEditingMiddleware + SummarizationMiddleware", builtin),
            arm("ctxwise CtxwiseMiddleware (default preset)", ctxwise_mw("default")),
            arm("ctxwise CtxwiseMiddleware (lean preset)", ctxwise_mw("lean"))]
    for cm in managers.values():
        cm.close()
    played = [_calls_of(r) for r in recs]
    lines = [
        "## LangChain v1",
        "",
        f"`python bench/integrations.py --section langchain`; {len(convs)} recorded sessions, budget {budget:,} "
        f"o200k tokens, langchain {langchain.__version__}, every run through `create_agent(...).invoke` with an "
        "`InMemorySaver` (one thread per session), the scripted chat model of examples/langchain_agent.py and "
        "real `StructuredTool`s returning the recorded results. Each request = what the model received "
        "(system message included) in the OpenAI chat shape langchain-openai sends.",
        "",
        *shared.table(arms, played, budget, arms[0].name),
        "",
        "Messages the agent's own record (`state[\"messages\"]`) still holds at the end: "
        + ", ".join(f"{n.split(' (')[0]} {v[0]:,} of {v[1]:,}" for n, v in kept.items()) + ". "
        "`SummarizationMiddleware` replaces the summarized messages in the state itself (`RemoveMessage`); "
        "`ContextEditingMiddleware` clears a copy on each call and persists nothing, so its clears are redone "
        "(and move) on every call (langchain-ai/langchain#37815). Built-in settings: `ClearToolUsesEdit("
        f"trigger={budget // 2}, keep=3)`, `SummarizationMiddleware(trigger=(\"tokens\", {int(budget * 0.8)}), "
        f"keep=(\"tokens\", {int(budget * 0.4)}))` with LangChain's approximate token counter; its summary text "
        "comes from a scripted summarizer that returns ctxwise's offline digest of the messages it is given "
        f"(the same summarizer ctxwise uses). Summaries written: the built-in arm {asked[0]:,} (had the summarizer "
        f"been a model, those calls would have sent {asked[1]:,} more input tokens, not in the table), ctxwise "
        f"{counted['default'].n:,} (default) and {counted['lean'].n:,} (lean), each over the turns it folds. "
        "Wall time per arm: "
        + ", ".join(f"{a.name.split(' (')[0]} {a.seconds:.0f} s" for a in arms) + ".",
    ]
    return lines


# -- AgentScope 2 --------------------------------------------------------------------------------


def agentscope_section(convs: Sequence[Any], budget: int = 4000) -> list[str]:
    """ctxwise's ``CtxwiseMiddleware`` against AgentScope 2's own context compression
    (``ContextConfig`` at the same budget, a scripted summary model) and the whole history,
    all through ``Agent.reply``."""
    import agentscope
    import integrations as shared
    from agentscope.agent import ContextConfig
    from agentscope_agent import ScriptedModel, build_agent, run_turns
    from playback import recording

    from ctxwise.integrations.agentscope import CtxwiseMiddleware, to_canonical

    tmp = Path(tempfile.mkdtemp())
    recs = [recording(c) for c in convs]
    kept: dict[str, list[int]] = {}
    summaries: dict[str, list[int]] = {}

    def wire_of(seen: list[dict[str, Any]]) -> list[dict[str, Any]]:
        # AgentScope's formatter writes `name` on tool messages; the OpenAI SDK types have no such key
        return [{k: v for k, v in m.items() if not (m.get("role") == "tool" and k == "name")} for m in seen]

    def summarize(messages: list[Any]) -> dict[str, str]:
        # the compressor's request: system, [previous summary], messages to compress, its prompt
        body = [m for m in messages[1:-1] if not (m.role == "user" and "<system-info>" in m.get_text_content())]
        prev = next((m.get_text_content() for m in messages[1:-1]
                     if m.role == "user" and "<system-info>" in m.get_text_content()), None)
        if prev and "# Task Overview\n" in prev:
            prev = prev.split("# Task Overview\n", 1)[1].split("\n\n# Current State", 1)[0]
        return {"task_overview": _digest(to_canonical(body), prev), "current_state": "",
                "important_discoveries": "", "next_steps": "", "context_to_preserve": ""}

    def arm(name: str, make: Callable[[int, Any, Any], tuple[list[Any], list[Any], dict[str, Any]]],
            context_size: int = 1_000_000) -> Any:
        a = shared.Arm(name, [], [], "openai")
        kept[name] = [0, 0]
        summaries[name] = [0, 0]
        t0 = time.perf_counter()
        for k, conv in enumerate(convs):
            rec = recording(conv)
            model = ScriptedModel(context_size=context_size, summarize=summarize)
            middlewares, extra, kwargs = make(k, rec, model)
            agent = build_agent(rec, model, middlewares, extra_tools=extra, **kwargs)
            try:
                asyncio.run(run_turns(agent, model, rec))
            except Exception as e:  # noqa: BLE001 - a failed run is counted, its calls so far scored
                a.failed += 1
                print(f"  {name}: {rec.id}: {type(e).__name__}: {str(e)[:160]}", file=sys.stderr)
            wire = [wire_of(s) for s in model.seen]
            a.wire.append(wire)
            a.payloads.append([from_openai(_plain(w), strict=False) for w in wire])
            kept[name][0] += len([m for m in to_canonical(agent.state.context)])
            kept[name][1] += len(rec.opening) + sum(len(t.messages) for t in rec.turns)
            summaries[name][0] += len(model.summaries)
            summaries[name][1] += sum(_tokens(w) for w in model.summaries)
        a.seconds = time.perf_counter() - t0
        return a

    counted = {p: _Summaries() for p in ("default", "lean")}
    managers = {p: ContextManager(f"sqlite:///{tmp / f'as-{p}.db'}", pol, on_event=counted[p])
                for p, pol in _presets().items()}

    def ctxwise_arm(preset: str) -> Callable[[int, Any, Any], tuple[list[Any], list[Any], dict[str, Any]]]:
        def make(k: int, rec: Any, model: Any) -> tuple[list[Any], list[Any], dict[str, Any]]:
            mw = CtxwiseMiddleware(managers[preset], user_id=f"bench-{k}")
            return [mw], asyncio.run(mw.list_tools()), {}
        return make

    def plain(k: int, rec: Any, model: Any) -> tuple[list[Any], list[Any], dict[str, Any]]:
        return [], [], {}

    def compression(k: int, rec: Any, model: Any) -> tuple[list[Any], list[Any], dict[str, Any]]:
        return [], [], {"context_config": ContextConfig(compression_tool_enabled=False)}

    arms = [arm("AgentScope, whole history", plain),
            arm("AgentScope 2 compression (ContextConfig defaults)", compression, context_size=budget),
            arm("ctxwise CtxwiseMiddleware (default preset)", ctxwise_arm("default")),
            arm("ctxwise CtxwiseMiddleware (lean preset)", ctxwise_arm("lean"))]
    for cm in managers.values():
        cm.close()
    played = [_calls_of(r) for r in recs]
    return [
        "## AgentScope 2",
        "",
        f"`python bench/integrations.py --section agentscope`; {len(convs)} recorded sessions, budget "
        f"{budget:,} o200k tokens, agentscope {agentscope.__version__}, every run through `Agent.reply` with "
        "the scripted `ChatModelBase` of examples/agentscope_agent.py and real `FunctionTool`s returning the "
        "recorded results (runtime-state injection off, so runs are reproducible). Each request = the "
        "messages the model received, formatted by AgentScope's `OpenAIChatFormatter`.",
        "",
        *shared.table(arms, played, budget, arms[0].name),
        "",
        "Messages the agent's own record (`agent.state.context`, read as the chat messages it is sent as) "
        "still holds at the end: " + ", ".join(f"{n.split(' (')[0]} {v[0]:,} of {v[1]:,}" for n, v in kept.items())
        + ". AgentScope's compressor made "
        + f"{summaries[arms[1].name][0]:,} summary calls (a real model would have been sent "
        + f"{summaries[arms[1].name][1]:,} more input tokens, not in the table); ctxwise wrote "
        + f"{counted['default'].n:,} (default) and {counted['lean'].n:,} (lean) summaries. "
        f"AgentScope's compressor runs before each reasoning step when its estimate (bytes ÷ 4) passes "
        f"`trigger_ratio` 0.8 of the model's `context_size` (set to {budget:,}), keeps about `reserve_ratio` "
        "0.1 of it and replaces the rest, in `state.context` itself, by one summary; the summary comes from a "
        "scripted summary model returning ctxwise's offline digest of the messages it is handed (the same "
        "summarizer ctxwise uses). With ctxwise, `on_compress_context` stands in for it. Wall time per arm: "
        + ", ".join(f"{a.name.split(' (')[0]} {a.seconds:.0f} s" for a in arms) + ".",
    ]


def _plain(wire: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Wire messages as ``from_openai`` reads them for scoring (``name`` is not part of a message's text)."""
    return [{k: v for k, v in m.items() if k != "name"} for m in wire]


if __name__ == "__main__":  # a quick look without the shared file: python bench/integrations_lc_as.py
    from ctxwise.formats import load

    conv_list = load(REPO.parent / "shared" / "data" / "trajectories" / "tau2-bench" / "retail_gpt-4.1_1trial.json")[:3]
    for fn in (langchain_section, agentscope_section):
        print("\n".join(fn(conv_list)))
    print(json.dumps({"ok": True}))
