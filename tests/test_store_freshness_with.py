"""``SqlStore.freshness_with``: a caller's one-row read and a session's freshness in one
statement (the server's key check with the session it names), on SQLite and PostgreSQL.

Kind: the combined read answering other than the two reads made apart: for a lookup with no
row, a session that does not exist, one that does, another user's session of the same id,
and after a memory write that changes the fingerprint."""

from __future__ import annotations

import pytest
from sqlalchemy import Column, Integer, MetaData, String, Table, bindparam, insert, select

from ctxwise import ContextManager, Policy, SqlStore

meta = MetaData()
owners = Table("test_owners", meta, Column("id", Integer, primary_key=True), Column("code", String(20)),
               Column("name", String(64)))
LOOKUP = select((owners.c.name + ":").label("prefix"), owners.c.name).where(owners.c.code == bindparam("code"))


@pytest.fixture
def store(store_url: str):
    cm = ContextManager(store_url, Policy.preset("default", budget=50_000, unit="chars", provider="openai"))
    meta.create_all(cm.store.engine)  # type: ignore[attr-defined]
    with cm.store.engine.begin() as conn:  # type: ignore[attr-defined]
        conn.execute(insert(owners), [{"code": "k1", "name": "acme"}, {"code": "k2", "name": "other"}])
    s = cm.session("acme:u", "s")
    s.append_openai([{"role": "system", "content": "You help."}, {"role": "user", "content": "I prefer tea."}])
    yield cm.store
    cm.close()


def test_no_lookup_row_is_none(store: SqlStore):
    assert store.freshness_with(LOOKUP, "u", "s", {"code": "nope"}) is None


@pytest.mark.parametrize("code, user, session", [("k1", "u", "missing"), ("k2", "u", "s"), ("k1", "v", "s")])
def test_a_session_the_prefix_does_not_have_is_none_beside_the_row(store: SqlStore, code, user, session):
    row, found = store.freshness_with(LOOKUP, user, session, {"code": code})  # type: ignore[misc]
    assert found is None and row[1] == {"k1": "acme", "k2": "other"}[code]


def test_the_freshness_is_what_the_separate_read_gives(store: SqlStore):
    for _ in range(2):
        row, found = store.freshness_with(LOOKUP, "u", "s", {"code": "k1"})  # type: ignore[misc]
        assert row == ("acme:", "acme") and found == store.freshness("acme:u", "s")
        assert found is not None and found[0] == store.version("acme:u", "s")
        store.add_memory("acme:u", "I like window seats.", "preference")  # a new entry: not shown to s
        store.clear_memory("acme:u")
        store.apply("acme:u", "s", [], [{"stage": "noted", "trigger": "test", "affected_ids": []}],
                    expected_version=found[0])
    assert store.freshness_with(LOOKUP, "u", "s", {"code": "k1"})[1] == store.freshness("acme:u", "s")  # type: ignore[index]
