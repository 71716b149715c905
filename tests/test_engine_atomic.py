"""Every operation of a Session either commits whole or changes nothing (issue 24, item 1).

A real SqlStore on a SQLite file is wrapped so that its N-th write raises (before the real
write runs, so the store holds exactly what the earlier writes stored). After the failure the
Session must equal one freshly reopened from the store: messages, sizes, version, the engine
state (fact book, failed summaries, lossy flag, id counter), and the payload of the next
prepare(). Every write of every operation is tried: append, append_openai, prepare with
compaction, pop, pop(then=...), amend, clear, close_pending.

Kind: a Session that mutated its state before the store committed and repaired it by hand in
restore sites; the restore after a failed compaction write forgot the lossy flag and the lost
facts, so the session sent a facts block the store did not know about.
"""

from __future__ import annotations

from ctxwise.core import state_of
import sqlite3
from pathlib import Path
from typing import Any, Callable

import pytest

from builders import assistant, results, system, user
from ctxwise import ContextManager, Policy, Session
from ctxwise.errors import StoreUnavailable
from ctxwise.store import SqlStore

POLICY = Policy.preset("default", budget=1_500, unit="tokens", provider="openai")

WRITES = ("open_session", "append", "apply", "pop", "amend", "clear", "set_policy", "add_memory", "supersede_memory",
          "retract_memory", "clear_memory", "apply_memory", "claim_memory", "renew_memory", "release_memory")


class FailingStore(SqlStore):
    """A real SqlStore whose ``fail_at``-th write (counted from :meth:`arm`) raises
    StoreUnavailable before anything is written; ``writes`` counts the writes since then."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.fail_at: int | None = None
        self.writes = 0

    def arm(self, fail_at: int | None) -> None:
        self.fail_at, self.writes = fail_at, 0


def _failing(name: str) -> Callable[..., Any]:
    real = getattr(SqlStore, name)

    def write(self: FailingStore, *args: Any, **kwargs: Any) -> Any:
        self.writes += 1
        if self.fail_at is not None and self.writes == self.fail_at:
            raise StoreUnavailable(f"injected failure of write {self.writes} ({name})")
        return real(self, *args, **kwargs)

    return write


for _name in WRITES:
    setattr(FailingStore, _name, _failing(_name))


def turns(s: Session, n: int) -> None:
    """``n`` user turns with facts, one tool call each, long results, a final answer."""
    for i in range(n):
        s.append([user(f"Question {i}: my budget is {100 + i} EUR and order #W{1000000 + i}.")])
        call = assistant(calls=[("lookup", {"i": i})])
        s.append([call, *results(call, [f"result {i} " + "x " * 150])])
        s.append([assistant(f"Answer {i}.")])


def small(s: Session) -> None:
    s.append([system()])
    turns(s, 2)


def open_call(s: Session) -> None:
    small(s)
    s.append([user("Please check order #W7654321, my limit is 300 EUR."),
              assistant(calls=[("lookup", {"order": "W7654321"}), ("refund", {"order": "W7654321"})])])


def long(s: Session) -> None:
    s.append([system()])
    turns(s, 12)


def add_facts(s: Session) -> None:
    call = assistant(calls=[("lookup", {"q": "x"})])
    s.append([user("I moved: my new zip code is 90210 and my order is #W5550001."), call])


def append_openai(s: Session) -> None:
    s.append_openai([{"role": "user", "content": "My order #W4444444 arrived broken, budget 80 EUR."},
                     {"role": "assistant", "content": "Sorry to hear that."}])


def pop_then(s: Session) -> None:
    s.pop(then=[assistant("Answer 1, corrected.")])


def amend(s: Session) -> None:
    s.amend(lambda m: m.model_copy(update={"metadata": {**m.metadata, "trace": "t-1"}}))


OPERATIONS: dict[str, tuple[Callable[[Session], None], Callable[[Session], Any]]] = {
    "append": (small, add_facts),
    "append_openai": (small, append_openai),
    "prepare": (long, lambda s: s.prepare()),
    "pop": (small, lambda s: s.pop()),
    "pop_then": (small, pop_then),
    "amend": (small, amend),
    "clear": (long, lambda s: s.clear()),
    "close_pending": (open_call, lambda s: s.close_pending()),
}


def session(path: Path, store: SqlStore | None = None) -> Session:
    return ContextManager(store or SqlStore(f"sqlite:///{path}"), POLICY).session("u", "s")


def writes_of(op: str, tmp_path: Path) -> int:
    setup, run = OPERATIONS[op]
    store = FailingStore(f"sqlite:///{tmp_path / 'count.db'}")
    s = session(tmp_path, store)
    setup(s)
    store.arm(None)
    run(s)
    return store.writes


def snapshot(s: Session) -> dict[str, Any]:
    return {"messages": [m.model_dump(mode="json") for m in s.messages], "size": s.size, "version": s.version,
            "sizes": {m.id: s.view.sizes[m.id] for m in s.messages}, "state": state_of(s.view, s._deps.size_key),
            "pinned": s.memory.pinned_texts()}


def payload(s: Session) -> Any:
    try:
        return s.prepare().payload
    except Exception as e:  # noqa: BLE001 - an open tool call is refused: the same refusal on both
        return f"{type(e).__name__}: {e}"


def copy_db(src: Path, dst: Path) -> None:
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)


@pytest.mark.parametrize("op", sorted(OPERATIONS))
def test_a_failed_write_leaves_the_session_as_the_store_has_it(op: str, tmp_path: Path) -> None:
    n = writes_of(op, tmp_path)
    assert n >= 1, f"{op} wrote nothing: the scenario does not exercise it"
    setup, run = OPERATIONS[op]
    for k in range(1, n + 1):
        db = tmp_path / f"{op}-{k}.db"
        store = FailingStore(f"sqlite:///{db}")
        s = session(db, store)
        setup(s)
        before = snapshot(s)
        store.arm(k)
        try:
            run(s)
        except StoreUnavailable:
            pass
        reached = store.writes
        store.arm(None)
        assert reached >= k, f"{op}: write {k} was never reached"
        reopened = session(db)
        assert snapshot(s) == snapshot(reopened), f"{op}: write {k} of {n} failed and the Session differs from the store"
        if k == 1:
            assert snapshot(s) == before, f"{op}: the first write failed and the Session changed anyway"
        copy = tmp_path / f"{op}-{k}-copy.db"
        copy_db(db, copy)
        assert payload(s) == payload(session(copy)), f"{op}: write {k} failed; the next prepare() differs"


def test_plans_never_touch_the_store() -> None:
    """Kind: a plan that writes on its own (the shell commits; the core computes). Only
    core/commit.py, the one place a Write becomes a store call, names the store."""
    import ast

    core = Path(__file__).resolve().parents[1] / "src" / "ctxwise" / "core"
    bad = []
    for path in sorted(core.glob("*.py")):
        if path.name == "commit.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and any(
                    part in ("store", "engine", "manager", "commit", "records") for part in node.module.split(".")):
                bad.append(f"{path.name}:{node.lineno} imports {node.module}")
    assert not bad, bad


def test_plans_leave_the_view_they_start_from_unchanged(tmp_path: Path) -> None:
    """Kind: a validator or plan writing into the state it reads (the old append check set
    thinking-seen on the session while checking)."""
    from ctxwise.core import plan_append, plan_clear, plan_pop, plan_prepare

    s = session(tmp_path / "v.db")
    long(s)
    view = s.view
    facts_state, messages, sizes = view.facts.state(), view.messages, dict(view.sizes)
    deps = s._deps
    plans = [plan_prepare(view, deps), plan_append(view, deps, [user("and my phone is 555-0100")]),
             plan_pop(view, deps), plan_clear(view, deps)]
    assert all(p.write is not None for p in plans)
    assert view.facts.state() == facts_state and view.messages == messages and dict(view.sizes) == sizes
    assert s.view is view and s.version == view.version

