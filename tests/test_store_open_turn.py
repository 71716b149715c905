"""The store's append keeps the open turn it leaves (ctxwise.store.base.OpenTurn): a store
object appending to a session it wrote last reads no open-turn rows, and the transcript and
header it writes are those of a store that reads them; another writer in between is seen."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from ctxwise import SessionConflict, SqlStore
from ctxwise.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock, text_message
from ctxwise.store import InMemoryStore


def _call(mid: str, cid: str) -> Message:
    return Message(id=mid, role="assistant", blocks=[ToolUseBlock(id=cid, name="look", input={"q": cid})])


def _result(mid: str, cid: str) -> Message:
    return Message(id=mid, role="tool", blocks=[ToolResultBlock(tool_use_id=cid, output=[TextBlock(text=f"r {cid}")])])


def _turns(n: int) -> list[list[Message]]:
    """Batches of a tool loop: a user turn, tool calls with results, a final reply, again."""
    out: list[list[Message]] = [[text_message("sys", "system", "Be brief.")]]
    for i in range(n):
        if i % 4 == 0:
            out.append([text_message(f"u{i}", "user", f"question {i}")])
        out.append([_call(f"a{i}", f"c{i}"), _result(f"t{i}", f"c{i}")])
        if i % 4 == 3:
            out.append([text_message(f"f{i}", "assistant", f"answer {i}")])
    return out


def _open(store: Any, session: str) -> None:
    store.open_session("u", session, provider="openai", policy={})


def _append_all(stores: list[Any], session: str, batches: list[list[Message]]) -> None:
    version = 0
    for k, batch in enumerate(batches):
        version = stores[k % len(stores)].append("u", session, batch, expected_version=version)


def _record(store: Any, session: str) -> tuple[Any, ...]:
    snap = store.load("u", session, include_hidden=True)
    rows = [(r.seq if hasattr(r, "seq") else None, r.state, r.current.id) for r in snap.rows]
    transcript = [(t.seq, t.role, t.text, t.status, t.message_ids, t.blocks) for t in store.read_transcript("u", session)]
    return snap.version, rows, transcript


def test_appends_of_one_store_read_no_open_turn_and_write_what_fresh_stores_write(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    kept = SqlStore(url)
    selects: list[str] = []

    @event.listens_for(kept.engine, "before_cursor_execute")
    def _seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().startswith("SELECT") and "context_messages.seq >= ?" in statement:
            selects.append(statement)

    batches = _turns(12)
    _open(kept, "kept")
    _append_all([kept], "kept", batches)
    assert selects == []  # each append built on the open turn its own last append left
    # the same batches, each appended by a store object that never wrote the session: it reads the open turn
    _open(kept, "read")
    fresh = [SqlStore(url) for _ in range(len(batches))]
    _append_all(fresh, "read", batches)
    kv, krows, ktranscript = _record(kept, "kept")
    rv, rrows, rtranscript = _record(kept, "read")
    assert (kv, krows) == (rv, rrows) and ktranscript == rtranscript
    assert any(t[1] == "assistant" and t[3] == "normal" for t in ktranscript)  # the turns were folded into replies


def test_another_writer_in_between_is_read_not_assumed(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    a, b = SqlStore(url), SqlStore(url)
    batches = _turns(8)
    _open(a, "s")
    # a and b take turns: every append of each follows one of the other's
    _append_all([a, b], "s", batches)
    _open(a, "one")
    _append_all([a], "one", batches)
    assert _record(a, "s")[1:] == _record(a, "one")[1:]
    v = a.version("u", "s")
    b.append("u", "s", [text_message("late", "user", "more")], expected_version=v)
    with pytest.raises(SessionConflict):  # a's kept turn is at v: its stale write is refused as before
        a.append("u", "s", [text_message("x", "user", "x")], expected_version=v)


def test_a_rebasing_store_reads_the_turn_another_writer_left(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    a, b = SqlStore(url, wait=True), SqlStore(url)
    _open(a, "s")
    v = a.append("u", "s", [text_message("q", "user", "q"), _call("a1", "c1")], expected_version=0)
    b.append("u", "s", [_result("t1", "c1")], expected_version=v)
    # a appends on its old version: it rebases onto b's write and must fold b's tool result into the reply
    a.append("u", "s", [text_message("done", "assistant", "ok")], expected_version=v)
    reply = [t for t in a.read_transcript("u", "s") if t.role == "assistant"]
    assert len(reply) == 1 and reply[0].message_ids == ["a1", "t1", "done"]


def test_the_in_memory_store_keeps_its_turns_too() -> None:
    store = InMemoryStore()
    _open(store, "s")
    batches = _turns(8)
    _append_all([store], "s", batches)
    other = InMemoryStore()
    _open(other, "s")
    for k, batch in enumerate(batches):
        other.append("u", "s", batch, expected_version=k)
        other.__dict__.pop("_ctxwise_open_turns", None)  # nothing kept: each append reads the turn
    assert _record(store, "s") == _record(other, "s")


def test_a_long_open_turn_is_not_kept_but_read(tmp_path: Path) -> None:
    from ctxwise.store.base import MAX_TURN_KEPT

    url = f"sqlite:///{tmp_path / 's.db'}"
    store = SqlStore(url)
    reads: list[str] = []

    @event.listens_for(store.engine, "before_cursor_execute")
    def _seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().startswith("SELECT") and "context_messages.seq >= ?" in statement:
            reads.append(statement)

    _open(store, "s")
    v = store.append("u", "s", [text_message("q", "user", "go")], expected_version=0)
    for i in range(MAX_TURN_KEPT // 2 + 1):
        v = store.append("u", "s", [_call(f"a{i}", f"c{i}"), _result(f"t{i}", f"c{i}")], expected_version=v)
    assert reads == []  # the turn grew past the bound only with the last append
    store.append("u", "s", [text_message("done", "assistant", "ok")], expected_version=v)
    assert len(reads) == 1
    reply = [t for t in store.read_transcript("u", "s") if t.role == "assistant"]
    assert len(reply) == 1 and len(reply[0].message_ids) == 2 * (MAX_TURN_KEPT // 2 + 1) + 1


def test_an_open_turn_heavier_than_the_byte_bound_is_not_kept():
    """Kind (tests/server/test_session_memory.py): sixty sessions each holding an 8 MB result
    kept 480 MB alive in the open-turn cache, bounded by message counts only. A turn over
    MAX_TURN_BYTES is read again by the next append instead of kept."""
    from collections import OrderedDict

    from ctxwise.messages import text_message
    from ctxwise.store.base import MAX_TURN_BYTES, OpenTurn, _keep_turn

    held: OrderedDict = OrderedDict()
    light = OpenTurn(1, None, ((1, text_message("u1", "user", "hi")),))
    heavy = OpenTurn(1, None, ((1, text_message("u2", "user", "x" * (MAX_TURN_BYTES + 1))),))
    _keep_turn(held, ("u", "a"), light)
    _keep_turn(held, ("u", "b"), heavy)
    assert list(held) == [("u", "a")]
    _keep_turn(held, ("u", "a"), heavy)  # the same session's turn grew past the bound: dropped
    assert list(held) == []
