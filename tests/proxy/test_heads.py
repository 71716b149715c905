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
