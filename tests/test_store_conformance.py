"""The store conformance suite shipped in ``ctxwise.testing``, run against every backend:
SqlStore on SQLite and on PostgreSQL, InMemoryStore, and a toy backend written here the way a
third party would write one (a dict per table, implementing only BaseStore's eight
primitives). Plus what the suite cannot hold: every recorded conversation round-trips, the
suite fails a broken backend, InMemoryStore and the suite load no SQLAlchemy. SQL-only checks
(statements written, migrations, several processes) are in test_store_sql.py; the store's
errors for bad URLs, unreachable databases and refused writes in test_store_errors.py."""

from __future__ import annotations

import copy
import itertools
import json
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from ctxwise.errors import SessionConflict, SessionNotFound
from ctxwise.memory.user import MemoryEntry
from ctxwise.store import BaseStore, InMemoryStore, SqlStore
from ctxwise.store.base import busy, utc_now
from ctxwise.store.contract import (AddEntry, ClaimAction, ClearEntries, MemoryChange, MemoryQuery, RetractEntry,
                                    RowQuery, Snapshot, StoredRow, SupersedeEntry, Write)
from ctxwise.store.types import SessionInfo, TranscriptRow
from ctxwise.testing import CHECKS, POLICY, cleared, fill, run_check, tool_cycle, validate_store

from conftest import TRAJECTORIES
from test_store_support import batches, conversations

__all__ = ["POLICY", "cleared", "fill", "tool_cycle"]  # test_store_sql.py uses them


class DictStore(BaseStore):
    """A toy backend as a third party writes one: the eight primitives over plain dicts, bodies
    kept as JSON text, one lock. Everything else comes from BaseStore."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.heads: dict[tuple[str, str], Any] = {}
        self.rows: dict[tuple[str, str], dict[str, str]] = {}  # message id -> the row as JSON
        self.logs: dict[tuple[str, str], tuple[list[TranscriptRow], list[str]]] = {}
        self.memory: dict[int, tuple[str, MemoryEntry]] = {}
        self.claims: dict[str, tuple[str, Any]] = {}

    def _key(self, user_id: str, session_id: str) -> tuple[str, str]:
        if (user_id, session_id) not in self.heads:
            raise SessionNotFound(f"no session {session_id!r} for user {user_id!r}")
        return user_id, session_id

    def read_session(self, user_id: str, session_id: str, *queries: RowQuery) -> Snapshot:
        with self.lock:
            key = self._key(user_id, session_id)
            head = self.heads[key]
            every = [StoredRow(**{**json.loads(r), "tool_use_ids": tuple(json.loads(r)["tool_use_ids"])})
                     for r in self.rows[key].values()]
            out = []
            for q in queries:
                got = [r for r in every if (q.states is None or r.state in q.states)
                       and (q.message_ids is None or r.message_id in q.message_ids)
                       and (q.tool_use_id is None or q.tool_use_id in r.tool_use_ids)
                       and (not q.open_turn or (head.open_from_seq is not None and r.seq >= head.open_from_seq))
                       and (not q.appended or r.generation == 0)]
                if q.newest:
                    got = sorted(got, key=lambda r: r.seq)[-1:]
                out.append(tuple(r if q.bodies else replace(r, current=None, original=None) for r in got))
            return Snapshot(head, tuple(out))

    def commit(self, user_id: str, session_id: str, write: Write) -> None:
        with self.lock:
            if write.create:
                if (user_id, session_id) not in self.heads:
                    self.heads[(user_id, session_id)] = write.head
                    self.rows[(user_id, session_id)], self.logs[(user_id, session_id)] = {}, ([], [])
                return
            key = self._key(user_id, session_id)
            if self.heads[key].version != write.expected_version:
                raise SessionConflict("another writer got in first; reload and retry")
            rows = dict(self.rows[key])
            for r in write.inserts:
                rows[r.message_id] = json.dumps(r.__dict__)
            for u in write.updates:
                row = json.loads(rows[u.message_id])
                row.update({k: v for k, v in u.__dict__.items() if v is not None})
                rows[u.message_id] = json.dumps(row)
            if write.reset_visible:
                for mid, text in rows.items():
                    row = json.loads(text)
                    if row["state"] in ("verbatim", "cleared", "pruned"):
                        rows[mid] = json.dumps({**row, "state": "reset"})
            self.rows[key] = rows
            self.logs[key][0].extend(write.transcript)
            self.logs[key][1].extend(json.dumps(e) for e in write.events)
            self.heads[key] = write.head

    def read_events(self, user_id: str, session_id: str) -> list[dict[str, Any]]:
        with self.lock:
            return [json.loads(e) for e in self.logs[self._key(user_id, session_id)][1]]

    def read_transcript(self, user_id: str, session_id: str) -> list[TranscriptRow]:
        with self.lock:
            return copy.deepcopy(self.logs[self._key(user_id, session_id)][0])

    def query_sessions(self, user_id: str | None, user_prefix: str | None, limit: int,
                       offset: int) -> list[SessionInfo]:
        with self.lock:
            found = [SessionInfo(u, s, h.provider, h.version, h.created_at, h.updated_at)
                     for k, ((u, s), h) in enumerate(self.heads.items())
                     if (user_id is None or u == user_id) and (user_prefix is None or u.startswith(user_prefix))]
            order = {(i.user_id, i.session_id): k for k, i in enumerate(found)}
            found.sort(key=lambda i: (i.updated_at, order[(i.user_id, i.session_id)]), reverse=True)
            return found[offset:offset + limit]

    def read_memory(self, user_id: str, query: MemoryQuery) -> list[MemoryEntry]:
        with self.lock:
            return [e for _, (u, e) in sorted(self.memory.items()) if u == user_id
                    and (query.include_inactive or e.status == "active")
                    and (query.exclude_session is None or e.source_session_id != query.exclude_session)
                    and (query.created_before is None or e.created_at is None or e.created_at <= query.created_before)]

    def write_memory(self, user_id: str, changes: Sequence[MemoryChange], owner: str | None) -> list[object]:
        with self.lock:
            if owner is not None:
                if self.claims.get(user_id, ("", None))[0] != owner:
                    raise busy(user_id, owner)
                self.claims[user_id] = (owner, utc_now())
            memory = dict(self.memory)  # written back only when every change went through
            results = [self._change(memory, user_id, c) for c in changes]
            self.memory = memory
            return results

    @staticmethod
    def _change(memory: dict[int, tuple[str, MemoryEntry]], user_id: str, c: MemoryChange) -> object:
        def active(i: int) -> MemoryEntry | None:
            u, e = memory.get(i, ("", None))  # type: ignore[arg-type]
            return e if u == user_id and e is not None and e.status == "active" else None

        if isinstance(c, AddEntry):
            new = MemoryEntry(id=max(memory, default=0) + 1, text=c.text, kind=c.kind, supersedes_id=c.supersedes_id,
                              source_session_id=c.source_session_id, source_message_id=c.source_message_id,
                              created_at=utc_now())
            memory[new.id] = (user_id, new)
            return new
        if isinstance(c, (SupersedeEntry, RetractEntry)):
            old = active(c.entry_id)
            if old is None:
                return None if isinstance(c, SupersedeEntry) else False
            memory[c.entry_id] = (user_id, replace(old, status="superseded" if isinstance(c, SupersedeEntry)
                                                   else "retracted"))
            if isinstance(c, RetractEntry):
                return True
            return DictStore._change(memory, user_id, AddEntry(c.text, c.kind or old.kind, c.entry_id,
                                                               c.source_session_id, c.source_message_id))
        assert isinstance(c, ClearEntries)
        mine = [i for i, (u, e) in memory.items() if u == user_id and (c.purge or e.status == "active")]
        for i in mine:
            if c.purge:
                del memory[i]
            else:
                memory[i] = (user_id, replace(memory[i][1], status="retracted"))
        return len(mine)

    def memory_claim(self, user_id: str, owner: str, action: ClaimAction, stale_after_s: float) -> bool:
        with self.lock:
            held, at = self.claims.get(user_id, (None, None))
            if action == "take":
                if held not in (None, owner) and at > utc_now() - timedelta(seconds=stale_after_s):
                    return False
                self.claims[user_id] = (owner, utc_now())
                return True
            if held != owner:
                return False
            if action == "renew":
                self.claims[user_id] = (owner, utc_now())
            else:
                del self.claims[user_id]
            return True


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql), "memory", "toy"])
def factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Any]]:
    """A factory of new, empty stores of one backend (a new SQLite file or PostgreSQL schema each call)."""
    made: list[Any] = []
    counter = itertools.count()

    def new() -> Any:
        if request.param == "memory":
            store: Any = InMemoryStore()
        elif request.param == "toy":
            store = DictStore()
        elif request.param == "sqlite":
            store = SqlStore(f"sqlite:///{tmp_path / f'{next(counter)}.db'}")
        else:  # one store per test (run_check calls the factory once): the fixture's fresh schema
            store = SqlStore(request.getfixturevalue("pg_schema_url"))
        made.append(store)
        return store

    yield new
    for store in made:
        store.close()


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_backend_passes_the_check(factory: Callable[[], Any], check: str) -> None:
    """Each check of the shipped suite on each backend."""
    run_check(check, factory)


def test_the_suite_runs_in_five_lines_and_fails_a_broken_backend() -> None:
    """A third party's use as the module docstring shows it; and a backend that forgets one
    rule (its clear() leaves the context visible, its commits ignore the version) fails
    exactly the checks about that rule."""
    report = validate_store(DictStore)
    assert report.ok and len(report.passed) == len(CHECKS), str(report)

    class NoReset(DictStore):
        def commit(self, user_id: str, session_id: str, write: Write) -> None:
            super().commit(user_id, session_id, replace(write, reset_visible=False))

    class NoVersionCheck(DictStore):
        def commit(self, user_id: str, session_id: str, write: Write) -> None:
            if not write.create:
                key = self._key(user_id, session_id)
                self.heads[key] = replace(self.heads[key], version=write.expected_version)
            super().commit(user_id, session_id, write)

    broken = validate_store(NoReset)
    assert not broken.ok and {f.name for f in broken.failed} == {"clear_and_set_policy", "pop"}, str(broken)
    assert "every row is reset" in str(broken) or "nothing to pop" in str(broken)
    assert {f.name for f in validate_store(NoVersionCheck).failed} == {"commit_checks_version"}
    with pytest.raises(KeyError):
        validate_store(DictStore, only=["no-such-check"])


def test_the_readme_block_runs_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    """The "Writing a store backend" block of docs/library.md, executed as it stands."""
    readme = (Path(__file__).resolve().parents[1] / "docs" / "library.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if "ctxwise.testing" in b]
    exec(compile(block, "docs/library.md", "exec"), {})
    assert capsys.readouterr().out.strip() == f"{len(CHECKS)} of {len(CHECKS)} store checks passed"


def test_in_memory_store_and_the_suite_load_no_sqlalchemy() -> None:
    """InMemoryStore and ctxwise.testing work in a process where SQLAlchemy, Alembic and
    pytest were never imported."""
    code = (
        "import sys\n"
        "from ctxwise import InMemoryStore, ContextManager\n"
        "from ctxwise.testing import validate_store\n"
        "report = validate_store(InMemoryStore)\n"
        "assert report.ok, str(report)\n"
        "s = ContextManager('memory://').session('u', 's')\n"
        "s.append_openai([{'role': 'user', 'content': 'hi'}])\n"
        "assert s.prepare().payload[-1]['content'] == 'hi'\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('sqlalchemy', 'alembic', 'pytest')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout


@pytest.fixture
def store(any_store):
    """Every built-in backend: SQLite, PostgreSQL, in-memory."""
    return any_store


def test_round_trip_every_recorded_conversation(store) -> None:
    """Every recorded conversation comes back byte-identical (pydantic JSON) from every backend."""
    convs = conversations(TRAJECTORIES)
    assert len(convs) >= 270
    for k, (name, msgs) in enumerate(convs):
        sid = f"c{k}"
        v = store.open_session("rt", sid, provider="openai", policy={"name": name}).version
        for batch in batches(msgs):
            v = store.append("rt", sid, batch, expected_version=v)
    for k, (name, msgs) in enumerate(convs):
        st = store.load("rt", f"c{k}")
        assert all(r.state == "verbatim" and r.current == r.original for r in st.rows)
        assert [m.model_dump_json() for m in st.context()] == [m.model_dump_json() for m in msgs], name


