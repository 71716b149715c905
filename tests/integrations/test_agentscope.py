"""AgentScope 2: CtxwiseMiddleware inside an ``agentscope.agent.Agent``, driven by its reply loop.

The model is a ``ChatModelBase`` subclass playing back the assistant turns recorded in tau2-bench
retail sessions (tool calls included); the tools are ``FunctionTool``s returning the recorded
results; the reply loop, permission checks, acting and the OpenAI chat formatter are
AgentScope's own. Budget: 4,000 o200k tokens. Kinds of fault covered: compaction that never
fires inside a framework; a request the provider would reject; the framework's record losing
messages (AgentScope's compressor drops what it summarizes from ``state.context``); two
compactors fighting; an agent restored from saved state sending a different request; the
user-memory block and the recall tool not reaching the agent.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "examples"))

from agentscope.state import AgentState  # noqa: E402

from agentscope_agent import ScriptedModel, build_agent, run_turns  # noqa: E402
from ctxwise import ContextManager, Policy  # noqa: E402
from ctxwise.integrations.agentscope import CtxwiseMiddleware, to_canonical  # noqa: E402
from ctxwise.providers import check_wire  # noqa: E402
from ctxwise.summarizers.base import SUMMARY_HEADER  # noqa: E402
from playback import recordings  # noqa: E402

BUDGET = 4000


def policy(**kw) -> Policy:
    return Policy.preset("default", budget=BUDGET, unit="tokens", tokenizer="o200k_base", provider="openai", **kw)


def wire(seen: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """AgentScope's OpenAI chat formatter output as the OpenAI SDK types declare it.

    The formatter also writes ``name`` (the tool's name) on every tool message, and
    AgentScope's ``OpenAIChatModel`` sends it to the API as written (it is not ctxwise's: the
    formatter runs after the middleware, with or without ctxwise). The OpenAI SDK types have
    no such key, so the wire check would report it; before it is removed here, this checks
    it is the name of the call the message answers, also for the results ctxwise rebuilt
    (cleared placeholders). Kind: a rebuilt tool message sent with a wrong or empty name
    (Gemini's OpenAI endpoint requires it; strict gateways compare it)."""
    calls = {c["id"]: c["function"]["name"] for m in seen for c in (m.get("tool_calls") or [])}
    for m in seen:
        if m.get("role") == "tool":
            assert m.get("name") == calls.get(m["tool_call_id"]) and m["name"], m
    return [{k: v for k, v in m.items() if not (m.get("role") == "tool" and k == "name")} for m in seen]


def build(rec, tmp_path: Path, name: str = "ctx", **kwargs):
    cm = ContextManager(f"sqlite:///{tmp_path / (name + '.db')}", policy())
    mw = CtxwiseMiddleware(cm, user_id="u1")
    model = ScriptedModel()
    agent = build_agent(rec, model, [mw], extra_tools=asyncio.run(mw.list_tools()), **kwargs)
    return cm, mw, model, agent


@pytest.mark.parametrize("runtime_state", [False, True], ids=["plain", "time-hints"])
def test_compaction_fires_every_request_valid_and_the_record_keeps_every_message(runtime_state, tmp_path):
    # kinds: compaction inside the framework; wire validity; nothing lost from the agent's record.
    # time-hints: AgentScope's default runtime-state injection (hint blocks in the agent's message)
    from agentscope.agent import InjectionConfig

    rec = recordings(n=1)[0]
    cm, mw, model, agent = build(rec, tmp_path)
    agent.injection_config = InjectionConfig(inject_runtime_state=runtime_state)
    asyncio.run(run_turns(agent, model, rec))
    stages = {e["stage"] for e in mw.session(agent.state).events()}
    # over the hard limit the cheaper cut goes first: on this recording, the summary
    assert "summarizing" in stages, stages
    assert len(model.seen) == sum(len(t.assistant) for t in rec.turns)
    for call, sent in enumerate(model.seen):
        assert check_wire(wire(sent), "openai") == [], call
    assert model.summaries == []  # AgentScope's own compressor never ran

    # the record: every recorded user message, reply and tool result, results verbatim
    parts = to_canonical(agent.state.context)
    results = [r for m in parts for r in m.tool_results]
    assert len(results) == sum(len(m.tool_uses) for t in rec.turns for m in t.assistant)
    assert all(r.text in rec.results.texts for r in results)
    users = [m.text for m in parts if m.role == "user" and not m.text.startswith("<system-reminder>")]
    assert users == [t.user for t in rec.turns]
    sent_results = {m["tool_call_id"]: m["content"] for s in model.seen for m in s if m["role"] == "tool"}
    # the model got the compacted context, not the record: placeholders or a summary
    assert (any(r.tool_use_id in sent_results and sent_results[r.tool_use_id] != r.text for r in results)
            or any(SUMMARY_HEADER in json.dumps(s, ensure_ascii=False) for s in model.seen))


def test_the_builtin_compressor_is_stood_in_for(tmp_path):
    # kind: two compactors on one context (AgentScope's would drop messages from the record)
    rec = recordings(n=1)[0]
    cm, mw, model, agent = build(rec, tmp_path)
    agent.model.context_size = 1_000  # far past AgentScope's 80 % trigger
    asyncio.run(run_turns(agent, model, rec, turns=slice(0, 4)))
    before = agent.state.model_dump_json()
    asyncio.run(agent.compress_context())
    assert agent.state.model_dump_json() == before and agent.state.summary == ""
    assert model.summaries == []


def _snapshot(src: Path, dst: Path) -> None:
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)


def test_an_agent_restored_from_saved_state_sends_the_same_next_request(tmp_path):
    # kind: a restart from saved AgentState (+ the same ctxwise store) diverging
    rec = recordings(n=2)[1]
    k = len(rec.turns) - 2
    cm, mw, model, agent = build(rec, tmp_path, name="run")
    asyncio.run(run_turns(agent, model, rec, turns=slice(0, k)))
    assert any(e["stage"] in ("clearing", "summarizing", "trimming") for e in mw.session(agent.state).events())
    saved = agent.state.model_dump_json()
    _snapshot(tmp_path / "run.db", tmp_path / "restored.db")
    n = len(model.seen)
    asyncio.run(run_turns(agent, model, rec, first=False, turns=slice(k, k + 1)))
    expected = json.dumps(model.seen[n], ensure_ascii=False)
    cm.close()

    rec = recordings(n=2)[1]  # its own recorded results
    cm2, mw2, model2, agent2 = build(rec, tmp_path, name="restored", state=AgentState.model_validate_json(saved))
    asyncio.run(run_turns(agent2, model2, rec, first=False, turns=slice(k, k + 1)))
    assert json.dumps(model2.seen[0], ensure_ascii=False) == expected
    cm2.close()


def test_user_memory_goes_into_the_system_prompt_once_and_recall_fetches_a_cleared_result(tmp_path):
    # kinds: the user-memory block missing (or sent twice); the recall tool not reaching the agent
    rec = recordings(n=1)[0]
    # Ragent's rule (clearing above clear_at) and no summary, so that cleared results stay in
    # the requests of this recording (by default its cheaper cut is the summary)
    cm = ContextManager(f"sqlite:///{tmp_path / 'm.db'}", policy(edit_when="watermark", summarize=False))
    cm.store.add_memory("u1", "The user prefers to be contacted by e-mail.", "preference")
    mw = CtxwiseMiddleware(cm, user_id="u1")
    model = ScriptedModel()
    tools = asyncio.run(mw.list_tools())
    agent = build_agent(rec, model, [mw], extra_tools=tools)
    asyncio.run(run_turns(agent, model, rec))
    for sent in model.seen:
        text = json.dumps(sent, ensure_ascii=False)
        assert text.count("prefers to be contacted by e-mail") == 1
        assert sent[0]["role"] == "system" and "prefers to be contacted by e-mail" in json.dumps(sent[0])

    assert any(e["stage"] == "clearing" for e in mw.session(agent.state).events())
    placeholder = next(m for sent in model.seen for m in sent if m["role"] == "tool" and "recall" in m["content"])
    (recall,) = tools
    chunk = asyncio.run(recall.call(tool_use_id=placeholder["tool_call_id"], _agent_state=agent.state))
    text = chunk.content[0].text
    assert text != placeholder["content"] and text in rec.results.texts


def test_import_ctxwise_does_not_import_agentscope_and_a_missing_extra_is_named():
    # kind: an optional framework made mandatory, or a raw ImportError for a missing extra
    code = ("import sys, ctxwise\n"
            "assert 'agentscope' not in sys.modules\n"
            "sys.modules['agentscope'] = None\n"
            "try:\n    import ctxwise.integrations.agentscope\n"
            "except ctxwise.MissingExtra as e:\n    print(e.hint)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "pip install 'ctxwise[agentscope]'"


@pytest.mark.parametrize("turns", [12])
def test_agentscope_example_runs_and_reports_compaction(turns, capsys):
    from agentscope_agent import main

    asyncio.run(main(turns_wanted=turns))
    out = capsys.readouterr().out
    assert f"{turns} turns" in out and "agent.state.context keeps all" in out
    assert "summarizing" in out


def test_a_saved_state_opened_on_another_store_is_refused(tmp_path):
    # kind: a restored agent silently continuing on a ctxwise store that lacks its history
    from ctxwise import SessionConflict

    rec = recordings(n=1)[0]
    cm, mw, model, agent = build(rec, tmp_path, name="first")
    asyncio.run(run_turns(agent, model, rec, turns=slice(0, 3)))
    saved = agent.state.model_dump_json()
    rec = recordings(n=1)[0]
    cm2, mw2, model2, agent2 = build(rec, tmp_path, name="empty", state=AgentState.model_validate_json(saved))
    with pytest.raises(SessionConflict, match="not the one it was saved with"):
        asyncio.run(run_turns(agent2, model2, rec, first=False, turns=slice(3, 4)))
    assert model2.seen == []  # nothing was sent


def test_a_call_awaiting_confirmation_is_kept_whole_until_answered(tmp_path):
    # kind: compaction touching an open tool call (awaiting a user confirmation)
    from agentscope.event import ConfirmResult, UserConfirmResultEvent
    from agentscope.message import TextBlock, ToolCallBlock, UserMsg
    from agentscope.model import ChatResponse
    from agentscope.tool import FunctionTool

    rec = recordings(n=1)[0]
    long_result = "REFUND-OK " + json.dumps([{"order": f"#W{i:07d}", "amount": f"{i}.99"} for i in range(60)])

    def refund_all(order_id: str) -> str:
        """Refund every item of an order.

        Args:
            order_id (str): the order id
        """
        return long_result

    cm = ContextManager(f"sqlite:///{tmp_path / 'hitl.db'}", policy())
    mw = CtxwiseMiddleware(cm, user_id="u1")
    model = ScriptedModel()
    agent = build_agent(rec, model, [mw], extra_tools=[FunctionTool(refund_all)])  # asks for confirmation
    asyncio.run(run_turns(agent, model, rec, turns=slice(0, 6)))
    call = ToolCallBlock(id="call_refund_1", name="refund_all", input=json.dumps({"order_id": "#W0000001"}))
    model.script = [ChatResponse(content=[TextBlock(text="I will refund it."), call], is_last=True)]
    asyncio.run(agent.reply(UserMsg("user", "Please refund everything on #W0000001.")))
    assert [c.id for c in agent.state.get_awaiting_tool_calls(agent.name)] == ["call_refund_1"]
    assert {"clearing", "summarizing"} & {e["stage"] for e in mw.session(agent.state).events()}

    before = agent.state.model_dump_json()
    asyncio.run(agent.compress_context())  # the stand-in: the open call and the record stay as they are
    assert agent.state.model_dump_json() == before

    n = len(model.seen)
    model.script = [ChatResponse(content=[TextBlock(text="Refunded.")], is_last=True)]
    asyncio.run(agent.reply(UserConfirmResultEvent(reply_id=agent.state.reply_id, confirm_results=[
        ConfirmResult(confirmed=True, tool_call=agent.state.get_awaiting_tool_calls(agent.name)[0])])))
    sent = model.seen[n]
    (asked,) = [m for m in sent if m.get("tool_calls") and m["tool_calls"][0]["id"] == "call_refund_1"]
    (answer,) = [m for m in sent if m.get("role") == "tool" and m["tool_call_id"] == "call_refund_1"]
    assert answer["content"] == long_result  # the fresh result whole
    assert check_wire(wire(sent), "openai") == []
    assert "Please refund everything on #W0000001." in json.dumps(sent)


PNG_1PX = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")


def _image_agent(rec, tmp_path, tool_output):
    from agentscope.message import ToolResultState
    from agentscope.tool import FunctionTool, ToolChunk

    def screenshot(page: str) -> ToolChunk:
        """Take a screenshot of a page.

        Args:
            page (str): the page
        """
        return ToolChunk(content=tool_output(), state=ToolResultState.SUCCESS)

    from agentscope.permission import PermissionBehavior, PermissionDecision

    cm = ContextManager(f"sqlite:///{tmp_path / 'img.db'}", policy())
    mw = CtxwiseMiddleware(cm, user_id="u1")
    model = ScriptedModel()
    tool = FunctionTool(screenshot, permission=PermissionDecision(behavior=PermissionBehavior.ALLOW, message="test"))
    agent = build_agent(rec, model, [mw], extra_tools=[tool])
    return cm, mw, model, agent


def test_image_data_blocks_reach_ctxwise_and_the_model(tmp_path):
    # kind: non-text content (AgentScope DataBlocks: in a user message, in a tool result's
    # output) silently dropped when AgentScope messages are read into ctxwise, so the budget
    # never counted them and a rebuilt message lost them. Images (base64 and URL sources) are
    # carried as ctxwise images (other media types: the next test).
    from agentscope.message import Base64Source, DataBlock, TextBlock, ToolCallBlock, URLSource, UserMsg
    from agentscope.model import ChatResponse

    from ctxwise import ImageBlock
    from ctxwise.integrations.agentscope import _blocks, _parts

    rec = recordings(n=1)[0]
    shot = lambda: [TextBlock(text="the order page"),  # noqa: E731
                    DataBlock(source=Base64Source(data=PNG_1PX, media_type="image/png"))]
    cm, mw, model, agent = _image_agent(rec, tmp_path, shot)
    call = ToolCallBlock(id="call_shot_1", name="screenshot", input=json.dumps({"page": "orders"}))
    model.script = [ChatResponse(content=[call], is_last=True),
                    ChatResponse(content=[TextBlock(text="I see the order page.")], is_last=True)]
    user = UserMsg("user", [TextBlock(text="What is on these?"),
                            DataBlock(source=Base64Source(data=PNG_1PX, media_type="image/png")),
                            DataBlock(source=URLSource(url="https://example.com/a.jpg", media_type="image/jpeg"))])
    asyncio.run(agent.reply(user))

    session = mw.session(agent.state)
    (asked,) = [m for m in session.messages if m.role == "user" and m.text == "What is on these?"]
    images = [b for b in asked.blocks if isinstance(b, ImageBlock)]
    assert [(b.media_type, b.data, b.url) for b in images] == [
        ("image/png", PNG_1PX, None), ("image/jpeg", None, "https://example.com/a.jpg")]
    (result,) = [r for m in session.messages for r in m.tool_results]
    assert [type(o).__name__ for o in result.output] == ["TextBlock", "ImageBlock"]
    assert result.output[1].data == PNG_1PX
    # the model got them too (the messages ctxwise left unchanged travel as AgentScope wrote them)
    sent = json.dumps(model.seen[-1])
    assert f"data:image/png;base64,{PNG_1PX}" in sent and "https://example.com/a.jpg" in sent
    # a message ctxwise rebuilds (after clearing, summarizing) keeps its images, sources included
    for msg in agent.state.context:
        for m, _ in _parts(msg):
            from agentscope.message import Msg

            role = "assistant" if m.role == "tool" else m.role
            again = [p for p, _ in _parts(Msg(name="x", role=role, content=_blocks(m), id=msg.id))]
            assert [b.model_dump() for p in again for b in p.blocks] == [b.model_dump() for b in m.blocks]

    cm.close()


def test_a_data_block_ctxwise_does_not_hold_reaches_the_model_as_written_and_never_leaves_the_agent_stuck(tmp_path):
    # kind: input a framework can legitimately produce making a session unusable (issue 15's
    # rule), or ctxwise visible (issue 29): an AgentScope DataBlock that is not an image (audio
    # in a user message, a PDF in a tool result's output) stays in the agent's own record, so
    # refusing it refused every later model call; then the view sent a text in its place. Now
    # the model gets the block as written, ctxwise holds and counts a text naming it, and that
    # is recorded (message metadata and a `normalized` event); later calls go through.
    from agentscope.message import Base64Source, DataBlock, TextBlock, ToolCallBlock, UserMsg
    from agentscope.model import ChatResponse

    from ctxwise.integrations.agentscope import HELD_RULE, held_text

    rec = recordings(n=1)[0]
    pdf = DataBlock(source=Base64Source(data="JVBERi0xLjQK", media_type="application/pdf"))
    shot = lambda: [TextBlock(text="the invoice"), pdf]  # noqa: E731
    cm, mw, model, agent = _image_agent(rec, tmp_path, shot)
    audio = DataBlock(source=Base64Source(data="UklGRg==", media_type="audio/wav"))
    voice = UserMsg("user", [TextBlock(text="and this?"), audio])
    kept = audio.model_dump()
    call = ToolCallBlock(id="call_shot_2", name="screenshot", input=json.dumps({"page": "invoice"}))
    model.script = [ChatResponse(content=[call], is_last=True),
                    ChatResponse(content=[TextBlock(text="It is a voice note and an invoice.")], is_last=True)]
    asyncio.run(agent.reply(voice))
    for k, turn in enumerate(["Thanks. What else?", "And the order status?"]):
        model.script = [ChatResponse(content=[TextBlock(text=f"answer {k}")], is_last=True)]
        asyncio.run(agent.reply(UserMsg("user", turn)))

    assert len(model.seen) == 4  # never stuck: every later model call of the agent went through
    for n, sent in enumerate(model.seen):
        text = json.dumps(sent)
        assert "ctxwise holds this text" not in text  # the model never sees ctxwise's stand-in
        assert "UklGRg==" in text or "audio" in text
    assert held_text("audio/wav") == "[audio/wav block: sent as given; ctxwise holds this text for it]"
    # the agent's own record keeps the original blocks untouched
    (held,) = [b for m in agent.state.context for b in m.content
               if isinstance(b, DataBlock) and b.source.media_type == "audio/wav"]
    assert held.model_dump() == kept
    (result,) = [b for m in agent.state.context for b in m.content if getattr(b, "id", None) == "call_shot_2"
                 and b.type == "tool_result"]
    assert [type(o).__name__ for o in result.output] == ["TextBlock", "DataBlock"]
    # ctxwise's own payload holds the texts, and the stand-in is recorded
    assert held_text("audio/wav") in json.dumps(mw.last_prepared.payload)
    session = mw.session(agent.state)
    noted = {n["media_type"]: n for m in session.messages
             for n in (m.metadata.get("ctxwise") or {}).get("normalized", [])}
    assert set(noted) == {"audio/wav", "application/pdf"}
    assert all(n["rule"] == HELD_RULE for n in noted.values())
    assert "block 1" in noted["audio/wav"]["place"] and "output 1" in noted["application/pdf"]["place"]
    events = [e for e in session.events() if e["stage"] == "normalized"]
    assert sorted(r for e in events for m in e["detail"]["messages"] for r in m["rules"]) == [HELD_RULE] * 2
    cm.close()


def test_anthropic_thinking_signature_and_redacted_data_reach_the_anthropic_payload(tmp_path):
    # kind: provider-opaque reasoning data lost when AgentScope messages are read into ctxwise:
    # an AgentScope ThinkingBlock from its Anthropic model carries `signature` (or
    # `redacted_thinking_data`) as extra fields; only the text was read, so ctxwise's anthropic
    # payload could not send the latest assistant thinking back byte-identical (Anthropic
    # rejects it) and a rebuilt message lost it. Checked with the anthropic wire check.
    from agentscope.message import TextBlock, ThinkingBlock, ToolCallBlock, UserMsg
    from agentscope.model import ChatResponse

    from ctxwise.integrations.agentscope import _blocks, _parts

    rec = recordings(n=1)[0]
    cm = ContextManager(f"sqlite:///{tmp_path / 'think.db'}",
                        Policy(budget=8000, unit="tokens", tokenizer="o200k_base", provider="anthropic"))
    mw = CtxwiseMiddleware(cm, user_id="u1")
    model = ScriptedModel()
    agent = build_agent(rec, model, [mw])
    tool = next(iter(rec.tools))
    signed = ThinkingBlock.model_validate({"thinking": "Look the user up first.", "signature": "EqQBCkgIARAB=="})
    hidden = ThinkingBlock.model_validate({"thinking": "", "redacted_thinking_data": "EmwKAhgBEgy3va3p=="})
    model.script = [ChatResponse(content=[signed, hidden, TextBlock(text="Checking."),
                                          ToolCallBlock(id="call_t1", name=tool, input="{}")], is_last=True),
                    ChatResponse(content=[TextBlock(text="Done.")], is_last=True)]
    payloads = []
    real = mw._prepare

    def spy(*a, **kw):
        out = real(*a, **kw)
        payloads.append(mw.last_prepared.payload)
        return out

    mw._prepare = spy
    asyncio.run(agent.reply(UserMsg("user", "Find my account.")))
    assert len(payloads) == 2
    for payload in payloads:
        assert check_wire(payload, "anthropic") == []
    (asked,) = [m for m in payloads[1]["messages"] if m["role"] == "assistant"]
    assert asked["content"][:2] == [{"type": "thinking", "thinking": "Look the user up first.", "signature": "EqQBCkgIARAB=="},
                                    {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3p=="}]
    # a rebuilt message gives AgentScope the same opaque data back
    (msg,) = [m for m in agent.state.context if any(isinstance(b, ThinkingBlock) for b in m.content)]
    (part, _), *_ = _parts(msg)
    again = _blocks(part)
    assert again[0].signature == "EqQBCkgIARAB==" and again[1].redacted_thinking_data == "EmwKAhgBEgy3va3p=="


@pytest.mark.parametrize("stop", ["tool-raises", "cancelled"])
def test_a_tool_raising_or_an_interrupted_reply_leaves_the_agent_usable(stop, tmp_path):
    # kind: a tool call without its result stuck in the ctxwise session (every later call
    # refused as a dangling call). AgentScope answers a tool that raises with an error result
    # and closes the calls of a cancelled (interrupted) reply with `interrupted` results;
    # ctxwise reads both as error results, and the next reply's request is complete and valid.
    from agentscope.message import UserMsg
    from agentscope.permission import PermissionBehavior, PermissionDecision
    from agentscope.tool import FunctionTool

    from agentscope_agent import as_response

    from agentscope.agent import Agent, InjectionConfig
    from agentscope.tool import Toolkit

    rec = recordings(n=1)[0]
    k = next(i for i, t in enumerate(rec.turns) if i > 0 and t.assistant[0].tool_uses)
    cm = ContextManager(f"sqlite:///{tmp_path / 'a.db'}", policy())
    mw = CtxwiseMiddleware(cm, user_id="u1")
    model = ScriptedModel()
    failing = {"on": False}

    def make(tool_name, params):
        async def run(**kwargs):
            if failing["on"]:
                if stop == "tool-raises":
                    raise RuntimeError("the backend is down")
                await asyncio.sleep(30)
            return rec.results.answer(tool_name, kwargs)[0]

        return FunctionTool(run, name=tool_name, description=f"the {tool_name} tool",
                            input_schema={"type": "object", "properties": {p: {} for p in params}},
                            permission=PermissionDecision(behavior=PermissionBehavior.ALLOW, message="recorded"))

    agent = Agent(name="agent", system_prompt=rec.system, model=model, middlewares=[mw],
                  toolkit=Toolkit(tools=[*(make(n, p) for n, p in rec.tools.items()), *asyncio.run(mw.list_tools())]),
                  injection_config=InjectionConfig(inject_runtime_state=False))

    async def go():
        await run_turns(agent, model, rec, turns=slice(0, k))
        failing["on"] = True
        model.script = [as_response(m) for m in rec.turns[k].assistant]
        task = asyncio.create_task(agent.reply(UserMsg("user", rec.turns[k].user)))
        if stop == "tool-raises":
            await task
        else:
            await asyncio.sleep(0.5)
            task.cancel()  # AgentScope's interruption: the reply closes its calls as interrupted
            await task
        failing["on"] = False
        sent = len(model.seen)
        await run_turns(agent, model, rec, first=False, turns=slice(k + 1, k + 2))
        assert len(model.seen) > sent
        assert check_wire(mw.last_prepared.payload, "openai") == []
        results = [r for m in mw.session(agent.state).messages for r in m.tool_results]
        assert any(r.state == "error" for r in results)

    asyncio.run(go())


MULTI_AGENT_FORMATTERS = ["OpenAIChatFormatter", "OpenAIMultiAgentFormatter", "AnthropicMultiAgentFormatter",
                          "DashScopeMultiAgentFormatter", "DeepSeekMultiAgentFormatter", "GeminiMultiAgentFormatter",
                          "MiniMaxMultiAgentFormatter", "MoonshotMultiAgentFormatter", "OllamaMultiAgentFormatter",
                          "OpenAIResponseMultiAgentFormatter", "VolcengineMultiAgentFormatter"]
# (XAIMultiAgentFormatter needs the xai_sdk package, which ctxwise's test environment does not install)


def _multi_agent(tmp_path):
    """An agent whose context holds a user, another agent (bob) and its own reply with a tool
    call, its result and text in one Msg, with an AgentScope summary; and a call of ctxwise's
    ``on_model_call`` returning (what the model got, what the agent would have sent)."""
    from agentscope.message import Msg, TextBlock, ToolCallBlock, ToolResultBlock, ToolResultState, UserMsg
    from agentscope.model import ChatResponse

    rec = recordings(n=1)[0]
    cm, mw, model, agent = build(rec, tmp_path, name="multi")
    tool = next(iter(rec.tools), "lookup")
    agent.state.context = [
        UserMsg("carol", "Bob, Alice: who can check order #W1?"),
        Msg(name="bob", role="assistant", content=[TextBlock(text="Not me, I only do refunds.")]),
        Msg(name="agent", role="assistant", content=[
            ToolCallBlock(id="c1", name=tool, input=json.dumps({"order_id": "#W1"})),
            ToolResultBlock(id="c1", name=tool, output=[TextBlock(text="order #W1: delivered")],
                            state=ToolResultState.SUCCESS),
            TextBlock(text="I checked: #W1 was delivered.")]),
        UserMsg("carol", "Thanks both."),
    ]
    agent.state.summary = "Earlier: carol asked bob for a refund of #W0."

    async def call() -> tuple[list[Any], list[Any]]:
        kwargs = await agent._prepare_model_input()
        got: list[Any] = []

        async def handler(messages: list[Any]) -> Any:
            got.extend(messages)
            return ChatResponse(content=[TextBlock(text="ok")], is_last=True)

        await mw.on_model_call(agent, dict(kwargs), handler)
        return got, kwargs["messages"]

    return cm, mw, agent, call


@pytest.mark.parametrize("formatter", MULTI_AGENT_FORMATTERS)
def test_with_nothing_to_compact_every_multi_agent_formatter_sends_what_it_sends_without_ctxwise(tmp_path, formatter):
    # kind: ctxwise visible when nothing is compacted: the view renamed every assistant message
    # to the agent's own name (bob's words reached the model as the agent's), split the reply
    # holding a tool call, its result and text into two messages (the multi-agent formatters then
    # sent the agent's own answer as user-side history), and left state.summary out
    import agentscope.formatter as fmt

    cm, mw, agent, call = _multi_agent(tmp_path)
    got, sent = asyncio.run(call())
    assert [(m.name, m.role) for m in got] == [(m.name, m.role) for m in sent]
    assert got[1].get_text_content() == agent.state.summary
    assert all(a is b for a, b in zip(got[2:], agent.state.context))  # the state's own messages
    f = getattr(fmt, formatter)()
    assert json.dumps(asyncio.run(f.format(got)), default=str) == json.dumps(asyncio.run(f.format(sent)), default=str)
    cm.close()


def test_a_message_corrected_in_place_or_a_new_summary_is_followed_on_a_new_branch(tmp_path):
    # kind: editing agent.state.context in place was ignored (the model kept getting the stored
    # original); a changed summary likewise
    cm, mw, agent, call = _multi_agent(tmp_path)
    asyncio.run(call())
    first = mw.record(agent.state)["session_id"]
    agent.state.context[1].content[0].text = "Correction: I can check orders too."
    got, _ = asyncio.run(call())
    assert got[3].get_text_content() == "Correction: I can check orders too."
    session = mw.session(agent.state)
    assert session.session_id != first
    (ev,) = [e for e in session.events() if e["stage"] == "branched"]
    assert ev["detail"]["parent"] == first and "corrected or removed" in ev["trigger"]
    assert "Correction: I can check orders too." in json.dumps(mw.last_prepared.payload)

    agent.state.summary = "Earlier: carol asked bob for a refund of #W0; bob refunded it."
    got, _ = asyncio.run(call())
    assert got[1].get_text_content() == agent.state.summary
    assert "bob refunded it" in json.dumps(mw.last_prepared.payload)
    assert mw.record(agent.state)["session_id"] not in (first, session.session_id)
    # and a call with nothing changed goes on on the same branch
    now = mw.record(agent.state)["session_id"]
    asyncio.run(call())
    assert mw.record(agent.state)["session_id"] == now
    cm.close()


def test_the_stand_in_compressor_lets_the_later_middlewares_run(tmp_path):
    # kind: ctxwise visible to the other middlewares (found by AgentScope's own middleware tests:
    # a compress_context hook after ctxwise in the list never ran)
    from agentscope.middleware import MiddlewareBase

    seen: list[str] = []

    class After(MiddlewareBase):
        async def on_compress_context(self, agent, input_kwargs, next_handler):
            seen.append(f"after:{input_kwargs['instructions']}")
            await next_handler(**input_kwargs)

    rec = recordings(n=1)[0]
    cm = ContextManager(f"sqlite:///{tmp_path / 'ctx.db'}", policy())
    mw = CtxwiseMiddleware(cm, user_id="u1")
    model = ScriptedModel()
    agent = build_agent(rec, model, [mw, After()], extra_tools=asyncio.run(mw.list_tools()))
    agent.model.context_size = 1_000  # far past AgentScope's 80 % trigger
    asyncio.run(run_turns(agent, model, rec, turns=slice(0, 2)))
    before = agent.state.model_dump_json()
    own = agent._compress_context_impl
    asyncio.run(agent.compress_context())
    assert seen and all(s == "after:None" for s in seen)
    assert agent.state.model_dump_json() == before and model.summaries == []
    assert agent._compress_context_impl == own and "_compress_context_impl" not in agent.__dict__
