"""A load is one snapshot, also on PostgreSQL (several server nodes write the same session)."""

from __future__ import annotations

from sqlalchemy import event

from ctxwise import SqlStore, text_message


def test_a_load_does_not_mix_two_versions(store_url: str):
    """Kind: a read that spans another node's commit (PostgreSQL READ COMMITTED: each statement
    sees the newest commit), returning the session row of version v beside the rows of v+1. It
    made a hedged append answer 422 duplicate-message-id instead of 409. Another store commits
    an append right after the load read the session row."""
    a, b = SqlStore(store_url), SqlStore(store_url)
    try:
        a.open_session("u", "s", provider="openai", policy={})
        a.append("u", "s", [text_message("m1", "user", "hi")], expected_version=0)
        fired: list[int] = []

        @event.listens_for(a.engine, "after_cursor_execute")
        def between(conn, cursor, statement, params, context, executemany):  # type: ignore[no-untyped-def]
            if not fired and "FROM sessions" in statement:
                fired.append(1)
                b.append("u", "s", [text_message("m2", "assistant", "hello")], expected_version=1)

        state = a.load("u", "s")
        assert fired
        assert (state.version, [r.message_id for r in state.rows]) == (1, ["m1"])
        again = a.load("u", "s")
        assert (again.version, [r.message_id for r in again.rows]) == (2, ["m1", "m2"])
    finally:
        a.close()
        b.close()


def test_opening_a_new_session_while_another_node_appends_is_a_conflict_not_a_duplicate(store_url: str):
    """Kind: a session opened from two reads (the state, then a rebuild from the whole history)
    with another node's commit in between: version 0 beside that node's message ids, so the
    append was refused as duplicate-message-id (422) where it lost a race (409). Found by the
    hedged first appends of bench/service.py."""
    import pytest

    from ctxwise import ContextManager, SessionConflict

    other = SqlStore(store_url)
    with ContextManager(store_url) as cm:
        store = cm.store
        real_load = store.load
        calls: list[int] = []

        def load_then_other_node_appends(*args, **kwargs):  # type: ignore[no-untyped-def]
            try:  # a new session is not stored by opening it: this read finds none
                return real_load(*args, **kwargs)
            finally:
                if not calls:
                    calls.append(1)
                    other.open_session("u", "s", provider="openai", policy={})
                    other.append("u", "s", [text_message("m1", "user", "the same append")], expected_version=0)

        store.load = load_then_other_node_appends
        s = cm.session("u", "s")
        assert calls and s.version == 0 and s.messages == []
        with pytest.raises(SessionConflict):
            s.append([text_message("m1", "user", "the same append")])  # a hedged request: the same batch
        store.load = real_load
        again = cm.session("u", "s")
        assert [m.id for m in again.messages] == ["m1"] and again.version == 1
    other.close()
