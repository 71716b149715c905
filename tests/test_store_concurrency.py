"""Store under real concurrency: several writer processes, a writer killed mid-transaction,
and case B21 (../shared/cases/B21.json). Both backends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from ctxwise.errors import SessionConflict
from ctxwise.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock, text_message
from ctxwise.store import Store

from conftest import CASES
from test_store_support import WORKER

N_WRITERS, M_BATCHES = 4, 12


def test_writers_in_processes_store_whole_batches(store_url: str) -> None:
    store = Store(store_url)
    store.open_session("u", "s", provider="openai", policy={})
    procs = [subprocess.Popen([sys.executable, WORKER, "writer", store_url, "u", "s", str(w), str(M_BATCHES)],
                              stderr=subprocess.PIPE, text=True) for w in range(N_WRITERS)]
    for p in procs:
        _, err = p.communicate(timeout=240)
        assert p.returncode == 0, err
    st = store.load("u", "s")
    assert st.version == N_WRITERS * M_BATCHES
    rows = st.rows
    assert len(rows) == 3 * N_WRITERS * M_BATCHES
    assert len({r.message_id for r in rows}) == len(rows)  # no duplicates
    assert [r.seq for r in rows] == list(range(1, len(rows) + 1))
    seen_batches = []
    for k in range(0, len(rows), 3):  # each batch contiguous: a, t, z of one writer's batch
        ids = [r.message_id for r in rows[k:k + 3]]
        stem = ids[0][:-1]
        assert ids == [stem + "a", stem + "t", stem + "z"], ids
        seen_batches.append(stem)
    assert sorted(seen_batches) == sorted(f"w{w}b{j}" for w in range(N_WRITERS) for j in range(M_BATCHES))
    for w in range(N_WRITERS):  # each writer's batches in its own order
        mine = [int(s.split("b")[1]) for s in seen_batches if s.startswith(f"w{w}b")]
        assert mine == sorted(mine)
    # the version that wrote each batch grows strictly with its position
    from sqlalchemy import select

    from ctxwise.store.schema import ContextMessageRow as C

    with store.engine.connect() as conn:
        versions = [v for (v,) in conn.execute(select(C.version).where(C.user_id == "u").order_by(C.seq))]
    per_batch = [versions[k] for k in range(0, len(versions), 3)]
    assert all(versions[k] == versions[k + 1] == versions[k + 2] for k in range(0, len(versions), 3))
    assert per_batch == list(range(1, N_WRITERS * M_BATCHES + 1))
    transcript = store.transcript("u", "s")
    assert len(transcript) == N_WRITERS * M_BATCHES
    store.close()


def test_killed_writer_leaves_the_session_as_before(store_url: str) -> None:
    store = Store(store_url)
    v = store.open_session("u", "s", provider="openai", policy={}).version
    v = store.append("u", "s", [text_message("m0", "user", "before")], expected_version=v)
    p = subprocess.Popen([sys.executable, WORKER, "hang", store_url, "u", "s", "5000"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        assert line.strip() == "WRITING", p.stderr.read()
    finally:
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=30)
    assert p.returncode == -signal.SIGKILL
    after = Store(store_url, wait_timeout_s=10)  # a fresh process view
    st = after.load("u", "s")
    assert st.version == v and [r.message_id for r in st.rows] == ["m0"]
    t0 = time.monotonic()
    assert after.append("u", "s", [text_message("m1", "assistant", "after")], expected_version=v) == v + 1
    assert time.monotonic() - t0 < 10
    assert [r.message_id for r in after.load("u", "s").rows] == ["m0", "m1"]
    after.close()
    store.close()


def _openai_to_messages(items: list[dict], prefix: str) -> list[Message]:
    out = []
    for k, it in enumerate(items):
        mid = f"{prefix}{k}"
        if it["role"] == "tool":
            out.append(Message(id=mid, role="tool", blocks=[ToolResultBlock(
                tool_use_id=it["tool_call_id"], output=[TextBlock(text=it["content"])])]))
        else:
            blocks = [TextBlock(text=it["content"])] if it.get("content") else []
            blocks += [ToolUseBlock(id=c["id"], name=c["function"]["name"], input=json.loads(c["function"]["arguments"]))
                       for c in it.get("tool_calls", [])]
            out.append(Message(id=mid, role=it["role"], blocks=blocks))
    return out


def _append_retrying(store: Store, batch: list[Message]) -> None:
    while True:
        try:
            store.append("u", "b21", batch, expected_version=store.load("u", "b21").version)
            return
        except SessionConflict:
            time.sleep(0.001)


def test_case_b21_atomic_batches_and_writable_after_failure(store_url: str) -> None:
    case = json.loads((CASES / "B21.json").read_text())
    assert case["id"] == "B21"
    base = _openai_to_messages(case["messages"], "base")
    A = _openai_to_messages([
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_c1", "type": "function", "function": {
            "name": "fetch_url", "arguments": json.dumps({"url": "https://example.org/review"})}}]},
        {"role": "tool", "tool_call_id": "call_c1", "content": "review text ..."}], "A")
    B = _openai_to_messages([{"role": "user", "content": "Also check lithium iron phosphate."}], "B")
    D = _openai_to_messages([{"role": "user", "content": "Status?"}], "D")

    setup = Store(store_url)
    v = setup.open_session("u", "b21", provider="openai", policy={}).version
    setup.append("u", "b21", base, expected_version=v)
    writers = [Store(store_url), Store(store_url)]
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def run(store: Store, batch: list[Message]) -> None:
        try:
            barrier.wait()
            _append_retrying(store, batch)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(writers[0], A)), threading.Thread(target=run, args=(writers[1], B))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors

    class Unserializable:
        pass

    C = Store(store_url)
    version = C.load("u", "b21").version
    with pytest.raises((TypeError, ValueError)):
        C.append("u", "b21", [text_message("C0", "assistant", "partial"),
                              Message(id="C1", role="assistant", metadata={"obj": Unserializable()})],
                 expected_version=version)
    with pytest.raises(TypeError):
        C.append("u", "b21", [text_message("C0", "assistant", "partial"), Unserializable()],  # type: ignore[list-item]
                 expected_version=version)
    t0 = time.monotonic()
    Dstore = Store(store_url, wait_timeout_s=1.0)
    Dstore.append("u", "b21", D, expected_version=version)  # must succeed at once
    assert time.monotonic() - t0 < 2.0

    items = [r.current for r in setup.load("u", "b21").rows]
    ids = [m.id for m in items]
    options = [[m.id for m in base + A + B + D], [m.id for m in base + B + A + D]]
    assert ids in options                                   # persisted_equals_one_of
    assert not any(i.startswith("C") for i in ids)          # batch_atomic
    assert len(ids) == len(set(ids))                        # no_duplicates
    for k, m in enumerate(items):                           # no_orphan_tool_results
        for r in m.tool_results:
            assert items[k - 1].role == "assistant" and r.tool_use_id in [u.id for u in items[k - 1].tool_uses]
    assert items == (base + A + B + D if ids == options[0] else base + B + A + D)
    for s in (setup, C, Dstore, *writers):
        s.close()
