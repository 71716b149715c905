"""SqlStore only: what reaches the database (statements, bytes), several processes and
connections, migrations. The behaviour every backend shares is in test_store_conformance.py."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time

import pytest
from sqlalchemy import create_engine, event, insert, inspect

from ctxwise.errors import SessionConflict
from ctxwise.messages import text_message
from ctxwise.store import Hide, InsertSummary, Replace, Store
from ctxwise.store import migrate
from ctxwise.store.schema import SessionRow

from conftest import TRAJECTORIES
from test_store_conformance import POLICY, cleared, fill, tool_cycle
from test_store_support import WORKER, batches, conversations, dump_session


def in_new_process(url: str, user: str, session: str) -> list[list]:
    out = subprocess.run([sys.executable, WORKER, "dump", url, user, session], capture_output=True,
                         text=True, check=True, timeout=120)
    return json.loads(out.stdout)


@pytest.fixture
def store(store_url: str):
    s = Store(store_url)
    yield s
    s.close()


def test_round_trip_every_recorded_conversation_in_a_new_process(store, store_url: str) -> None:
    convs = conversations(TRAJECTORIES)
    assert len(convs) >= 270
    expected = {}
    for k, (name, msgs) in enumerate(convs):
        sid = f"c{k}"
        v = store.open_session("rt", sid, provider="openai", policy={"name": name}).version
        for batch in batches(msgs):
            v = store.append("rt", sid, batch, expected_version=v)
        expected[sid] = hashlib.sha256("\n".join(m.model_dump_json() for m in msgs).encode()).hexdigest()
    code = (
        "import sys, json, hashlib\n"
        "from ctxwise.store import Store\n"
        "s = Store(sys.argv[1]); out = {}\n"
        "for sid in json.loads(sys.stdin.read()):\n"
        "    st = s.load('rt', sid, include_hidden=True)\n"
        "    assert all(r.state == 'verbatim' and r.current == r.original for r in st.rows)\n"
        "    out[sid] = hashlib.sha256('\\n'.join(m.model_dump_json() for m in st.context()).encode()).hexdigest()\n"
        "print(json.dumps(out))\n"
    )
    res = subprocess.run([sys.executable, "-c", code, store_url], input=json.dumps(list(expected)),
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    bad = [sid for sid in expected if got[sid] != expected[sid]]
    if bad:  # show the first difference
        sid = bad[0]
        msgs = convs[int(sid[1:])][1]
        reloaded = store.load("rt", sid).context()
        assert [m.model_dump_json() for m in reloaded] == [m.model_dump_json() for m in msgs]
    assert not bad


def test_states_and_order_survive_a_new_process(store, store_url: str) -> None:
    v = fill(store, turns=2)
    st = store.load("u1", "s1")
    t0 = next(r.current for r in st.rows if r.message_id == "t0")
    v = store.apply("u1", "s1", [Replace("t0", cleared(t0))], [{"stage": "clearing"}], expected_version=v)
    summary = text_message("sum1", "user", "Summary of turn 0", ctxwise={"kind": "summary"})
    store.apply("u1", "s1", [InsertSummary(summary, "u0"), Hide(["u0", "a0", "t0", "r0"], "summarized")],
                [{"stage": "summarizing", "summary_id": "sum1"}], expected_version=v)
    assert in_new_process(store_url, "u1", "s1") == dump_session(store_url, "u1", "s1")


class Statements:
    """Counts INSERT / UPDATE / DELETE statements and their rows, per table."""

    def __init__(self, engine) -> None:
        self.seen: list[tuple[str, str, int]] = []
        event.listen(engine, "before_cursor_execute", self._on)
        self.engine = engine

    def _on(self, conn, cursor, statement, params, context, executemany) -> None:  # noqa: ANN001
        words = statement.split()
        verb = words[0].upper()
        if verb not in ("INSERT", "UPDATE", "DELETE"):
            return
        table = words[2] if verb in ("INSERT", "DELETE") else words[1]
        rows = len(params) if executemany else 1
        if verb == "INSERT" and not executemany and "), (" in statement:
            rows = statement.count("), (") + 1
        self.seen.append((verb, table.strip('"').lower(), rows))

    def count(self, verb: str, table: str) -> int:
        return sum(1 for v, t, _ in self.seen if v == verb and t == table)

    def rows(self, verb: str, table: str) -> int:
        return sum(n for v, t, n in self.seen if v == verb and t == table)

    def close(self) -> None:
        event.remove(self.engine, "before_cursor_execute", self._on)


def test_writes_are_proportional_to_what_changed(store: Store) -> None:
    v = fill(store, turns=10)
    st = store.load("u1", "s1")
    spy = Statements(store.engine)
    v = store.append("u1", "s1", [text_message("u99", "user", "next")] + tool_cycle(99), expected_version=v)
    assert spy.rows("INSERT", "context_messages") == 3
    assert spy.count("UPDATE", "sessions") == 1
    assert spy.count("UPDATE", "context_messages") == 0
    assert not any(verb == "DELETE" for verb, _, _ in spy.seen)
    spy.seen.clear()
    targets = ["t2", "t5", "t7"]
    changes = [Replace(i, cleared(next(r.current for r in st.rows if r.message_id == i))) for i in targets]
    v = store.apply("u1", "s1", changes, [{"stage": "clearing", "affected_ids": targets}], expected_version=v)
    assert spy.count("UPDATE", "context_messages") == 3
    assert spy.count("UPDATE", "sessions") == 1
    assert spy.rows("INSERT", "compaction_events") == 1
    assert spy.count("INSERT", "context_messages") == 0
    assert not any(verb == "DELETE" for verb, _, _ in spy.seen)
    spy.close()
    st = store.load("u1", "s1")
    assert {r.message_id for r in st.rows if r.state == "cleared"} == set(targets)
    assert all(r.current == r.original for r in st.rows if r.message_id not in targets)


def test_an_append_is_one_transaction_reading_its_session_row_once(store: Store) -> None:
    """Kind: an append read what it builds on in one transaction and wrote in a second, reading
    the session row in each (the proxy's per-call overhead). It locks the row, reads under the
    lock and writes, in one transaction."""
    v = fill(store, turns=3)
    begins: list[int] = []
    session_reads: list[str] = []

    def on_begin(conn) -> None:  # noqa: ANN001
        begins.append(1)

    def on_execute(conn, cursor, statement, params, context, executemany) -> None:  # noqa: ANN001
        if statement.lstrip().upper().startswith("SELECT") and "FROM sessions" in statement.replace('"', ""):
            session_reads.append(statement)

    event.listen(store.engine, "begin", on_begin)
    event.listen(store.engine, "before_cursor_execute", on_execute)
    try:
        v2 = store.append("u1", "s1", [text_message("u99", "user", "next")] + tool_cycle(99), expected_version=v)
    finally:
        event.remove(store.engine, "begin", on_begin)
        event.remove(store.engine, "before_cursor_execute", on_execute)
    assert v2 == v + 1 and len(begins) == 1 and len(session_reads) == 1
    assert [r.message_id for r in store.load("u1", "s1").rows][-3:] == ["u99", *(m.id for m in tool_cycle(99))]


def test_stale_version_conflicts_and_wait_rebases_appends(store_url: str) -> None:
    a, b = Store(store_url), Store(store_url, wait=True)
    try:
        v = fill(a, turns=1)
        v2 = a.append("u1", "s1", [text_message("n1", "user", "one")], expected_version=v)
        with pytest.raises(SessionConflict):
            a.append("u1", "s1", [text_message("n2", "user", "two")], expected_version=v)
        with pytest.raises(SessionConflict):
            b.apply("u1", "s1", [Hide(["u0"])], [], expected_version=v)
        assert b.append("u1", "s1", [text_message("n2", "user", "two")], expected_version=v) == v2 + 1
        assert [r.message_id for r in a.load("u1", "s1").rows][-2:] == ["n1", "n2"]
    finally:
        a.close()
        b.close()


def test_upgrade_from_base_keeps_data(store_url: str) -> None:
    engine = create_engine(store_url)
    migrate.upgrade(engine, "0001")
    assert migrate.current(engine) == "0001"
    assert "user_memory" not in inspect(engine).get_table_names()
    from ctxwise.store.schema import utcnow

    with engine.begin() as conn:
        conn.execute(insert(SessionRow).values(user_id="old", session_id="s", provider="openai", policy={},
                                               version=0, last_seq=0, transcript_seq=0,
                                               created_at=utcnow(), updated_at=utcnow()))
    engine.dispose()
    store = Store(store_url)
    try:
        assert migrate.current(store.engine) == migrate.head() != "0001"
        assert {"user_memory", "memory_claims", "ctxwise_api_keys"} <= set(inspect(store.engine).get_table_names())
        assert store.append("old", "s", [text_message("m", "user", "hi")], expected_version=0) == 1
    finally:
        store.close()


def test_reopen_reads_the_visible_rows_through_their_index(store: Store, store_url: str) -> None:
    """Kind: a read whose cost grows with the history (issue 14: reopen O(visible), not
    O(history)). The visible-context read must be answerable from ix_context_visible
    (session_pk, state, ...), not by walking every row the session ever had; on SQLite the
    plan of the very statement load() runs is checked."""
    assert "ix_context_visible" in {ix["name"] for ix in inspect(store.engine).get_indexes("context_messages")}
    fill(store, "u", "s", 6)
    statements: list[tuple[str, object]] = []

    def grab(conn, cursor, statement, parameters, context, executemany):  # noqa: ANN001
        if "FROM context_messages" in statement:
            statements.append((statement, parameters))

    event.listen(store.engine, "before_cursor_execute", grab)
    try:
        store.load("u", "s")
    finally:
        event.remove(store.engine, "before_cursor_execute", grab)
    assert statements, "load() read no context rows"
    if store.engine.dialect.name == "sqlite":
        statement, parameters = statements[0]
        with store.engine.connect() as conn:
            plan = " ".join(str(r[-1]) for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters))
        assert "ix_context_visible" in plan, plan


@pytest.mark.postgresql
def test_a_pooled_connection_that_died_while_idle_is_replaced_unseen(pg_schema_url: str, monkeypatch) -> None:
    """Kind: the store pinged PostgreSQL before every transaction (pool_pre_ping: a round trip
    each); now only a connection idle longer than IDLE_PING_S is pinged. One whose backend was
    terminated while it sat in the pool (a database restart) is replaced at its next use, and
    the call succeeds."""
    from sqlalchemy import text

    from ctxwise.store import sql

    monkeypatch.setattr(sql, "IDLE_PING_S", 0.2)
    store = Store(pg_schema_url)
    try:
        with store.engine.connect() as conn:
            pid = conn.execute(text("SELECT pg_backend_pid()")).scalar()
        killer = create_engine(pg_schema_url)
        with killer.connect() as conn:
            assert conn.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid}).scalar() is True
        killer.dispose()
        time.sleep(0.5)
        assert store.list_sessions(None) == []  # the dead connection failed its ping and was replaced
        with store.engine.connect() as conn:
            assert conn.execute(text("SELECT pg_backend_pid()")).scalar() != pid
    finally:
        store.close()
