"""Kind: a call that makes more round trips to the database than its work needs.

``prepare()`` checks that no other writer changed the session with one indexed read of the
stored version (it read the version twice, each in a transaction of its own), and a caller
that has just read it (``checked_version``: the server's per-request freshness read) makes no
read at all; a checked version other than the object's is ``SessionConflict`` and stores
nothing. Counted with SQLAlchemy's statement events on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import event

from ctxwise import ContextManager, Policy, SessionConflict

POLICY = Policy.preset("default", budget=50_000, unit="chars", provider="openai")


@contextmanager
def statements(cm: ContextManager) -> Iterator[list[str]]:
    """The SQL statements ``cm``'s store sends while the block runs (pings and the driver's own
    ``BEGIN`` / ``COMMIT`` are not statements SQLAlchemy sends; the store's own ``BEGIN`` on
    SQLite is)."""
    seen: list[str] = []

    def record(_conn, _cursor, statement, *_a) -> None:  # type: ignore[no-untyped-def]
        seen.append(statement)

    engine = cm.store.engine  # type: ignore[attr-defined]
    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


def started(store_url: str) -> tuple[ContextManager, object]:
    cm = ContextManager(store_url, POLICY)
    s = cm.session("u", "s")
    s.append_openai([{"role": "system", "content": "You help."}, {"role": "user", "content": "hello"},
                     {"role": "assistant", "content": "hi, how can I help?"}, {"role": "user", "content": "refund"}])
    return cm, s


@pytest.mark.parametrize("rounds", [1, 3])
def test_prepare_reads_the_stored_version_once(store_url: str, rounds: int) -> None:
    cm, s = started(store_url)
    try:
        for k in range(rounds):
            with statements(cm) as seen:
                p = s.prepare()  # type: ignore[attr-defined]
            reads = [q for q in seen if q.lstrip().upper().startswith("SELECT")]
            assert len(reads) == 1 and "version" in reads[0], seen
            assert not [q for q in seen if q.strip().upper() in ("BEGIN", "BEGIN IMMEDIATE")], seen
            assert p.payload[-1]["content"] == ("refund" if k == 0 else f"next {k - 1}")
            s.append_openai([{"role": "assistant", "content": f"done {k}"},  # type: ignore[attr-defined]
                             {"role": "user", "content": f"next {k}"}])
    finally:
        cm.close()


def test_a_checked_version_is_not_read_again(store_url: str) -> None:
    cm, s = started(store_url)
    try:
        with statements(cm) as seen:
            p = s.prepare(checked_version=s.version)  # type: ignore[attr-defined]
        assert seen == [] and p.payload[-1]["content"] == "refund"
    finally:
        cm.close()


@pytest.mark.parametrize("offset", [1, -1, 5])
def test_a_checked_version_other_than_the_objects_is_a_conflict_and_stores_nothing(store_url: str,
                                                                                     offset: int) -> None:
    cm, s = started(store_url)
    try:
        version = s.version  # type: ignore[attr-defined]
        events = cm.store.events("u", "s")
        with pytest.raises(SessionConflict, match="another writer got in first"):
            s.prepare(checked_version=version + offset)  # type: ignore[attr-defined]
        assert cm.store.version("u", "s") == version and cm.store.events("u", "s") == events
    finally:
        cm.close()


def test_a_stale_object_given_the_new_stored_version_is_a_conflict(store_url: str) -> None:
    """The shape the server meets: its freshness read finds another writer's version."""
    cm, a = started(store_url)
    try:
        b = cm.session("u", "s", create=False)
        b.append_openai([{"role": "assistant", "content": "answer"}, {"role": "user", "content": "second"}])
        with pytest.raises(SessionConflict):
            a.prepare(checked_version=cm.store.version("u", "s"))  # type: ignore[attr-defined]
        a.reload()  # type: ignore[attr-defined]
        assert a.prepare().payload[-1]["content"] == "second"  # type: ignore[attr-defined]
    finally:
        cm.close()
