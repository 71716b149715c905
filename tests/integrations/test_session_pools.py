"""Both middlewares keep their open sessions in one ctxwise.SessionPool (issue 24 item 4): bounded
by count and by bytes, locked (AgentScope's dict had no lock), and an agent run with a pool that
keeps nothing sends exactly the requests of one that keeps everything (a session read again from
the store is the same session). Real SQLite stores, AgentScope's own reply loop."""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "examples"))

from agentscope.state import AgentState  # noqa: E402

from agentscope_agent import ScriptedModel, build_agent, run_turns  # noqa: E402
from ctxwise import ContextManager, Policy, SessionPool, text_message  # noqa: E402
from ctxwise.integrations import agentscope, langchain  # noqa: E402
from playback import recordings  # noqa: E402


def manager(tmp_path: Path, name: str = "p") -> ContextManager:
    return ContextManager(f"sqlite:///{tmp_path / (name + '.db')}",
                          Policy.preset("default", budget=4000, unit="tokens", tokenizer="o200k_base", provider="openai"))


def lc_state(session_id: str) -> dict:
    return {"ctxwise": {"ctxwise": {"user_id": "u1", "session_id": session_id}}}


def as_state(session_id: str) -> AgentState:
    return AgentState(session_id=session_id)


MIDDLEWARES = [(langchain.CtxwiseMiddleware, lc_state), (agentscope.CtxwiseMiddleware, as_state)]


@pytest.mark.parametrize("make,state", MIDDLEWARES, ids=["langchain", "agentscope"])
def test_the_middlewares_pool_is_bounded_by_count_and_by_bytes(make, state, tmp_path):
    """Kind: an unbounded per-process dict of sessions (one per thread id ever seen)."""
    with manager(tmp_path) as cm:
        pool: SessionPool = SessionPool(max_entries=3, max_bytes=400_000)
        mw = make(cm, sessions=pool)
        assert mw.sessions is pool
        opened = [mw.session(state(f"t{i}")) for i in range(6)]
        assert len(pool) == 3 and all(s is not None for s in opened)
        # a session holding more than a quarter of the bytes is not kept; the next use reads it again
        heavy = mw.session(state("heavy"))
        heavy.append([text_message("big", "user", "x" * 200_000)])
        assert len(pool) == 3
        again = mw.session(state("heavy"))
        assert again is heavy  # served from the pool (weighed light when put), weighed again: dropped
        assert len(pool) == 2 and pool.held_bytes <= 400_000
        reread = mw.session(state("heavy"))
        assert reread is not heavy and reread.version == heavy.version
        assert [m.id for m in reread.messages] == [m.id for m in heavy.messages]


@pytest.mark.parametrize("make,state", MIDDLEWARES, ids=["langchain", "agentscope"])
def test_threads_opening_one_session_share_one_object(make, state, tmp_path):
    """Kind: a cache without a lock: two model calls of one agent on two worker threads each
    open their own copy, and the one left behind is stale."""
    with manager(tmp_path) as cm:
        mw = make(cm)
        got: list[object] = []
        barrier = threading.Barrier(8)

        def use() -> None:
            barrier.wait()
            got.append(mw.session(state("shared")))

        threads = [threading.Thread(target=use) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(got) == 8 and len({id(s) for s in got}) == 1 and len(mw.sessions) == 1


def test_an_agent_with_a_pool_that_keeps_nothing_sends_the_same_requests(tmp_path):
    """Kind: state kept only in the cached object (a session read again from the store would
    differ): with every session read again at every model call, the model sees the same requests."""
    seen = []
    for name, pool in (("kept", None), ("none", SessionPool(max_entries=0))):
        rec = recordings(n=1)[0]  # its recorded tools are used up by a run
        cm = manager(tmp_path, name)
        mw = agentscope.CtxwiseMiddleware(cm, user_id="u1", sessions=pool)
        model = ScriptedModel()
        agent = build_agent(rec, model, [mw], extra_tools=asyncio.run(mw.list_tools()))
        asyncio.run(run_turns(agent, model, rec, turns=slice(0, 4)))
        seen.append(model.seen)
        assert (len(mw.sessions) == 0) == (pool is not None)
        cm.close()
    assert seen[0] == seen[1] and len(seen[0]) >= 4
