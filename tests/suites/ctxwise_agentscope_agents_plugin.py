"""pytest plugin (``-p ctxwise_agentscope_agents_plugin``): every AgentScope ``Agent`` of the
vendored agent tests gets a :class:`ctxwise.integrations.agentscope.CtxwiseMiddleware` FIRST in
its ``middlewares`` (in front of the test's own), so every model call of the agent gets ctxwise's
view of ``agent.state.context`` instead of the record.

The budget: ``CTXWISE_SUITE_BUDGET`` characters (default 10,000,000: nothing is compacted, so a
failure is ctxwise being visible; a small budget makes compaction fire). User memory is off and
the recall tool is not registered (the tests count the agent's tools). Each agent gets its own
ctxwise user in one in-memory store (:data:`STORE`), so session ids the tests reuse never meet.

At a small budget (:mod:`budget_check`) every request ctxwise prepares is checked
(:func:`ctxwise.providers.check_wire`) and so is the agent's record: every message
``agent.state.context`` held before a model call is still there, in order, after it.

Each test's JUnit record gets the property ``ctxwise_stand_ins``: how many agents got ctxwise.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

import pytest
from agentscope.agent import Agent

from ctxwise import ContextManager, Policy
from ctxwise.integrations.agentscope import CtxwiseMiddleware

import budget_check
from budget_check import BUDGET

STORE = os.environ.get("CTXWISE_SUITE_STORE", "memory://")
PROPERTY = "ctxwise_stand_ins"

_manager = ContextManager(STORE, Policy(budget=BUDGET, unit="chars", provider="openai", user_memory=False))
_original_init = Agent.__init__
created: list[CtxwiseMiddleware] = []
"""Every middleware the patch added, in order."""


class CheckedMiddleware(CtxwiseMiddleware):
    """:class:`CtxwiseMiddleware` that, at a small budget, checks each request it prepares and
    the agent's record around each model call."""

    def _prepare(self, agent: Any, messages: list[Any], tools: list[dict[str, Any]]) -> Any:
        out = super()._prepare(agent, messages, tools)
        if budget_check.SMALL:
            budget_check.request(self.last_prepared, "openai", f"agent {agent.name}")
        return out

    async def on_model_call(self, agent: Any, input_kwargs: dict[str, Any], next_handler: Any) -> Any:
        before = [m.id for m in agent.state.context]
        out = await super().on_model_call(agent, input_kwargs, next_handler)
        if budget_check.SMALL:
            after = [m.id for m in agent.state.context]
            budget_check.record(after[:len(before)] == before, f"agent {agent.name}",
                                f"state.context ids {before} -> {after}")
        return out


def _init(self: Agent, *args: Any, middlewares: Any = None, **kwargs: Any) -> None:
    mw = CheckedMiddleware(_manager, user_id=f"suite-{uuid.uuid4().hex[:12]}")
    created.append(mw)
    _original_init(self, *args, middlewares=[mw, *(middlewares or [])], **kwargs)


Agent.__init__ = _init  # type: ignore[method-assign]


def warm_up() -> None:
    """Build a stand-in and prepare one request with it, on a manager of its own (so the
    suite's events and counts stay the tests'): ctxwise's one-time loading (imports, the
    tokenizer, the provider's rules) then happens here, before the first test, not inside a
    test that times its agent (an interrupt test cancels the reply after 0.05 s)."""
    from types import SimpleNamespace

    from agentscope.message import Msg, TextBlock, UserMsg
    from agentscope.state import AgentState

    manager = ContextManager("memory://", Policy(budget=BUDGET, unit="chars", provider="openai", user_memory=False))
    mw = CtxwiseMiddleware(manager, user_id="suite-warm-up")
    user = UserMsg("user", "Warm up.")
    agent = SimpleNamespace(name="warm-up", state=AgentState(session_id="warm-up", context=[user]))
    system = Msg(name="system", role="system", content=[TextBlock(text="You are a warm-up.")])
    mw._prepare(agent, [system, user], [])


def pytest_sessionstart(session: pytest.Session) -> None:
    """Warm ctxwise up before the first test (:func:`warm_up`)."""
    warm_up()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Start counting the agents this test builds."""
    item.stash[_START] = len(created)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    """Record how many agents got ctxwise (fixtures included) as a JUnit property."""
    item.user_properties.append((PROPERTY, len(created) - item.stash.get(_START, len(created))))


_START = pytest.StashKey[int]()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    store, out = _manager.store, {}  # type: ignore[var-annotated]
    for info in store.list_sessions(limit=1_000_000):
        for e in store.events(info.user_id, info.session_id):
            out[e["stage"]] = out.get(e["stage"], 0) + 1
    terminalreporter.write_line(f"ctxwise events over {len(created)} agents: {out}")
    if budget_check.SMALL:
        terminalreporter.write_line(budget_check.summary())
        budget_check.write()


def pytest_report_header(config: Any) -> str:
    return f"ctxwise stands in: CtxwiseMiddleware first in every Agent, budget {BUDGET} chars"
