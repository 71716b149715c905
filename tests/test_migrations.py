"""Schema migrations in a shared database (issue 14 item 5): ctxwise's own version table, a
database from an older ctxwise upgraded transparently, another application's Alembic table
left alone, a newer ctxwise's schema refused in one line, a PostgreSQL schema option, and
`ctxwise db upgrade`. SQLite and PostgreSQL."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from sqlalchemy import MetaData, Table, create_engine, inspect, text

from conftest import REPO
from ctxwise.errors import StoreSchemaError
from ctxwise.messages import text_message
from ctxwise.store import SqlStore, migrate
from ctxwise.store.schema import utcnow

CLI = [sys.executable, "-m", "ctxwise.cli"]


def _legacy_database(url: str) -> None:
    """A database as ctxwise 0002 left it: its revision in Alembic's default table
    ``alembic_version`` and one session with one message (original in the row)."""
    engine = create_engine(url)
    migrate.upgrade(engine, "0002")
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE ctxwise_alembic_version"))
        conn.execute(text("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL, "
                          "CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num))"))
        conn.execute(text("INSERT INTO alembic_version VALUES ('0002')"))
        sessions = Table("sessions", MetaData(), autoload_with=conn)
        rows = Table("context_messages", MetaData(), autoload_with=conn)
        pk = conn.execute(sessions.insert().values(
            user_id="old", session_id="s", provider="openai", policy={}, version=1, last_seq=1,
            transcript_seq=1, created_at=utcnow(), updated_at=utcnow()).returning(sessions.c.id)).scalar_one()
        conn.execute(rows.insert().values(
            session_pk=pk, user_id="old", seq=1, anchor_seq=1, generation=0, version=1, message_id="m1",
            role="user", state="verbatim", original=text_message("m1", "user", "kept").model_dump(mode="json"),
            current=None))
    engine.dispose()


def test_a_database_from_an_older_ctxwise_is_upgraded_transparently(store_url):
    """Kind: a shared-database clash. ctxwise used Alembic's default table; an existing ctxwise
    database must move to ``ctxwise_alembic_version`` on open, data intact."""
    _legacy_database(store_url)
    with SqlStore(store_url) as store:
        tables = set(inspect(store.engine).get_table_names())
        assert "ctxwise_alembic_version" in tables and "alembic_version" not in tables
        assert migrate.current(store.engine) == migrate.head()
        st = store.load("old", "s")
        assert [m.text for m in st.context()] == ["kept"]
        assert store.append("old", "s", [text_message("m2", "user", "new")], expected_version=1) == 2
        assert store.original("old", "s", message_id="m1").text == "kept"


def test_another_applications_alembic_table_is_ignored(store_url):
    """Kind: a shared-database clash. An application database whose own ``alembic_version``
    holds a revision ctxwise does not know gave a 106-line "Can't locate revision" traceback;
    ctxwise now keeps to its own table and never touches the application's."""
    engine = create_engine(store_url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)"))
        conn.execute(text("INSERT INTO alembic_version VALUES ('a1b2c3d4e5f6')"))
    with SqlStore(store_url) as store:
        assert store.open_session("u", "s", provider="openai", policy={}).version == 0
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all() == ["a1b2c3d4e5f6"]
    engine.dispose()


def test_a_schema_from_a_newer_ctxwise_is_one_line(store_url):
    """Kind: a raw traceback for a state the user must act on (a database written by a newer
    ctxwise): a one-line StoreSchemaError, and `ctxwise db upgrade` exits 2 with one line."""
    SqlStore(store_url).close()
    engine = create_engine(store_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE ctxwise_alembic_version SET version_num = '9999'"))
    engine.dispose()
    with pytest.raises(StoreSchemaError) as e:
        SqlStore(store_url)
    assert "9999" in str(e.value) and "newer ctxwise" in str(e.value) and "\n" not in str(e.value)
    proc = subprocess.run([*CLI, "db", "upgrade", "--db", store_url], capture_output=True, text=True, cwd=REPO,
                          timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "newer ctxwise" in proc.stderr and "Traceback" not in proc.stderr


def test_db_upgrade_creates_and_reports(tmp_path):
    """`ctxwise db upgrade` brings a new database to the current schema and says so."""
    url = f"sqlite:///{tmp_path / 'new.db'}"
    proc = subprocess.run([*CLI, "db", "upgrade", "--db", url], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert migrate.head() in proc.stdout
    again = subprocess.run([*CLI, "db", "upgrade", "--db", url], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert again.returncode == 0 and "already" in again.stdout


@pytest.mark.postgresql
def test_postgresql_schema_option_keeps_every_table_there():
    """Kind: a shared-database clash: ctxwise's tables in their own PostgreSQL schema."""
    import uuid

    base = os.environ["CTXWISE_TEST_PG_URL"]
    name = "cw_" + uuid.uuid4().hex[:12]
    engine = create_engine(base)
    try:
        with SqlStore(base, schema=name) as store:
            store.open_session("u", "s", provider="openai", policy={})
            assert {"sessions", "context_originals", "ctxwise_alembic_version"} <= set(
                inspect(engine).get_table_names(schema=name))
            with store.engine.connect() as conn:
                assert conn.execute(text("SELECT current_schema()")).scalar() == name
    finally:
        with engine.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{name}" CASCADE'))
        engine.dispose()
    with pytest.raises(ValueError):
        SqlStore("sqlite:///x.db", schema="ctxwise")


def test_proxy_heads_from_revision_0006_are_upgraded(store_url):
    """Revision 0007 adds ``ends_call`` to the proxy's heads table: rows stored under 0006 are
    kept, read as false (no call end known: the proxy falls back to a one-message reply), and
    new rows carry it."""
    from ctxwise.proxy.heads import HeadStore, heads_rows, proxy_heads

    engine = create_engine(store_url)
    migrate.upgrade(engine, "0006")
    with engine.begin() as conn:
        table = Table("ctxwise_proxy_heads", MetaData(), autoload_with=conn)
        assert "ends_call" not in table.c and "in_flight" not in table.c
        conn.execute(table.insert(), [{"tenant": "t", "name": "", "head": f"h{i}", "count": i, "user_id": "u",
                                       "session_id": "s", "branched_from": None, "created_at": utcnow()}
                                      for i in (1, 2)])
    engine.dispose()
    with SqlStore(store_url) as store:
        assert migrate.current(store.engine) == migrate.head() == "0007"
        heads = HeadStore(store_url, engine=store.engine)
        found = heads.lookup("t", None, ["h1", "h2", "h3"])
        assert found is not None and (found.count, found.session_id, found.latest) == (2, "s", 2)
        assert heads.newest_call("t", "u", "s") is None
        heads.write(heads_rows("t", "", "u", "s", ["h1", "h2", "h3", "h4"], 2, ends=3))
        assert heads.newest_call("t", "u", "s") == 3
        with store.engine.connect() as conn:
            rows = conn.execute(proxy_heads.select().order_by(proxy_heads.c.count)).all()
        assert [(r.count, r.ends_call, r.in_flight) for r in rows] == [
            (1, False, False), (2, False, False), (3, True, True), (4, False, False)]
        assert heads.in_flight("t", "u", "s", 3, 600) and not heads.in_flight("t", "u", "s", 2, 600)
        assert not heads.in_flight("t", "u", "s", 3, -60)  # written longer ago than that: a crashed call
        heads.landed("t", "u", "s", 3)
        assert not heads.in_flight("t", "u", "s", 3, 600)
        heads.close()
