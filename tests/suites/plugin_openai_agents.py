"""pytest plugin: the OpenAI Agents SDK's own tests with ``CtxwiseSession`` as their session store.

Loaded by ``tests/suites/runner.py openai_agents`` (``-p plugin_openai_agents``) inside the
extracted ``openai-agents`` sdist. At configure time it replaces

* ``SQLiteSession`` in ``agents``, ``agents.memory`` and ``agents.memory.sqlite_session``, and
* ``SimpleListSession`` / ``CountingSession`` / ``IdStrippingSession`` in the sdist's
  ``tests.utils.simple_session``

with stand-ins built on :class:`ctxwise.integrations.openai_agents.CtxwiseSession`, before any
test module is imported (so every ``from agents import SQLiteSession`` gets the stand-in). Each
stand-in is a real ctxwise session on a real SQLite store (a temp file for ``":memory:"``, the
given file for a ``db_path``) at a 10,000,000-char budget with user memory off: nothing can be
compacted, so the SDK must not be able to tell ctxwise is there. At a small budget
(``CTXWISE_SUITE_BUDGET``, :mod:`budget_check`) compaction fires, and each request a read
prepares and the record after each write are checked instead.

Each test's JUnit record gets the property ``ctxwise_stand_ins``: how many stand-ins it built.
The runner counts a failure of a test that built none as "n/a" (it never ran through ctxwise).
"""

from __future__ import annotations

import copy
import json
from collections import Counter
import os
import sys
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from ctxwise import ContextManager, Policy
from ctxwise.formats import plain
from ctxwise.integrations.openai_agents import CtxwiseSession

import budget_check
from budget_check import BUDGET

POLICY = Policy(budget=BUDGET, unit="chars", provider="openai_responses", user_memory=False)
PROPERTY = "ctxwise_stand_ins"

_managers: dict[str, ContextManager] = {}
_guard = threading.Lock()
_built = 0


def manager(db_path: str | Path) -> tuple[ContextManager, str]:
    """The ContextManager for ``db_path`` (one per file, shared like SQLite's file) and the user id
    to open sessions under: a fresh one per ``":memory:"`` session (each in-memory SQLiteSession
    is a database of its own), a fixed one for a file (sessions on one file share their ids)."""
    global _built
    with _guard:
        _built += 1
        key = str(db_path)
        memory = key == ":memory:"
        if memory:
            key = os.path.join(_tmpdir(), "memory.db")
        cm = _managers.get(key)
        if cm is None:
            cm = _managers[key] = ContextManager(f"sqlite:///{key}", POLICY)
        return cm, (f"mem-{uuid.uuid4().hex[:12]}" if memory else "agents-sdk")


_tmp: list[str] = []


def _tmpdir() -> str:
    if not _tmp:
        _tmp.append(tempfile.mkdtemp(prefix="ctxwise-oa-"))
    return _tmp[0]


def _key(item: Any) -> str:
    return json.dumps(item, sort_keys=True, ensure_ascii=False, default=str)


_shadow: dict[tuple[int, str, str], list[str]] = {}
"""At a small budget: per ctxwise session, the keys of the items the SDK wrote and did not pop
or clear, in order (what the record must hold)."""


class CheckedSession(CtxwiseSession):
    """:class:`CtxwiseSession` that, at a small budget (:mod:`budget_check`), checks every request
    a read prepares and, after every write, that the record (``get_items(limit=...)``: every item
    as written) still holds every item written and not popped or cleared."""

    def _where(self) -> tuple[int, str, str]:
        return (id(self.ctx.manager), self.ctx.user_id, self.session_id)

    def _check_record(self) -> None:
        """Every item written and not popped or cleared is still in the record (as written).
        The record may hold more: the interruption outputs ctxwise writes for calls a new run
        left unanswered, and items another object or thread wrote to the same session since."""
        want = Counter(_shadow.get(self._where(), []))
        got = Counter(_key(i) for i in self._synced(self._tail, 1 << 30))
        lost = want - got
        budget_check.record(not lost, f"session {self.session_id}",
                            f"{sum(lost.values())} written item(s) missing from the record: {list(lost)[:2]}")

    def _written_now(self, items: list[Any]) -> None:
        _shadow.setdefault(self._where(), []).extend(_key(plain(i)) for i in items)

    def _view(self) -> list[dict[str, Any]]:
        out = super()._view()
        if budget_check.SMALL and self.last_prepared is not None:
            budget_check.request(self.last_prepared, "openai_responses", f"session {self.session_id}")
        return out

    async def add_items(self, items: list[Any]) -> None:
        await super().add_items(items)
        if budget_check.SMALL:
            self._written_now(items)
            self._check_record()

    async def pop_item(self) -> Any:
        item = await super().pop_item()
        if budget_check.SMALL:
            keys = _shadow.get(self._where(), [])
            if item is not None and keys:
                keys.pop()
            self._check_record()
        return item

    async def clear_session(self) -> None:
        await super().clear_session()
        if budget_check.SMALL:
            _shadow[self._where()] = []
            self._check_record()


class SQLiteSessionStandIn(CheckedSession):
    """``agents.SQLiteSession``'s constructor over a ctxwise session (the table names are
    accepted and unused: ctxwise has its own schema)."""

    def __init__(self, session_id: str, db_path: str | Path = ":memory:", sessions_table: str = "agent_sessions",
                 messages_table: str = "agent_messages", session_settings: Any = None) -> None:
        cm, user = manager(db_path)
        super().__init__(cm.session(user, session_id), session_settings=session_settings)
        self.db_path = db_path

    def close(self) -> None:
        """SQLiteSession.close(): the shared store stays open for other sessions on the file."""


class SimpleListSessionStandIn(CheckedSession):
    """The sdist's ``tests.utils.simple_session.SimpleListSession`` constructor over a ctxwise
    session on its own in-memory database; ``saved_items`` is the record as written."""

    def __init__(self, session_id: str = "test", history: list[Any] | None = None) -> None:
        cm, user = manager(":memory:")
        super().__init__(cm.session(user, session_id))
        self._ignore_ids_for_matching = False
        if history:
            self._synced(self._add, [plain(i) for i in history])
            if budget_check.SMALL:
                self._written_now(history)

    @property
    def saved_items(self) -> list[Any]:
        """Every item of the record, as written (the SimpleListSession's list, read-only)."""
        return list(self._synced(self._tail, 1 << 30))


class CountingSessionStandIn(SimpleListSessionStandIn):
    """``CountingSession``: counts ``pop_item`` calls."""

    def __init__(self, session_id: str = "test", history: list[Any] | None = None) -> None:
        super().__init__(session_id=session_id, history=history)
        self.pop_calls = 0

    async def pop_item(self) -> Any:
        self.pop_calls += 1
        return await super().pop_item()


class IdStrippingSessionStandIn(CountingSessionStandIn):
    """``IdStrippingSession``: strips item ids on write, like hosted stores that reassign them."""

    def __init__(self, session_id: str = "test", history: list[Any] | None = None) -> None:
        super().__init__(session_id=session_id, history=history)
        self._ignore_ids_for_matching = True

    async def add_items(self, items: list[Any]) -> None:
        clean = []
        for item in items:
            if isinstance(item, dict):
                item = copy.copy(item)
                item.pop("id", None)
            clean.append(item)
        await super().add_items(clean)


def pytest_configure(config: pytest.Config) -> None:
    """Put the stand-ins in place before the test modules import the names."""
    import agents
    import agents.memory
    import agents.memory.sqlite_session
    # imported first, so they keep the SDK's own class: AdvancedSQLiteSession subclasses it and
    # EncryptedSession checks for it (their tests test those classes, not the session store)
    import agents.extensions.memory.advanced_sqlite_session  # noqa: F401
    import agents.extensions.memory.async_sqlite_session  # noqa: F401
    import agents.extensions.memory.encrypt_session  # noqa: F401

    for mod in (agents, agents.memory, agents.memory.sqlite_session):
        setattr(mod, "SQLiteSession", SQLiteSessionStandIn)
    root = str(config.rootpath)
    if root not in sys.path:
        sys.path.insert(0, root)
    import tests.utils.simple_session as simple  # the sdist's tests package

    simple.SimpleListSession = SimpleListSessionStandIn  # type: ignore[misc]
    simple.CountingSession = CountingSessionStandIn  # type: ignore[misc]
    simple.IdStrippingSession = IdStrippingSessionStandIn  # type: ignore[misc]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Start counting the stand-ins this test builds."""
    item.stash[_START] = _built


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    """Record how many stand-ins the test built (fixtures included) as a JUnit property."""
    item.user_properties.append((PROPERTY, _built - item.stash.get(_START, _built)))


_START = pytest.StashKey[int]()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """At a small budget: the checks' counts (and the report file for the runner)."""
    if budget_check.SMALL:
        terminalreporter.write_line(budget_check.summary())
        budget_check.write()
