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
