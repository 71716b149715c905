"""Kind: a refused first append that leaves an empty session behind (issue 28, the low items).

Opening a session used to store it at once, so a first append refused for its payload (a
tool result with no call, a NUL character) left an empty session that ``list_sessions`` showed
and a reopen found. A session is now stored by its first successful write, in the same
transaction as that write (SQLite and PostgreSQL; one step under the lock in memory): a
refused or failed first write leaves nothing, on every backend. Until then the Session
behaves as an empty one (version 0, no events, no transcript, an empty-payload refusal from
prepare)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import event

from ctxwise import ContextManager, MessageNotStorable, PayloadInvalid, SessionConflict, SessionNotFound
from ctxwise.messages import Message, TextBlock, ToolResultBlock, text_message
from ctxwise.store import InMemoryStore, SqlStore


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql), "memory"])
def url(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ctxwise.db'}"
    return str(request.getfixturevalue("pg_schema_url"))


def _orphan_result() -> Message:
    return Message(id="t1", role="tool", blocks=[ToolResultBlock(tool_use_id="nope", name="q",
                                                                 output=[TextBlock(text="x")])])


REFUSALS = {
    "payload": (lambda: [text_message("sys", "system", "Be brief."), _orphan_result()], PayloadInvalid),
    "not-storable": (lambda: [text_message("u1", "user", "a\x00b")], MessageNotStorable),
}


def _nothing_stored(cm: ContextManager, url: str) -> None:
    assert cm.store.list_sessions() == []
    with pytest.raises(SessionNotFound):
        cm.session("u", "s", create=False)
    if url != "memory://":  # another process's view of the same database
        with ContextManager(url) as other:
            assert other.store.list_sessions() == []
            with pytest.raises(SessionNotFound):
                other.session("u", "s", create=False)


@pytest.mark.parametrize("kind", REFUSALS)
def test_a_refused_first_append_leaves_no_session(url: str, kind: str) -> None:
    batch, error = REFUSALS[kind]
    with ContextManager(url) as cm:
        s = cm.session("u", "s")
        with pytest.raises(error):
            s.append(batch())
        _nothing_stored(cm, url)
        # the same Session object goes on: its first good append creates the session
        assert s.append([text_message("sys", "system", "Be brief."), text_message("u1", "user", "Hi")]) == 1
        [info] = cm.store.list_sessions()
        assert (info.user_id, info.session_id, info.version) == ("u", "s", 1)
        assert [m.id for m in cm.session("u", "s", create=False).messages] == ["sys", "u1"]


def test_a_first_write_the_database_fails_leaves_no_session(url: str) -> None:
    if url == "memory://":
        store: Any = InMemoryStore()
    else:
        store = SqlStore(url)
        # the database fails the write after the session row went in: one transaction, so neither stays
        def fail_rows(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
            if statement.lstrip().upper().startswith("INSERT INTO CONTEXT_MESSAGES"):
                raise RuntimeError("the database failed this statement")
        event.listen(store.engine, "before_cursor_execute", fail_rows)
    with ContextManager(store) as cm:
        s = cm.session("u", "s")
        if url == "memory://":
            cm.store.commit = _failing_commit(cm.store.commit)  # type: ignore[method-assign]
        with pytest.raises(RuntimeError):
            s.append([text_message("u1", "user", "Hi")])
        assert cm.store.list_sessions() == []
        with pytest.raises(SessionNotFound):
            cm.store.load("u", "s")


def _failing_commit(real: Any) -> Any:
    """InMemoryStore.commit failing the write that follows the create write."""
    def commit(user_id: str, session_id: str, write: Any) -> None:
        if not write.create:
            raise RuntimeError("the write failed")
        real(user_id, session_id, write)
    return commit


def test_an_opened_session_reads_as_empty_until_written(url: str) -> None:
    with ContextManager(url) as cm:
        s = cm.session("u", "s")
        assert (s.version, s.messages, s.events(), s.transcript()) == (0, [], [], [])
        assert s.original(message_id="m1") is None
        with pytest.raises(PayloadInvalid, match="empty-payload"):
            s.prepare()
        assert cm.store.list_sessions() == []


def test_two_writers_opening_one_new_session_still_conflict(url: str) -> None:
    with ContextManager(url if url != "memory://" else InMemoryStore()) as cm:
        other = ContextManager(cm.store)
        a, b = cm.session("u", "s"), other.session("u", "s")
        a.append([text_message("u1", "user", "Hi")])
        with pytest.raises(SessionConflict):
            b.append([text_message("u2", "user", "Hello")])
        b.reload()
        assert b.append([text_message("u2", "user", "Hello")]) == 2
        assert [m.id for m in cm.session("u", "s", create=False).messages] == ["u1", "u2"]
