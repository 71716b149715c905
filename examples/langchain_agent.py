"""A LangChain v1 agent (``create_agent``) whose context ctxwise keeps inside 4,000 tokens, offline.

    pip install 'ctxwise[langchain]'
    python examples/langchain_agent.py            # 30 user turns from recorded tau2-bench retail sessions

The model is scripted: it plays back the assistant turns recorded in
``../shared/data/trajectories`` (tool calls included), and the tools return the recorded
results (long JSON order and user records). Everything else is the real thing: LangChain's
agent loop, a LangGraph checkpointer, ctxwise's middleware, a SQLite ctxwise store. After each
turn the script prints what the model received and what ctxwise did.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from langchain.agents import create_agent  # noqa: E402
from langchain_core.callbacks import CallbackManagerForLLMRun  # noqa: E402
from langchain_core.language_models import BaseChatModel  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, convert_to_messages  # noqa: E402
from langchain_core.outputs import ChatGeneration, ChatResult  # noqa: E402
from langchain_core.tools import StructuredTool, ToolException  # noqa: E402

from ctxwise.formats import to_openai  # noqa: E402
from playback import Recording, merged, recordings  # noqa: E402


class ScriptedChatModel(BaseChatModel):
    """A chat model that answers each call with the next recorded assistant message.

    ``script`` is consumed in order; ``seen`` keeps every message list the model received (the
    system message first), so a caller can check what the framework sent."""

    script: list[AIMessage] = []
    seen: list[list[BaseMessage]] = []

    @property
    def _llm_type(self) -> str:
        return "ctxwise-scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedChatModel":
        return self  # the script already knows which tools it calls

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        self.seen.append(list(messages))
        reply = self.script.pop(0) if self.script else AIMessage(content="(the recording has no more turns)")
        return ChatResult(generations=[ChatGeneration(message=reply)])


def as_ai_message(m: Any) -> AIMessage:
    """A recorded canonical assistant message as the AIMessage a chat model would return."""
    d = to_openai([m], reasoning_field=None, extras=False)[0]
    msg = convert_to_messages([d])[0]
    msg.id = m.id
    assert isinstance(msg, AIMessage)
    return msg


def recorded_tools(rec: Recording) -> list[StructuredTool]:
    """One real tool per recorded tool name, answering with the recorded results."""
    out = []
    for name, params in rec.tools.items():
        def run(_name: str = name, **kwargs: Any) -> str:
            text, is_error = rec.results.answer(_name, kwargs)
            if is_error:
                raise ToolException(text)
            return text

        schema = {"type": "object", "properties": {p: {} for p in params}}
        out.append(StructuredTool.from_function(func=run, name=name, description=f"the {name} tool",
                                                args_schema=schema, handle_tool_error=lambda e: str(e)))
    return out


def run_turns(agent: Any, model: ScriptedChatModel, rec: Recording, config: dict[str, Any], *,
              first: bool = True, turns: slice = slice(None),
              on_turn: Any = None) -> None:
    """Drive ``agent`` through ``rec``'s user turns: load the turn's recorded replies into the
    model, ``agent.invoke`` the user message. ``first`` sends the recorded opening with it."""
    for k, turn in enumerate(rec.turns[turns]):
        model.script = [as_ai_message(m) for m in turn.assistant]
        new: list[Any] = []
        if first and k == 0:
            new += [as_ai_message(m) for m in rec.opening]
        new.append({"role": "user", "content": turn.user})
        state = agent.invoke({"messages": new}, config)
        if on_turn is not None:
            on_turn(k, turn, state)


def main(turns_wanted: int = 30) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    from ctxwise import ContextManager, Policy
    from ctxwise.integrations.langchain import CtxwiseMiddleware

    recs, total = [], 0
    for rec in recordings(n=10):
        recs.append(rec)
        total += len(rec.turns)
        if total >= turns_wanted:
            break
    db = Path(tempfile.mkdtemp()) / "ctxwise.db"
    policy = Policy.preset("default", budget=4000, unit="tokens", tokenizer="o200k_base", provider="openai")
    cm = ContextManager(f"sqlite:///{db}", policy)
    middleware = CtxwiseMiddleware(cm, user_id="example")
    model = ScriptedChatModel()
    rec = merged(recs)  # the recordings continue one another: a long chat of one user
    agent = create_agent(model, recorded_tools(rec), system_prompt=rec.system, middleware=[middleware],
                         checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "example-thread"}}
    count, seen_events, peak = [0], [0], [0]

    def report(k: int, turn: Any, state: dict[str, Any]) -> None:
        count[0] += 1
        state = agent.get_state(config).values  # the private ctxwise record is not in invoke's output
        session = middleware.session(state)
        events = session.events()
        acts = [e["stage"] for e in events[seen_events[0]:]]
        seen_events[0] = len(events)
        sent = model.seen[-1]
        peak[0] = max(peak[0], middleware.last_prepared.size)
        print(f"turn {count[0]:>2}  {turn.user[:38]:<38}  state {len(state['messages']):>3} msgs, "
              f"model got {len(sent):>2}  ({session.size:>5} tokens)  {', '.join(acts) or '-'}")

    run_turns(agent, model, rec, config, turns=slice(None, turns_wanted), on_turn=report)
    state = agent.get_state(config).values
    session = middleware.session(state)
    stages: dict[str, int] = {}
    for e in session.events():
        stages[e["stage"]] = stages.get(e["stage"], 0) + 1
    print(f"\n{count[0]} turns, {len(model.seen)} model calls; the agent state keeps all "
          f"{len(state['messages'])} messages; the largest request ctxwise sent: {peak[0]} tokens "
          f"(budget {policy.effective_budget})")
    print("compaction events:", ", ".join(f"{k} {v}" for k, v in sorted(stages.items())))


if __name__ == "__main__":
    main()
