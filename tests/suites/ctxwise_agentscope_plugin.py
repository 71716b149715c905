"""pytest plugin (``-p ctxwise_agentscope_plugin``): every AgentScope formatter formats what
ctxwise's middleware hands the model instead of the messages it is given.

For each ``format(msgs)`` call of a formatter class in ``agentscope.formatter``, the messages are
put through :meth:`ctxwise.integrations.agentscope.CtxwiseMiddleware.on_model_call` first, as
an agent holding them would (the first system message is the system prompt, the rest its
``state.context``), then formatted. At a small budget (:mod:`budget_check`) each request ctxwise
prepared is checked, and the context it was given must come out of the call unchanged. Budget: ``CTXWISE_SUITE_BUDGET`` characters (default
10,000,000: nothing is compacted, so a failure is ctxwise being visible); user memory off; one
fresh agent state (and so one fresh ctxwise session) per call, in an in-memory store.
"""

from __future__ import annotations

import contextvars
import inspect
from types import SimpleNamespace
from typing import Any

import agentscope.formatter as fmt
from agentscope.message import Msg
from agentscope.state import AgentState

from ctxwise import ContextManager, Policy
from ctxwise.integrations.agentscope import CtxwiseMiddleware

import budget_check
from budget_check import BUDGET

_manager = ContextManager("memory://", Policy(budget=BUDGET, unit="chars", provider="openai", user_memory=False))
_middleware = CtxwiseMiddleware(_manager, user_id="suite")
_inside: contextvars.ContextVar[bool] = contextvars.ContextVar("ctxwise_inside", default=False)


async def through_ctxwise(msgs: Any) -> Any:
    """What ctxwise's ``on_model_call`` hands the model for ``msgs`` (a system prompt first, then
    the context), or ``msgs`` itself when it is not a list of ``Msg``."""
    if not isinstance(msgs, list) or not msgs or not all(isinstance(m, Msg) for m in msgs):
        return msgs
    system = msgs[0] if msgs[0].role == "system" else None
    state = AgentState()
    state.context = list(msgs[1:] if system is not None else msgs)
    agent = SimpleNamespace(name="agent", state=state)
    got: list[Any] = []

    async def handler(messages: list[Any]) -> None:
        got.extend(messages)

    before = [m.model_dump_json() for m in state.context]
    await _middleware.on_model_call(agent, {"messages": list(msgs), "tools": []}, handler)
    if budget_check.SMALL:
        budget_check.request(_middleware.last_prepared, "openai", "formatter input")
        budget_check.record([m.model_dump_json() for m in state.context] == before, "formatter input",
                            "state.context changed by the model call")
    return got


def _wrap(cls: type) -> None:
    original = cls.__dict__["format"]

    async def format(self: Any, msgs: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: A001
        if _inside.get():
            return await original(self, msgs, *args, **kwargs)
        token = _inside.set(True)
        try:
            return await original(self, await through_ctxwise(msgs), *args, **kwargs)
        finally:
            _inside.reset(token)

    format.__doc__ = original.__doc__
    cls.format = format  # type: ignore[attr-defined]


for _name, _cls in vars(fmt).items():
    if inspect.isclass(_cls) and issubclass(_cls, fmt.FormatterBase) and "format" in _cls.__dict__ \
            and not inspect.isabstract(_cls):
        _wrap(_cls)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    store, out = _manager.store, {}  # type: ignore[var-annotated]
    for info in store.list_sessions(limit=1_000_000):
        for e in store.events(info.user_id, info.session_id):
            out[e["stage"]] = out.get(e["stage"], 0) + 1
    terminalreporter.write_line(f"ctxwise events: {out}")
    if budget_check.SMALL:
        terminalreporter.write_line(budget_check.summary())
        budget_check.write()


def pytest_report_header(config: Any) -> str:
    return f"ctxwise stands in: every AgentScope formatter formats CtxwiseMiddleware's view, budget {BUDGET} chars"
