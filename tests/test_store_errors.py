"""Kind: a store error that says the wrong thing (issue 28, "Errors that say what to do").

A database that is down, or a SQLite path whose folder does not exist, was reported as
StoreSchemaError with the hint "upgrade ctxwise"; a ``mysql://`` URL gave a raw
ModuleNotFoundError; a full disk and a read-only database gave raw driver errors. Each is now a
:class:`~ctxwise.StoreUnavailable` that names the place (the URL without its password) and
the rule, with a hint that fits, and a refused write stores nothing. Every case runs the real
thing: a closed port, a SQLite database capped by ``max_page_count``, one opened read-only."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from sqlalchemy import event

from ctxwise import ContextManager, StoreSchemaError, StoreUnavailable
from ctxwise.errors import with_hint
from ctxwise.messages import text_message
from ctxwise.store import SqlStore, open_store


@pytest.mark.parametrize("url", ["mysql://app:s3cret@db.example/app", "mysql+pymysql://app:s3cret@db/app",
                                 "oracle://app:s3cret@db/app", "not a url"])
def test_an_unsupported_url_names_the_supported_ones(url: str) -> None:
    for opener in (SqlStore, open_store, lambda u: ContextManager(u)):
        with pytest.raises(StoreUnavailable) as err:
            opener(url)
        text = with_hint(err.value)
        assert "sqlite:///" in text and "postgresql" in text and "memory://" in text, text
        assert "s3cret" not in text, text


def test_a_sqlite_path_whose_folder_is_missing_says_so(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "folder" / "ctxwise.db"
    with pytest.raises(StoreUnavailable) as err:
        ContextManager(f"sqlite:///{missing}")
    assert not isinstance(err.value, StoreSchemaError)
    assert str(missing.parent) in str(err.value) and "does not exist" in str(err.value)
    assert "mkdir" in err.value.hint and "upgrade" not in with_hint(err.value)
    assert not missing.parent.exists()  # nothing was created on the way


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the block ends: nothing listens there


def test_a_database_that_is_down_says_so_without_the_password() -> None:
    url = f"postgresql+psycopg://ctxwise:s3cret@127.0.0.1:{_closed_port()}/ctxwise"
    with pytest.raises(StoreUnavailable) as err:
        SqlStore(url)
    text = with_hint(err.value)
    assert not isinstance(err.value, StoreSchemaError)
    assert "cannot connect" in text and "127.0.0.1" in text and "ctxwise:***@" in text, text
    assert "s3cret" not in text and "upgrade" not in text and "running" in err.value.hint


def test_a_full_disk_is_a_ctxwise_error_and_stores_nothing(tmp_path: Path) -> None:
    store = SqlStore(f"sqlite:///{tmp_path / 'full.db'}")
    v = store.open_session("u", "s", provider="openai", policy={}).version
    store.engine.dispose()  # new connections get the cap: the database may not grow past ~60 pages
    event.listen(store.engine, "connect", lambda conn, _rec: conn.execute("PRAGMA max_page_count=60"))
    with pytest.raises(StoreUnavailable) as err:
        store.append("u", "s", [text_message("m1", "user", "x" * 1_000_000)], expected_version=v)
    assert "out of room" in str(err.value) and "free disk space" in err.value.hint
    assert store.load("u", "s").version == v and store.load("u", "s").rows == []
    assert store.append("u", "s", [text_message("m1", "user", "short")], expected_version=v) == v + 1
    store.close()


def test_a_read_only_database_is_a_ctxwise_error_and_stores_nothing(tmp_path: Path) -> None:
    db = tmp_path / "ro.db"
    with SqlStore(f"sqlite:///{db}") as store:
        store.append("u", "s", [text_message("m0", "user", "hi")],
                     expected_version=store.open_session("u", "s", provider="openai", policy={}).version)
    ro = SqlStore(f"sqlite:///file:{db}?mode=ro&uri=true")
    assert [m.id for m in ro.load("u", "s").context()] == ["m0"]  # reads work
    with pytest.raises(StoreUnavailable) as err:
        ro.append("u", "s", [text_message("m1", "user", "more")], expected_version=1)
    assert "read-only" in str(err.value) and "write" in err.value.hint
    ro.close()
    with SqlStore(f"sqlite:///{db}") as store:
        assert store.load("u", "s").version == 1 and len(store.load("u", "s").rows) == 1
