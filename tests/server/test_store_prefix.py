"""``list_sessions(user_prefix=...)``, the store call behind the server's per-tenant session
list, on every backend (SQLite, PostgreSQL, in-memory): a literal prefix, never a pattern."""

from __future__ import annotations

from ctxwise import text_message


def test_user_prefix_lists_only_those_users_and_is_literal(any_store):
    """Kind: a tenant listing that leaks another tenant's sessions through a LIKE wildcard
    (``_`` and ``%`` in the prefix) or a prefix match on the wrong side of the separator."""
    s = any_store
    for user in ("a_b:u1", "axb:u2", "a_b:u3", "a%b:u4", "a_bc:u5", "other"):
        st = s.open_session(user, "s", provider="openai", policy={})
        s.append(user, "s", [text_message(f"m-{user}", "user", "hi")], expected_version=st.version)
    assert sorted(i.user_id for i in s.list_sessions(user_prefix="a_b:")) == ["a_b:u1", "a_b:u3"]
    assert [i.user_id for i in s.list_sessions(user_prefix="a%b:")] == ["a%b:u4"]
    assert len(s.list_sessions(user_prefix="a_b:", limit=1)) == 1
    assert [i.user_id for i in s.list_sessions("a_b:u3", user_prefix="a_b:")] == ["a_b:u3"]
    assert s.list_sessions(user_prefix="zzz:") == []
