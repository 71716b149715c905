"""LangChain v1: CtxwiseMiddleware inside create_agent, driven by the agent's own loop.

The model is scripted (it plays back the assistant turns recorded in tau2-bench retail
sessions, tool calls included) and the tools return the recorded results; the rest is the real
LangChain agent loop and LangGraph checkpointers, at a 4,000-token (o200k) budget. Kinds of
fault covered: compaction that never fires inside a framework; a request the provider would
reject (wire shape and pairing); the framework's record losing messages; clears that are
re-done differently on every call (langchain#37815, ContextEditingMiddleware persists nothing);
a resumed checkpoint sending a different request than the uninterrupted run.
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

from langchain.agents import create_agent  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage, convert_to_openai_messages  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402

from ctxwise import ContextManager, Policy  # noqa: E402
from ctxwise.integrations.langchain import CtxwiseMiddleware  # noqa: E402
from ctxwise.providers import check_wire  # noqa: E402
from ctxwise.tokens import get_counter  # noqa: E402
from langchain_agent import ScriptedChatModel, as_ai_message, recorded_tools, run_turns  # noqa: E402
from playback import recordings  # noqa: E402

BUDGET = 4000


def policy(**kw) -> Policy:
    return Policy.preset("default", budget=BUDGET, unit="tokens", tokenizer="o200k_base", provider="openai", **kw)


def to_wire(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    """What an OpenAI chat model integration sends for these LangChain messages: LangChain's
    OpenAI conversion, with tool messages reduced to role / content / tool_call_id as
    langchain-openai sends them (it drops ``name`` there)."""
    out = []
    for d in convert_to_openai_messages(messages):
        if d.get("role") == "tool":
            d = {k: d[k] for k in ("role", "content", "tool_call_id")}
        out.append(d)
    return out


def build(rec, tmp_path: Path, *, checkpointer=None, name: str = "ctx", **kw):
    cm = ContextManager(f"sqlite:///{tmp_path / (name + '.db')}", policy(**kw))
    mw = CtxwiseMiddleware(cm, user_id="u1")
    model = ScriptedChatModel()
    agent = create_agent(model, recorded_tools(rec), system_prompt=rec.system, middleware=[mw],
                         checkpointer=checkpointer or InMemorySaver())
    return cm, mw, model, agent


@pytest.fixture
def recs():
    return recordings(n=2)


def test_compaction_fires_every_request_valid_and_the_state_keeps_every_message(recs, tmp_path):
    # kinds: compaction inside the framework; wire validity of what the model receives; nothing lost
    rec = recs[0]
    # a 10 % summary target (the default is 9 %): on this recording the default's smaller
    # summaries leave no result to clear, and the test is about what the framework sends and
    # keeps when results are cleared and turns summarized, not about the engine's choice
    cm, mw, model, agent = build(rec, tmp_path, summary_target=0.1)
    config = {"configurable": {"thread_id": "t-main"}}
    run_turns(agent, model, rec, config)
    state = agent.get_state(config).values
    session = mw.session(state)
    stages = {e["stage"] for e in session.events()}
    assert "summarizing" in stages, stages  # the cheaper cut over the hard limit, on this recording

    counter = get_counter("o200k_base")
    assert len(model.seen) == sum(len(t.assistant) for t in rec.turns)
    sizes = []
    for call, sent in enumerate(model.seen):
        wire = to_wire(sent)
        assert check_wire(wire, "openai") == [], call
        sizes.append(counter.count_text(json.dumps(wire, ensure_ascii=False)))
    full = counter.count_text(json.dumps(to_wire([model.seen[0][0], *state["messages"]]), ensure_ascii=False))
    assert max(sizes) < full  # what was sent is smaller than the uncompacted history

    # the agent's own record: every recorded message, tool results verbatim
    msgs = state["messages"]
    expected = len(rec.opening) + sum(1 + len(t.assistant) + sum(len(m.tool_uses) for m in t.assistant)
                                      for t in rec.turns)
    assert len(msgs) == expected
    results = [m for m in msgs if isinstance(m, ToolMessage)]
    assert results and all(m.content in rec.results.texts for m in results)
    last_sent = {c.tool_call_id: c.content for s in model.seen for c in s if isinstance(c, ToolMessage)}
    assert any(last_sent.get(m.tool_call_id) != m.content for m in results)  # the model got a placeholder


def test_a_cleared_result_is_sent_byte_identical_on_every_later_call(recs, tmp_path):
    # kind: clears re-done on every call (langchain#37815): ctxwise's clear is persisted once
    rec = recs[0]
    cm, mw, model, agent = build(rec, tmp_path, summary_target=0.1)  # clears made (see above)
    run_turns(agent, model, rec, {"configurable": {"thread_id": "t-stable"}})
    history: dict[str, list[str]] = {}
    for sent in model.seen:
        for m in sent:
            if isinstance(m, ToolMessage):
                h = history.setdefault(m.tool_call_id, [])
                if not h or h[-1] != m.content:
                    h.append(m.content)
    changed = {k: v for k, v in history.items() if len(v) > 1}
    assert changed, "a 4,000-token budget must clear some results"
    assert all(len(v) == 2 for v in changed.values()), changed  # cleared once, then the same bytes


def _first_request_of_next_turn(agent, model, rec, config, k) -> str:
    before = len(model.seen)
    run_turns(agent, model, rec, config, first=False, turns=slice(k, k + 1))
    return json.dumps(to_wire(model.seen[before]), ensure_ascii=False)


def _snapshot(src: Path, dst: Path) -> None:
    """A consistent copy of a SQLite database, committed WAL content included."""
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)


def test_sqlite_checkpoint_resume_sends_the_same_next_request(recs, tmp_path):
    # kind: a resumed thread (new process objects, same checkpoint and store) diverging
    rec = recs[1]
    k = len(rec.turns) - 2
    ckpt = tmp_path / "ckpt.sqlite"
    conn = sqlite3.connect(ckpt, check_same_thread=False)
    cm, mw, model, agent = build(rec, tmp_path, checkpointer=SqliteSaver(conn), name="run")
    config = {"configurable": {"thread_id": "t-resume"}}
    run_turns(agent, model, rec, config, turns=slice(0, k))
    assert any(e["stage"] in ("clearing", "summarizing", "trimming") for e in mw.session(agent.get_state(config).values).events())
    # snapshot both records (checkpoints and ctxwise store) as a crash right here would leave them
    _snapshot(ckpt, tmp_path / "ckpt2.sqlite")
    _snapshot(tmp_path / "run.db", tmp_path / "resumed.db")
    expected = _first_request_of_next_turn(agent, model, rec, config, k)
    conn.close()
    cm.close()

    conn2 = sqlite3.connect(tmp_path / "ckpt2.sqlite", check_same_thread=False)
    rec = recordings(n=2)[1]  # its own recorded results
    cm2, mw2, model2, agent2 = build(rec, tmp_path, checkpointer=SqliteSaver(conn2), name="resumed")
    got = _first_request_of_next_turn(agent2, model2, rec, config, k)
    assert got == expected
    conn2.close()
    cm2.close()


def test_async_agent_sends_the_same_requests_as_the_sync_agent(recs, tmp_path):
    # kind: awrap_model_call drifting from wrap_model_call
    rec = recs[1]
    _, _, model_a, agent_a = build(rec, tmp_path, name="sync")
    run_turns(agent_a, model_a, rec, {"configurable": {"thread_id": "t"}}, turns=slice(0, 6))

    rec = recordings(n=2)[1]  # its own recorded results (the sync run consumed the first copy's)
    _, _, model_b, agent_b = build(rec, tmp_path, name="async")

    async def drive() -> None:
        for k, turn in enumerate(rec.turns[:6]):
            model_b.script = [as_ai_message(m) for m in turn.assistant]
            new: list[Any] = [as_ai_message(m) for m in rec.opening] if k == 0 else []
            new.append({"role": "user", "content": turn.user})
            await agent_b.ainvoke({"messages": new}, {"configurable": {"thread_id": "t"}})

    asyncio.run(drive())
    assert [json.dumps(to_wire(s)) for s in model_b.seen] == [json.dumps(to_wire(s)) for s in model_a.seen]


def test_import_ctxwise_does_not_import_langchain_and_a_missing_extra_is_named():
    # kind: an optional framework made mandatory, or a raw ImportError for a missing extra
    code = ("import sys, ctxwise\n"
            "assert 'langchain' not in sys.modules and 'langgraph' not in sys.modules\n"
            "sys.modules['langchain'] = None\n"
            "try:\n    import ctxwise.integrations.langchain\n"
            "except ctxwise.MissingExtra as e:\n    print(e.hint)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "pip install 'ctxwise[langchain]'"


def test_a_thread_whose_record_does_not_match_the_store_is_refused(recs, tmp_path):
    # kind: a checkpoint resumed on a ctxwise store that lacks its history: it would silently
    # send a wrong context
    from ctxwise import SessionConflict

    rec = recs[0]
    conn = sqlite3.connect(tmp_path / "ckpt.sqlite", check_same_thread=False)
    cm, mw, model, agent = build(rec, tmp_path, checkpointer=SqliteSaver(conn), name="a")
    config = {"configurable": {"thread_id": "t"}}
    run_turns(agent, model, rec, config, turns=slice(0, 3))

    # the same checkpoints, an empty ctxwise store
    cm2, mw2, model2, agent2 = build(recordings(n=1)[0], tmp_path, checkpointer=SqliteSaver(conn), name="b")
    with pytest.raises(SessionConflict, match="not the one it was saved with"):
        run_turns(agent2, model2, rec, config, first=False, turns=slice(3, 4))
    assert model2.seen == []
    conn.close()


def branched(cm, user_id="u1"):
    """The ``branched`` events of every session of ``user_id`` in ``cm``'s store, by session id."""
    out = {}
    for info in cm.store.list_sessions(user_id):
        sid = info.session_id
        evs = [e for e in cm.session(user_id, sid).events() if e["stage"] == "branched"]
        if evs:
            out[sid] = evs
    return out


def test_a_reused_thread_id_without_its_checkpoints_is_a_fresh_conversation_on_a_new_branch(recs, tmp_path):
    # kind: plain LangGraph treats an invoke without a checkpointer (or with its checkpoints
    # gone) as a fresh conversation; ctxwise raised SessionConflict on the same thread_id, or
    # would send the old conversation with the new question
    rec = recs[0]
    cm = ContextManager(f"sqlite:///{tmp_path / 'fresh.db'}", policy())
    mw = CtxwiseMiddleware(cm, user_id="u1")
    model = ScriptedChatModel()
    agent = create_agent(model, recorded_tools(rec), system_prompt=rec.system, middleware=[mw])  # no checkpointer
    config = {"configurable": {"thread_id": "t"}}
    run_turns(agent, model, rec, config, turns=slice(0, 1))
    first_run = len(model.seen)
    run_turns(agent, model, rec, config, first=False, turns=slice(1, 2))
    again = model.seen[first_run]
    # the second invoke's first call got exactly what plain LangGraph sends: its own input only
    assert [m.type for m in again] == ["system", "human"] and again[1].content == rec.turns[1].user
    evs = branched(cm)
    assert len(evs) == 1
    (sid, [ev]), = evs.items()
    assert sid.startswith("t:ctxwise~") and ev["detail"]["parent"] == "t:ctxwise"
    assert "fresh run" in ev["trigger"]


def test_a_model_call_that_fails_after_the_append_is_retried_with_the_same_request(tmp_path):
    # kind: the ctxwise store ahead of the checkpoint (the model call failed after ctxwise stored
    # the new messages): the retried call must not append them twice nor send another request
    rec = recordings(n=2)[1]
    cm, mw, model, agent = build(rec, tmp_path, name="ok")
    run_turns(agent, model, rec, {"configurable": {"thread_id": "t"}}, turns=slice(0, 4))

    class Flaky(ScriptedChatModel):
        fail_at: int = -1

        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            if len(self.seen) == self.fail_at:
                self.fail_at = -1
                self.seen.append(list(messages))
                raise ConnectionError("the provider hung up")
            return super()._generate(messages, stop, run_manager, **kwargs)

    rec2 = recordings(n=2)[1]
    cm2 = ContextManager(f"sqlite:///{tmp_path / 'flaky.db'}", policy())
    flaky = Flaky(fail_at=len(model.seen) - 2)
    agent2 = create_agent(flaky, recorded_tools(rec2), system_prompt=rec2.system,
                          middleware=[CtxwiseMiddleware(cm2, user_id="u1")], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    with pytest.raises(ConnectionError):
        run_turns(agent2, flaky, rec2, config, turns=slice(0, 4))
    failed_at = len(flaky.seen)
    script = flaky.script
    agent2.invoke(None, config)  # LangGraph resumes the failed step from the last checkpoint
    retried = flaky.seen[failed_at]
    assert json.dumps(to_wire(retried)) == json.dumps(to_wire(flaky.seen[failed_at - 1]))  # same request again
    assert json.dumps(to_wire(retried)) == json.dumps(to_wire(model.seen[failed_at - 1]))  # as the run without failure
    assert script is flaky.script


def test_reasoning_and_thinking_content_blocks_do_not_break_the_thread():
    # kind: an AIMessage whose content carries reasoning (ChatOpenAI Responses mode) or Anthropic
    # thinking blocks made every later call of the thread raise FormatError ("unknown block type
    # 'reasoning'"); they are read as the message's reasoning, and the thread goes on.
    import uuid

    from langchain.agents import create_agent
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langgraph.checkpoint.memory import InMemorySaver

    from ctxwise import ContextManager, Policy
    from ctxwise.integrations.langchain import CtxwiseMiddleware

    class Reasoner(BaseChatModel):
        seen: list = []

        @property
        def _llm_type(self) -> str:
            return "scripted-reasoner"

        def bind_tools(self, tools, **kw):
            return self

        def _generate(self, messages, stop=None, run_manager=None, **kw):
            self.seen.append(list(messages))
            content = [{"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "think"}]},
                       {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                       {"type": "text", "text": f"answer {len(self.seen)}"}]
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content=content))])

    cm = ContextManager("memory://", Policy(budget=4000, unit="chars", provider="openai"))
    model = Reasoner()
    agent = create_agent(model, [], system_prompt="sys", middleware=[CtxwiseMiddleware(cm, user_id="u")],
                         checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": str(uuid.uuid4())}}
    for k in range(3):
        out = agent.invoke({"messages": [HumanMessage(f"turn {k}")]}, cfg)
        assert out["messages"][-1].content[-1]["text"] == f"answer {k + 1}"
    assert len(model.seen) == 3 and len(model.seen[-1]) == 6  # system, 3 user turns, 2 earlier replies


def test_anthropic_thinking_signatures_and_redacted_thinking_survive_the_round_trip(tmp_path):
    # kind: provider-opaque reasoning data lost when an AIMessage's content blocks are read
    # through the chat shape: a langchain_anthropic reply's thinking block kept its text but not
    # its `signature` (and a `redacted_thinking` block broke the read), so the next Anthropic
    # request would not carry the latest assistant thinking byte-identical and be rejected
    # ("Invalid `signature` in `thinking` block"). The rendered anthropic payload is checked with
    # the wire check, and each block must come back exactly as the model returned it, also in
    # the tool loop (the assistant message with the tool_use is the latest one).
    import uuid

    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool

    thinking = {"type": "thinking", "thinking": "The user wants the order status; look it up.",
                "signature": "EqQBCkgIARABGAIiQL1Zk2b+Lq0w/Xy=="}
    redacted = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP=="}
    later = {"type": "thinking", "thinking": "The lookup says shipped.", "signature": "ErUBCkYIAxgCIkDQ8s=="}
    replies = [
        AIMessage(content=[thinking, redacted, {"type": "text", "text": "Let me look it up."},
                           {"type": "tool_use", "id": "toolu_01", "name": "order_status", "input": {"order": "#W1"}}],
                  tool_calls=[{"id": "toolu_01", "name": "order_status", "args": {"order": "#W1"}}]),
        AIMessage(content=[later, {"type": "text", "text": "It has shipped."}]),
        AIMessage(content=[{"type": "text", "text": "You are welcome."}]),
    ]

    class AnthropicShaped(BaseChatModel):
        seen: list = []
        script: list = []

        @property
        def _llm_type(self) -> str:
            return "scripted-anthropic"

        def bind_tools(self, tools, **kw):
            return self

        def _generate(self, messages, stop=None, run_manager=None, **kw):
            self.seen.append(list(messages))
            payloads.append(mw.last_prepared.payload)  # what ctxwise rendered and checked for this call
            return ChatResult(generations=[ChatGeneration(message=self.script.pop(0))])

    @tool
    def order_status(order: str) -> str:
        """The status of an order."""
        return f"{order}: shipped"

    cm = ContextManager(f"sqlite:///{tmp_path / 'a.db'}", Policy(budget=8000, unit="tokens", tokenizer="o200k_base",
                                                                 provider="anthropic"))
    mw = CtxwiseMiddleware(cm, user_id="u1")
    model = AnthropicShaped(script=list(replies))
    agent = create_agent(model, [order_status], system_prompt="You help with orders.", middleware=[mw],
                         checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": str(uuid.uuid4())}}
    payloads: list = []
    for text in ("Where is order #W1?", "Thanks!"):
        agent.invoke({"messages": [HumanMessage(text)]}, cfg)
    assert len(model.seen) == len(payloads) == 3

    def assistant_content(payload):
        return [m["content"] for m in payload["messages"] if m["role"] == "assistant"]

    for payload in payloads:
        assert check_wire(payload, "anthropic") == []
    # the call after the tool result (the tool loop): the latest assistant message is the tool_use one
    assert assistant_content(payloads[1])[-1][:2] == [thinking, redacted]
    first = assistant_content(payloads[-1])[0]
    assert first[0] == thinking and first[1] == redacted  # byte for byte, signature and data kept
    assert assistant_content(payloads[-1])[1][0] == later
    # and the view the model got passes the LangChain messages on with those blocks
    sent = [m for m in model.seen[-1] if isinstance(m, AIMessage)]
    assert thinking in sent[0].content and redacted in sent[0].content and later in sent[1].content


def test_a_fork_from_an_earlier_checkpoint_goes_on_as_a_new_branch_without_the_other_branch(recs, tmp_path):
    # kind: the ctxwise session went on past the checkpoint being resumed (LangGraph time
    # travel): the abandoned branch's call and result were sent with the new question, then
    # SessionConflict refused it; the state is the truth, so ctxwise follows it on a new branch
    rec = recs[0]
    cm, mw, model, agent = build(rec, tmp_path, name="fork")
    config = {"configurable": {"thread_id": "t"}}
    run_turns(agent, model, rec, config, turns=slice(0, 3))
    done = [h for h in agent.get_state_history(config) if not h.next and h.values.get("messages")]
    latest, earlier = len(done[0].values["messages"]), done[-1]
    assert len(earlier.values["messages"]) < latest
    sent = len(model.seen)
    model.script = [AIMessage(content="an answer on the new branch")]
    out = agent.invoke({"messages": [{"role": "user", "content": "a different question"}]}, earlier.config)
    assert len(model.seen) == sent + 1
    # the model got the earlier checkpoint's messages and the new question, nothing of the rest
    want = [*earlier.values["messages"], out["messages"][-2]]
    assert [m.id for m in model.seen[-1][1:] if m.id != "ctxwise-user-memory"] == [m.id for m in want]
    assert check_wire(to_wire(model.seen[-1]), "openai") == []
    evs = branched(cm)
    assert len(evs) == 1 and "earlier checkpoint" in next(iter(evs.values()))[0]["trigger"]
    # and the thread goes on on that branch: the next turn is no new branch
    state = agent.get_state(config).values
    assert mw.record(state)["session_id"] == next(iter(evs))
    model.script = [AIMessage(content="and another")]
    agent.invoke({"messages": [{"role": "user", "content": "one more"}]}, config)
    assert len(branched(cm)) == 1


def _failing_tools(rec, fail: dict[str, int]):
    """The recorded tools, where ``fail[name]`` calls of that tool raise a plain exception (not
    a ToolException: ToolNode's default handler lets it out of ``invoke``)."""
    from langchain_core.tools import StructuredTool

    out = []
    for t in recorded_tools(rec):
        def run(_t=t, **kwargs):
            if fail.get(_t.name, 0) > 0:
                fail[_t.name] -= 1
                raise RuntimeError(f"{_t.name}: the backend is down")
            return _t.func(**kwargs)

        out.append(StructuredTool.from_function(func=run, name=t.name, description=t.description,
                                                args_schema=t.args_schema))
    return out


def _checked_turns(agent, model, mw, rec, config, turns, *, use_async=False):
    """Play ``turns``; every request ctxwise checked for the model passes the wire check."""
    payloads = []
    for k, turn in zip(range(turns.start, turns.stop), rec.turns[turns]):
        model.script = [as_ai_message(m) for m in turn.assistant]
        new = [as_ai_message(m) for m in rec.opening] if k == 0 else []
        new.append({"role": "user", "content": turn.user})
        before = len(model.seen)
        if use_async:
            asyncio.run(agent.ainvoke({"messages": new}, config))
        else:
            agent.invoke({"messages": new}, config)
        assert len(model.seen) > before
        payloads.append(mw.last_prepared.payload)
        assert check_wire(mw.last_prepared.payload, "openai") == []
    return payloads


@pytest.mark.parametrize("variant", ["sync", "async", "sqlite-resumed", "twice", "recursion-limit"])
def test_a_tool_raising_out_of_invoke_does_not_leave_the_thread_stuck(variant, tmp_path):
    # kind: a tool call recorded without its result (the tool raised out of invoke, the run
    # was cancelled): every later call of the thread was refused (dangling call) and nothing
    # could close it. Now the next invoke closes the unanswered calls with an explicit
    # interruption result (an `interrupted` event), and the thread goes on.
    rec = recordings(n=2)[0]
    k = next(i for i, t in enumerate(rec.turns) if i > 0 and t.assistant[0].tool_uses)
    name = rec.turns[k].assistant[0].tool_uses[0].name
    fail = {name: 2 if variant == "twice" else 0 if variant == "recursion-limit" else 1}
    conn = sqlite3.connect(tmp_path / "ckpt.sqlite", check_same_thread=False) if variant == "sqlite-resumed" else None
    cm = ContextManager(f"sqlite:///{tmp_path / 'f.db'}", policy())
    mw = CtxwiseMiddleware(cm, user_id="u1")
    model = ScriptedChatModel()
    agent = create_agent(model, _failing_tools(rec, fail), system_prompt=rec.system, middleware=[mw],
                         checkpointer=SqliteSaver(conn) if conn else InMemorySaver())
    config = {"configurable": {"thread_id": "t-fail"}}
    use_async = variant == "async"
    _checked_turns(agent, model, mw, rec, config, slice(0, k), use_async=use_async)
    tries = 2 if variant == "twice" else 1
    for t in range(tries):  # a retry's reply gets its own ids (add_messages replaces a message by id)
        model.script = [as_ai_message(m.model_copy(update={"id": f"{m.id}-try{t}"})) for m in rec.turns[k].assistant]
        call = {"messages": [{"role": "user", "content": rec.turns[k].user}]}
        if variant == "recursion-limit":  # the run stops after the model's call, before the tools
            from langgraph.errors import GraphRecursionError

            with pytest.raises(GraphRecursionError):
                agent.invoke(call, {**config, "recursion_limit": 1})
            continue
        with pytest.raises(RuntimeError, match="the backend is down"):
            asyncio.run(agent.ainvoke(call, config)) if use_async else agent.invoke(call, config)
    if variant == "sqlite-resumed":  # a new process: new middleware and agent on the same records
        cm.close()
        cm = ContextManager(f"sqlite:///{tmp_path / 'f.db'}", policy())
        mw = CtxwiseMiddleware(cm, user_id="u1")
        agent = create_agent(model, _failing_tools(rec, fail), system_prompt=rec.system, middleware=[mw],
                             checkpointer=SqliteSaver(conn))
    _checked_turns(agent, model, mw, rec, config, slice(k + 1, k + 3), use_async=use_async)

    state = agent.get_state(config).values
    session = mw.session(state)
    closed = [e for e in session.events() if e["stage"] == "interrupted"]
    assert len(closed) == tries
    # the model got an explicit error result for each unanswered call, never a dangling call
    sent = [m for m in model.seen[-2] if isinstance(m, ToolMessage) and m.content.startswith("interrupted:")]
    assert len(sent) == tries and all(m.status == "error" for m in sent)
    # the agent's own record is untouched: the calls stay unanswered there, nothing was added
    msgs = state["messages"]
    unanswered = []
    for i, m in enumerate(msgs):
        after = []
        for x in msgs[i + 1:]:
            if not isinstance(x, ToolMessage):
                break
            after.append(x.tool_call_id)
        unanswered += [c["id"] for c in getattr(m, "tool_calls", None) or [] if c["id"] not in after]
    assert len(unanswered) == tries
    if conn is not None:
        conn.close()


def test_calls_langchain_answers_itself_keep_their_error_state(tmp_path):
    # kind: what LangChain does with a failing call, in its shapes: a tool error handled by the
    # tool (ToolException -> ToolMessage status="error"), a call with malformed arguments
    # (create_agent answers it with an error ToolMessage: it was refused as an orphan result),
    # and parallel calls of which one raises out of invoke (both closed as interrupted)
    import uuid

    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import ToolException, tool

    class Model(BaseChatModel):
        script: list = []

        @property
        def _llm_type(self) -> str:
            return "scripted-failures"

        def bind_tools(self, tools, **kw):
            return self

        def _generate(self, messages, stop=None, run_manager=None, **kw):
            reply = self.script.pop(0) if self.script else AIMessage(content="Done.")
            return ChatResult(generations=[ChatGeneration(message=reply)])

    @tool
    def lookup(order: str) -> str:
        """Look an order up."""
        raise ToolException(f"order {order} not found")

    lookup.handle_tool_error = True

    @tool
    def refund(order: str) -> str:
        """Refund an order."""
        if order == "#W2":
            raise ConnectionError("payments backend down")
        return f"refunded {order}"

    cm = ContextManager(f"sqlite:///{tmp_path / 'e.db'}", Policy(budget=4000, unit="tokens", tokenizer="o200k_base",
                                                                 provider="openai"))
    mw = CtxwiseMiddleware(cm, user_id="u1")
    model = Model()
    agent = create_agent(model, [lookup, refund], system_prompt="You help with orders.", middleware=[mw],
                         checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": str(uuid.uuid4())}}
    model.script = [AIMessage(content="", tool_calls=[{"id": "c1", "name": "lookup", "args": {"order": "#W1"}}]),
                    AIMessage(content="", invalid_tool_calls=[{"id": "c2", "name": "refund", "args": "{\"order\": ",
                                                                "error": "truncated", "type": "invalid_tool_call"}])]
    agent.invoke({"messages": [HumanMessage("Where is #W1?")]}, cfg)
    model.script = [AIMessage(content="", tool_calls=[{"id": "c3", "name": "refund", "args": {"order": "#W1"}},
                                                      {"id": "c4", "name": "refund", "args": {"order": "#W2"}}])]
    with pytest.raises(ConnectionError):
        agent.invoke({"messages": [HumanMessage("Refund #W1 and #W2")]}, cfg)
    agent.invoke({"messages": [HumanMessage("Did it work?")]}, cfg)

    session = mw.session(agent.get_state(cfg).values)
    assert check_wire(mw.last_prepared.payload, "openai") == []
    results = {r.tool_use_id: r for m in session.messages for r in m.tool_results}
    assert set(results) == {"c1", "c2", "c3", "c4"}
    assert all(r.state == "error" for r in results.values())
    assert results["c1"].text == "order #W1 not found"
    assert results["c3"].text.startswith("interrupted:") and results["c4"].text.startswith("interrupted:")
    assert [e["detail"]["tool_use_ids"] for e in session.events() if e["stage"] == "interrupted"] == [["c3", "c4"]]


def test_an_empty_system_prompt_is_not_a_message_and_the_run_goes_on():
    # kind: create_agent(system_prompt="") put an empty system message first in the session and
    # every call raised PayloadInvalid [empty-content]; an empty prompt is no message, as in LangChain.
    import uuid

    from langchain_core.messages import AIMessage, HumanMessage

    cm = ContextManager("memory://", Policy(budget=4000, unit="chars", provider="openai"))
    model = ScriptedChatModel(script=[AIMessage(content="one"), AIMessage(content="two")])
    mw = CtxwiseMiddleware(cm, user_id="u")
    agent = create_agent(model, [], system_prompt="", middleware=[mw], checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": str(uuid.uuid4())}}
    assert agent.invoke({"messages": [HumanMessage("hi")]}, cfg)["messages"][-1].content == "one"
    assert agent.invoke({"messages": [HumanMessage("again")]}, cfg)["messages"][-1].content == "two"
    roles = [m["role"] for m in mw.last_prepared.payload]
    assert roles == ["user", "assistant", "user"]


def test_messages_removed_or_corrected_in_the_state_are_followed_on_a_new_branch(recs, tmp_path):
    # kind: the framework's record changed under ctxwise (RemoveMessage, update_state with the
    # same id): ctxwise raised SessionConflict for a removal, and ignored a correction (the model
    # kept getting the stored original)
    from langchain_core.messages import HumanMessage, RemoveMessage

    rec = recs[0]
    cm, mw, model, agent = build(rec, tmp_path, name="edit")
    config = {"configurable": {"thread_id": "t"}}
    run_turns(agent, model, rec, config, turns=slice(0, 2))
    humans = [m for m in agent.get_state(config).values["messages"] if isinstance(m, HumanMessage)]
    first, second = humans[0], humans[1]

    agent.update_state(config, {"messages": [HumanMessage(id=first.id, content="the corrected first question")]})
    model.script = [AIMessage(content="ok")]
    agent.invoke({"messages": [{"role": "user", "content": "next"}]}, config)
    sent = {m.id: m for m in model.seen[-1]}
    assert sent[first.id].content == "the corrected first question"
    assert len(branched(cm)) == 1

    agent.update_state(config, {"messages": [RemoveMessage(id=second.id)]})
    model.script = [AIMessage(content="ok again")]
    agent.invoke({"messages": [{"role": "user", "content": "and next"}]}, config)
    ids = [m.id for m in model.seen[-1]]
    assert second.id not in ids and first.id in ids
    assert check_wire(to_wire(model.seen[-1]), "openai") == []
    evs = branched(cm)
    assert len(evs) == 2 and all("corrected or removed" in e[0]["trigger"] for e in evs.values())
    # the branch the record follows holds the state's messages, the correction included
    state = agent.get_state(config).values
    session = mw.session(state)
    assert session.session_id == mw.record(state)["session_id"] and session.session_id in evs
    assert second.id not in [m.id for m in session.messages]
