"""A client that rewrites its own history (Claude Code's compaction, an edited retry) gets a new
branch session, recorded with where it came from; never a 400, and the session it left is kept."""
from __future__ import annotations

from typing import Any

from ctxwise import SqlStore
from ctxwise.proxy.conversation import BRANCH_TRIGGER
from ctxwise.proxy.heads import HeadStore

from .conftest import Live
from .stub import Reply
from .test_routes import anthropic_client, openai_client, session_messages


def test_compacted_history_branches_and_the_branch_continues(live: Live) -> None:
    live.stub.queue("messages", Reply(text="a1"), Reply(text="a2"), Reply(text="a3"), Reply(text="a4"))
    client = anthropic_client(live)

    def call(msgs: list[Any]) -> Any:
        return client.messages.with_raw_response.create(model="m", max_tokens=64, system="You code.", messages=msgs)

    h: list[Any] = [{"role": "user", "content": "u1"}]
    sid = call(h).headers["x-ctxwise-session"]
    h += [{"role": "assistant", "content": "a1"}, {"role": "user", "content": "u2"}]
    assert call(h).headers["x-ctxwise-session"] == sid
    compacted: list[Any] = [{"role": "user", "content": "Summary of the conversation so far: u1, u2. Go on."}]
    r3 = call(compacted)
    assert r3.status_code == 200 and r3.headers["x-ctxwise-branched-from"] == sid
    branch = r3.headers["x-ctxwise-session"]
    assert branch != sid
    compacted += [{"role": "assistant", "content": "a3"}, {"role": "user", "content": "u4"}]
    r4 = call(compacted)
    assert r4.headers["x-ctxwise-session"] == branch and "x-ctxwise-branched-from" not in r4.headers
    assert live.stub.of("messages")[3].json["messages"][0]["content"].startswith("Summary")
    assert [m.role for m in session_messages(live, "acme", "proxy", sid)] == \
        ["system", "user", "assistant", "user", "assistant"]  # the session left is kept as it was
    assert [m.role for m in session_messages(live, "acme", "proxy", branch)] == \
        ["system", "user", "assistant", "user", "assistant"]
    live.settle()
    heads = HeadStore(live.store_url)
    try:
        assert heads.branches("acme", "proxy", sid) == [branch]
    finally:
        heads.close()
    # the branch is a stored event of the new session; the session left has none
    store = SqlStore(live.store_url)
    try:
        branched = [e for e in store.events("acme:proxy", branch) if e["stage"] == "branched"]
        assert [(e["trigger"], e["detail"]) for e in branched] == \
            [(BRANCH_TRIGGER, {"parent": sid, "messages": 2})]  # the system prompt and the summary
        assert not [e for e in store.events("acme:proxy", sid) if e["stage"] == "branched"]
    finally:
        store.close()
    assert live.stub.invalid == []


def test_edited_retry_under_a_named_session_branches(live: Live) -> None:
    live.stub.queue("chat", Reply(text="a1"), Reply(text="a2"), Reply(text="a2 again"))
    client = openai_client(live, **{"X-Ctxwise-Session": "named"})
    h: list[Any] = [{"role": "system", "content": "S"}, {"role": "user", "content": "u1"}]
    client.chat.completions.create(model="m", messages=h)
    h += [{"role": "assistant", "content": "a1"}, {"role": "user", "content": "u2"}]
    client.chat.completions.create(model="m", messages=h)
    h[-1] = {"role": "user", "content": "u2, said differently"}
    raw = client.chat.completions.with_raw_response.create(model="m", messages=h)
    assert raw.parse().choices[0].message.content == "a2 again"
    assert raw.headers["x-ctxwise-branched-from"] == "named"
    assert raw.headers["x-ctxwise-session"].startswith("named~")
    sent = live.stub.of("chat")[2].json["messages"]
    assert [m["content"] for m in sent] == ["S", "u1", "a1", "u2, said differently"]
    assert [m.blocks[0].text for m in session_messages(live, "acme", "proxy", "named")] == \
        ["S", "u1", "a1", "u2", "a2"]


def test_re_serialized_tool_arguments_still_continue_the_session(live: Live) -> None:
    """LangChain and others send arguments back as json.dumps of the parsed dict: other spacing
    than the provider's string, the same call."""
    from .stub import chat_json

    reply = chat_json(Reply(calls=[("call_x", "f", {"a": 1})]), "m")
    reply["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = '{"a":1}'  # the provider's compact form
    live.stub.queue("chat", Reply(raw=reply["choices"][0]["message"]), Reply(text="ok"))
    client = openai_client(live)
    h: list[Any] = [{"role": "user", "content": "go"}]
    first = client.chat.completions.with_raw_response.create(model="m", messages=h)
    h += [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_x", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}]},
        {"role": "tool", "tool_call_id": "call_x", "content": "done"}]
    second = client.chat.completions.with_raw_response.create(model="m", messages=h)
    assert second.headers["x-ctxwise-session"] == first.headers["x-ctxwise-session"]
    assert "x-ctxwise-branched-from" not in second.headers


def test_named_session_compacted_to_no_shared_prefix_branches_with_an_event(live: Live) -> None:
    """Claude Code's own compaction shape under ``X-Ctxwise-Session``: ``[summary, last reply,
    question]`` shares no prefix with the stored history (no system prompt either); it is a branch
    of the named session, with the header and the ``branched`` event, not an unlinked session."""
    live.stub.queue("chat", Reply(text="a0"), Reply(text="a1"), Reply(text="a3"))
    client = openai_client(live, **{"X-Ctxwise-Session": "ed-1"})

    def call(msgs: list[Any]) -> Any:
        return client.chat.completions.with_raw_response.create(model="m", messages=msgs)

    h: list[Any] = [{"role": "user", "content": "q0"}]
    assert call(h).headers["x-ctxwise-session"] == "ed-1"
    h += [{"role": "assistant", "content": "a0"}, {"role": "user", "content": "q1"}]
    call(h)
    compacted: list[Any] = [{"role": "user", "content": "summary of before"},
                            {"role": "assistant", "content": "a1"}, {"role": "user", "content": "q3"}]
    r = call(compacted)
    assert r.status_code == 200 and r.headers["x-ctxwise-branched-from"] == "ed-1"
    branch = r.headers["x-ctxwise-session"]
    assert branch.startswith("ed-1~")
    assert [m["content"] for m in live.stub.of("chat")[2].json["messages"]] == ["summary of before", "a1", "q3"]
    live.settle()
    store = SqlStore(live.store_url)
    try:
        branched = [e for e in store.events("acme:proxy", branch) if e["stage"] == "branched"]
        assert [(e["trigger"], e["detail"]["parent"]) for e in branched] == [(BRANCH_TRIGGER, "ed-1")]
    finally:
        store.close()
