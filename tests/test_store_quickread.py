"""QuickRead: the one-row reads made on every proxied call (key check, heads lookup) read the
same rows as SQLAlchemy's own path, and fall back to it where they cannot run direct."""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import bindparam, select
from sqlalchemy.exc import OperationalError

from ctxwise import SqlStore
from ctxwise.proxy.heads import HeadStore, heads_rows, proxy_heads
from ctxwise.server.keys import KeyStore, api_keys
from ctxwise.store.sql import QuickRead


def _url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'q.db'}"


def _store(tmp_path: Path) -> SqlStore:
    return SqlStore(_url(tmp_path))


def test_a_fixed_shape_read_runs_direct_and_reads_what_sqlalchemy_reads(tmp_path: Path) -> None:
    store = _store(tmp_path)
    heads = HeadStore(_url(tmp_path), engine=store.engine)
    chain = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(12)]
    heads.write(heads_rows("t1", "c", "u", "s", chain, 0))
    t = proxy_heads.c
    stmt = select(t.count, t.session_id).where(t.tenant == bindparam("tenant"), t.head == bindparam("h")) \
        .order_by(t.count.desc()).limit(1)
    slow: list[dict[str, Any]] = []

    def fallback(params: dict[str, Any]) -> Any:
        slow.append(params)
        with store.engine.connect() as conn:
            return conn.execute(stmt, params).first()

    read = QuickRead(store.engine, stmt, fallback)
    assert read.sql is not None
    for h in (chain[0], chain[7], "absent"):
        got = read({"tenant": "t1", "h": h})
        assert got == fallback({"tenant": "t1", "h": h})
    assert read({"tenant": "t1", "h": chain[7]}) == (8, "s")
    assert read({"tenant": "t2", "h": chain[7]}) is None  # another tenant's rows are not read
    assert len(slow) == 3  # only the comparisons above went through SQLAlchemy


def test_a_column_that_needs_conversion_goes_through_sqlalchemy(tmp_path: Path) -> None:
    store = _store(tmp_path)
    keys = KeyStore(_url(tmp_path), engine=store.engine)
    key, stored = keys.create("acme", "k")
    stmt = select(api_keys.c.created_at).where(api_keys.c.key_id == bindparam("key_id"))
    calls: list[int] = []

    def fallback(params: dict[str, Any]) -> Any:
        calls.append(1)
        with store.engine.connect() as conn:
            return conn.execute(stmt, params).first()

    read = QuickRead(store.engine, stmt, fallback)
    assert read.sql is None  # a DateTime column: SQLite returns text, SQLAlchemy a datetime
    row = read({"key_id": stored.key_id})
    assert calls == [1] and row[0].year == stored.created_at.year


def test_a_driver_error_is_sqlalchemys_error_through_the_fallback(tmp_path: Path) -> None:
    store = _store(tmp_path)
    t = proxy_heads.c
    stmt = select(t.count).where(t.tenant == bindparam("tenant"))

    def fallback(params: dict[str, Any]) -> Any:
        with store.engine.connect() as conn:
            return conn.execute(stmt, params).first()

    read = QuickRead(store.engine, stmt, fallback)
    assert read.sql is not None
    with store.engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE ctxwise_proxy_heads")
    with pytest.raises(OperationalError, match="no such table"):
        read({"tenant": "t1"})


def test_the_key_check_refuses_a_revoked_or_wrong_key_on_the_direct_read(tmp_path: Path) -> None:
    store = _store(tmp_path)
    keys = KeyStore(_url(tmp_path), engine=store.engine)
    key, stored = keys.create("acme", "k")
    other, _ = keys.create("beta", "k")
    assert keys._active.sql is not None
    assert keys.tenant_of(key) == "acme" and keys.tenant_of(other) == "beta"
    forged = key[:-4] + ("AAAA" if not key.endswith("AAAA") else "BBBB")  # the key id of acme, another secret
    assert keys.tenant_of(forged) is None
    keys.revoke(stored.key_id)
    assert keys.tenant_of(key) is None  # revoked: refused on the next read, nothing cached
    assert keys.tenant_of(other) == "beta"
