"""A session that keeps its word (issue 14 item 3, issue 15 item 6). Each test failed on the code
before this change; its docstring says which kind of fault it covers. Every test runs on the
SQL store (SQLite, PostgreSQL) and, where the fault is not about SQL, on the in-memory store."""

from __future__ import annotations

import pytest

from builders import assistant, results, system, user
from ctxwise import ContextManager
from ctxwise.errors import MessageNotStorable, PolicyMismatch, SessionConflict
from ctxwise.memory.repo import MemoryBusy
from ctxwise.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock, text_message
from ctxwise.policy import Policy
from ctxwise.store import InMemoryStore

DEEPSEEK = Policy.preset("default", provider="deepseek", budget=5_000, unit="chars")
ANTHROPIC = Policy.preset("default", provider="anthropic", budget=999, unit="chars")


@pytest.fixture
def store(any_store):
    """Every backend: SqlStore on SQLite and PostgreSQL, InMemoryStore."""
    return any_store


def test_reopen_with_another_policy_is_refused_naming_the_fields(store):
    """Kind: a stored contract silently ignored. A session created as deepseek / 5,000 reopened
    as anthropic / 999 without a word (the caller's policy won over the stored one)."""
    s = ContextManager(store, DEEPSEEK).session("u", "s")
    s.append([system(), user("hi")])
    with pytest.raises(PolicyMismatch) as e:
        ContextManager(store, ANTHROPIC).session("u", "s")
    assert {"provider", "budget"} <= set(e.value.fields)
    assert e.value.fields["budget"] == (5_000, 999)
    assert "migrate_policy=True" in str(e.value)
    # nothing changed, and a manager without a policy of its own uses the stored one
    again = ContextManager(store).session("u", "s")
    assert again.policy.provider == "deepseek" and again.policy.budget == 5_000
    assert len(again.messages) == 2 and not any(ev.get("stage") == "policy_migrated" for ev in again.events())


def test_migrating_the_policy_is_explicit_and_recorded(store):
    """Kind: a stored contract silently ignored (the supported way to change it is an event)."""
    s = ContextManager(store, DEEPSEEK).session("u", "s")
    s.append([system(), user("hi")])
    moved = ContextManager(store, ANTHROPIC).session("u", "s", migrate_policy=True)
    assert moved.policy.provider == "anthropic" and moved.policy.budget == 999
    [ev] = [ev for ev in moved.events() if ev.get("stage") == "policy_migrated"]
    assert ev["detail"]["budget"] == {"stored": 5_000, "given": 999}
    reopened = ContextManager(store, ANTHROPIC).session("u", "s")  # no mismatch any more
    assert reopened.policy.provider == "anthropic" and reopened.version == moved.version


def test_append_never_raises_after_its_commit(store):
    """Kind: a call that raised after it had stored (append promised "nothing is stored when it
    raises", then user-memory extraction waited for the claim and raised MemoryBusy)."""
    cm = ContextManager(store, Policy.preset("default", user_memory=True))
    s = cm.session("u", "s")
    s.append([system()])
    assert store.claim_memory("u", "someone-else")  # another extraction holds the user's claim

    def busy(*_a, **_k):
        raise MemoryBusy("memory of user 'u' is being extracted by another process; waited 0s")

    s.memory.observe_memory = busy  # the extraction fails as it would after its wait
    first = user("I prefer over-ear headphones.")
    version = s.append([first])
    assert version == s.version
    again = cm.session("u", "s")
    assert [m.id for m in again.messages][-1] == first.id
    [ev] = [ev for ev in again.events() if ev.get("stage") == "memory_failed"]
    assert ev["trigger"] == "MemoryBusy" and ev["affected_ids"] == [first.id]


def test_prepare_refuses_a_stale_session_even_when_no_stage_fires(store):
    """Kind: a lost update (issue 15 item 6): a Session overtaken by another writer returned a
    stale payload without SessionConflict when no stage fired."""
    cm = ContextManager(store, DEEPSEEK)
    a = cm.session("u", "s")
    a.append([system(), user("hi")])
    b = cm.session("u", "s")
    b.append([assistant("hello from b")])
    with pytest.raises(SessionConflict, match="another writer"):
        a.prepare()
    a.reload()
    assert a.prepare().messages[-1].text == "hello from b"


def test_original_of_a_reused_call_id_is_the_one_in_the_context(store):
    """Kind: a key that is not unique (issue 15 item 6). tau-bench recordings reuse call ids; the
    cleared result's placeholder names its call id, and original(id) returned the newer call's
    result instead of the body that was cleared."""
    from ctxwise.changes import Replace

    cm = ContextManager(store, DEEPSEEK)
    s = cm.session("u", "s")
    call = lambda mid: Message(id=mid, role="assistant", blocks=[ToolUseBlock(id="call_1", name="lookup", input={})])
    res = lambda mid, body: Message(id=mid, role="tool", blocks=[ToolResultBlock(
        tool_use_id="call_1", name="lookup", output=[TextBlock(text=body)])])
    s.append([system(), user("first question"), call("a1"), res("t1", "FIRST RESULT")])
    s.append([assistant("answer one"), user("second question"), call("a2"), res("t2", "SECOND RESULT")])
    # clear the first result as the clearing stage would (the second one stays verbatim)
    placeholder = res("t1", "[cleared: the original is kept under tool_use_id call_1]")
    s.version = store.apply("u", "s", [Replace("t1", placeholder, "cleared")], [], expected_version=s.version)
    s.reload()
    assert s.original("call_1").tool_results[0].text == "FIRST RESULT"
    assert s.original(message_id="t2").tool_results[0].text == "SECOND RESULT"
    assert s.original("no-such-call") is None


@pytest.mark.parametrize("bad, rule", [
    (text_message("nul", "user", "a\x00b"), "nul-character"),
    (text_message("sur", "user", b"caf\xe9".decode("utf-8", errors="surrogateescape")), "lone-surrogate"),
    (text_message("x" * 256, "user", "long id"), "id-too-long"),
    (Message(id="t-long", role="tool", blocks=[ToolResultBlock(tool_use_id="c" * 300, output=[TextBlock(text="r")])]),
     "id-too-long"),
])
def test_what_the_database_cannot_hold_is_refused_before_the_write(store, bad, rule):
    """Kind: a database error for a user mistake (issue 15 item 7): NUL bytes were a PostgreSQL
    DataError, ids over 255 characters a PostgreSQL-only error, lone surrogates a raw
    UnicodeEncodeError; now a MessageNotStorable naming the session index, on every backend."""
    cm = ContextManager(store, DEEPSEEK)
    s = cm.session("u", "s")
    call = Message(id="a-call", role="assistant", blocks=[ToolUseBlock(id="c" * 300, name="f", input={})])
    s.append([system(), user("hi"), call] if rule == "id-too-long" and bad.role == "tool" else [system(), user("hi")])
    before = (s.version, [m.id for m in s.messages])
    with pytest.raises(MessageNotStorable) as e:
        s.append([bad])
    assert e.value.rule == rule and e.value.index == len(before[1]), str(e.value)
    assert f"message {len(before[1])}" in str(e.value)
    again = cm.session("u", "s")
    assert (again.version, [m.id for m in again.messages]) == before


def test_pop_removes_the_last_message_and_keeps_a_record(store):
    """Kind: a missing operation the integrations need ("remove the last item"), durable and
    recorded."""
    cm = ContextManager(store, DEEPSEEK)
    s = cm.session("u", "s")
    q = user("My order id is #W1234567. Where is it?")
    a = assistant("It is on its way.")
    s.append([system(), q])
    s.append([a])
    assert s.pop() == a
    assert [m.id for m in s.messages][-1] == q.id
    reopened = cm.session("u", "s")
    assert [m.id for m in reopened.messages] == [m.id for m in s.messages]
    rows = reopened.transcript()
    assert (rows[-1].status, rows[-1].message_ids, rows[-1].text) == ("retracted", [a.id], "It is on its way.")
    assert [ev["stage"] for ev in reopened.events()][-1] == "popped"
    assert s.pop() == q  # the user input too; its facts go with it
    assert not any("W1234567" in t for t in s.memory.pinned_texts())
    s.append([user("new question")])
    s.append([assistant("new answer")])
    assert [r.role for r in s.transcript()][-2:] == ["user", "assistant"]


def test_pop_with_then_replaces_the_last_message_in_one_write(store):
    """Kind: a two-write retraction (pop, then append what stays) that a failure or another
    writer between the writes leaves half done: the Agents SDK's pop_item on an item sharing
    its ctxwise message with others. ``pop(then=...)`` is one write (one version bump): the
    last message is replaced, or nothing changes (a bad replacement, a conflict)."""
    from ctxwise.errors import PayloadInvalid

    cm = ContextManager(store, DEEPSEEK)
    s = cm.session("u", "s")
    s.append([system(), user("hi")])
    both = Message(id="a-both", role="assistant", blocks=[TextBlock(text="Let me check."),
                                                         ToolUseBlock(id="c1", name="f", input={})])
    s.append([both])
    head = Message(id="a-head", role="assistant", blocks=[TextBlock(text="Let me check.")])
    v = s.version
    assert s.pop(then=[head]) == both
    assert s.version == v + 1 and [m.id for m in s.messages][-1] == "a-head"
    again = cm.session("u", "s")
    assert [m.id for m in again.messages] == [m.id for m in s.messages] and again.size == s.size
    ev = again.events()[-1]
    assert ev["stage"] == "popped" and ev["detail"] == {"replaced_by": ["a-head"]}
    rows = again.transcript()
    assert (rows[-2].status, rows[-2].message_ids) == ("retracted", ["a-both"]) and rows[-1].message_ids == ["a-head"]

    # a replacement that breaks the message rules, an id already taken, another writer first:
    # raised, nothing changed
    before = (s.version, [m.id for m in s.messages], s.size)
    orphan = Message(id="t-orphan", role="tool", blocks=[ToolResultBlock(tool_use_id="nope", output=[TextBlock(text="x")])])
    with pytest.raises(PayloadInvalid):
        s.pop(then=[orphan])
    with pytest.raises(PayloadInvalid):
        s.pop(then=[Message(id="a-both", role="assistant", blocks=[TextBlock(text="again")])])
    other = cm.session("u", "s")
    other.append([user("more")])
    with pytest.raises(SessionConflict):
        s.pop(then=[Message(id="a-x", role="assistant", blocks=[TextBlock(text="x")])])
    fresh = cm.session("u", "s")
    assert [m.id for m in fresh.messages] == before[1] + [other.messages[-1].id]
    assert (s.version, [m.id for m in s.messages], s.size) == before


def test_clear_resets_the_context_and_keeps_the_record(store):
    """Kind: a missing operation the integrations need (reset a session), durable and recorded."""
    cm = ContextManager(store, DEEPSEEK)
    s = cm.session("u", "s")
    s.append([system(), user("hello"), assistant("hi")])
    s.clear()
    assert s.messages == [] and s.size == s.overhead
    reopened = cm.session("u", "s")
    assert reopened.messages == []
    assert reopened.transcript()[-1].status == "cleared"
    assert reopened.events()[-1]["stage"] == "cleared"
    reopened.append([system(), user("again")])
    assert reopened.prepare().messages[-1].text == "again"
    with pytest.raises(SessionConflict):
        s.append([user("stale writer")])  # the old object is behind: nothing stored


class CountingCounter:
    """The real o200k counter, counting how many messages it is asked to measure."""

    def __init__(self) -> None:
        from ctxwise.tokens import get_counter

        self.inner = get_counter("o200k_base")
        self.counted: list[str] = []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def count_message(self, m):
        self.counted.append(m.id)
        return self.inner.count_message(m)


class RecordingStore(InMemoryStore):
    """A real in-memory store that records which reads the engine makes."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    def load(self, user_id, session_id, *, include_hidden=False):
        self.reads.append("load(include_hidden)" if include_hidden else "load")
        return super().load(user_id, session_id, include_hidden=include_hidden)

    def events(self, user_id, session_id):
        self.reads.append("events")
        return super().events(user_id, session_id)


def test_reopen_reads_the_visible_context_only_and_counts_nothing():
    """Kind: cost proportional to history (issue 14: reopen re-read every row and every event,
    rebuilt the fact book and re-tokenized the context)."""
    store = RecordingStore()
    policy = Policy.preset("default", budget=1_500, unit="tokens", provider="openai")
    cm = ContextManager(store, policy)
    s = cm.session("u", "s")
    s.append([system()])
    for i in range(40):
        s.append([user(f"Question {i}: my budget is {100 + i} EUR and order #W{1000000 + i}.")])
        call = assistant(calls=[("lookup", {"i": i})])
        s.append([call, *results(call, [f"result {i} " + "x " * 150])])
        s.append([assistant(f"Answer {i}.")])
        s.prepare()
    events = s.events()
    assert any(e["stage"] in ("summarizing", "trimming") for e in events), "the history must have been compacted"
    facts = s.memory.pinned_texts()
    store.reads.clear()
    counter = CountingCounter()
    again = ContextManager(store, policy, counter=counter).session("u", "s")
    assert store.reads == ["load"], store.reads
    assert not set(counter.counted) & {m.id for m in again.messages}, "no context message is counted again"
    assert again.size == s.size and again.messages == s.messages
    assert again.memory.pinned_texts() == facts
    assert again.prepare().payload == s.prepare().payload  # the same request, and nothing written


def test_pop_after_a_reply_left_out_of_the_context_pops_that_reply():
    # kind: the newest stored message is not in the context (an empty reply normalize left out);
    # pop() removes exactly what was appended last (the Agents SDK's pop_item contract) instead
    # of raising a raw ValueError, and the next pop goes on from the context's tail.
    from ctxwise import ContextManager

    cm = ContextManager("memory://", {"provider": "openai"})
    s = cm.session("u", "s")
    s.append_openai([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
                     {"role": "user", "content": "again"}, {"role": "assistant", "content": ""}])
    ids = [m.id for m in s.messages]
    assert len(ids) == 3  # the empty reply is in the transcript only
    first = s.pop()
    assert first is not None and first.id not in ids and [m.id for m in s.messages] == ids
    second = s.pop()
    assert second is not None and second.id == ids[-1] and [m.id for m in s.messages] == ids[:-1]
    assert [m.id for m in cm.session("u", "s").messages] == ids[:-1]


def test_a_session_reopened_before_every_call_reports_what_the_live_one_reports(store):
    """Kind: state a reopen recomputes instead of reading back (here: which facts the
    ``facts_evicted`` events already reported). A session reopened before every append and
    prepare must send the same payloads and fire the same events as one kept open."""
    policy = Policy.preset("default", budget=1_200, unit="tokens", provider="openai", facts_share=0.05)
    live_cm = ContextManager(InMemoryStore(), policy)
    live = live_cm.session("u", "s")

    def reopened():
        return ContextManager(store, policy).session("u", "s")

    fired = {"live": [], "reopened": []}
    for target in (live, reopened()):
        target.append([system()])
    for i in range(14):
        turn = [user(f"My budget is {100 + i} EUR, order #W{1000000 + i}, and I need it by 2024-05-{10 + i}.")]
        call = assistant(calls=[("lookup", {"i": i})])
        rest = [[call, *results(call, [f"result {i} " + "x " * 60])], [assistant(f"Answer {i}.")]]
        for batch in (turn, *rest):
            live.append(batch)
            reopened().append(batch)
        a, b = live.prepare(), reopened().prepare()
        assert a.payload == b.payload, i
        fired["live"].append([(e.stage, e.detail) for e in a.events])
        fired["reopened"].append([(e.stage, e.detail) for e in b.events])
    assert fired["live"] == fired["reopened"]
    assert any(st == "facts_evicted" for call in fired["live"] for st, _ in call), "facts must have been evicted"


def test_an_append_error_names_the_appended_message_as_well_as_its_place(store):
    """Kind: an error index that reads as a batch position but is the message's place in the
    session (a fresh user read "message 3" for the first item of their append). The violation
    keeps the session index and names the appended message's id."""
    from ctxwise.errors import PayloadInvalid

    cm = ContextManager(store, Policy(provider="openai", budget=50_000, unit="chars"))
    s = cm.session("u", "s")
    s.append_openai([{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"},
                     {"role": "assistant", "content": "yo"}])
    with pytest.raises(PayloadInvalid) as info:
        s.append_openai([{"role": "user", "content": "   "}])
    (v,) = info.value.violations
    assert v.index == 3 and v.where == "appended id 'msg-000004'" and "message 3 (appended id 'msg-000004')" in str(info.value)
    assert len(s.messages) == 3


def test_amend_updates_the_last_message_in_place_with_no_retraction(store):
    """Kind: an update recorded as a retraction. An integration keeping items that arrive after
    a message with it (the Agents SDK's hosted-tool items) could only pop the message and
    append it again: the transcript showed it retracted and written twice, the events a
    `popped`. ``amend`` changes the metadata of the newest stored message in one write: the
    transcript is unchanged, one `amended` event says what; items sent beside the message are
    counted in its size; anything but metadata, or another writer first, changes nothing."""
    from ctxwise.errors import FormatError

    cm = ContextManager(store, DEEPSEEK)
    s = cm.session("u", "s")
    a = assistant("It is on its way.")
    s.append([system(), user("Where is #W1?"), a])
    rows, size, v = len(s.transcript()), s.size, s.version
    item = {"type": "web_search_call", "id": "ws_1", "status": "completed",
            "action": {"type": "search", "query": "carrier status of order W1 " * 20}}
    got = s.amend(lambda m: m.model_copy(update={"metadata": {**m.metadata, "sdk": {"n": 1}, "ctxwise": {"beside": [item]}}}))
    assert got is not None and got.id == a.id and got.beside == [item] and got.metadata["sdk"] == {"n": 1}
    assert s.version == v + 1 and len(s.transcript()) == rows
    assert s.size == size + s.counter.count_text(__import__("json").dumps(item, ensure_ascii=False))
    ev = s.events()[-1]
    assert ev["stage"] == "amended" and ev["affected_ids"] == [a.id] and ev["detail"]["keys"] == ["beside", "sdk"]
    again = cm.session("u", "s")
    assert again.messages[-1].beside == [item] and again.size == s.size and again.version == s.version
    assert all(r.status != "retracted" for r in again.transcript())

    before = (s.version, s.size, s.messages[-1].metadata)
    with pytest.raises(FormatError, match="only its metadata may change"):
        s.amend(lambda m: m.model_copy(update={"blocks": [TextBlock(text="changed")]}))
    with pytest.raises(FormatError, match="not removed"):
        s.amend(lambda m: m.model_copy(update={"metadata": {}}))
    other = cm.session("u", "s")
    other.append([user("more")])
    with pytest.raises(SessionConflict):
        s.amend(lambda m: m.model_copy(update={"metadata": {**m.metadata, "sdk": {"n": 2}}}))
    assert (s.version, s.size, s.messages[-1].metadata) == before
    fresh = cm.session("u", "s")
    assert fresh.messages[-2].metadata == before[2]


def test_amend_after_a_reply_left_out_of_the_context_amends_that_reply():
    """Kind: the newest stored row taken to be the context's last message: after an empty
    reply (kept in the transcript only), ``amend`` updates that reply's record; the context,
    its size and the transcript stay as they were."""
    cm = ContextManager(InMemoryStore(), DEEPSEEK)
    s = cm.session("u", "s")
    s.append([system(), user("hi"), assistant("hello")])
    empty = Message(id="empty-1", role="assistant", blocks=[])
    s.append([empty])
    ctx, size, rows = [m.model_dump() for m in s.messages], s.size, len(s.transcript())
    got = s.amend(lambda m: m.model_copy(update={"metadata": {**m.metadata, "sdk": {"items": [1]}}}))
    assert got is not None and got.id == "empty-1" and got.metadata["sdk"] == {"items": [1]}
    assert [m.model_dump() for m in s.messages] == ctx and s.size == size and len(s.transcript()) == rows
    assert s.events()[-1]["detail"]["omitted_reply"] is True
    assert s.pop() is not None and [m.model_dump() for m in s.messages] == ctx  # the reply goes, as before
