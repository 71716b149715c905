"""An AgentScope 2 agent whose context ctxwise keeps inside 4,000 tokens, offline.

    pip install 'ctxwise[agentscope]'
    python examples/agentscope_agent.py           # 30 user turns from recorded tau2-bench retail sessions

The model is scripted: it plays back the assistant turns recorded in
``../shared/data/trajectories`` (tool calls included), and the tools return the recorded
results. Everything else is the real thing: AgentScope's reply loop (reasoning, permission
checks, acting), its OpenAI chat formatter, ctxwise's middleware and a SQLite ctxwise store.
After each turn the script prints what the model received and what ctxwise did.
"""

from __future__ import annotations

import asyncio
import copy
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from agentscope.agent import Agent, InjectionConfig  # noqa: E402
from agentscope.formatter import OpenAIChatFormatter  # noqa: E402
from agentscope.message import TextBlock, ToolCallBlock, ToolResultState, UserMsg  # noqa: E402
from agentscope.model import ChatModelBase, ChatResponse  # noqa: E402
from agentscope.permission import PermissionBehavior, PermissionDecision  # noqa: E402
from agentscope.tool import FunctionTool, ToolChunk, Toolkit  # noqa: E402
from pydantic import BaseModel  # noqa: E402

from playback import Recording, merged, recordings  # noqa: E402

SUMMARY_CALL = "generate_structured_output"


class ScriptedModel(ChatModelBase):
    """A chat model answering each call with the next recorded assistant message.

    ``seen`` keeps, per call, the messages as AgentScope's OpenAI chat formatter sends them (the
    wire shape). A call that asks for ``generate_structured_output`` (AgentScope's own context
    compressor) is answered with ``summarize(messages)``, a scripted summarizer, and kept in
    ``summaries`` instead."""

    class Parameters(BaseModel):
        pass

    def __init__(self, context_size: int = 1_000_000, summarize: Any = None) -> None:
        super().__init__(credential=None, model="scripted", parameters=self.Parameters(),  # type: ignore[arg-type]
                         stream=False, max_retries=0, context_size=context_size)
        self.formatter = OpenAIChatFormatter()
        self.script: list[ChatResponse] = []
        self.seen: list[list[dict[str, Any]]] = []
        self.summaries: list[list[dict[str, Any]]] = []
        self.summarize = summarize

    async def _call_api(self, model_name: str, messages: list[Any], tools: list[dict] | None = None,
                        tool_choice: Any = None, **kwargs: Any) -> ChatResponse:
        wire = copy.deepcopy(await self.formatter.format(messages))
        if tools and any(t.get("function", {}).get("name") == SUMMARY_CALL for t in tools):
            self.summaries.append(wire)
            args = self.summarize(messages) if self.summarize else {}
            return ChatResponse(content=[ToolCallBlock(id=f"summary-{len(self.summaries)}", name=SUMMARY_CALL,
                                                       input=json.dumps(args))], is_last=True)
        self.seen.append(wire)
        if self.script:
            return self.script.pop(0)
        return ChatResponse(content=[TextBlock(text="(the recording has no more turns)")], is_last=True)


def as_response(m: Any) -> ChatResponse:
    """A recorded canonical assistant message as the ChatResponse a model would return."""
    content: list[Any] = [TextBlock(text=m.text)] if m.text else []
    content += [ToolCallBlock(id=u.id, name=u.name, input=json.dumps(u.input, ensure_ascii=False))
                for u in m.tool_uses]
    return ChatResponse(content=content, is_last=True)


def recorded_tools(rec: Recording) -> list[FunctionTool]:
    """One real tool per recorded tool name, answering with the recorded results."""
    out = []
    for name, params in rec.tools.items():
        def run(_name: str = name, **kwargs: Any) -> Any:
            text, is_error = rec.results.answer(_name, kwargs)
            if is_error:
                return ToolChunk(content=[TextBlock(text=text)], state=ToolResultState.ERROR)
            return text

        out.append(FunctionTool(run, name=name, description=f"the {name} tool",
                                input_schema={"type": "object", "properties": {p: {} for p in params}},
                                permission=PermissionDecision(behavior=PermissionBehavior.ALLOW, message="recorded")))
    return out


async def run_turns(agent: Agent, model: ScriptedModel, rec: Recording, *, first: bool = True,
                    turns: slice = slice(None), on_turn: Any = None) -> None:
    """Drive ``agent`` through ``rec``'s user turns: load the turn's recorded replies into the
    model, ``agent.reply`` the user message. ``first`` puts the recorded opening in the context."""
    for k, turn in enumerate(rec.turns[turns]):
        if first and k == 0 and rec.opening:
            await agent.observe([_assistant(m, agent.name) for m in rec.opening])
        model.script = [as_response(m) for m in turn.assistant]
        await agent.reply(UserMsg("user", turn.user))
        if on_turn is not None:
            on_turn(k, turn)


def _assistant(m: Any, name: str) -> Any:
    from agentscope.message import Msg

    return Msg(name=name, role="assistant", content=[TextBlock(text=m.text)])


def build_agent(rec: Recording, model: ScriptedModel, middlewares: list[Any], extra_tools: list[Any] = (),
                **kwargs: Any) -> Agent:
    """The agent the examples, tests and bench run: recorded tools, no time injection (so runs
    are byte-reproducible)."""
    return Agent(name="agent", system_prompt=rec.system, model=model,
                 toolkit=Toolkit(tools=[*recorded_tools(rec), *extra_tools]), middlewares=middlewares,
                 injection_config=InjectionConfig(inject_runtime_state=False), **kwargs)


async def main(turns_wanted: int = 30) -> None:
    from ctxwise import ContextManager, Policy
    from ctxwise.integrations.agentscope import CtxwiseMiddleware

    recs, total = [], 0
    for rec in recordings(n=10):
        recs.append(rec)
        total += len(rec.turns)
        if total >= turns_wanted:
            break
    db = Path(tempfile.mkdtemp()) / "ctxwise.db"
    policy = Policy.preset("default", budget=4000, unit="tokens", tokenizer="o200k_base", provider="openai")
    cm = ContextManager(f"sqlite:///{db}", policy)
    mw = CtxwiseMiddleware(cm, user_id="example")
    model = ScriptedModel()
    rec = merged(recs)
    agent = build_agent(rec, model, [mw], extra_tools=await mw.list_tools())
    count, seen_events, peak = [0], [0], [0]

    def report(k: int, turn: Any) -> None:
        count[0] += 1
        session = mw.session(agent.state)
        events = session.events()
        acts = [e["stage"] for e in events[seen_events[0]:]]
        seen_events[0] = len(events)
        peak[0] = max(peak[0], mw.last_prepared.size)
        print(f"turn {count[0]:>2}  {turn.user[:38]:<38}  record {len(agent.state.context):>3} msgs, "
              f"model got {len(model.seen[-1]):>2}  ({mw.last_prepared.size:>5} tokens)  {', '.join(acts) or '-'}")

    # the recordings continue one another: a long chat of one user
    await run_turns(agent, model, rec, turns=slice(None, turns_wanted), on_turn=report)
    session = mw.session(agent.state)
    stages: dict[str, int] = {}
    for e in session.events():
        stages[e["stage"]] = stages.get(e["stage"], 0) + 1
    print(f"\n{count[0]} turns, {len(model.seen)} model calls; agent.state.context keeps all "
          f"{len(agent.state.context)} messages; the largest request ctxwise sent: {peak[0]} tokens "
          f"(budget {policy.effective_budget})")
    print("compaction events:", ", ".join(f"{k} {v}" for k, v in sorted(stages.items())))


if __name__ == "__main__":
    asyncio.run(main())
