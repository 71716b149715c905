"""pytest plugin (``-p ctxwise_langchain_plugin``): every ``create_agent`` of LangChain's own
tests gets a :class:`ctxwise.integrations.langchain.CtxwiseMiddleware`.

Where it goes in the middleware list: ``CTXWISE_SUITE_POSITION`` = ``last`` (default: after
the test's own middlewares, nearest the model) or ``first``. The budget: ``CTXWISE_SUITE_BUDGET``
characters (default 10,000,000: nothing is ever compacted, so a failure is ctxwise being visible;
a small budget makes compaction fire, and each request and the thread's record are checked:
:mod:`budget_check`). User memory is off and the recall tool is not registered
(the tests count the agent's tools). Each agent gets its own ctxwise user in one store per
test session (:data:`STORE`), so thread ids the tests reuse never meet.

The patch replaces ``create_agent`` in ``langchain.agents`` and ``langchain.agents.factory``
when the plugin is imported, before any test module imports it by name.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

import langchain.agents as agents_pkg
from langchain.agents import factory

from ctxwise import ContextManager, Policy
from ctxwise.integrations.langchain import CtxwiseMiddleware

POSITION = os.environ.get("CTXWISE_SUITE_POSITION", "last")
import budget_check
from budget_check import BUDGET

STORE = os.environ.get("CTXWISE_SUITE_STORE", "memory://")
"""The ctxwise store: ``memory://`` by default. LangChain's conftest runs every test under
``blockbuster``, which makes any blocking call on an event-loop thread an error, and several
async tests call the sync ``agent.invoke`` inside their loop: a SQLite store's file I/O is then
an error that has nothing to do with what the test checks (``CTXWISE_SUITE_STORE=sqlite:///...``
runs it on SQLite all the same)."""
if POSITION not in ("first", "last"):
    raise SystemExit(f"CTXWISE_SUITE_POSITION must be first or last, got {POSITION!r}")

_original = factory.create_agent
_manager: ContextManager | None = None
created: list[CtxwiseMiddleware] = []
"""Every middleware the patch added, in order (a test's own checks can look at them)."""


def manager() -> ContextManager:
    """One ctxwise store for the test session (a SQLite file in a temp dir)."""
    global _manager
    if _manager is None:
        policy = Policy(budget=BUDGET, unit="chars", provider="openai", user_memory=False)
        _manager = ContextManager(STORE, policy)
    return _manager


class CheckedMiddleware(CtxwiseMiddleware):
    """:class:`CtxwiseMiddleware` that, at a small budget, checks each request it prepares
    (:func:`budget_check.request`) and the thread's record around each model call: the state's
    messages are the same, in number and content, before and after ctxwise's part of the call."""

    def _prepare(self, request: Any) -> Any:
        before = [m.content for m in (request.state or {}).get("messages", [])]
        out = super()._prepare(request)
        if budget_check.SMALL:
            budget_check.request(self.last_prepared, "openai", "create_agent model call")
            after = [m.content for m in (request.state or {}).get("messages", [])]
            budget_check.record(after == before, "create_agent model call", "state messages changed")
        return out


def create_agent(model: Any, tools: Any = None, *, middleware: Any = (), **kwargs: Any) -> Any:
    """LangChain's ``create_agent`` with ctxwise added to ``middleware`` (first or last)."""
    mw = CheckedMiddleware(manager(), user_id=f"suite-{uuid.uuid4().hex[:12]}", recall=False)
    created.append(mw)
    own = list(middleware or ())
    return _original(model, tools, middleware=[*own, mw] if POSITION == "last" else [mw, *own], **kwargs)


create_agent.__doc__ = _original.__doc__
factory.create_agent = create_agent  # type: ignore[assignment]
agents_pkg.create_agent = create_agent  # type: ignore[assignment]


def pytest_configure(config: Any) -> None:
    manager()  # the store is made before any test runs (an async test's loop sees no store setup)


def stages() -> dict[str, int]:
    """How many events of each stage the store holds, over every session of the run."""
    store, out = manager().store, {}  # type: ignore[var-annotated]
    for info in store.list_sessions(limit=1_000_000):
        for e in store.events(info.user_id, info.session_id):
            out[e["stage"]] = out.get(e["stage"], 0) + 1
    return out


def pytest_terminal_summary(terminalreporter: Any) -> None:
    terminalreporter.write_line(f"ctxwise events over {len(created)} agents: {stages()}")
    if budget_check.SMALL:
        terminalreporter.write_line(budget_check.summary())
        budget_check.write()


def pytest_report_header(config: Any) -> str:
    return f"ctxwise stands in: CtxwiseMiddleware {POSITION} in every create_agent, budget {BUDGET} chars"
