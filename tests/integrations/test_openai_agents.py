"""ctxwise inside the OpenAI Agents SDK: ``CtxwiseSession`` driven by the SDK's own ``Runner.run``.

The model is a playback ``Model`` (examples/openai_agents_playback.py) answering with the
recorded assistant turns of the tau2-bench retail sessions in ../shared; the tools are real
``FunctionTool`` s returning the recorded results. No network: a dummy OPENAI_API_KEY, tracing
off.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, TRAJECTORIES

os.environ.setdefault("OPENAI_API_KEY", "sk-dummy-offline")
sys.path.insert(0, str(REPO / "examples"))

from agents import Runner, set_tracing_disabled  # noqa: E402
from agents.memory import Session as AgentsSession  # noqa: E402
from agents.memory import is_openai_responses_compaction_aware_session  # noqa: E402
from openai_agents_playback import PlaybackModel, agent_for, play, split  # noqa: E402

from ctxwise import ContextManager, Policy  # noqa: E402
from ctxwise.errors import FormatError, PolicyError  # noqa: E402
from ctxwise.formats import load  # noqa: E402
from ctxwise.integrations.openai_agents import CtxwiseSession  # noqa: E402
from ctxwise.formats import from_responses  # noqa: E402
from ctxwise.providers import check_wire, render  # noqa: E402

set_tracing_disabled(True)

RETAIL = TRAJECTORIES / "tau2-bench" / "retail_gpt-4.1_1trial.json"


def _screen(png: str) -> type:
    """A real ``agents.AsyncComputer`` whose screenshot is ``png`` (base64) and whose actions do
    nothing: the Runner writes its computer_call and computer_call_output items."""
    from agents import AsyncComputer

    class Screen(AsyncComputer):
        environment, dimensions = "browser", (8, 8)

        async def screenshot(self) -> str:
            return png

        async def click(self, x, y, button): ...
        async def double_click(self, x, y): ...
        async def scroll(self, x, y, scroll_x, scroll_y): ...
        async def type(self, text): ...
        async def wait(self): ...
        async def move(self, x, y): ...
        async def keypress(self, keys): ...
        async def drag(self, path): ...

    return Screen
BUDGET = 4000


def policy(**kw) -> Policy:
    return Policy.preset("default", budget=BUDGET, unit="tokens", tokenizer="o200k_base",
                         provider="openai_responses", **kw)


class Spy(CtxwiseSession):
    """Records every batch the Runner writes, every id stored, and what each model call got."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.batches: list[list[dict]] = []
        self.stored_ids: list[str] = []
        self.prepared: list = []
        self.compactions = 0

    async def add_items(self, items):
        self.batches.append(copy.deepcopy(list(items)))
        await super().add_items(items)

    def _to_messages(self, *a, **kw):
        out = super()._to_messages(*a, **kw)
        self.stored_ids += [m.id for m in out]
        return out

    async def model_input_filter(self, data):
        out = await super().model_input_filter(data)
        self.prepared.append(self.last_prepared)
        return out

    async def run_compaction(self, args=None):
        self.compactions += 1
        await super().run_compaction(args)


def run_recorded(conv, cm, *, user="agents-test") -> tuple[Spy, PlaybackModel]:
    rec = split(conv.messages)
    model = PlaybackModel()
    agent = agent_for(rec, model, instructions=False)
    s = Spy(cm.session(user, conv.id))
    asyncio.run(play(rec, agent, model, session=s, run_config=s.run_config(), system_in_input=True))
    return s, model


@pytest.fixture(scope="module")
def played(tmp_path_factory):
    """The first 16 tau2 retail sessions played through Runner.run at 4,000 tokens."""
    cm = ContextManager(f"sqlite:///{tmp_path_factory.mktemp('agents') / 'a.db'}", policy())
    convs = load(RETAIL)[:16]
    return cm, convs, [run_recorded(c, cm) for c in convs]


def test_compaction_fires_clearing_and_summarizing_in_recorded_sessions(played):
    """Kind: an integration that stores the history but never lets the engine act on it."""
    _, _, runs = played
    stages = [{e["stage"] for e in s.ctx.events()} for s, _ in runs]
    # over the hard limit the cheaper cut goes first: both kinds occur over these 16 sessions
    assert any("clearing" in st for st in stages) and any("summarizing" in st for st in stages), stages
    assert sum(bool(st & {"clearing", "summarizing"}) for st in stages) >= 5


def test_every_request_the_runner_sends_is_the_checked_view_within_budget(played):
    """Kind: a request the provider would reject, or over budget, reaching the model; or the
    Runner's in-run history bypassing the session (the input filter hands every call the view)."""
    _, convs, runs = played
    calls = 0
    for conv, (s, model) in zip(convs, runs):
        rec = split(conv.messages)
        assert len(model.requests) == rec.calls, conv.id  # every recorded call was made
        assert len(s.prepared) == len(model.requests)
        for req, prep in zip(model.requests, s.prepared):
            calls += 1
            assert check_wire(req["input"], "openai_responses") == [], conv.id
            # exactly ctxwise's prepared payload: a message ctxwise did not edit goes as the Runner
            # wrote it, which reads back to the very items ctxwise prepared
            got = render(from_responses(req["input"], strict=False), "openai_responses")
            assert got == prep.payload, conv.id
            assert prep.size <= s.ctx.policy.effective_budget, (conv.id, prep.size)
        assert s.compactions >= 1  # the Runner called the post-turn hook
    assert calls > 100


def test_the_transcript_keeps_every_message_and_every_result(played):
    """Kind: compaction losing what a person (or the recall tool) needs later."""
    _, convs, runs = played
    for conv, (s, _) in zip(convs, runs):
        rows = s.ctx.transcript()
        in_rows = {i for r in rows for i in r.message_ids}
        system = {m.id for m in s.ctx.messages if m.role == "system"}
        assert set(s.stored_ids) - system <= in_rows, conv.id
        written = [i for b in s.batches for i in b]
        assert len(s.stored_ids) <= len(written)
        texts = " ".join(r.text for r in rows)
        for m in conv.messages:
            if m.role == "user" and m.text.strip():
                assert m.text.strip()[:60] in texts, conv.id
        rec = split(conv.messages)
        for call_id, output in rec.results.items():
            orig = s.ctx.original(call_id)
            assert orig is not None and orig.tool_results[0].text == (output or orig.tool_results[0].text), call_id


def test_retry_pop_then_re_add_gives_the_same_next_payload_byte_for_byte(tmp_path):
    """Kind: a rewind (the Runner's retry reads the tail, pops it, writes it again) that
    changes the next request: a prompt-cache break or a lost item."""
    # user memory off: a reopened session re-reads the user's long-term memory block, which this
    # session itself filled (reported to the engine's owner); the item record is what is tested here
    cm = ContextManager(f"sqlite:///{tmp_path / 'r.db'}", policy(user_memory=False))
    for conv in load(RETAIL)[:16]:  # the first session that was summarized before the rewind
        s, _ = run_recorded(conv, cm)
        if {"clearing", "summarizing"} <= {e["stage"] for e in s.ctx.events()}:
            break
    else:
        pytest.fail("no session was compacted")
    before = json.dumps(asyncio.run(s.get_items()))
    tail_batches = s.batches[-3:]
    tail = [i for b in tail_batches for i in b]
    assert asyncio.run(s.get_items(limit=len(tail))) == tail          # exactly as written
    popped = [asyncio.run(s.pop_item()) for _ in tail]
    assert popped[::-1] == tail                                        # exactly what was appended last
    for b in tail_batches:
        asyncio.run(s.add_items(copy.deepcopy(b)))
    assert json.dumps(asyncio.run(s.get_items())) == before
    # another process opening the same store reads the same tail and the same view
    again = CtxwiseSession(ContextManager(f"sqlite:///{tmp_path / 'r.db'}", policy(user_memory=False))
                           .session(s.ctx.user_id, conv.id))
    assert asyncio.run(again.get_items(limit=len(tail))) == tail
    assert json.dumps(asyncio.run(again.get_items())) == before


def _order_turn() -> tuple[dict, list[dict]]:
    """A user question and one model turn answering it: reasoning, text and a function call
    in one assistant message (items that share a ctxwise message)."""
    user = {"role": "user", "content": "Where is order #W123?"}
    turn = [{"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "look it up"}]},
            {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": "Checking.", "annotations": []}]},
            {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_order",
             "arguments": "{\"order_id\": \"#W123\"}", "status": "completed"}]
    return user, turn


def test_pop_inside_an_assistant_message_and_a_call_whose_output_comes_later(tmp_path):
    """Kinds: an item-level pop of an item that shares its assistant message with others; a
    function_call_output in a later add_items batch than its call (never compacted across)."""
    cm = ContextManager(f"sqlite:///{tmp_path / 'p.db'}", policy())
    s = CtxwiseSession(cm.session("u", "p"))
    user, turn = _order_turn()
    out = {"type": "function_call_output", "call_id": "call_1", "output": "shipped 2024-05-05"}

    async def go():
        await s.add_items([user])
        await s.add_items(copy.deepcopy(turn))
        assert await s.get_items(limit=3) == turn            # open call: read as written
        await s.add_items([out])                             # its output, in a later batch
        stored = [m for m in s.ctx.messages if m.role == "tool"][0]
        assert stored.tool_results[0].name == "get_order"    # matched to its call by call_id
        view = await s.get_items()
        assert check_wire(view, "openai_responses") == [] and view[-1] == out
        tail = await s.get_items(limit=1)
        assert tail == [out] and list(tail[0]) == list(out)  # as written, key order too
        assert await s.pop_item() == out
        assert await s.pop_item() == turn[2]                 # the call alone; reasoning + text stay
        assert await s.get_items(limit=2) == turn[:2]
        await s.add_items([turn[2]])
        await s.add_items([out])
        assert await s.get_items() == view                   # the same request again
        await s.clear_session()
        assert await s.get_items() == [] and await s.pop_item() is None
        assert any(r.message_ids for r in s.ctx.transcript())   # the transcript keeps it all

    asyncio.run(go())


def test_bad_items_raise_ctxwise_errors_and_store_nothing(tmp_path):
    """Kind: a user mistake surfacing as a raw traceback, or half a batch stored."""
    cm = ContextManager(f"sqlite:///{tmp_path / 'b.db'}", policy())
    s = CtxwiseSession(cm.session("u", "b"))
    asyncio.run(s.add_items([{"role": "user", "content": "hi"}]))
    version = s.ctx.version
    with pytest.raises(FormatError, match="item 1.*expected a Responses input item"):
        asyncio.run(s.add_items([{"role": "user", "content": "a"}, "not an item"]))
    with pytest.raises(FormatError, match="item 3"):  # the place counts the whole batch
        asyncio.run(s.add_items([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                                 {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
                                 {"type": "message", "role": "robot", "content": "x"}]))
    # (an output answering no waiting call is stored, as the SDK's sessions store it: see
    # test_outputs_answering_no_waiting_call_are_stored_and_sent_as_written)
    # kind: a call_id repeated while the first call still waits for its output (the session could
    # never be read again: every get_items() raised unanswered-tool-call), in one batch or across two
    call = {"type": "function_call", "call_id": "dup", "name": "f", "arguments": "{}"}
    with pytest.raises(FormatError, match="item 1.*already waiting"):
        asyncio.run(s.add_items([call, dict(call)]))
    assert s.ctx.version == version and len(s.ctx.messages) == 1
    asyncio.run(s.add_items([call]))
    with pytest.raises(FormatError, match="item 0.*already waiting"):
        asyncio.run(s.add_items([dict(call)]))
    asyncio.run(s.add_items([{"type": "function_call_output", "call_id": "dup", "output": "ok"}]))
    asyncio.run(s.add_items([dict(call)]))  # answered: the id may be used again
    assert [m.role for m in s.ctx.messages] == ["user", "assistant", "tool", "assistant"]
    # a dict ctxwise cannot read (an EncryptedSession envelope, a newer item type) is carried
    # verbatim, as the SDK's own sessions keep it
    envelope = {"__enc__": 1, "v": 1, "kid": "k", "payload": "opaque"}
    asyncio.run(s.add_items([{"type": "function_call_output", "call_id": "dup", "output": "ok"}]))
    asyncio.run(s.add_items([{"role": "user", "content": "z"}, envelope]))
    assert asyncio.run(s.get_items(limit=1)) == [envelope] and asyncio.run(s.get_items())[-1] == envelope
    with pytest.raises(PolicyError, match="openai_responses"):
        CtxwiseSession(ContextManager(f"sqlite:///{tmp_path / 'c.db'}", Policy(budget=4000)).session("u", "c"))


def test_it_is_an_agents_session_and_the_runner_uses_its_compaction_hook(tmp_path):
    cm = ContextManager(f"sqlite:///{tmp_path / 'h.db'}", policy())
    s = CtxwiseSession(cm.session("u", "h"), session_settings={"limit": None})
    assert isinstance(s, AgentsSession) and is_openai_responses_compaction_aware_session(s)
    assert s.session_id == "h"
    tool = s.recall_tool()
    assert tool.name == "recall_tool_result"
    # strict mode: every property required, the optional message_id nullable
    assert tool.params_json_schema["required"] == ["tool_use_id", "message_id", "offset"]
    assert tool.params_json_schema["properties"]["message_id"]["type"] == ["string", "null"]


def test_recall_tool_answers_inside_a_runner_loop(tmp_path):
    """The recall tool registered with the agent fetches a cleared result back by its id."""
    from agents import Agent
    from agents.items import ModelResponse
    from agents.usage import Usage
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    cm = ContextManager(f"sqlite:///{tmp_path / 'rc.db'}", policy())
    s = CtxwiseSession(cm.session("u", "rc"))
    asyncio.run(s.add_items([{"role": "user", "content": "order?"},
                             {"type": "function_call", "call_id": "c1", "name": "get_order", "arguments": "{}"},
                             {"type": "function_call_output", "call_id": "c1", "output": "order W9 shipped"}]))

    class Two(PlaybackModel):
        async def get_response(self, *a, **kw):
            self.requests.append(kw)
            if len(self.requests) == 1:
                return ModelResponse(output=[ResponseFunctionToolCall(
                    type="function_call", call_id="c2", name="recall_tool_result",
                    arguments=json.dumps({"tool_use_id": "c1"}))], usage=Usage(), response_id="r1")
            return ModelResponse(output=[ResponseOutputMessage(
                type="message", id="m2", role="assistant", status="completed",
                content=[ResponseOutputText(type="output_text", text="W9", annotations=[])])],
                usage=Usage(), response_id="r2")

    agent = Agent(name="a", model=Two(), tools=[s.recall_tool()])
    asyncio.run(Runner.run(agent, "recall it", session=s, run_config=s.run_config()))
    outs = [m for m in s.ctx.messages if m.role == "tool"]
    assert outs[-1].tool_results[0].text == "order W9 shipped"


def test_import_ctxwise_does_not_import_the_sdk_and_a_missing_extra_says_what_to_install():
    """Kind: an optional integration made a hard dependency, or failing with a raw ImportError."""
    code = ("import sys, ctxwise, ctxwise.integrations\n"
            "assert 'agents' not in sys.modules\n"
            "sys.modules['agents'] = None\n"
            "from ctxwise import MissingExtra\n"
            "try:\n    from ctxwise.integrations.openai_agents import CtxwiseSession\n"
            "except MissingExtra as e:\n    print(e.extra, '|', e.hint)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       cwd=str(Path(REPO)))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "openai-agents | pip install 'ctxwise[openai-agents]'"


def test_the_sdks_own_requests_pass_the_wire_check(tmp_path):
    """Kind: a wire check stricter than the API it models (a false invalid on what the API
    accepts): the SDK sends user messages as ``{"role", "content"}`` (``EasyInputMessageParam``,
    ``type`` optional) and function calls with ``status``."""
    from agents import SQLiteSession

    conv = load(RETAIL)[0]
    rec = split(conv.messages)
    model = PlaybackModel()
    asyncio.run(play(rec, agent_for(rec, model), model, session=SQLiteSession("w", str(tmp_path / "w.db"))))
    assert len(model.requests) == rec.calls
    for r in model.requests:
        assert check_wire(r["input"], "openai_responses") == []
    assert any("type" not in i for r in model.requests for i in r["input"])
    assert any(i.get("status") for r in model.requests for i in r["input"] if i.get("type") == "function_call")


def test_readme_agents_sdk_block_runs_against_the_real_responses_model(tmp_path, monkeypatch):
    """The Agents SDK block of docs/frameworks.md, as written, with the SDK's own OpenAI Responses model
    over a scripted HTTP transport: the body the SDK puts on the wire passes the wire check."""
    import ast
    import re

    import httpx
    from agents import set_default_openai_client
    from openai import AsyncOpenAI

    readme = (REPO / "docs" / "frameworks.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if "CtxwiseSession" in b]
    bodies: list[dict] = []

    def reply(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(200, json={
            "id": f"resp_{len(bodies)}", "object": "response", "created_at": 0, "model": "gpt-4.1",
            "status": "completed", "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "output": [{"type": "message", "id": f"msg_{len(bodies)}", "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "text": "Order W1 shipped.", "annotations": []}]}]})

    set_default_openai_client(AsyncOpenAI(api_key="x", base_url="http://offline.invalid/v1",
                                          http_client=httpx.AsyncClient(transport=httpx.MockTransport(reply))))
    monkeypatch.chdir(tmp_path)
    scope: dict = {"SYSTEM_PROMPT": "You are a support agent.", "TOOLS": []}
    for _ in range(2):  # the second run resumes the stored session
        code = compile(block, "docs/frameworks.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        asyncio.run(eval(code, scope))  # noqa: S307 - the docs' own code
    assert scope["result"].final_output == "Order W1 shipped."
    assert len(bodies) == 2 and [i.get("role") for i in bodies[1]["input"]] == ["user", "assistant", "user"]
    for body in bodies:
        assert check_wire(body["input"], "openai_responses") == []
    scope["cm"].close()


@pytest.mark.parametrize("example", ["openai_agents_loop.py", "raw_openai_loop.py", "raw_anthropic_loop.py"])
def test_examples_run_offline_and_show_what_ctxwise_did(example):
    """The examples run as shipped (no network: a scripted model) and report the summaries
    ctxwise made over their 30 turns."""
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    r = subprocess.run([sys.executable, str(REPO / "examples" / example)], capture_output=True, text=True,
                       timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert sum(ln.lstrip().startswith(("30 ", "turn 30")) or ln.startswith("  30") for ln in lines) == 1, r.stdout
    assert "summarizing" in r.stdout


def test_pop_item_of_an_item_sharing_its_message_is_one_write(tmp_path):
    """Kind: a non-atomic retraction. pop_item of an item stored in one ctxwise message with
    others (reasoning, text and a call of one model turn) popped the message, then appended the
    others again: two writes, so a failure between them lost the others, and the version moved
    twice. Now one write: the version moves once, and a failure inside it (here the database
    refusing the replacement's insert) raises and changes nothing."""
    from sqlalchemy import event

    cm = ContextManager(f"sqlite:///{tmp_path / 'a.db'}", policy())
    s = CtxwiseSession(cm.session("u", "atomic"))
    user, turn = _order_turn()
    fail = {"on": False}

    def refuse_inserts(conn, cursor, statement, params, context, executemany):
        if fail["on"] and statement.lstrip().upper().startswith("INSERT INTO CONTEXT"):
            raise RuntimeError("disk full (injected)")

    event.listen(cm.store.engine, "before_cursor_execute", refuse_inserts)

    async def go():
        await s.add_items([user])
        await s.add_items(copy.deepcopy(turn))
        before = (s.ctx.version, await s.get_items(limit=4), len(s.ctx.transcript()))
        fail["on"] = True
        with pytest.raises(RuntimeError, match="injected"):
            await s.pop_item()
        fail["on"] = False
        s.ctx.reload()
        assert (s.ctx.version, await s.get_items(limit=4), len(s.ctx.transcript())) == before  # nothing changed
        again = CtxwiseSession(cm.session("u", "atomic"))
        assert await again.get_items(limit=4) == before[1]
        v = s.ctx.version
        assert await s.pop_item() == turn[2]
        assert s.ctx.version == v + 1                                     # one write
        assert await s.get_items(limit=3) == [user, *turn[:2]]
        assert await s.pop_item() == turn[1] and await s.pop_item() == turn[0]
        assert s.ctx.version == v + 3 and await s.get_items(limit=5) == [user]

    asyncio.run(go())


def test_hosted_tool_items_are_kept_as_written_and_sent_back_as_responses_input_items(tmp_path):
    """Kind: items of the SDK's hosted and built-in tools (web_search_call, file_search_call,
    computer_call / computer_call_output, ...) refused by add_items, so an agent with hosted
    tools failed on its first turn. They are stored as written (get_items(limit) returns them
    byte for byte, key order included), sent back in the context view where they were written
    when they validate as the openai package's Responses input item of their type, and popped
    like any item. Driven by Runner.run with a model answering with hosted-tool output items
    and a ComputerTool on a real AsyncComputer (the Runner writes its computer_call and
    computer_call_output in a batch of hosted items only, kept with the message before it)."""
    from agents import Agent, ComputerTool, Runner
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import (ResponseComputerToolCall, ResponseFileSearchToolCall,
                                        ResponseFunctionWebSearch, ResponseOutputMessage, ResponseOutputText,
                                        ResponseReasoningItem)
    from openai.types.responses.response_function_web_search import ActionSearch
    from openai.types.responses.response_reasoning_item import Summary

    def say(i: int, text: str) -> ResponseOutputMessage:
        return ResponseOutputMessage(id=f"msg_{i}", type="message", role="assistant", status="completed",
                                     content=[ResponseOutputText(type="output_text", text=text, annotations=[])])

    replies = [
        [ResponseFunctionWebSearch(id="ws_1", type="web_search_call", status="completed",
                                   action=ActionSearch(type="search", query="order #W1 carrier")),
         say(1, "UPS says it is out for delivery.")],
        [ResponseReasoningItem(id="rs_2", type="reasoning", summary=[Summary(type="summary_text", text="check docs")]),
         ResponseFileSearchToolCall(id="fs_2", type="file_search_call", status="completed", queries=["returns"]),
         say(2, "Returns are free within 30 days.")],
        [ResponseComputerToolCall(id="cu_3", type="computer_call", call_id="call_cu_3", status="completed",
                                  pending_safety_checks=[], action={"type": "screenshot"})],
        [say(4, "The screen shows the order page.")],
    ]

    class Hosted(Model):
        def __init__(self):
            self.inputs: list = []

        async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs,
                               tracing, *, previous_response_id, conversation_id, prompt):
            self.inputs.append(copy.deepcopy(input))
            return ModelResponse(output=replies[len(self.inputs) - 1], usage=Usage(), response_id=f"resp_{len(self.inputs)}")

        def stream_response(self, *a, **kw):
            raise NotImplementedError

    Screen = _screen("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")

    cm = ContextManager(f"sqlite:///{tmp_path / 'h.db'}", policy())
    s = Spy(cm.session("u", "hosted"))
    model = Hosted()
    agent = Agent(name="a", model=model, tools=[ComputerTool(Screen())])

    async def go():
        for text in ("Where is order #W1?", "Can I return it?", "Show me the screen."):
            await Runner.run(agent, text, session=s, run_config=s.run_config())
        from ctxwise.integrations.openai_agents import accepted, hosted

        written = [i for b in s.batches for i in b]
        types = [i.get("type", "message") for i in written]
        assert {"web_search_call", "file_search_call", "computer_call", "computer_call_output"} <= set(types)
        assert any(all(hosted(i) for i in b) for b in s.batches)   # the computer output's own batch
        # as written, byte for byte (key order too), from the record
        tail = await s.get_items(limit=len(written))
        assert json.dumps(tail) == json.dumps(written)
        # the view: every hosted item where it was written, each a valid Responses input item;
        # the rest is what ctxwise rendered and checked
        view = await s.get_items()
        assert [i.get("type", "message") for i in view] == types
        assert all(accepted(i) for i in view if hosted(i))
        assert check_wire([i for i in view if not hosted(i)], "openai_responses") == []
        assert json.dumps([i for i in view if hosted(i)]) == json.dumps([i for i in written if hosted(i)])
        # the model's last request (the filter's view) carried them too
        sent = [i.get("type", "message") for i in model.inputs[-1]]
        assert "web_search_call" in sent and "computer_call_output" in sent
        # pops: exactly the item appended last, hosted or not, one write each
        v = s.ctx.version
        for expected in reversed(written[-4:]):
            assert await s.pop_item() == expected
        assert s.ctx.version == v + 4 and await s.get_items(limit=len(written) - 4) == written[:-4]

    asyncio.run(go())


def test_a_reply_left_out_of_the_context_as_the_newest_row_gives_no_raw_error(tmp_path):
    """Kind: the newest stored row taken to be the context's last message. A reply ctxwise
    leaves out of the context (an empty or refusal-only assistant message: stored, kept in the
    transcript only) is newer than the context's last message, so a write replacing that
    message (pop_item of an item sharing its message; hosted items joining the message before
    them) was refused by the store with a plain ValueError, and later hosted items arriving
    alone after such a reply were refused with a FormatError (found by a fresh-user check).
    Now pop_item removes the item written last, and hosted items alone after the reply are
    kept with it (in the record: the reply is not sent, so neither are they); the session
    stays usable either way."""
    cm = ContextManager(f"sqlite:///{tmp_path / 'a.db'}", policy())
    s = CtxwiseSession(cm.session("u", "omitted"))
    user = {"role": "user", "content": "Any news on order #W123?"}
    turn = [{"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "answer"}]},
            {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": "It shipped.", "annotations": []}]}]
    empty = {"type": "message", "id": "msg_2", "role": "assistant", "status": "completed", "content": []}
    search = {"type": "web_search_call", "id": "ws_1", "status": "completed",
              "action": {"type": "search", "query": "order W123 carrier"}}
    files = {"type": "file_search_call", "id": "fs_1", "status": "completed", "queries": ["W123"]}

    async def go():
        await s.add_items([user])
        await s.add_items(copy.deepcopy(turn))           # one assistant message of two items
        await s.add_items([copy.deepcopy(empty)])        # left out of the context
        assert [m.role for m in s.ctx.messages] == ["user", "assistant"]
        # pop_item: the item written last is the empty reply
        assert await s.pop_item() == empty
        assert await s.get_items(limit=3) == [user, *turn]
        assert [(r.text, r.status) for r in s.ctx.transcript()][-2:] == [("", "normal"), ("", "retracted")]
        # hosted items alone after the empty reply: accepted, kept with it, an update (no retraction)
        await s.add_items([copy.deepcopy(empty)])
        rows, size, view = len(s.ctx.transcript()), s.ctx.size, await s.get_items()
        await s.add_items([copy.deepcopy(search)])
        await s.add_items([copy.deepcopy(files)])
        assert len(s.ctx.transcript()) == rows and s.ctx.size == size and await s.get_items() == view
        assert [e["stage"] for e in s.ctx.events()][-2:] == ["amended", "amended"]
        # pops: exactly the item written last, the hosted ones as updates, then the reply
        assert await s.pop_item() == files
        assert await s.pop_item() == search
        assert await s.pop_item() == empty
        assert await s.get_items(limit=3) == [user, *turn]
        # still usable: the next user message is stored and the view passes the wire check
        await s.add_items([{"role": "user", "content": "Thanks, and the refund?"}])
        view = await s.get_items()
        assert check_wire(view, "openai_responses") == [] and view[-1]["content"] == "Thanks, and the refund?"

    asyncio.run(go())


@pytest.mark.parametrize("stop", ["approval-abandoned", "tool-raises", "cancelled", "max-turns"])
def test_a_run_stopped_between_a_call_and_its_output_leaves_the_session_usable(stop, tmp_path):
    """Kind: a function_call stored without its output. A run that stops at a tool approval
    (``needs_approval``) stores the call and returns; when the next ``Runner.run`` starts with
    new input instead of resuming, every later write was refused (dangling call). Now the call
    is answered with an explicit interruption result (an ``interrupted`` event) and the
    session goes on. The other ways a run stops mid-tool (a tool raising out of the run, a
    cancelled run, MaxTurnsExceeded) must leave it usable too. Recorded turns, Runner.run."""
    from agents import FunctionTool, MaxTurnsExceeded, Runner
    from agents.exceptions import AgentsException

    conv = load(RETAIL)[0]
    rec = split(conv.messages)
    k = next(i for i, r in enumerate(rec.replies) if i > 0 and r and any(b.type == "tool_use" for b in r[0].blocks))
    model = PlaybackModel()
    agent = agent_for(rec, model, instructions=False)
    mode = {"on": False}

    def wrap(t: FunctionTool) -> FunctionTool:
        async def invoke(ctx, arguments):
            if mode["on"] and stop == "tool-raises":
                raise RuntimeError("the backend is down")
            if mode["on"] and stop == "cancelled":
                await asyncio.sleep(30)
            return await t.on_invoke_tool(ctx, arguments)

        async def approval(ctx, params, call_id):
            return mode["on"] and stop == "approval-abandoned"

        return FunctionTool(name=t.name, description=t.description, params_json_schema=t.params_json_schema,
                            on_invoke_tool=invoke, strict_json_schema=False, needs_approval=approval)

    agent.tools = [wrap(t) for t in agent.tools]
    cm = ContextManager(f"sqlite:///{tmp_path / 's.db'}", policy())
    s = Spy(cm.session("u", f"stop-{stop}"))

    async def turn(i: int, **kw):
        items = ([{"role": "system", "content": rec.instructions}] if i == 0 else []) + rec.turns[i]
        model.load(rec.replies[i])
        return await Runner.run(agent, items, session=s, run_config=s.run_config(), **{"max_turns": 200, **kw})

    async def go():
        for i in range(k):
            await turn(i)
        mode["on"] = True
        if stop == "approval-abandoned":
            result = await turn(k)
            assert result.interruptions  # the run paused for an approval nobody gives
        elif stop == "tool-raises":
            with pytest.raises(AgentsException, match="the backend is down"):
                await turn(k)
        elif stop == "cancelled":
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(turn(k), 1.0)
        else:
            with pytest.raises(MaxTurnsExceeded):
                await turn(k, max_turns=1)
        mode["on"] = False
        sent = len(model.requests)
        for i in (k + 1, k + 2):
            await turn(i)
        assert len(model.requests) > sent
        for p in s.prepared[-2:]:
            assert check_wire(p.payload, "openai_responses") == []
        # nothing dangles in what the model got; a call left open got an explicit error output
        last = model.requests[-1]["input"]
        calls = {i["call_id"] for i in last if i.get("type") == "function_call"}
        outputs = [i for i in last if i.get("type") == "function_call_output"]
        assert calls == {o["call_id"] for o in outputs}
        closed = [e for e in s.ctx.events() if e["stage"] == "interrupted"]
        if stop == "approval-abandoned":
            assert len(closed) == 1
            assert any(o["output"].startswith("interrupted:") for o in outputs)

    asyncio.run(go())


def test_hosted_items_are_an_update_of_their_message_and_counted_in_the_budget(tmp_path):
    """Kinds: (1) hosted-tool items that join the message stored before them (a batch of hosted
    items only, e.g. the Runner's computer_call_output) showed in the transcript as that
    message retracted and written again, with a `popped` event: a retraction that never
    happened. Now the message is updated in place (one `amended` event; the transcript keeps
    one row per message, none retracted), also when the hosted items open a batch; a
    pop_item of a hosted item is such an update too. (2) hosted items are sent but were not
    counted: every one sent is now counted in its message's size (its JSON text with the
    session's counter; a screenshot by the image rule), so the budget holds them and
    compaction fires for them. Driven by Runner.run with a ComputerTool on a real
    AsyncComputer and a model answering with hosted items."""
    from agents import Agent, ComputerTool, Runner
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import (ResponseComputerToolCall, ResponseFunctionWebSearch, ResponseOutputMessage,
                                        ResponseOutputText)
    from openai.types.responses.response_function_web_search import ActionSearch

    from ctxwise.integrations.openai_agents import hosted
    from ctxwise.tokens import get_counter

    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==" * 40

    def say(i, text):
        return ResponseOutputMessage(id=f"msg_{i}", type="message", role="assistant", status="completed",
                                     content=[ResponseOutputText(type="output_text", text=text, annotations=[])])

    def search(i, query):
        return ResponseFunctionWebSearch(id=f"ws_{i}", type="web_search_call", status="completed",
                                         action=ActionSearch(type="search", query=query))

    def click(i):
        return ResponseComputerToolCall(id=f"cu_{i}", type="computer_call", call_id=f"call_cu_{i}", status="completed",
                                        pending_safety_checks=[], action={"type": "screenshot"})

    long_query = "carrier tracking status for order #W1 shipped via UPS ground " * 12
    replies = [[search(1, long_query), say(1, "Out for delivery.")],        # hosted item opens the batch
               [say(2, "Let me look."), search(2, long_query)],             # hosted item after the message
               [click(3)], [say(4, "The page shows it.")],                    # computer_call_output alone
               [click(5)], [search(6, long_query), say(6, "Done.")]]

    class Hosted(Model):
        n = 0

        async def get_response(self, *a, **kw):
            Hosted.n += 1
            return ModelResponse(output=replies[Hosted.n - 1], usage=Usage(), response_id=f"resp_{Hosted.n}")

        def stream_response(self, *a, **kw):
            raise NotImplementedError

    Screen = _screen(png)

    cm = ContextManager(f"sqlite:///{tmp_path / 'h.db'}", policy(reserve_output=0))
    s = Spy(cm.session("u", "hosted-truth"))
    agent = Agent(name="a", model=Hosted(), tools=[ComputerTool(Screen())])
    counter = get_counter("o200k_base")

    async def go():
        for text in ("Where is order #W1?", "And the other one?", "Show me the screen.", "Again?"):
            await Runner.run(agent, text, session=s, run_config=s.run_config())
        written = [i for b in s.batches for i in b]
        assert sum(1 for b in s.batches if all(hosted(i) for i in b)) >= 2
        assert json.dumps(await s.get_items(limit=len(written))) == json.dumps(written)
        # (1) the truth: one transcript row per message, nothing retracted, updates as such
        rows = s.ctx.transcript()
        assert all(r.status != "retracted" for r in rows)
        texts = [r.text for r in rows if r.role == "assistant"]
        assert texts == ["Out for delivery.", "Let me look.", "The page shows it.", "Done."]
        stages = [e["stage"] for e in s.ctx.events()]
        assert "popped" not in stages and stages.count("amended") >= 2
        # (2) counted: each message's size is its canonical size plus its hosted items'
        for m in s.ctx.messages:
            beside = [i for i in (s._written(m) or []) if hosted(i)]
            bare = m.model_copy(update={"metadata": {}})
            own = s.ctx._sz(bare)
            if not beside:
                assert s.ctx._sz(m) == own
                continue
            extra = s.ctx._sz(m) - own
            text = sum(counter.count_text(json.dumps(i, ensure_ascii=False)) for i in beside
                       if "screenshot" not in json.dumps(i))
            assert extra >= text > 0 or extra > 0
            if any("image_url" in json.dumps(i) for i in beside):  # by the image rule, not its base64
                assert extra < counter.count_text(png) / 4
        # pops: the reply is retracted (it was); the hosted item that opened its batch stays, with
        # the message before it; popping that is an update taking its size off
        size, rows = s.ctx.size, len(s.ctx.transcript())
        assert (await s.pop_item())["type"] == "message"
        assert [r.status for r in s.ctx.transcript()[rows:]] == ["retracted"]
        assert json.dumps(await s.get_items(limit=len(written) - 1)) == json.dumps(written[:-1])
        size, rows = s.ctx.size, len(s.ctx.transcript())
        assert (await s.pop_item())["type"] == "web_search_call"
        assert len(s.ctx.transcript()) == rows and s.ctx.events()[-1]["stage"] == "amended"
        assert size - s.ctx.size >= counter.count_text(long_query) > 0
        assert json.dumps(await s.get_items(limit=len(written) - 2)) == json.dumps(written[:-2])
        # the budget holds them: what prepare() measures (and compacts against) includes them
        bare = sum(s.ctx._sz(m.model_copy(update={"metadata": {}})) for m in s.ctx.messages)
        hosted_text = sum(counter.count_text(json.dumps(i, ensure_ascii=False)) for m in s.ctx.messages
                          for i in (s._written(m) or []) if hosted(i) and "image_url" not in json.dumps(i))
        assert s.ctx.prepare().size >= bare + hosted_text > bare

    asyncio.run(go())


def test_a_reused_call_id_left_unanswered_twice_is_closed_twice(tmp_path):
    """Kind (found by a fresh-user check): a model that repeats a call id (some gateways and
    local models send ``call_0`` every time) and two runs abandoned at a tool approval. The
    session took the second call for answered, because an output with that id existed earlier:
    it prepared with the call dangling and every later run raised PayloadInvalid
    [unanswered-tool-call]. Calls are now paired with outputs in order."""
    cm = ContextManager(f"sqlite:///{tmp_path / 'r.db'}", policy())
    s = CtxwiseSession(cm.session("u", "reuse"), session_settings={"limit": None})
    call = {"type": "function_call", "call_id": "c1", "name": "refund", "arguments": "{}"}

    async def go():
        await s.add_items([{"role": "system", "content": "You are a shop assistant."},
                           {"role": "user", "content": "Refund order 1."}])
        for k in range(3):
            await s.add_items([{**call, "id": f"fc_{k}"}])  # paused at approval, never answered
            await s.run_compaction()                   # the Runner's post-turn hook: no error
            assert await s.get_items()                  # a read while the call waits
            await s.add_items([{"role": "user", "content": f"Never mind, question {k}."}])
            view = await s.get_items()
            assert check_wire(view, "openai_responses") == []
            outputs = [i for i in view if i.get("type") == "function_call_output"]
            assert len(outputs) == k + 1 and all(o["output"].startswith("interrupted:") for o in outputs)
        assert [e["stage"] for e in s.ctx.events()].count("interrupted") == 3

    asyncio.run(go())


def test_two_session_objects_on_one_ctxwise_session_both_keep_working(tmp_path):
    """Kind (found by a fresh-user check): two CtxwiseSession objects on one ctxwise session
    (two agents, two workers, two processes). The one that did not write last raised
    SessionConflict on every call until its session was reloaded by hand, and that user turn
    was lost. Each call now catches up with the other writer first."""
    url = f"sqlite:///{tmp_path / 'two.db'}"
    a = CtxwiseSession(ContextManager(url, policy()).session("u", "shared"), session_settings={"limit": None})
    b = CtxwiseSession(ContextManager(url, policy()).session("u", "shared"), session_settings={"limit": None})

    async def go():
        await a.add_items([{"role": "system", "content": "You are a shop assistant."},
                           {"role": "user", "content": "Hi from A"}])
        await a.add_items([{"role": "assistant", "content": "Hello A."}])
        for k in range(4):
            w = (b, a)[k % 2]
            await w.add_items([{"role": "user", "content": f"question {k}"}])
            view = await w.get_items()
            assert view[-1]["content"] == f"question {k}"   # it sees the other writer's items
            await w.add_items([{"role": "assistant", "content": f"answer {k}"}])
            await w.run_compaction()
        va, vb = await a.get_items(), await b.get_items()
        assert va == vb and sum(i.get("role") == "user" for i in va) == 5
        assert check_wire(va, "openai_responses") == []
        assert await b.pop_item() is not None and len(await a.get_items(limit=100)) == len(va) - 1

    asyncio.run(go())


def _quiet_cm(tmp_path) -> ContextManager:
    """A 10M-char budget, user memory off: nothing can be compacted (issue 29's setting)."""
    return ContextManager(f"sqlite:///{tmp_path / 'q.db'}", Policy(budget=10_000_000, unit="chars",
                                                                  provider="openai_responses", user_memory=False))


WRITTEN = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": [{"type": "input_text", "text": "read this"},
                                 {"type": "input_file", "file_data": "data:application/pdf;base64,JVBERi0=",
                                  "filename": "a.pdf"},
                                 {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "high"}]},
    {"type": "reasoning", "id": "rs_1", "summary": []},
    {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}", "id": "fc_1",
     "caller": {"type": "direct"}, "namespace": "tools"},
    {"type": "function_call_output", "call_id": "c1", "output": "r", "caller": {"type": "direct"}},
    {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed", "phase": "final_answer",
     "content": [{"type": "output_text", "text": "ok", "annotations": [{"type": "url_citation", "url": "https://x.test",
                                                                        "title": "x", "start_index": 0, "end_index": 2}],
                  "logprobs": []}]},
    {"role": "developer", "content": "Now answer in French."},
    {"role": "user", "content": "and?"},
    {"type": "message", "role": "assistant", "id": "msg_2", "status": "completed",
     "content": [{"type": "refusal", "refusal": "I can't help with that."}]},
    {"type": "local_shell_call", "id": "lsh_1", "call_id": "call_9", "status": "completed",
     "action": {"type": "exec", "command": ["ls"], "env": {}}},
    {"type": "local_shell_call_output", "call_id": "call_9", "output": "a b"},
]


def test_nothing_compacted_gives_back_every_item_exactly_as_written(tmp_path):
    """Kind (issue 29, the SDK's own suite): get_items() re-rendered items when nothing was
    compacted (``type: "message"`` added, ``caller`` / ``namespace`` / ``phase`` /
    ``annotations`` dropped, ``detail`` high became auto); refusal and input_file parts and a
    developer message after the first item made add_items raise; a local_shell_call_output
    (call_id, no id) left the view with its call. The Runner sends that view to the model."""
    s = CtxwiseSession(_quiet_cm(tmp_path).session("u", "exact"))

    async def go():
        for a, b in [(0, 2), (2, 6), (6, 8), (8, 9), (9, 11)]:  # in batches, as the Runner writes
            await s.add_items(copy.deepcopy(WRITTEN[a:b]))
        assert await s.get_items() == WRITTEN
        assert await s.get_items(limit=4) == WRITTEN[-4:]
        assert await s.pop_item() == WRITTEN[-1]
        assert await s.get_items() == WRITTEN[:-1]

    asyncio.run(go())


def test_session_settings_limit_and_a_reasoning_only_batch(tmp_path):
    """Kind (issue 29): get_items() ignored ``session_settings.limit``; a batch holding only a
    reasoning item was missing from get_items(limit=N) yet pop_item() returned it."""
    from agents import SessionSettings

    cm = _quiet_cm(tmp_path)
    s = CtxwiseSession(cm.session("u", "lim"), session_settings=SessionSettings(limit=2))
    r = CtxwiseSession(cm.session("u", "rs"))

    async def go():
        assert await s.get_items() == [] and await r.get_items(limit=3) == []  # nothing written yet
        await s.add_items([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                           {"role": "user", "content": "c"}])
        assert await s.get_items() == [{"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]
        assert len(await s.get_items(limit=3)) == 3
        await r.add_items([{"role": "user", "content": "hi"}])
        reasoning = {"type": "reasoning", "id": "rs_9", "summary": []}
        await r.add_items([reasoning])
        assert await r.get_items(limit=1) == [reasoning]
        assert await r.pop_item() == reasoning
        assert await r.get_items(limit=1) == [{"role": "user", "content": "hi"}]

    asyncio.run(go())


def test_one_session_from_several_threads_and_event_loops(tmp_path):
    """Kind (issue 29, ``test_sqlite_session_concurrent_access``): one CtxwiseSession used from
    several event loops (``Runner.run_sync`` in threads) raised "bound to a different event
    loop", one call hung and the object stayed unusable."""
    from threadrun import run_threads

    s = CtxwiseSession(_quiet_cm(tmp_path).session("u", "threads"))
    def worker(k: int) -> None:
        for j in range(4):
            asyncio.run(s.add_items([{"role": "user", "content": f"t{k}-{j}"}]))
            asyncio.run(s.get_items(limit=1))

    assert run_threads(worker, 4) == []
    got = asyncio.run(s.get_items())
    assert sorted(i["content"] for i in got) == sorted(f"t{k}-{j}" for k in range(4) for j in range(4))


def test_run_config_keeps_reasoning_id_policy_and_session_input_callback(tmp_path):
    """Kind (issue 29): with ``session.run_config()``, ``reasoning_item_id_policy="omit"`` had no
    effect (stored reasoning ids sent again: the SDK's fix for its 404 "Item not found") and
    what a ``session_input_callback`` removed was sent anyway."""
    from agents import Agent
    from agents.run_config import CallModelData, ModelInputData

    s = CtxwiseSession(_quiet_cm(tmp_path).session("u", "cfg"))
    old = [{"role": "user", "content": "old question"}, {"type": "reasoning", "id": "rs_1", "summary": []},
           {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
            "content": [{"type": "output_text", "text": "old answer", "annotations": []}]}]
    new = {"role": "user", "content": "new question"}

    def call(cfg, given):
        data = CallModelData(model_data=ModelInputData(input=given, instructions="x"), agent=Agent(name="a"),
                             context=None)
        return asyncio.run(cfg.call_model_input_filter(data)).input

    asyncio.run(s.add_items(copy.deepcopy(old)))
    asyncio.run(s.add_items([new]))
    sent = call(s.run_config(reasoning_item_id_policy="omit"), [*old, new])
    assert [i for i in sent if i.get("type") == "reasoning"] == [{"type": "reasoning", "summary": []}]
    assert call(s.run_config(), [*old, new]) == [*old, new]
    # a callback that kept only the newest user message: the older items stay out
    cfg = s.run_config(session_input_callback=lambda history, items: items)
    assert call(cfg, [new]) == [new]


def test_a_compaction_item_alone_can_open_the_session(tmp_path):
    """Kind (the SDK's OpenAIResponsesCompactionSession over CtxwiseSession): the compaction
    session replaces the history with its ``compaction`` item alone; add_items raised "cannot open
    a session" and the SDK restored the old history."""
    s = CtxwiseSession(_quiet_cm(tmp_path).session("u", "compacted"))
    item = {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAA-opaque"}

    async def go():
        await s.add_items([copy.deepcopy(item)])
        assert await s.get_items() == [item]
        await s.add_items([{"role": "user", "content": "go on"}])
        assert await s.get_items() == [item, {"role": "user", "content": "go on"}]
        assert await s.get_items(limit=2) == [item, {"role": "user", "content": "go on"}]
        assert await s.pop_item() == {"role": "user", "content": "go on"}
        assert await s.pop_item() == item
        assert await s.get_items() == []

    asyncio.run(go())


def test_outputs_answering_no_waiting_call_are_stored_as_written_and_sent_as_notes(tmp_path):
    """Kind (issue 29, the SDK's own suite: ``prepare_input_with_session`` / ``save_result_to_session``
    tests): a ``function_call_output`` whose call is not in the session, or was answered already,
    made add_items raise PayloadInvalid [orphan-tool-result]; the SDK stores such outputs. ctxwise
    stores them as written (the record, ``get_items(limit=...)``), reads each as a user note (the
    context stays valid) and sends the note, not the output (the Responses API rejects an output
    that answers no call: 400)."""
    cm = _quiet_cm(tmp_path)
    s = CtxwiseSession(cm.session("u", "orphan"))
    orphan = {"type": "function_call_output", "call_id": "call_gone", "output": "ok"}
    call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
    first = {"type": "function_call_output", "call_id": "c1", "output": "old"}
    again = {"type": "function_call_output", "call_id": "c1", "output": "new"}

    async def go():
        await s.add_items([copy.deepcopy(orphan)])
        await s.add_items([{"role": "user", "content": "hi"}, copy.deepcopy(call), copy.deepcopy(first)])
        await s.add_items([copy.deepcopy(again)])  # a second output for an answered call
        written = [orphan, {"role": "user", "content": "hi"}, call, first, again]

        def note(o):
            return {"type": "message", "role": "user", "content": f"[function_call_output {o['call_id']}] {o['output']}"}

        sent = [note(orphan), {"role": "user", "content": "hi"}, call, first, note(again)]
        assert await s.get_items() == sent
        assert await s.get_items(limit=-1) == written  # SQLiteSession's LIMIT -1: everything
        assert await s.get_items(limit=0) == []
        notes = [m for m in s.ctx.messages if m.role == "user" and m.text.startswith("[function_call_output")]
        assert [m.text for m in notes] == ["[function_call_output call_gone] ok", "[function_call_output c1] new"]
        assert check_wire(s.last_prepared.payload, "openai_responses") == []
        assert await s.pop_item() == again
        assert await s.get_items() == sent[:-1]

    asyncio.run(go())


def test_a_message_item_without_a_role_is_carried_as_written(tmp_path):
    """Kind (issue 29, the SDK's own suite: ``wait_for_session_cleanup`` / rewind tests): a
    ``message`` item without a role (the SDK stores what it is given) made add_items raise
    FormatError "unknown role None"; it is kept and given back as written, like a hosted item."""
    s = CtxwiseSession(_quiet_cm(tmp_path).session("u", "roleless"))
    bare = {"id": "msg-1", "type": "message", "content": "hello"}
    empty = {"id": "old", "type": "message"}

    async def go():
        await s.add_items([copy.deepcopy(bare)])
        await s.add_items([{"role": "user", "content": "next"}, copy.deepcopy(empty)])
        assert await s.get_items(limit=10) == [bare, {"role": "user", "content": "next"}, empty]
        assert await s.get_items() == [bare, {"role": "user", "content": "next"}, empty]
        assert await s.pop_item() == empty
        assert await s.get_items(limit=10) == [bare, {"role": "user", "content": "next"}]

    asyncio.run(go())
