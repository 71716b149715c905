"""The service's session cache is bounded by bytes (issue 28, "the service's session cache
keeps each cached session's uncompacted context"): 60 sessions each appended an 8 MB tool
result through a real server (uvicorn, a SQLite file) leave the cache holding at most its
configured bytes, and the process's resident memory grows by no more than a bound computed
from that limit (with 1,024 entries and no byte bound, the 60 results stayed pinned: ~480 MB)."""

from __future__ import annotations

import ctypes
import gc
import os

from ctxwise import Policy

from .conftest import start_server, stop_server

MB = 2**20
RESULT = 8 * MB
SESSIONS = 60
LIMIT = 64 * MB
"""The byte bound the server is configured with: 60 x 8 MB is 7.5 times it."""


def rss() -> int:
    """This process's resident set in bytes, after a full collection and handing freed heap
    pages back to the system (so the figure is what is alive, not what malloc keeps around)."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the figure only gets more generous
        pass
    with open(f"/proc/{os.getpid()}/status", encoding="ascii") as f:
        line = next(x for x in f if x.startswith("VmRSS:"))
    return int(line.split()[1]) * 1024


def batch(i: int) -> list[dict]:
    """A tool cycle whose result is RESULT bytes of text (distinct per session)."""
    call = f"call_{i}"
    body = (f"row {i}: " + "payload " * 12 + "\n") * (RESULT // 105)
    return [{"role": "system", "content": "You read logs."},
            {"role": "user", "content": f"read log {i}"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": call, "type": "function", "function": {"name": "read_log", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": call, "content": body[:RESULT]}]


def test_sixty_sessions_of_8_mb_results_stay_within_the_byte_bound(tmp_path):
    import httpx

    from .conftest import make_keys

    url = f"sqlite:///{tmp_path / 'big.db'}"
    policy = Policy.preset("default", budget=200_000, unit="chars")
    server, thread, base = start_server(url, policy, session_cache_bytes=LIMIT)
    keys, _ = make_keys(url)
    pool = server.config.app.state.server.sessions.pool
    try:
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {keys['a']}"}, timeout=120) as http:
            def append(i: int) -> None:
                r = http.post(f"/v1/sessions/log-{i}/messages", params={"user_id": "u"},
                              json={"format": "openai", "messages": batch(i)})
                assert r.status_code == 200, r.text[:500]

            for i in range(2):  # warm up: the first requests' one-time allocations
                append(-1 - i)
            start = rss()
            most = 0
            for i in range(SESSIONS):
                append(i)
                most = max(most, pool.held_bytes)
                assert pool.held_bytes <= LIMIT and len(pool) <= LIMIT // RESULT
            grown = rss() - start
    finally:
        stop_server(server, thread)
    # the cache did keep 8 MB sessions (it is not simply off), and evicted the rest
    assert most >= RESULT and pool.evicted >= SESSIONS - LIMIT // RESULT
    # what stays alive: at most the cache's bound, plus SQLite's page cache and the last
    # request's leftovers; the 60 results (480 MB) are not among it
    assert grown < LIMIT + 96 * MB, f"resident memory grew by {grown / MB:.0f} MB"
