"""Play a recorded session back through the OpenAI Agents SDK's own Runner, offline.

A recorded conversation (canonical ctxwise messages: system prompt, user turns, assistant
messages with tool calls, tool results) becomes:

* ``PlaybackModel``: an ``agents.models.interface.Model`` that answers each model call with the
  next recorded assistant message (``message`` and ``function_call`` output items) and keeps
  every input the Runner sent it (``model.requests``);
* real ``FunctionTool`` s, one per recorded tool name, whose output is the recorded result of
  that call (looked up by ``call_id``);
* ``turns``: per user turn, the Runner input (the user's message; the first turn also carries
  what came before it, e.g. the agent's greeting).

Tool call ids are made unique across the session (tau-bench reuses them), as an SDK model must
("a call ID must identify one canonical invocation"). Used by the tests, the example and
bench/integrations.py; needs ``openai-agents`` (``pip install 'ctxwise[openai-agents]'``).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

from agents import Agent, FunctionTool, ModelSettings
from agents.agent import ToolsToFinalOutputResult
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from ctxwise.messages import Message, TextBlock, ToolUseBlock


@dataclass
class Recording:
    """A recorded conversation split for playback."""

    instructions: str
    turns: list[list[dict[str, Any]]]          # the Runner input of each user turn
    replies: list[list[Message]]               # the recorded assistant messages of each turn
    results: dict[str, str]                    # unique call id -> recorded tool output text
    tool_names: list[str]
    calls: int = 0                             # recorded model calls in all


def split(messages: list[Message]) -> Recording:
    """Split canonical ``messages`` (a recorded tool-using session) into playback turns."""
    instructions = "\n\n".join(m.text for m in messages if m.role == "system")
    turns: list[list[dict[str, Any]]] = []
    replies: list[list[Message]] = []
    results: dict[str, str] = {}
    seen: dict[str, int] = {}
    rename: dict[str, str] = {}
    lead: list[dict[str, Any]] = []
    names: list[str] = []
    for m in messages:
        if m.role == "system":
            continue
        if m.role == "user":
            turns.append(lead + [{"role": "user", "content": m.text}])
            replies.append([])
            lead = []
        elif m.role == "assistant":
            if not turns:  # before the first user message (a greeting): part of the first input
                lead.append({"role": "assistant", "content": m.text})
                continue
            blocks: list[Any] = []
            for b in m.blocks:
                if isinstance(b, ToolUseBlock):
                    n = seen[b.id] = seen.get(b.id, 0) + 1
                    uid = b.id if n == 1 else f"{b.id}_{n}"
                    rename[b.id] = uid
                    blocks.append(b.model_copy(update={"id": uid}))
                    if b.name not in names:
                        names.append(b.name)
                elif isinstance(b, TextBlock):
                    blocks.append(b)
            replies[-1].append(m.model_copy(update={"blocks": blocks}))
        elif m.role == "tool":
            for r in m.tool_results:
                results[rename.get(r.tool_use_id, r.tool_use_id)] = r.text
    return Recording(instructions, turns, replies, results, names, sum(len(r) for r in replies))


def output_items(m: Message, n: int) -> list[Any]:
    """The Responses output items of recorded assistant message ``m`` (call number ``n``)."""
    out: list[Any] = []
    text = "".join(b.text for b in m.blocks if isinstance(b, TextBlock))
    if text:
        out.append(ResponseOutputMessage(type="message", id=f"msg_{n:04d}", role="assistant", status="completed",
                                         content=[ResponseOutputText(type="output_text", text=text, annotations=[])]))
    for k, b in enumerate(b for b in m.blocks if isinstance(b, ToolUseBlock)):
        out.append(ResponseFunctionToolCall(type="function_call", id=f"fc_{n:04d}_{k}", call_id=b.id, name=b.name,
                                            arguments=json.dumps(b.input, ensure_ascii=False), status="completed"))
    if not out:
        out.append(ResponseOutputMessage(type="message", id=f"msg_{n:04d}", role="assistant", status="completed",
                                         content=[ResponseOutputText(type="output_text", text="", annotations=[])]))
    return out


@dataclass
class PlaybackModel(Model):
    """Answers each model call with the next recorded assistant message of the current turn."""

    queue: list[Message] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    n: int = 0

    def load(self, replies: list[Message]) -> None:
        self.queue = list(replies)

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs,  # type: ignore[no-untyped-def]
                           tracing, *, previous_response_id, conversation_id, prompt):
        self.requests.append({"instructions": system_instructions,
                              "input": copy.deepcopy(input if isinstance(input, list) else [
                                  {"role": "user", "content": input}])})
        if not self.queue:
            raise RuntimeError("the playback ran out of recorded assistant messages for this turn")
        self.n += 1
        return ModelResponse(output=output_items(self.queue.pop(0), self.n), usage=Usage(), response_id=f"resp_{self.n:04d}")

    def stream_response(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise NotImplementedError("the playback model answers get_response only")


def recorded_tools(rec: Recording) -> list[FunctionTool]:
    """One real FunctionTool per recorded tool name; each returns the recorded output of the
    call it answers (by ``call_id``)."""

    def make(name: str) -> FunctionTool:
        async def invoke(ctx: Any, arguments: str) -> str:
            return rec.results.get(ctx.tool_call_id, "(no recorded output)")
        return FunctionTool(name=name, description=f"recorded tool {name}",
                            params_json_schema={"type": "object", "properties": {}, "additionalProperties": True},
                            on_invoke_tool=invoke, strict_json_schema=False)

    return [make(n) for n in rec.tool_names]


def agent_for(rec: Recording, model: PlaybackModel, *, instructions: bool = True) -> Agent:
    """The agent: the recorded tools, the playback model; it stops when the turn's recording
    has no reply left (a recorded turn that ended on tool results)."""

    def stop_when_recording_ends(ctx: Any, results: Any) -> ToolsToFinalOutputResult:
        return ToolsToFinalOutputResult(is_final_output=not model.queue, final_output="" if not model.queue else None)

    return Agent(name="recorded-agent", instructions=rec.instructions if instructions else None, model=model,
                 tools=list(recorded_tools(rec)), tool_use_behavior=stop_when_recording_ends,
                 model_settings=ModelSettings())


async def play(rec: Recording, agent: Agent, model: PlaybackModel, *, session: Any = None, run_config: Any = None,
               system_in_input: bool = False, on_turn: Any = None) -> None:
    """Run every recorded turn through ``Runner.run`` (one run per user turn). A last user
    message with no recorded answer is stored without a run. ``system_in_input``: the system
    prompt goes in as the first input item (so a ctxwise session counts it in its budget)
    instead of the agent's instructions. ``on_turn(i)`` is awaited after each turn."""
    from agents import Runner

    for i, (given, replies) in enumerate(zip(rec.turns, rec.replies)):
        items = ([{"role": "system", "content": rec.instructions}] if i == 0 and system_in_input else []) + given
        if not replies:
            if session is not None:
                await session.add_items(items)
            continue
        model.load(replies)
        await Runner.run(agent, items, session=session, run_config=run_config, max_turns=200)
        if on_turn is not None:
            await on_turn(i)
