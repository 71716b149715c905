"""Helpers for the store tests (no tests here): the recorded sessions split into write batches,
and a worker run in subprocesses (``python tests/test_store_support.py CMD ...``)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from ctxwise.errors import SessionConflict
from ctxwise.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock, text_message

HERE = Path(__file__).resolve().parent
WORKER = str(HERE / "test_store_support.py")


def conversations(trajectories: Path) -> list[tuple[str, list[Message]]]:
    """Every recorded conversation under ``trajectories`` as ``(name, messages)``, read by
    ``ctxwise.formats.load`` (system prompt first; every field without a canonical home is in
    metadata or block ``extra``, so bodies carry nested usage / raw_data dicts, floats and
    unicode)."""
    from ctxwise.formats import load  # here, so the subprocess workers start without the readers

    return [(f"{path.name}#{conv.id}", conv.messages)
            for path in sorted(trajectories.rglob("*.json")) for conv in load(path)]


def batches(messages: list[Message]) -> list[list[Message]]:
    """Split like an engine would write: a user input alone, an assistant message together
    with the tool messages answering it."""
    out: list[list[Message]] = []
    for m in messages:
        if m.role == "tool" and out and out[-1][0].role == "assistant":
            out[-1].append(m)
        else:
            out.append([m])
    return out


def dump_session(url: str, user: str, session: str) -> list[list[Any]]:
    """``[[message_id, seq, state, current_json, original_json], ...]`` in context order."""
    from ctxwise.store import Store

    store = Store(url)
    try:
        st = store.load(user, session, include_hidden=True)
        return [[r.message_id, r.seq, r.state, r.current.model_dump_json(), r.original.model_dump_json()]
                for r in st.rows]
    finally:
        store.close()


def writer(url: str, user: str, session: str, wid: int, m: int) -> None:
    """Append ``m`` batches of 3 messages (a tool cycle and its answer), retrying conflicts."""
    from ctxwise.store import Store

    store = Store(url)
    for j in range(m):
        batch = [
            Message(id=f"w{wid}b{j}a", role="assistant", blocks=[ToolUseBlock(id=f"c{wid}-{j}", name="f")]),
            Message(id=f"w{wid}b{j}t", role="tool",
                    blocks=[ToolResultBlock(tool_use_id=f"c{wid}-{j}", output=[TextBlock(text=f"r{wid}-{j}")])]),
            text_message(f"w{wid}b{j}z", "assistant", f"done {wid}-{j}"),
        ]
        while True:
            version = store.load(user, session).version
            try:
                store.append(user, session, batch, expected_version=version)
                break
            except SessionConflict:
                time.sleep(0.001 * (wid % 3))
    store.close()


def hang(url: str, user: str, session: str, n: int) -> None:
    """Start appending ``n`` messages and stop forever right after the context rows are
    inserted, inside the open transaction (the parent kills this process)."""
    from sqlalchemy import event

    from ctxwise.store import Store

    store = Store(url)

    @event.listens_for(store.engine, "after_cursor_execute")
    def _stall(conn, cursor, statement, params, context, executemany):  # type: ignore[no-untyped-def]
        if statement.lstrip().upper().startswith("INSERT INTO CONTEXT_MESSAGES"):
            print("WRITING", flush=True)
            time.sleep(600)

    version = store.load(user, session).version
    msgs = [text_message(f"h{k}", "user", "x" * 200) for k in range(n)]
    store.append(user, session, msgs, expected_version=version)


if __name__ == "__main__":
    cmd, *rest = sys.argv[1:]
    if cmd == "dump":
        print(json.dumps(dump_session(*rest)))
    elif cmd == "writer":
        writer(rest[0], rest[1], rest[2], int(rest[3]), int(rest[4]))
    elif cmd == "hang":
        hang(rest[0], rest[1], rest[2], int(rest[3]))
    else:
        raise SystemExit(f"unknown command {cmd}")
