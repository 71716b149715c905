"""Errors of the service that no caller should see as a server fault, and the ones that are:
numbers past 64 bits are 422 on both backends; an unhandled error is a 500 whose trace id is in
the body and, with its traceback, in the server's log (real uvicorn, a real store whose row was
damaged behind the server's back).

Kinds covered: a query number the database cannot bind (2^63) answered 500 on SQLite and 503
"retry" on PostgreSQL; a 500 whose body points at a log that has nothing in it; a 500 logged
twice, once with no id; a 500 that closes the connection under a client that reuses it.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, update

from ctxwise.server.keys import KeyStore
from ctxwise.store.schema import OriginalRow

from .conftest import Live, make_keys, start_server, stop_server

BIG = 2**63
HUGE = 10**30


def _append(c: httpx.Client, session: str = "chat-1", **extra: object) -> httpx.Response:
    return c.post(f"/v1/sessions/{session}/messages", params={"user_id": "alice"},
                  json={"format": "openai", "messages": [{"role": "user", "content": "Where is order A-1?"}], **extra})


@pytest.mark.parametrize("params", [{"offset": BIG}, {"offset": HUGE}, {"offset": -1}, {"limit": BIG},
                                    {"limit": -1}, {"offset": BIG, "user_id": "alice"}])
def test_list_numbers_out_of_range_are_422(live: Live, params):
    c = live.client()
    assert _append(c).status_code == 200
    r = c.get("/v1/sessions", params=params)
    assert r.status_code == 422, (params, r.status_code, r.text)
    body = r.json()["error"]
    assert body["type"] == "RequestInvalid" and next(iter(params)) in body["message"]


def test_the_largest_offset_is_an_empty_page(live: Live):
    c = live.client()
    assert _append(c).status_code == 200
    for params in ({"offset": BIG - 1}, {"offset": BIG - 1, "user_id": "alice"}):
        r = c.get("/v1/sessions", params=params)
        assert r.status_code == 200 and r.json()["sessions"] == [], r.text


def test_expected_versions_out_of_range_are_422(live: Live):
    c = live.client()
    assert _append(c).status_code == 200
    for big in (BIG, HUGE):
        r = _append(c, expected_version=big)                                  # the hot path
        assert r.status_code == 422 and "expected_version" in r.text, r.text
        r = c.post("/v1/sessions/chat-1/messages?user_id=alice", content=(            # through FastAPI
            '{"format": "openai", "messages": [], "expected_version": %d}' % big).encode(),
                   headers={"Content-Type": "application/json; charset=utf-8"})
        assert r.status_code == 422 and "expected_version" in r.text, r.text
        r = c.post("/v1/sessions/chat-1/prepare", params={"user_id": "alice"}, json={"expected_version": big})
        assert r.status_code == 422 and "expected_version" in r.text, r.text
        r = c.delete("/v1/sessions/chat-1/messages/last", params={"user_id": "alice", "expected_version": big})
        assert r.status_code == 422 and "expected_version" in r.text, r.text
    assert c.get("/v1/sessions/chat-1/context", params={"user_id": "alice"}).json()["version"] == 1


def test_inspector_offsets_past_64_bits_are_an_empty_page(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'ui.db'}"
    server, thread, base = start_server(url)
    try:
        for offset in (BIG, HUGE, -5):
            r = httpx.get(f"{base}/ui", params={"offset": offset}, timeout=30)
            assert r.status_code == 200 and "Sessions" in r.text, (offset, r.status_code)
            r = httpx.get(f"{base}/ui/api/sessions-version", params={"offset": offset}, timeout=30)
            assert r.status_code == 200, (offset, r.status_code)
    finally:
        stop_server(server, thread)


# -- 500s in the log ----------------------------------------------------------------------------


def _damage(url: str) -> None:
    """Write a body no message can be read from into every stored original (as a broken
    migration or a hand edit of the database would)."""
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(update(OriginalRow.__table__).values(body={"role": 42, "blocks": "not blocks"}))
    engine.dispose()


def _trace_of(r: httpx.Response) -> str:
    assert r.status_code == 500, r.text
    body = r.json()["error"]
    assert body["type"] == "InternalError" and "Traceback" not in r.text
    trace = body["trace_id"]
    assert re.fullmatch(r"[0-9a-f]{32}", trace) and trace in body["message"]
    assert r.headers["x-trace-id"] == trace
    return str(trace)


def test_a_500_is_logged_with_its_trace_id(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    url = f"sqlite:///{tmp_path / 'broken.db'}"
    server, thread, base = start_server(url, session_cache=0)
    keys, _ = make_keys(url)
    try:
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {keys['a']}"}, timeout=30) as c:
            assert _append(c).status_code == 200
            _damage(url)
            caplog.set_level(logging.ERROR, logger="ctxwise.server")
            traces = [_trace_of(c.get("/v1/sessions/chat-1/context", params={"user_id": "alice"})),   # FastAPI
                      _trace_of(c.post("/v1/sessions/chat-1/prepare", params={"user_id": "alice"},   # hot path
                                       json={})),
                      _trace_of(c.get("/ui/session", params={"user": "alice", "id": "chat-1"}))]      # inspector
    finally:
        stop_server(server, thread)
    assert len(set(traces)) == 3
    for trace in traces:
        found = [rec for rec in caplog.records if rec.name.startswith("ctxwise.server") and trace in rec.getMessage()]
        assert len(found) == 1, trace
        assert found[0].levelno == logging.ERROR and found[0].exc_info is not None
        assert "ValidationError" in caplog.text


def test_ctxwise_serve_writes_the_500_to_its_log(tmp_path: Path):
    from .test_ui_chromium import serve

    url = f"sqlite:///{tmp_path / 'served.db'}"
    from ctxwise import ContextManager

    ContextManager(url).close()
    ks = KeyStore(url)
    key = ks.create("acme")[0]
    ks.close()
    proc, base = serve(url, tmp_path)
    try:
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30) as c:
            assert _append(c).status_code == 200
            _damage(url)
            # read from the store on every call (the context could come from the process's cache)
            trace = _trace_of(c.get("/v1/sessions/chat-1/tool-results/x",
                                    params={"user_id": "alice", "message_id": "msg-000001"}))
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    log = next(tmp_path.glob("serve-*.log")).read_text()
    at = log.index(trace)
    assert "ERROR" in log[max(0, at - 200):at] and "Traceback" in log[at:] and "ValidationError" in log[at:]
    assert log.count("Traceback") == 1                          # once, under its trace id


def test_a_500_keeps_the_connection_open(tmp_path: Path):
    """A client that reuses its connection after a 500 gets its next answer (no reset)."""
    url = f"sqlite:///{tmp_path / 'kept.db'}"
    server, thread, base = start_server(url, session_cache=0)
    keys, _ = make_keys(url)
    ports = set()
    try:
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {keys['a']}"}, timeout=30) as c:
            assert _append(c).status_code == 200
            _damage(url)
            for _ in range(5):
                r = c.get("/v1/sessions/chat-1/context", params={"user_id": "alice"})
                assert r.status_code == 500 and r.headers.get("connection", "").lower() != "close"
                ports.add(r.extensions["network_stream"].get_extra_info("socket").getsockname()[1])
                r = c.get("/healthz")
                assert r.status_code == 200
                ports.add(r.extensions["network_stream"].get_extra_info("socket").getsockname()[1])
        assert len(ports) == 1                                      # one connection for all ten
    finally:
        stop_server(server, thread)
