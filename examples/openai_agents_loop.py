"""A 30-turn OpenAI Agents SDK loop with ctxwise as its Session, offline.

    pip install 'ctxwise[openai-agents]'
    python examples/openai_agents_loop.py

An after-sales agent answers 30 user turns; in each it calls a tool whose result is long (an
order listing, a knowledge-base article: 2,000-4,000 characters) and then answers. The model is
scripted (no network, no API key needed): a ``Model`` subclass that calls one tool per turn and
then answers with a figure it read in the result. ctxwise keeps every request inside a
6,000-token budget; the script prints, per turn, the size the model was sent and what ctxwise
did, then the totals against sending the whole history.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile

os.environ.setdefault("OPENAI_API_KEY", "sk-offline-example")  # never used: the model is scripted

from agents import Agent, ModelSettings, Runner, function_tool, set_tracing_disabled  # noqa: E402
from agents.items import ModelResponse  # noqa: E402
from agents.models.interface import Model  # noqa: E402
from agents.usage import Usage  # noqa: E402
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText  # noqa: E402

from ctxwise import ContextManager, Policy, get_counter  # noqa: E402
from ctxwise.formats import from_responses  # noqa: E402
from ctxwise.integrations.openai_agents import CtxwiseSession  # noqa: E402

set_tracing_disabled(True)
TURNS = 30
SYSTEM = "You are the after-sales agent of an electronics shop. Look things up before you answer."


def order_listing(n: int) -> str:
    lines = [f"order #W{1000 + n} for customer c-{n % 7}: status {'shipped' if n % 3 else 'pending'}"]
    lines += [f"  item {k}: SKU-{n:03d}-{k:02d} Aria Buds Pro {k}, qty {1 + k % 3}, ${19.5 * (k + n % 5):.2f}"
              for k in range(40)]
    return "\n".join(lines)


def article(n: int) -> str:
    return f"KB-{n:04d}: " + " ".join(f"Step {k}: reset the earbuds, wait {k + 5} seconds, retry pairing."
                                       for k in range(45))


@function_tool
def get_order(order_id: str) -> str:
    """The full order listing for an order id like #W1003."""
    return order_listing(int(order_id.strip("#W")) - 1000)


@function_tool
def search_kb(query: str) -> str:
    """A knowledge-base article for a query."""
    return article(len(query) * 7)


class ScriptedModel(Model):
    """Turn t: call one tool (orders on even turns, the knowledge base on odd), then answer."""

    def __init__(self) -> None:
        self.calls = 0
        self.session: CountingSession | None = None
        self.sent: list[int] = []       # per call: the size ctxwise sent (tokens, tool schemas included)
        self.whole: list[int] = []      # per call: the size of the whole history written so far

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema,  # type: ignore[no-untyped-def]
                           handoffs, tracing, *, previous_response_id, conversation_id, prompt):
        self.calls += 1
        if self.session is not None and self.session.last_prepared is not None:
            self.sent.append(self.session.last_prepared.size)
            self.whole.append(self.session.written + self.session.ctx.overhead)
        last = input[-1]
        if last.get("type") != "function_call_output":  # the user spoke: look something up
            turn = sum(1 for i in input if i.get("role") == "user")
            name, args = (("get_order", {"order_id": f"#W{1000 + turn}"}) if turn % 2 == 0
                          else ("search_kb", {"query": f"pairing problem {turn}"}))
            return ModelResponse(output=[ResponseFunctionToolCall(
                type="function_call", id=f"fc_{self.calls}", call_id=f"call_{self.calls}", name=name,
                arguments=json.dumps(args), status="completed")], usage=Usage(), response_id=f"r{self.calls}")
        first_line = str(last["output"]).splitlines()[0][:80]
        return ModelResponse(output=[ResponseOutputMessage(
            type="message", id=f"msg_{self.calls}", role="assistant", status="completed",
            content=[ResponseOutputText(type="output_text", text=f"Here is what I found: {first_line}",
                                        annotations=[])])], usage=Usage(), response_id=f"r{self.calls}")

    def stream_response(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise NotImplementedError


class CountingSession(CtxwiseSession):
    """CtxwiseSession that also counts what the Runner writes (= sending the whole history)."""

    written = 0

    async def add_items(self, items):  # type: ignore[no-untyped-def]
        counter = get_counter("estimate")
        self.written += sum(counter.count_message(m) for m in from_responses([dict(i) for i in items], strict=False))
        await super().add_items(items)


async def main() -> None:
    db = os.path.join(tempfile.mkdtemp(), "ctxwise.db")
    policy = Policy(budget=6_000, unit="tokens", tokenizer="estimate", provider="openai_responses")
    cm = ContextManager(f"sqlite:///{db}", policy)
    session = CountingSession(cm.session("user-42", "chat-7"))
    model = ScriptedModel()
    model.session = session
    agent = Agent(name="after-sales", model=model, tools=[get_order, search_kb, session.recall_tool()],
                  model_settings=ModelSettings())
    print(f"{'turn':>4}  {'sent (tokens)':>13}  {'whole history':>13}  what ctxwise did (sizes in tokens)")
    for turn in range(1, TURNS + 1):
        given = [{"role": "system", "content": SYSTEM}] if turn == 1 else []  # counted inside the budget
        given.append({"role": "user", "content": f"Question {turn}: can you check this for me?"})
        seen = len(session.ctx.events())
        await Runner.run(agent, given, session=session, run_config=session.run_config())
        done = session.ctx.events()[seen:]
        what = ", ".join(f"{e['stage']} ({e['size_before']:,}->{e['size_after']:,})" for e in done) or "nothing"
        print(f"{turn:>4}  {model.sent[-1]:>13,}  {model.whole[-1]:>13,}  {what}")
    stages: dict[str, int] = {}
    for e in session.ctx.events():
        stages[e["stage"]] = stages.get(e["stage"], 0) + 1
    rows = session.ctx.transcript()
    print(f"\n{model.calls} model calls; input tokens sent {sum(model.sent):,} with ctxwise against "
          f"{sum(model.whole):,} sending the whole history ({sum(model.sent) / sum(model.whole) - 1:+.0%}); "
          f"largest request {max(model.sent):,} tokens (budget {policy.budget:,}), whole history at the end "
          f"{model.whole[-1]:,} (estimate tokenizer)")
    print(f"compaction events: {stages}")
    print(f"transcript: {len(rows)} rows, every message kept; the context now holds {len(session.ctx.messages)} messages")
    cm.close()


if __name__ == "__main__":
    asyncio.run(main())
