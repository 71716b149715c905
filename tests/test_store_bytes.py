"""Bytes a SQLite write really costs (the WAL file), not time (issue 15 item 5)."""

from __future__ import annotations

import os
import sqlite3

from ctxwise.changes import Replace
from ctxwise.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock, text_message
from ctxwise.store import SqlStore


def _wal_after(db: str, write) -> int:
    """Size of the WAL file after ``write()``, starting from an empty WAL (the file only grows
    between checkpoints that truncate it: its size is what the write appended)."""
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert os.path.getsize(db + "-wal") == 0
    write()
    return os.path.getsize(db + "-wal")


def test_clearing_a_huge_result_writes_the_edit_not_a_second_copy(tmp_path):
    """Kind: write amplification. Clearing a 5 MB tool result to a 31 KB body rewrote the whole
    row, original included (SQLite rewrites every overflow page of a row it updates): about
    11 MB of WAL for a 31 KB edit. Originals now live in a row the edit does not touch."""
    db = str(tmp_path / "big.db")
    store = SqlStore(f"sqlite:///{db}")
    v = store.open_session("u", "s", provider="openai", policy={}).version
    body = "".join(f"line {i}: " + "payload " * 8 + "\n" for i in range(70_000))
    assert len(body) > 5_000_000
    call = Message(id="a1", role="assistant", blocks=[ToolUseBlock(id="c1", name="dump", input={})])
    result = Message(id="t1", role="tool", blocks=[ToolResultBlock(tool_use_id="c1", name="dump",
                                                                   output=[TextBlock(text=body)])])
    v = store.append("u", "s", [text_message("u1", "user", "dump it"), call, result], expected_version=v)
    edited = result.model_copy(update={"blocks": [result.blocks[0].model_copy(
        update={"output": [TextBlock(text=body[:31_000])]})]})
    versions = []
    wal = _wal_after(db, lambda: versions.append(
        store.apply("u", "s", [Replace("t1", edited, "cleared")], [{"stage": "clearing"}], expected_version=v)))
    assert wal < 400_000, f"{wal:,} bytes of WAL for a 31 KB edit"
    assert store.original("u", "s", "c1").tool_results[0].text == body
    assert store.load("u", "s").rows[-1].current.tool_results[0].text == body[:31_000]
    store.close()


def test_text_the_store_cannot_hold_is_reported_where_it_is():
    # kind: a NUL in a message's text vs in its id; the error names which, so the user fixes the
    # right thing (a clean id was blamed for the text's NUL).
    from ctxwise import ContextManager
    from ctxwise.errors import MessageNotStorable

    s = ContextManager("memory://").session("u", "s")
    for msg, where in ((text_message("m1", "user", "a\x00b"), "its content"),
                       (text_message("m\x00", "user", "ok"), "its id")):
        try:
            s.append([msg])
        except MessageNotStorable as e:
            assert e.rule == "nul-character" and where in str(e), str(e)
        else:
            raise AssertionError("a NUL was stored")
    assert s.messages == []
