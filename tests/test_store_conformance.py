"""The store conformance suite: every SessionStore / MemoryStore implementation (SqlStore on
SQLite and PostgreSQL, InMemoryStore) runs these tests (the ``any_store`` fixture), the way
langgraph's checkpointer conformance tests pin one contract for every saver. SQL-only checks
(statements written, migrations, several processes) are in test_store_sql.py."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest
from sqlalchemy import create_engine, event, insert, inspect

from ctxwise.errors import SessionConflict, SessionNotFound
from ctxwise.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock, text_message
from ctxwise.store import Hide, InsertSummary, Replace, Store
from ctxwise.store import migrate
from ctxwise.store.schema import SessionRow

from conftest import TRAJECTORIES
from test_store_support import WORKER, batches, conversations, dump_session

POLICY = {"budget": 1000, "unit": "chars", "watermarks": {"clear": 0.5, "summarize": 0.8}}


def tool_cycle(i: int, body: str = "result body") -> list[Message]:
    return [
        Message(id=f"a{i}", role="assistant", blocks=[ToolUseBlock(id=f"call{i}", name="lookup", input={"q": i})]),
        Message(id=f"t{i}", role="tool", blocks=[ToolResultBlock(tool_use_id=f"call{i}", name="lookup",
                                                                 output=[TextBlock(text=f"{body} {i}")])]),
    ]


def cleared(m: Message) -> Message:
    r = m.tool_results[0]
    return m.model_copy(update={"blocks": [r.model_copy(update={"output": [TextBlock(text="[cleared]")]})]})


def fill(store, user: str = "u1", session: str = "s1", turns: int = 5) -> int:
    v = store.open_session(user, session, provider="openai", policy=POLICY).version
    for i in range(turns):
        v = store.append(user, session, [text_message(f"u{i}", "user", f"question {i}")], expected_version=v)
        v = store.append(user, session, tool_cycle(i), expected_version=v)
        v = store.append(user, session, [text_message(f"r{i}", "assistant", f"answer {i}")], expected_version=v)
    return v


def in_new_process(url: str, user: str, session: str) -> list[list]:
    out = subprocess.run([sys.executable, WORKER, "dump", url, user, session], capture_output=True,
                         text=True, check=True, timeout=120)
    return json.loads(out.stdout)


@pytest.fixture
def store(any_store):
    """Every backend: SQLite, PostgreSQL, in-memory."""
    return any_store


def snapshot(store, user: str = "u1", session: str = "s1") -> list:
    """Everything stored for a session, for "nothing changed" checks on any backend."""
    st = store.load(user, session, include_hidden=True)
    return [st.version, st.policy, st.state,
            [[r.message_id, r.seq, r.state, r.size, r.current.model_dump_json(), r.original.model_dump_json()]
             for r in st.rows],
            [(t.seq, t.role, t.text, t.blocks, t.status, t.message_ids) for t in store.transcript(user, session)],
            store.events(user, session)]


def test_round_trip_every_recorded_conversation(store) -> None:
    """Every recorded conversation comes back byte-identical (pydantic JSON) from every backend."""
    convs = conversations(TRAJECTORIES)
    assert len(convs) >= 270
    for k, (name, msgs) in enumerate(convs):
        sid = f"c{k}"
        v = store.open_session("rt", sid, provider="openai", policy={"name": name}).version
        for batch in batches(msgs):
            v = store.append("rt", sid, batch, expected_version=v)
    for k, (name, msgs) in enumerate(convs):
        st = store.load("rt", f"c{k}")
        assert all(r.state == "verbatim" and r.current == r.original for r in st.rows)
        assert [m.model_dump_json() for m in st.context()] == [m.model_dump_json() for m in msgs], name


def test_states_and_order(store) -> None:
    v = fill(store, turns=4)
    st = store.load("u1", "s1")
    t0 = next(r.current for r in st.rows if r.message_id == "t0")
    t1 = next(r.current for r in st.rows if r.message_id == "t1")
    v = store.apply("u1", "s1", [Replace("t0", cleared(t0)), Replace("t1", cleared(t1))],
                    [{"stage": "clearing", "affected_ids": ["t0", "t1"]}], expected_version=v)
    summary = text_message("sum1", "user", "Summary of turns 0-1", ctxwise={"kind": "summary"})
    ids = ["u0", "a0", "t0", "r0", "u1", "a1", "t1", "r1"]
    v = store.apply("u1", "s1", [InsertSummary(summary, "u0"), Hide(ids, "summarized")],
                    [{"stage": "summarizing", "summary_id": "sum1"}], expected_version=v)
    st = store.load("u1", "s1", include_hidden=True)
    assert st.version == v == 4 * 3 + 2
    assert [m.id for m in st.context()] == ["sum1", "u2", "a2", "t2", "r2", "u3", "a3", "t3", "r3"]
    visible = store.load("u1", "s1")  # the default load reads the visible context only
    assert [r.message_id for r in visible.rows] == ["sum1", "u2", "a2", "t2", "r2", "u3", "a3", "t3", "r3"]
    states = {r.message_id: r.state for r in st.rows}
    assert all(states[i] == "summarized" for i in ids)
    t0row = next(r for r in st.rows if r.message_id == "t0")
    assert t0row.original.tool_results[0].text == "result body 0"
    assert t0row.current.tool_results[0].text == "[cleared]"


def test_rolling_summaries_take_the_anchor_spot(store) -> None:
    v = fill(store, turns=6)
    s1 = text_message("sum1", "user", "summary 1")
    v = store.apply("u1", "s1", [InsertSummary(s1, "u1"),
                                 Hide(["u1", "a1", "t1", "r1", "u2", "a2", "t2", "r2"], "summarized")],
                    [], expected_version=v)
    assert [m.id for m in store.load("u1", "s1").context()][:6] == ["u0", "a0", "t0", "r0", "sum1", "u3"]
    s2 = text_message("sum2", "user", "summary 2")
    v = store.apply("u1", "s1", [InsertSummary(s2, "sum1"), Hide(["sum1", "u3", "a3", "t3", "r3"], "summarized")],
                    [], expected_version=v)
    v = store.apply("u1", "s1", [Hide(["u0", "a0", "t0", "r0"], "trimmed")], [], expected_version=v)
    st = store.load("u1", "s1", include_hidden=True)
    assert [m.id for m in st.context()] == ["sum2", "u4", "a4", "t4", "r4", "u5", "a5", "t5", "r5"]
    order = [r.message_id for r in st.rows]
    assert order.index("sum1") < order.index("sum2") < order.index("u3")
    assert order.index("u1") < order.index("sum1") < order.index("a1")
    hidden = {r.message_id: r for r in st.rows if not r.visible}
    assert hidden["u0"].state == "trimmed" and hidden["sum1"].state == "summarized"
    assert hidden["t1"].original.tool_results[0].text == "result body 1"


def test_original_returns_the_uncleared_result_latest_on_reuse(store) -> None:
    v = store.open_session("u1", "s1", provider="openai", policy={}).version
    first = tool_cycle(1, "first")
    v = store.append("u1", "s1", first, expected_version=v)
    again = [m.model_copy(update={"id": m.id + "x"}) for m in tool_cycle(1, "second")]
    v = store.append("u1", "s1", again, expected_version=v)
    v = store.apply("u1", "s1", [Replace("t1x", cleared(again[1]))], [], expected_version=v)
    assert store.original("u1", "s1", "call1") == again[1]
    assert store.original("u1", "s1", "nope") is None


def test_events_round_trip_in_order(store) -> None:
    v = fill(store, turns=1)
    evs = [{"stage": "clearing", "trigger": "watermark", "before": 900, "after": 400, "unit": "chars",
            "affected_ids": ["t0"], "duration_ms": 1.5, "usage": None, "zeta": 1, "alpha": {"b": 2, "a": 1}},
           {"stage": "summarizing", "summary_id": "s", "usage": {"input_tokens": 10}}]
    v = store.apply("u1", "s1", [], evs[:1], expected_version=v)
    v = store.apply("u1", "s1", [], evs[1:], expected_version=v)
    got = store.events("u1", "s1")
    assert got == evs
    assert [list(e) for e in got] == [list(e) for e in evs]  # key order kept


def test_other_user_sees_nothing(store) -> None:
    v = fill(store, "alice", "shared-id", turns=1)
    with pytest.raises(SessionNotFound):
        store.load("bob", "shared-id")
    for call in (lambda: store.append("bob", "shared-id", [text_message("x", "user", "hi")], expected_version=v),
                 lambda: store.apply("bob", "shared-id", [Hide(["u0"])], [], expected_version=v),
                 lambda: store.events("bob", "shared-id"), lambda: store.transcript("bob", "shared-id"),
                 lambda: store.original("bob", "shared-id", "call0")):
        with pytest.raises(SessionNotFound):
            call()
    bob = store.open_session("bob", "shared-id", provider="anthropic", policy={})
    assert bob.rows == [] and bob.version == 0 and bob.provider == "anthropic"
    assert len(store.load("alice", "shared-id").rows) == 4
    assert [i.session_id for i in store.list_sessions("bob")] == ["shared-id"]
    assert {(i.user_id, i.provider) for i in store.list_sessions()} == {("alice", "openai"), ("bob", "anthropic")}


def test_bad_batches_store_nothing(store) -> None:
    v = fill(store, turns=1)
    before = snapshot(store)

    class Opaque:
        pass

    bad = [
        [text_message("ok1", "assistant", "partial"), Message(id="bad", role="user", metadata={"x": Opaque()})],
        [text_message("ok2", "assistant", "partial"), object()],
        [text_message("u0", "user", "id already stored")],
        [text_message("dup", "user", "a"), text_message("dup", "user", "b")],
    ]
    for batch in bad:
        with pytest.raises((TypeError, ValueError)):
            store.append("u1", "s1", batch, expected_version=v)
    with pytest.raises(ValueError):
        store.apply("u1", "s1", [Replace("nope", text_message("nope", "tool", "x"))], [], expected_version=v)
    with pytest.raises(ValueError):
        store.apply("u1", "s1", [Hide(["u0"]), Hide(["missing"])], [], expected_version=v)
    with pytest.raises(ValueError):
        store.apply("u1", "s1", [], [{"when": Opaque()}], expected_version=v)
    assert snapshot(store) == before
    assert store.load("u1", "s1").version == v
    assert store.append("u1", "s1", [text_message("fine", "user", "ok")], expected_version=v) == v + 1


def test_transcript_rows_are_written_with_the_turn(store) -> None:
    fill(store, turns=2)
    rows = store.transcript("u1", "s1")
    assert [(r.seq, r.role, r.status) for r in rows] == [
        (1, "user", "normal"), (2, "assistant", "normal"), (3, "user", "normal"), (4, "assistant", "normal")]
    assert rows[1].text == "answer 0"
    assert [b["kind"] for b in rows[1].blocks] == ["tool", "answer"]
    assert rows[1].blocks[0] == {"kind": "tool", "id": "call0", "name": "lookup", "input": {"q": 0},
                                 "status": "success", "result": "result body 0"}
    assert rows[1].message_ids == ["a0", "t0", "r0"]
    v = store.load("u1", "s1").version
    v = store.append("u1", "s1", tool_cycle(7), expected_version=v)   # work without a final reply
    assert len(store.transcript("u1", "s1")) == 4
    store.append("u1", "s1", [text_message("u9", "user", "hello?")], expected_version=v)
    rows = store.transcript("u1", "s1")
    assert [(r.role, r.status) for r in rows[4:]] == [("assistant", "interrupted"), ("user", "normal")]
    assert rows[4].blocks[0]["status"] == "success" and rows[4].text == ""


def test_open_session_keeps_the_stored_session(store) -> None:
    fill(store, turns=1)
    again = store.open_session("u1", "s1", provider="other", policy={"x": 1})
    assert again.provider == "openai" and again.policy == POLICY and len(again.rows) == 4


def test_memory_claim_is_exclusive(store) -> None:
    assert store.claim_memory("u1", "worker-a")
    assert not store.claim_memory("u1", "worker-b")
    assert store.claim_memory("u1", "worker-a")
    assert store.release_memory("u1", "worker-a") is True
    assert store.release_memory("u1", "worker-a") is False
    assert store.claim_memory("u1", "worker-b")
    assert store.claim_memory("u1", "worker-c", stale_after_s=0)  # a stale claim is taken over




def test_pop_then_append_is_one_write(store):
    """Kind: a retraction plus its replacement written as two writes (half done on a failure
    between them). ``pop(then_append=...)``: one version bump, the popped row retracted in the
    transcript, the new rows appended; a replacement the store cannot hold writes nothing."""
    from ctxwise.errors import MessageNotStorable

    v = fill(store, turns=1)
    repl = text_message("r0-kept", "assistant", "answer 0 (kept part)")
    v2, popped = store.pop("u1", "s1", expected_version=v, message_id="r0", then_append=[repl], sizes=[7])
    assert v2 == v + 1 and popped is not None and popped.id == "r0"
    st = store.load("u1", "s1")
    assert [m.id for m in st.context()][-2:] == ["t0", "r0-kept"] and st.version == v2
    rows = store.transcript("u1", "s1")
    assert rows[-2].status == "retracted" and rows[-2].message_ids == ["r0"]
    assert rows[-1].message_ids == ["r0-kept"]
    def dump():
        st = store.load("u1", "s1", include_hidden=True)
        return st.version, [(r.message_id, r.state) for r in st.rows], len(store.transcript("u1", "s1"))

    before = dump()
    with pytest.raises(MessageNotStorable):
        store.pop("u1", "s1", expected_version=v2, then_append=[text_message("u0", "user", "taken id")])
    assert dump() == before


@pytest.mark.parametrize("bad", ["a\x00b", "x" * 300, "a\udc80b"])
def test_a_read_by_an_id_no_database_can_hold_finds_nothing(store, bad) -> None:
    """Kind: a read that sends an id the database cannot hold (PostgreSQL raised DataError for a
    NUL in original() or list_memory()). Every backend answers as for any unknown id."""
    fill(store, "u1", "s1", 1)
    assert store.original("u1", "s1", bad) is None
    assert store.original("u1", "s1", message_id=bad) is None
    assert store.list_memory(bad) == []
    for user, session in ((bad, "s1"), ("u1", bad)):
        with pytest.raises(SessionNotFound):
            store.load(user, session)
        with pytest.raises(SessionNotFound):
            store.version(user, session)
