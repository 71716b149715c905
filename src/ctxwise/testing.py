"""The store conformance suite: the checks every session and memory store passes.

A third-party backend (a :class:`~ctxwise.store.BaseStore` subclass implementing its eight
primitives, or any object with the :class:`~ctxwise.SessionStore` and
:class:`~ctxwise.MemoryStore` calls) runs it in a few lines::

    from ctxwise.testing import validate_store

    report = validate_store(lambda: MyStore("..."))   # a new, empty store per check
    print(report)                                       # one line per failed check
    assert report.ok, report

``factory`` is called once per check and must return an empty store; the store is closed
after its check. ``ctxwise``'s own SQLite, PostgreSQL and in-memory stores run the same
checks (``tests/test_store_conformance.py``). Under pytest, parametrize over :data:`CHECKS`
and call :func:`run_check` to get one test per check. The module needs neither pytest nor
SQLAlchemy.
"""

from __future__ import annotations

import inspect
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from .changes import Hide, InsertSummary, Replace
from .errors import MemoryBusy, MemoryEntryNotFound, MessageNotStorable, NotNewestMessage, NotStorable, \
    SessionConflict, SessionNotFound
from .store.base import BaseStore
from .store.contract import StoredRow, Write
from .messages import Marker, Message, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock, text_message

Store = Any
"""A store under test: the :class:`~ctxwise.SessionStore` and :class:`~ctxwise.MemoryStore` calls."""

POLICY: dict[str, Any] = {"budget": 1000, "unit": "chars", "watermarks": {"clear": 0.5, "summarize": 0.8}}


class ConformanceError(AssertionError):
    """A store broke the contract: the message says which call did what instead of what."""


def expect(ok: object, what: str) -> None:
    """Raise :class:`ConformanceError` (``what``: the rule) unless ``ok`` is true."""
    if not ok:
        raise ConformanceError(what)


def expect_raises(errors: type[BaseException] | tuple[type[BaseException], ...], call: Callable[[], object],
                  what: str) -> BaseException:
    """Run ``call``; return the error it raised when it is one of ``errors``, else raise
    :class:`ConformanceError` naming ``what``."""
    try:
        call()
    except errors as exc:
        return exc
    except Exception as exc:  # noqa: BLE001 - reported as the contract break it is
        raise ConformanceError(f"{what}: raised {type(exc).__name__}: {exc}") from exc
    raise ConformanceError(f"{what}: raised nothing")


# -- shared shapes -------------------------------------------------------------------------


def tool_cycle(i: int, body: str = "result body") -> list[Message]:
    """An assistant tool call ``a{i}`` (call id ``call{i}``) and its result ``t{i}``."""
    return [Message(id=f"a{i}", role="assistant", blocks=[ToolUseBlock(id=f"call{i}", name="lookup", input={"q": i})]),
            Message(id=f"t{i}", role="tool", blocks=[ToolResultBlock(
                tool_use_id=f"call{i}", name="lookup", output=[TextBlock(text=f"{body} {i}")])])]


def cleared(m: Message) -> Message:
    """Tool result ``m`` with its body replaced by ``[cleared]``."""
    r = m.tool_results[0]
    return m.model_copy(update={"blocks": [r.model_copy(update={"output": [TextBlock(text="[cleared]")]})]})


def fill(store: Store, user: str = "u1", session: str = "s1", turns: int = 5) -> int:
    """Open the session and append ``turns`` turns (``u{i}``, ``a{i}``, ``t{i}``, ``r{i}``); the version."""
    v: int = store.open_session(user, session, provider="openai", policy=POLICY).version
    for i in range(turns):
        v = store.append(user, session, [text_message(f"u{i}", "user", f"question {i}")], expected_version=v)
        v = store.append(user, session, tool_cycle(i), expected_version=v)
        v = store.append(user, session, [text_message(f"r{i}", "assistant", f"answer {i}")], expected_version=v)
    return v


def snapshot(store: Store, user: str = "u1", session: str = "s1") -> list[Any]:
    """Everything stored for a session, to check that a refused call changed nothing."""
    st = store.load(user, session, include_hidden=True)
    return [st.version, st.policy, st.state, st.provider,
            [[r.message_id, r.seq, r.state, r.size, r.current.model_dump_json(),
              r.original.model_dump_json() if r.original else None] for r in st.rows],
            [(t.seq, t.role, t.text, t.blocks, t.status, t.message_ids) for t in store.transcript(user, session)],
            store.events(user, session)]


def ids(store: Store, user: str = "u1", session: str = "s1") -> list[str]:
    """The ids of the messages the model reads."""
    return [m.id for m in store.load(user, session).context()]


# -- the checks ----------------------------------------------------------------------------


def check_round_trip(store: Store) -> None:
    """Every block type comes back byte-identical (pydantic JSON), in order, as ``verbatim``."""
    msgs = [text_message("m1", "system", "You help."), text_message("m2", "user", "héllo ✓ \u2028 \"q\"", a=[1, {"b": None}]),
            Message(id="m3", role="assistant", blocks=[ThinkingBlock(thinking="hmm", signature="sig"),
                                                        ToolUseBlock(id="c1", name="f", input={"x": [1.5, True]})]),
            Message(id="m4", role="tool", blocks=[ToolResultBlock(tool_use_id="c1", name="f", state="error",
                                                                  output=[TextBlock(text="x" * 70_000)])]),
            text_message("m5", "assistant", "")]
    v = store.open_session("u1", "s1", provider="openai", policy=POLICY).version
    expect(v == 0, f"a new session is at version 0, not {v}")
    v = store.append("u1", "s1", msgs[:2], expected_version=v)
    v = store.append("u1", "s1", msgs[2:], expected_version=v)
    st = store.load("u1", "s1")
    expect(st.version == v == 2, f"two appends make version 2 (got {st.version}, append returned {v})")
    got = [m.model_dump_json() for m in st.context()]
    expect(got == [m.model_dump_json() for m in msgs], "load() returns the appended messages byte for byte")
    expect(all(r.state == "verbatim" and r.original == r.current for r in st.rows), "appended rows are verbatim")
    expect([r.seq for r in st.rows] == [1, 2, 3, 4, 5], "rows are numbered 1, 2, ... in append order")
    msgs[1].metadata["a"] = "mutated after append"
    expect(store.load("u1", "s1").rows[1].current.metadata["a"] != "mutated after append",
           "a message mutated after append does not change what was stored")


def check_states_and_order(store: Store) -> None:
    """Replace clears, InsertSummary takes its anchor's place, Hide hides; originals are kept."""
    v = fill(store, turns=4)
    st = store.load("u1", "s1")
    body = {r.message_id: r.current for r in st.rows}
    v = store.apply("u1", "s1", [Replace("t0", cleared(body["t0"])), Replace("t1", cleared(body["t1"]))],
                    [{"stage": "clearing", "affected_ids": ["t0", "t1"]}], expected_version=v)
    summary = text_message("sum1", "user", "Summary of turns 0-1", ctxwise={"kind": "summary"})
    hidden = ["u0", "a0", "t0", "r0", "u1", "a1", "t1", "r1"]
    v = store.apply("u1", "s1", [InsertSummary(summary, "u0"), Hide(hidden, "summarized")],
                    [{"stage": "summarizing", "summary_id": "sum1"}], expected_version=v)
    expect(v == 14, f"each write bumps the version by one (expected 14, got {v})")
    want = ["sum1", "u2", "a2", "t2", "r2", "u3", "a3", "t3", "r3"]
    expect(ids(store) == want, f"context after a summary is {want}, got {ids(store)}")
    expect([r.message_id for r in store.load("u1", "s1").rows] == want, "load() lists only the visible rows")
    full = store.load("u1", "s1", include_hidden=True)
    states = {r.message_id: r for r in full.rows}
    expect(all(states[i].state == "summarized" for i in hidden), "Hide sets the given state")
    t0 = states["t0"]
    expect(t0.original is not None and t0.original.tool_results[0].text == "result body 0",
           "a cleared row keeps its original")
    expect(t0.current.tool_results[0].text == "[cleared]", "Replace sets the current body")
    order = [r.message_id for r in full.rows]
    expect(order.index("u0") < order.index("sum1") < order.index("a0"), "a summary sits right after its anchor")


def check_rolling_summaries(store: Store) -> None:
    """A summary anchored on a summary takes that summary's place; Hide ``trimmed`` hides."""
    v = fill(store, turns=6)
    v = store.apply("u1", "s1", [InsertSummary(text_message("sum1", "user", "summary 1"), "u1"),
                                 Hide(["u1", "a1", "t1", "r1", "u2", "a2", "t2", "r2"], "summarized")],
                    [], expected_version=v)
    expect(ids(store)[:6] == ["u0", "a0", "t0", "r0", "sum1", "u3"], f"summary in place: {ids(store)[:6]}")
    v = store.apply("u1", "s1", [InsertSummary(text_message("sum2", "user", "summary 2"), "sum1"),
                                 Hide(["sum1", "u3", "a3", "t3", "r3"], "summarized")], [], expected_version=v)
    v = store.apply("u1", "s1", [Hide(["u0", "a0", "t0", "r0"], "trimmed")], [], expected_version=v)
    want = ["sum2", "u4", "a4", "t4", "r4", "u5", "a5", "t5", "r5"]
    expect(ids(store) == want, f"context is {want}, got {ids(store)}")
    order = [r.message_id for r in store.load("u1", "s1", include_hidden=True).rows]
    expect(order.index("u1") < order.index("sum1") < order.index("sum2") < order.index("a1"),
           f"hidden rows keep context order: {order}")


def check_summary_in_one_write(store: Store) -> None:
    """An apply may hide and re-anchor on a summary it inserts in the same write, and set sizes."""
    v = fill(store, turns=3)
    s1, s2 = text_message("sum1", "user", "one"), text_message("sum2", "user", "two")
    v = store.apply("u1", "s1", [InsertSummary(s1, "u0"), Hide(["u0", "a0", "t0", "r0"]),
                                 InsertSummary(s2, "sum1"), Hide(["sum1", "u1", "a1", "t1", "r1"])],
                    [], expected_version=v, sizes={"sum2": 7, "u2": 3})
    expect(ids(store) == ["sum2", "u2", "a2", "t2", "r2"], f"context is sum2 then turn 2: {ids(store)}")
    sizes = {r.message_id: r.size for r in store.load("u1", "s1").rows}
    expect(sizes["sum2"] == 7 and sizes["u2"] == 3, f"sizes are stored: {sizes}")


def check_conflicts(store: Store) -> None:
    """A write at a stale version raises SessionConflict and stores nothing."""
    v = fill(store, turns=1)
    v2 = store.append("u1", "s1", [text_message("n1", "user", "one")], expected_version=v)
    before = snapshot(store)
    writes: list[tuple[str, Callable[[], object]]] = [
        ("append", lambda: store.append("u1", "s1", [text_message("n2", "user", "two")], expected_version=v)),
        ("apply", lambda: store.apply("u1", "s1", [Hide(["u0"])], [], expected_version=v)),
        ("pop", lambda: store.pop("u1", "s1", expected_version=v)),
        ("amend", lambda: store.amend("u1", "s1", expected_version=v, metadata={"x": 1})),
        ("clear", lambda: store.clear("u1", "s1", expected_version=v)),
        ("set_policy", lambda: store.set_policy("u1", "s1", provider="x", policy={}, expected_version=v)),
    ]
    if getattr(store, "wait", False):
        writes = writes[1:]  # a waiting store rebases a stale append by design
    for name, call in writes:
        expect_raises(SessionConflict, call, f"{name} at a stale version raises SessionConflict")
    expect(snapshot(store) == before, "a refused stale write stores nothing")
    expect(store.version("u1", "s1") == v2, "version() is the stored version")


def check_commit_checks_version(store: Store) -> None:
    """A :class:`~ctxwise.store.BaseStore` commit built at a version another writer has since
    moved past raises SessionConflict and stores nothing (the race the base class's own
    version read cannot see). Stores that are not BaseStore subclasses pass by definition."""
    if not isinstance(store, BaseStore):
        return
    v = fill(store, turns=1)
    head = store.read_session("u1", "s1").head
    stale = Write(expected_version=v - 1, head=replace(head, version=v), changed=frozenset({"last_seq"}),
                  inserts=(StoredRow("late", head.last_seq + 1, head.last_seq + 1, 0, "verbatim", "user", None,
                                     text_message("late", "user", "x").model_dump(mode="json")),),
                  events=({"stage": "late"},))
    before = snapshot(store)
    expect_raises(SessionConflict, lambda: store.commit("u1", "s1", stale), "a commit at a stale version")
    expect(snapshot(store) == before, "a refused commit stores nothing")


def check_events(store: Store) -> None:
    """Events come back in order, equal to what was given, key order kept."""
    v = fill(store, turns=1)
    evs: list[dict[str, Any]] = [
        {"stage": "clearing", "trigger": "watermark", "before": 900, "after": 400, "unit": "chars",
         "affected_ids": ["t0"], "duration_ms": 1.5, "usage": None, "zeta": 1, "alpha": {"b": 2, "a": 1}},
        {"stage": "summarizing", "summary_id": "s", "usage": {"input_tokens": 10}}]
    v = store.apply("u1", "s1", [], evs[:1], expected_version=v)
    v = store.clear("u1", "s1", expected_version=v, events=evs[1:])
    got = store.events("u1", "s1")
    expect(got == evs, f"events() returns the events given: {got}")
    expect([list(e) for e in got] == [list(e) for e in evs], "events keep their key order")


def check_user_scoping(store: Store) -> None:
    """Another user's session with the same id does not exist for a user."""
    v = fill(store, "alice", "shared-id", turns=1)
    calls: list[Callable[[], object]] = [
        lambda: store.load("bob", "shared-id"), lambda: store.version("bob", "shared-id"),
        lambda: store.append("bob", "shared-id", [text_message("x", "user", "hi")], expected_version=v),
        lambda: store.apply("bob", "shared-id", [Hide(["u0"])], [], expected_version=v),
        lambda: store.pop("bob", "shared-id", expected_version=v),
        lambda: store.clear("bob", "shared-id", expected_version=v),
        lambda: store.events("bob", "shared-id"), lambda: store.transcript("bob", "shared-id"),
        lambda: store.original("bob", "shared-id", "call0")]
    for k, call in enumerate(calls):
        expect_raises(SessionNotFound, call, f"call {k} on another user's session raises SessionNotFound")
    bob = store.open_session("bob", "shared-id", provider="anthropic", policy={})
    expect(bob.rows == [] and bob.version == 0 and bob.provider == "anthropic", "bob's new session is empty")
    expect(len(store.load("alice", "shared-id").rows) == 4, "alice's session is untouched")
    expect([i.session_id for i in store.list_sessions("bob")] == ["shared-id"], "list_sessions(user) is scoped")
    listed = {(i.user_id, i.provider) for i in store.list_sessions()}
    expect(listed == {("alice", "openai"), ("bob", "anthropic")}, f"list_sessions() lists both: {listed}")


def check_bad_input_stores_nothing(store: Store) -> None:
    """Refused batches, changes and events store nothing and leave the session writable."""
    v = fill(store, turns=1)
    before = snapshot(store)

    class Opaque:
        pass

    bad: list[tuple[str, Callable[[], object], type[BaseException] | tuple[type[BaseException], ...]]] = [
        ("unserializable", lambda: store.append("u1", "s1", [text_message("ok1", "assistant", "x"), Message(
            id="bad", role="user", metadata={"x": Opaque()})], expected_version=v), MessageNotStorable),
        ("not a message", lambda: store.append("u1", "s1", [text_message("ok2", "user", "x"), object()],
                                               expected_version=v), TypeError),
        ("id taken", lambda: store.append("u1", "s1", [text_message("u0", "user", "x")], expected_version=v),
         MessageNotStorable),
        ("id twice", lambda: store.append("u1", "s1", [text_message("d", "user", "a"), text_message("d", "user", "b")],
                                          expected_version=v), MessageNotStorable),
        ("NUL", lambda: store.append("u1", "s1", [text_message("n", "user", "a\x00b")], expected_version=v),
         MessageNotStorable),
        ("surrogate", lambda: store.append("u1", "s1", [text_message("n", "user", "a\udc80")], expected_version=v),
         MessageNotStorable),
        ("long id", lambda: store.append("u1", "s1", [text_message("x" * 256, "user", "a")], expected_version=v),
         MessageNotStorable),
        ("unknown Replace", lambda: store.apply("u1", "s1", [Replace("nope", text_message("nope", "tool", "x"))], [],
                                                expected_version=v), ValueError),
        ("unknown Hide", lambda: store.apply("u1", "s1", [Hide(["u0"]), Hide(["missing"])], [], expected_version=v),
         ValueError),
        ("unknown anchor", lambda: store.apply("u1", "s1", [InsertSummary(text_message("s", "user", "s"), "zz")], [],
                                               expected_version=v), ValueError),
        ("bad event", lambda: store.apply("u1", "s1", [], [{"when": Opaque()}], expected_version=v), ValueError),
        ("bad state", lambda: store.apply("u1", "s1", [], [], expected_version=v, state={"x": Opaque()}), ValueError),
    ]
    for name, call, errors in bad:
        err = expect_raises(errors, call, f"{name}: refused")
        if isinstance(err, MessageNotStorable):
            expect(err.index in (0, 1), f"{name}: MessageNotStorable names the index in the batch")
        expect(snapshot(store) == before, f"{name}: nothing stored")
    expect(store.append("u1", "s1", [text_message("fine", "user", "ok")], expected_version=v) == v + 1,
           "the session stays writable after refusals")


def check_transcript(store: Store) -> None:
    """Turns become transcript rows when they complete; unfinished work becomes ``interrupted``."""
    fill(store, turns=2)
    rows = store.transcript("u1", "s1")
    got = [(r.seq, r.role, r.status) for r in rows]
    expect(got == [(1, "user", "normal"), (2, "assistant", "normal"), (3, "user", "normal"),
                   (4, "assistant", "normal")], f"one row per user input and per reply: {got}")
    expect(rows[1].text == "answer 0" and rows[1].message_ids == ["a0", "t0", "r0"], "a reply row folds its turn")
    expect(rows[1].blocks[0] == {"kind": "tool", "id": "call0", "name": "lookup", "input": {"q": 0},
                                 "status": "success", "result": "result body 0"}, f"tool block: {rows[1].blocks}")
    v = store.version("u1", "s1")
    v = store.append("u1", "s1", tool_cycle(7), expected_version=v)
    expect(len(store.transcript("u1", "s1")) == 4, "work without a reply is not listed yet")
    store.append("u1", "s1", [text_message("u9", "user", "hello?")], expected_version=v)
    tail = [(r.role, r.status) for r in store.transcript("u1", "s1")[4:]]
    expect(tail == [("assistant", "interrupted"), ("user", "normal")], f"cut-off work is interrupted: {tail}")


def check_open_session_keeps_stored(store: Store) -> None:
    """Opening an existing session returns it as stored (its provider and policy)."""
    fill(store, turns=1)
    again = store.open_session("u1", "s1", provider="other", policy={"x": 1})
    expect(again.provider == "openai" and again.policy == POLICY and len(again.rows) == 4,
           "open_session of a stored session loads it")
    expect_raises(NotStorable, lambda: store.open_session("", "s", provider="p", policy={}), "empty user id refused")
    expect_raises(NotStorable, lambda: store.open_session("u", "s" * 256, provider="p", policy={}),
                  "session id over 255 characters refused")


def check_deferred_open(store: Store) -> None:
    """A session opened with ``defer=True`` is stored by its first write, not before: a
    refused first write leaves nothing; the first good one creates it."""
    if "defer" not in inspect.signature(store.open_session).parameters:
        raise AssertionError("open_session() takes no defer argument (the engine opens new sessions with defer=True)")
    state = store.open_session("u1", "s1", provider="openai", policy=POLICY, defer=True)
    expect(state.version == 0 and state.rows == [], "a deferred new session opens empty at version 0")
    expect(store.list_sessions() == [], "a deferred session is not listed before its first write")
    expect_raises(SessionNotFound, lambda: store.load("u1", "s1"), "a deferred session is not loaded before its first write")
    expect_raises(MessageNotStorable, lambda: store.append("u1", "s1", [text_message("m1", "user", "a\x00b")],
                                                           expected_version=0), "a NUL is refused")
    expect(store.list_sessions() == [], "a refused first write leaves no session")
    expect(store.append("u1", "s1", [text_message("m1", "user", "hi")], expected_version=0) == 1,
           "the first good write creates the session")
    loaded = store.load("u1", "s1")
    expect((loaded.provider, loaded.policy, loaded.version, len(loaded.rows)) == ("openai", POLICY, 1, 1),
           "created with the provider and policy given at the deferred open")


def check_original(store: Store) -> None:
    """original(): by message id; by call id the cleared one in the context (a reused id)."""
    v = store.open_session("u1", "s1", provider="openai", policy={}).version
    first = tool_cycle(1, "first")
    v = store.append("u1", "s1", first, expected_version=v)
    again = [m.model_copy(update={"id": m.id + "x"}) for m in tool_cycle(1, "second")]
    v = store.append("u1", "s1", again, expected_version=v)
    v = store.apply("u1", "s1", [Replace("t1x", cleared(again[1]))], [], expected_version=v)
    expect(store.original("u1", "s1", "call1") == again[1], "the cleared result of a reused call id")
    expect(store.original("u1", "s1", message_id="t1") == first[1], "by message id")
    expect(store.original("u1", "s1", "nope") is None, "an unknown call id is None")
    expect(store.original("u1", "s1", message_id="nope") is None, "an unknown message id is None")
    expect_raises(ValueError, lambda: store.original("u1", "s1"), "original() needs one of the two ids")
    for bad in ("a\x00b", "x" * 300, "a\udc80b"):
        expect(store.original("u1", "s1", bad) is None, f"an id no store holds ({bad[:5]!r}...) is None")
        expect(store.original("u1", "s1", message_id=bad) is None, "likewise by message id")
        expect_raises(SessionNotFound, lambda: store.load(bad, "s1"), "a user id no store holds: not found")
        expect_raises(SessionNotFound, lambda: store.version("u1", bad), "a session id no store holds: not found")


def check_pop(store: Store) -> None:
    """pop() retracts the newest appended message (transcript ``retracted``); its id stays taken."""
    v = fill(store, turns=1)
    expect_raises(NotNewestMessage, lambda: store.pop("u1", "s1", expected_version=v, message_id="t0"),
                  "pop naming a message that is not the newest")
    v2, msg = store.pop("u1", "s1", expected_version=v, events=[{"stage": "pop"}], state={"k": 1})
    expect(v2 == v + 1 and msg is not None and msg.id == "r0", "pop returns the newest message, one version on")
    expect(ids(store) == ["u0", "a0", "t0"], f"popped message left the context: {ids(store)}")
    st = store.load("u1", "s1", include_hidden=True)
    expect({r.message_id: r.state for r in st.rows}["r0"] == "popped" and st.state == {"k": 1},
           "the row is popped, the state stored")
    last = store.transcript("u1", "s1")[-1]
    expect(last.status == "retracted" and last.message_ids == ["r0"], "the transcript names the retraction")
    expect(store.events("u1", "s1") == [{"stage": "pop"}], "pop stores its events")
    expect_raises(MessageNotStorable, lambda: store.append("u1", "s1", [text_message("r0", "user", "x")],
                                                           expected_version=v2), "a popped id stays taken")
    v3 = store.clear("u1", "s1", expected_version=v2)
    expect(store.pop("u1", "s1", expected_version=v3) == (v3, None), "nothing to pop: no write")


def check_pop_then_append(store: Store) -> None:
    """pop(then_append=...) replaces the last message in one write; a bad replacement writes nothing."""
    v = fill(store, turns=1)
    repl = text_message("r0-kept", "assistant", "answer 0 (kept part)")
    v2, popped = store.pop("u1", "s1", expected_version=v, message_id="r0", then_append=[repl], sizes=[7])
    expect(v2 == v + 1 and popped is not None and popped.id == "r0", "one version bump")
    expect(ids(store)[-2:] == ["t0", "r0-kept"], f"the replacement is appended: {ids(store)}")
    expect(store.load("u1", "s1").rows[-1].size == 7, "its size is stored")
    rows = store.transcript("u1", "s1")
    expect(rows[-2].status == "retracted" and rows[-1].message_ids == ["r0-kept"], "retracted, then the new reply")
    before = snapshot(store)
    expect_raises(MessageNotStorable, lambda: store.pop("u1", "s1", expected_version=v2, then_append=[
        text_message("u0", "user", "taken id")]), "a replacement with a taken id")
    expect(snapshot(store) == before, "a refused pop stores nothing")


def check_amend(store: Store) -> None:
    """amend() sets metadata on the newest message's original and current body, and its size."""
    v = fill(store, turns=1)
    expect_raises(NotNewestMessage, lambda: store.amend("u1", "s1", expected_version=v, metadata={"a": 1},
                                                        message_id="u0"), "amend naming another message")
    v2, msg = store.amend("u1", "s1", expected_version=v, metadata={"a": 1}, beside=[{"x": 2}], size=9,
                          events=[{"stage": "amend"}])
    expect(v2 == v + 1 and msg is not None and msg.id == "r0", "amend returns the amended original")
    expect(msg.metadata == Marker.with_({"a": 1}, beside=[{"x": 2}]), f"metadata set: {msg.metadata}")
    row = store.load("u1", "s1").rows[-1]
    expect(row.current.metadata == msg.metadata and row.size == 9, "current body and size amended")
    expect(store.original("u1", "s1", message_id="r0") == msg, "the original is amended")
    expect(len(store.transcript("u1", "s1")) == 2, "amend adds no transcript row")
    before = snapshot(store)
    expect_raises(MessageNotStorable, lambda: store.amend("u1", "s1", expected_version=v2, metadata={"b": "\x00"}),
                  "metadata the store cannot hold")
    expect(snapshot(store) == before, "a refused amend stores nothing")


def check_clear_and_set_policy(store: Store) -> None:
    """clear() hides the whole context (``reset``); set_policy() replaces provider and policy."""
    v = fill(store, turns=2)
    v = store.clear("u1", "s1", expected_version=v, state={"cleared": True})
    st = store.load("u1", "s1", include_hidden=True)
    expect(st.context() == [] and all(r.state == "reset" for r in st.rows), "every row is reset")
    expect(st.state == {"cleared": True} and store.transcript("u1", "s1")[-1].status == "cleared",
           "state stored, a cleared transcript row")
    v = store.append("u1", "s1", [text_message("n", "user", "again")], expected_version=v)
    expect(ids(store) == ["n"], "the session goes on after a clear")
    v = store.set_policy("u1", "s1", provider="anthropic", policy={"budget": 5}, expected_version=v,
                         sizes={"n": 4, "not-there": 1}, events=[{"stage": "policy"}])
    st = store.load("u1", "s1")
    expect((st.provider, st.policy, st.version) == ("anthropic", {"budget": 5}, v), "provider and policy replaced")
    expect(st.rows[0].size == 4 and store.events("u1", "s1")[-1] == {"stage": "policy"}, "sizes and events stored")


def check_list_sessions(store: Store) -> None:
    """list_sessions(): newest update first, paged, by user and by literal user-id prefix."""
    for user, session in (("t1:a", "s1"), ("t1:b", "s2"), ("t2:a", "s3"), ("t1%", "s4")):
        store.open_session(user, session, provider="openai", policy={})
    v = store.version("t1:a", "s1")
    store.append("t1:a", "s1", [text_message("m", "user", "hi")], expected_version=v)
    listed = [i.session_id for i in store.list_sessions()]
    expect(listed[0] == "s1" and sorted(listed) == ["s1", "s2", "s3", "s4"], f"newest update first: {listed}")
    expect([i.session_id for i in store.list_sessions(limit=2, offset=1)] == listed[1:3], "limit and offset")
    expect(store.list_sessions(offset=2**64) == [], "an offset past any list is empty")
    got = sorted(i.session_id for i in store.list_sessions(user_prefix="t1:"))
    expect(got == ["s1", "s2"], f"by user-id prefix: {got}")
    expect([i.session_id for i in store.list_sessions(user_prefix="t1%")] == ["s4"], "a prefix is literal")
    info = store.list_sessions("t1:a")[0]
    expect((info.user_id, info.version, info.provider) == ("t1:a", 1, "openai"), f"session info: {info}")


def check_memory_ops(store: Store) -> None:
    """Memory entries: add, supersede, retract, clear, filters; all scoped by user."""
    a = store.add_memory("u1", "aisle seats", source_session_id="s1", source_message_id="m3")
    b = store.add_memory("u2", "vegan", "profile")
    store.add_memory("u1", "Munich", source_session_id="s2")
    texts = [e.text for e in store.list_memory("u1", exclude_session="s1")]
    expect(texts == ["Munich"], f"exclude_session filters: {texts}")
    expect(store.retract_memory("u1", b.id) is False, "another user's entry cannot be retracted")
    expect_raises(MemoryEntryNotFound, lambda: store.supersede_memory("u1", b.id, "x"), "nor superseded")
    new = store.supersede_memory("u1", a.id, "window seats")
    expect(new.supersedes_id == a.id and new.kind == "preference", "a supersede names the entry it replaces")
    hist = [(e.text, e.status) for e in store.list_memory("u1", include_inactive=True)]
    expect(hist == [("aisle seats", "superseded"), ("Munich", "active"), ("window seats", "active")],
           f"history oldest first: {hist}")
    cut = store.list_memory("u1")[0].created_at
    expect([e.text for e in store.list_memory("u1", created_before=cut)] == ["Munich"], "created_before filters")
    expect(store.retract_memory("u1", str(new.id)) is True and store.retract_memory("u1", new.id) is False,
           "retract once (an id given as text counts)")
    expect(store.retract_memory("u1", "nope") is False and store.list_memory("x\x00") == [], "bad ids find nothing")
    expect(store.clear_memory("u2") == 1 and store.list_memory("u2") == [], "clear retracts the active entries")
    expect(store.clear_memory("u1", purge=True) == 3 and store.list_memory("u1", include_inactive=True) == [],
           "purge deletes every entry of the user")


def check_memory_apply_and_claim(store: Store) -> None:
    """The claim is exclusive and leased; apply_memory writes only while its owner holds it."""
    from .memory.user import Op

    expect(store.claim_memory("u1", "a") and not store.claim_memory("u1", "b"), "a claim is exclusive")
    expect(store.claim_memory("u1", "a") and store.renew_memory("u1", "a"), "the holder re-takes and renews")
    expect(not store.renew_memory("u1", "b"), "a renewal never takes a claim")
    e = store.add_memory("u1", "tea")
    done = store.apply_memory("u1", [Op("ADD", text="coffee"), Op("RETRACT", target_id=e.id),
                                     Op("RETRACT", target_id=10**9), Op("NOOP")], owner="a")
    expect([o.op for o in done] == ["ADD", "RETRACT"], f"apply_memory returns what changed: {done}")
    expect(store.claim_memory("u1", "b", stale_after_s=0), "a stale claim is taken over")
    before = store.list_memory("u1", include_inactive=True)
    expect_raises(MemoryBusy, lambda: store.apply_memory("u1", [Op("ADD", text="x")], owner="a"),
                  "a holder whose claim was taken over")
    expect(store.list_memory("u1", include_inactive=True) == before, "it writes nothing")
    expect(store.release_memory("u1", "b") is True and store.release_memory("u1", "b") is False, "release once")


CHECKS: dict[str, Callable[[Store], None]] = {
    f.__name__.removeprefix("check_"): f for f in (
        check_round_trip, check_states_and_order, check_rolling_summaries, check_summary_in_one_write,
        check_conflicts, check_commit_checks_version, check_events, check_user_scoping, check_bad_input_stores_nothing, check_transcript,
        check_open_session_keeps_stored, check_deferred_open, check_original, check_pop, check_pop_then_append, check_amend,
        check_clear_and_set_policy, check_list_sessions, check_memory_ops, check_memory_apply_and_claim)}
"""Every check by name; each takes an empty store and raises :class:`ConformanceError` (or
the unexpected error) when the store breaks the contract."""


# -- running them --------------------------------------------------------------------------


@dataclass
class Failure:
    """A failed check: its name, the error's one line, and the traceback."""

    name: str
    error: str
    trace: str = ""


@dataclass
class Report:
    """What :func:`validate_store` found: the checks passed and failed, by name."""

    passed: list[str] = field(default_factory=list)
    failed: list[Failure] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every check ran and passed."""
        return not self.failed and bool(self.passed)

    def __str__(self) -> str:
        head = f"{len(self.passed)} of {len(self.passed) + len(self.failed)} store checks passed"
        return "\n".join([head, *(f"FAILED {f.name}: {f.error}" for f in self.failed)])


def run_check(name: str, factory: Callable[[], Store]) -> None:
    """Run the check ``name`` of :data:`CHECKS` on a new store from ``factory``, then close the
    store. Raises what the check raises (:class:`ConformanceError` for a contract break),
    KeyError for an unknown name."""
    check = CHECKS[name]
    store = factory()
    try:
        check(store)
    finally:
        close = getattr(store, "close", None)
        if callable(close):
            close()


def validate_store(factory: Callable[[], Store], *, only: list[str] | None = None) -> Report:
    """Run every check (or those named in ``only``) of :data:`CHECKS`, each on a new empty
    store from ``factory``. Returns a :class:`Report`; raises nothing for a failed check.
    Raises KeyError for a name in ``only`` that is not a check."""
    report = Report()
    for name in only if only is not None else list(CHECKS):
        if name not in CHECKS:
            raise KeyError(f"no store check {name!r}; the checks are {sorted(CHECKS)}")
        try:
            run_check(name, factory)
        except Exception as exc:  # noqa: BLE001 - a failed check is reported, the others run
            first = (str(exc).splitlines() or [""])[0]
            report.failed.append(Failure(name, f"{type(exc).__name__}: {first}", traceback.format_exc()))
        else:
            report.passed.append(name)
    return report


__all__ = ["validate_store", "run_check", "CHECKS", "Report", "Failure", "ConformanceError", "expect",
           "expect_raises", "fill", "tool_cycle", "cleared", "snapshot", "POLICY"]
