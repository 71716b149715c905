"""ctxwise.SessionPool: the one bounded, locked, least-recently-used pool of open sessions
(the server's and both middlewares'), on real sessions of a real SQLite store."""

from __future__ import annotations

import gc
import threading

import pytest

from ctxwise import ContextManager, Policy, PolicyError, SessionPool, ToolResultBlock, text_message
from ctxwise.messages import Message, TextBlock, ToolUseBlock
from ctxwise.pool import MESSAGE_OVERHEAD, held_bytes


class Held:
    """A value holding messages, as a Session does (``.messages``)."""

    def __init__(self, *texts: str) -> None:
        self.messages = [text_message(f"m{i}", "user", t) for i, t in enumerate(texts)]


def test_held_bytes_counts_every_string_a_message_holds():
    """Kind: an estimate that misses where the bytes are (a tool result's output, a call's
    input), or that recurses on deep JSON."""
    big = "x" * 100_000
    result = Message(id="r", role="tool", blocks=[ToolResultBlock(tool_use_id="c", output=[TextBlock(text=big)])])
    assert big.__len__() < held_bytes(result) < len(big) + MESSAGE_OVERHEAD + 100
    deep: dict = {}
    node = deep
    for _ in range(10_000):  # nested 10,000 deep: no RecursionError
        node["k"] = {}
        node = node["k"]
    node["v"] = "y" * 5000
    call = Message(id="a", role="assistant", blocks=[ToolUseBlock(id="c", name="f", input=deep)])
    assert held_bytes(call) > 5000 + 10_000


def test_the_pool_is_bounded_by_entries_and_by_bytes_least_recent_first():
    """Kind: an unbounded cache (by count or by what the values hold)."""
    one = held_bytes(text_message("m0", "user", "a" * 1000))
    pool: SessionPool[str, Held] = SessionPool(max_entries=3, max_bytes=4 * one, max_entry_bytes=2 * one)
    for k in "abc":
        assert pool.put(k, Held("a" * 1000))
    assert pool.get("a") is not None  # a is now the most recent
    assert pool.put("d", Held("a" * 1000))
    assert len(pool) == 3 and "b" not in pool and "a" in pool  # b was the least recent
    assert pool.put("e", Held("a" * 1000, "a" * 1000))  # two messages: the byte bound evicts the oldest
    assert pool.held_bytes <= pool.max_bytes and pool.held_bytes == 4 * one
    assert "c" not in pool and "d" in pool and "a" in pool and "e" in pool
    # a value over the entry bound is not kept, and drops what the key held
    assert not pool.put("a", Held("a" * 3000))
    assert "a" not in pool and pool.held_bytes == 3 * one
    assert pool.evicted == 3


def test_take_gives_one_user_at_a_time_and_keep_guards_a_newer_value():
    pool: SessionPool[str, Held] = SessionPool()
    old, new = Held("old"), Held("new")
    pool.put("k", old)
    assert pool.take("k") is old and pool.take("k") is None and pool.held_bytes == 0
    pool.put("k", new)
    assert not pool.put("k", old, keep=lambda held: held is new)  # the newer one stays
    assert pool.get("k") is new
    assert pool.put("k", old) and pool.get("k") is old
    pool.discard("k")
    assert len(pool) == 0 and pool.held_bytes == 0
    off: SessionPool[str, Held] = SessionPool(max_entries=0)
    assert not off.put("k", new) and len(off) == 0


@pytest.mark.parametrize("kwargs", [{"max_entries": -1}, {"max_bytes": -5}, {"max_bytes": 10, "max_entry_bytes": 11},
                                    {"max_entries": 1.5}])
def test_bad_bounds_are_a_policy_error(kwargs):
    with pytest.raises(PolicyError, match="SessionPool"):
        SessionPool(**kwargs)


def test_many_threads_keep_the_accounting_exact():
    """Kind: a cache without a lock (AgentScope's dict was one): lost updates make the held
    bytes drift from what is held, or the bounds fail."""
    pool: SessionPool[int, Held] = SessionPool(max_entries=20, max_bytes=20 * 2000)
    values = [Held("z" * (i * 37 % 900)) for i in range(64)]

    def work(seed: int) -> None:
        for i in range(3000):
            k = (seed * 7 + i) % 64
            if i % 3 == 0:
                v = pool.take(k)
                if v is not None:
                    pool.put(k, v)
            elif i % 3 == 1:
                pool.put(k, values[k])
            else:
                pool.get(k)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(pool) <= 20 and pool.held_bytes <= pool.max_bytes
    held = sum(pool.weigh(v) for k, v in ((k, pool.get(k)) for k in range(64)) if v is not None)
    assert pool.held_bytes == held


def test_real_sessions_are_weighed_by_their_context_and_forgotten_when_gone(tmp_path):
    with ContextManager(f"sqlite:///{tmp_path / 'p.db'}", Policy(budget=100_000, unit="chars")) as cm:
        s = cm.session("u", "s")
        s.append([text_message("m1", "user", "hello " * 2000)])
        pool: SessionPool[str, object] = SessionPool()
        assert pool.put("s", s)
        assert 12_000 < pool.held_bytes < 12_000 + 2 * MESSAGE_OVERHEAD
        remembered = len(pool._sizes)
        assert remembered == len(s.messages)
        pool.clear()
        del s
        gc.collect()
        assert len(pool._sizes) == 0  # the weak memo holds nothing alive
