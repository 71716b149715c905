"""Several writers on one ctxwise session at once (issue 29): two ``CtxwiseSession`` objects on
one session in threads, and two LangChain invokes on one thread_id, each write either lands or
is retried after a reload (a lost race stores nothing), where before one raised SessionConflict."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from threadrun import run_threads

from ctxwise import ContextManager, Policy, SessionConflict

pytest.importorskip("agents")


def test_retry_races_retries_a_lost_race_and_raises_anything_else() -> None:
    from ctxwise.integrations._record import retry_races

    calls: list[int] = []

    def lose_twice() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise SessionConflict("another writer got in first")
        return "written"

    assert retry_races(lose_twice, lambda: True, backoff_s=0.0) == "written" and len(calls) == 3
    calls.clear()
    with pytest.raises(SessionConflict):  # not a race (the store did not move): raised at once
        retry_races(lose_twice, lambda: False, backoff_s=0.0)
    assert len(calls) == 1
    calls.clear()
    with pytest.raises(SessionConflict):  # bounded: the last attempt's conflict is raised
        retry_races(lose_twice, lambda: True, attempts=2, backoff_s=0.0)
    assert len(calls) == 2


def test_two_session_objects_in_threads_store_every_item(tmp_path: Path) -> None:
    from ctxwise.integrations.openai_agents import CtxwiseSession

    cm = ContextManager(f"sqlite:///{tmp_path}/c.db", Policy(budget=10_000_000, unit="tokens", provider="openai_responses"))

    def worker(i: int) -> None:
        s = CtxwiseSession(cm.session("u", "multi"))
        for j in range(15):
            asyncio.run(s.add_items([{"role": "user", "content": f"q{i}.{j}"},
                                     {"role": "assistant", "content": f"a{i}.{j}"}]))

    assert run_threads(worker, 3) == []
    items = asyncio.run(CtxwiseSession(cm.session("u", "multi")).get_items())
    texts = sorted(str(it["content"]) for it in items)
    assert texts == sorted([f"q{i}.{j}" for i in range(3) for j in range(15)] + [f"a{i}.{j}" for i in range(3) for j in range(15)])


def test_two_langchain_invokes_on_one_thread_id_raise_nothing(tmp_path: Path) -> None:
    pytest.importorskip("langchain")
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from ctxwise.integrations.langchain import CtxwiseMiddleware

    cm = ContextManager(f"sqlite:///{tmp_path}/c.db", Policy(budget=10_000_000, unit="tokens", provider="openai"))
    model = GenericFakeChatModel(messages=iter([AIMessage(f"r{i}") for i in range(100)]))
    agent = create_agent(model, [], middleware=[CtxwiseMiddleware(cm, user_id="u", recall=False)],
                         checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "t"}}

    def worker(i: int) -> None:
        for j in range(6):
            agent.invoke({"messages": [HumanMessage(f"w{i}.{j}")]}, cfg)

    assert run_threads(worker, 2) == []
    out = agent.invoke({"messages": [HumanMessage("later, alone")]}, cfg)
    assert out["messages"][-1].content.startswith("r")
