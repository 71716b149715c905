"""HeadStore.lookup: the longest stored prefix of a call's chain, for its tenant (and name),
whether it lies among the chain's newest heads (the first, fixed-shape query) or deeper."""
from __future__ import annotations

import hashlib
from ctxwise import SqlStore
from ctxwise.proxy.heads import CHUNK, NEWEST, HeadStore, heads_rows


def chain(tag: str, n: int) -> list[str]:
    return [hashlib.sha256(f"{tag}-{i}".encode()).hexdigest() for i in range(n)]


def store(url: str) -> tuple[SqlStore, HeadStore]:
    """The heads table of a store on ``url`` (SQLite, or PostgreSQL under scripts/with-postgres.sh)."""
    sql = SqlStore(url)
    return sql, HeadStore(url, engine=sql.engine)


def test_longest_prefix_among_the_newest_heads_and_deeper(store_url: str) -> None:
    sql, heads = store(store_url)
    try:
        a = chain("a", 40)
        heads.write(heads_rows("t1", "", "u", "s-a", a, 0))  # counts 1..40 in session s-a
        # the call re-sends the 40 stored messages and adds 3: found among the newest heads
        found = heads.lookup("t1", None, a + chain("new", 3))
        assert found is not None and (found.count, found.session_id, found.latest) == (40, "s-a", 40)
        assert found.continues
        # a rewrite that keeps only the first 5 messages, then 30 others: deeper than NEWEST
        rewritten = a[:5] + chain("b", 30)
        assert len(rewritten) - 5 > NEWEST
        found = heads.lookup("t1", None, rewritten)
        assert found is not None and (found.count, found.latest) == (5, 40) and not found.continues
        # a chain shorter than NEWEST (padded)
        found = heads.lookup("t1", None, a[:3])
        assert found is not None and found.count == 3
        # nothing shared, another tenant, another name: none
        assert heads.lookup("t1", None, chain("c", 12)) is None
        assert heads.lookup("t2", None, a) is None
        assert heads.lookup("t1", "other", a) is None
        assert heads.lookup("t1", None, []) is None
    finally:
        heads.close()
        sql.close()


def test_a_prefix_past_the_first_chunk_is_found(store_url: str) -> None:
    sql, heads = store(store_url)
    try:
        a = chain("a", 3)
        heads.write(heads_rows("t1", "n", "u", "s-a", a, 0))
        long = a + chain("x", CHUNK + NEWEST + 7)
        found = heads.lookup("t1", "n", long)
        assert found is not None and (found.count, found.session_id, found.name) == (3, "s-a", "n")
        # the newest of two sessions holding the same prefix (a branch re-stores it) wins
        heads.write(heads_rows("t1", "n", "u", "s-b", a, 0))
        found = heads.lookup("t1", "n", long)
        assert found is not None and found.session_id == "s-b"
    finally:
        heads.close()
        sql.close()


def _uncached(kind: str, messages: list[dict], start: str) -> list[str]:
    """The chain straight from wire.fingerprint, without wire's cache of links."""
    from ctxwise.proxy.wire import fingerprint

    out, h = [], start
    for m in messages:
        h = hashlib.sha256(h.encode("ascii") + b"\x00" + fingerprint(kind, m)).hexdigest()
        out.append(h)
    return out


def test_cached_links_give_the_chain_fingerprints_give() -> None:
    """wire.heads reuses links of chains it computed before (a client re-sends its history):
    the same heads as computed afresh, and a value that differs only in its type (1, 1.0,
    true) or text is another link."""
    import json

    from conftest import REPO
    from ctxwise.proxy import wire

    tau = json.loads((REPO.parent / "shared" / "data" / "trajectories" / "tau-bench" /
                      "gpt-4o-airline_subset.json").read_text())
    start = wire.seed("chat", {})
    wire._LINKS.clear()
    for conv in tau[:5]:
        msgs = [m for m in conv.get("traj") or [] if isinstance(m, dict) and m.get("role") != "system"]
        for k in range(1, len(msgs) + 1):
            sent = json.loads(json.dumps(msgs[:k]))  # a fresh parse, as each call's body is
            assert wire.heads("chat", {}, sent, start=start) == _uncached("chat", sent, start)
    assert len(wire._LINKS) > 0
    base = {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "ok"}]}
    variants = [base, {**base, "content": "ok"}, {**base, "content": [{"type": "text", "text": "ok "}]},
                {"role": "user", "content": "1"}, {"role": "user", "content": [{"type": "text", "text": "1"}]},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}]},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"a": 1.0}'}}]},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"a": true}'}}]}]
    for _ in range(2):  # cold, then every link cached
        for v in variants:
            assert wire.heads("chat", {}, [v], start=start) == _uncached("chat", [v], start), v


def test_commit_stores_only_on_the_newest_head_it_was_mapped_on(store_url: str) -> None:
    import pytest

    from ctxwise import SessionConflict

    sql, heads = store(store_url)
    try:
        a = chain("a", 6)
        key = ("t1", "u", "s-a")
        with heads.engine.begin() as conn:
            heads.commit(conn, key, 0, heads_rows("t1", "", "u", "s-a", a[:3], 0, ends=3))
        # mapped on 2 messages, the session is at 3: refused, nothing stored
        with pytest.raises(SessionConflict) as e, heads.engine.begin() as conn:
            heads.commit(conn, key, 2, heads_rows("t1", "", "u", "s-a", a[:4], 2, ends=4))
        assert "not 2" in str(e.value) and "another call of the session" in str(e.value)
        found = heads.lookup("t1", None, a)
        assert found is not None and (found.count, found.latest) == (3, 3)
        # on the newest head: stored; forget_above drops a reply's heads first
        with heads.engine.begin() as conn:
            heads.commit(conn, key, 3, heads_rows("t1", "", "u", "s-a", a[:5], 3), forget_above=None)
        assert heads.newest_call("t1", "u", "s-a") == 3
        with heads.engine.begin() as conn:
            heads.commit(conn, key, 5, [], forget_above=3)
        found = heads.lookup("t1", None, a)
        assert found is not None and (found.count, found.latest) == (3, 3)
    finally:
        heads.close()
        sql.close()
