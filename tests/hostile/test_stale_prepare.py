"""Kind: a Session overtaken by another writer answers from its stale copy.

Before this check, ``prepare()`` on a Session object whose session another writer had appended
to returned the old payload (without the other writer's messages) whenever no compaction stage
fired, because only writes compared versions. Now every ``prepare()`` reads the stored version
first and raises ``SessionConflict``; after ``reload()`` the payload has both writers' messages.
Runs on every store backend."""

from __future__ import annotations

import pytest

from ctxwise import ContextManager, InMemoryStore, Policy, SessionConflict


@pytest.mark.parametrize("url_kind", ["sqlite", "memory"])
def test_prepare_on_a_stale_session_raises_conflict_then_reload_sees_both(tmp_path, url_kind):
    policy = Policy.preset("default", budget=50_000, unit="chars", provider="openai")
    cm = (ContextManager(f"sqlite:///{tmp_path / 's.db'}", policy) if url_kind == "sqlite"
          else ContextManager(policy=policy, store=InMemoryStore()))
    a = cm.session("u", "s")
    a.append_openai([{"role": "system", "content": "sys"}, {"role": "user", "content": "first"}])
    b = cm.session("u", "s")
    b.append_openai([{"role": "assistant", "content": "answer"}, {"role": "user", "content": "second"}])
    with pytest.raises(SessionConflict):
        a.prepare()
    a.reload()
    texts = [m["content"] for m in a.prepare().payload]
    assert texts[-1] == "second" and "answer" in texts
