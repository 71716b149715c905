"""The engine's public API as an agent uses it: OpenAI-shaped appends, bad input, async."""

from __future__ import annotations

import asyncio

import pytest

from builders import assistant, results, system, user
from ctxwise import ContextManager, PayloadInvalid, Policy
from ctxwise.errors import FormatError
from ctxwise.messages import Message, TextBlock


def manager(store_url, **kw) -> ContextManager:
    return ContextManager(store_url, Policy.preset("default", **kw))


def test_append_openai_continues_ids_and_pairs_results_sent_alone(store_url):
    s = manager(store_url, provider="deepseek").session("u", "s")
    s.append_openai([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Where is order #W1?"}])
    s.append_openai([{"role": "assistant", "content": None, "reasoning_content": "Look it up.",
                      "tool_calls": [{"id": "c1", "type": "function",
                                      "function": {"name": "query_order", "arguments": "{\"id\": \"W1\"}"}}]}])
    s.append_openai([{"role": "tool", "tool_call_id": "c1", "content": "delivered"}])
    p = s.prepare()
    assert [m["role"] for m in p.payload] == ["system", "user", "assistant", "tool"]
    assert p.payload[2]["reasoning_content"] == "Look it up."
    reloaded = manager(store_url, provider="deepseek").session("u", "s")
    # DeepSeek thinking mode: the final reply of a tool-using span carries its reasoning too
    reloaded.append_openai([{"role": "assistant", "content": "Delivered.", "reasoning_content": "Tell them."}])
    assert [m.id for m in reloaded.messages] == [f"msg-{i:06d}" for i in range(1, 6)]


@pytest.mark.parametrize("bad, rule", [
    ([Message(id="t9", role="tool", blocks=[])], "orphan-tool-result"),
    ([Message(id="x1", role="user", blocks=[])], "empty-content"),
    ([Message(id="x2", role="user", blocks=[TextBlock(text="   ")])], "blank-text-block"),
])
def test_a_bad_batch_names_the_index_and_rule_and_stores_nothing(store_url, bad, rule):
    s = manager(store_url).session("u", "bad")
    s.append([system(), user("hi"), assistant("hello")])
    before = s.version
    with pytest.raises(PayloadInvalid) as e:
        s.append([user("fine"), *bad])
    assert e.value.violations[0].index == 4 and e.value.violations[0].rule in (rule, "empty-content", "empty-tool-result")
    assert "message 4" in str(e.value)
    again = manager(store_url).session("u", "bad")
    assert again.version == before and len(again.messages) == 3


def test_a_repeated_id_is_refused(store_url):
    s = manager(store_url).session("u", "dup")
    first = user("hi")
    s.append([system(), first])
    with pytest.raises(PayloadInvalid, match="duplicate-message-id"):
        s.append([first])


def test_a_tool_result_in_openai_shape_with_no_call_is_a_format_error(store_url):
    s = manager(store_url).session("u", "nocall")
    s.append_openai([{"role": "system", "content": "x"}, {"role": "user", "content": "y"}])
    with pytest.raises(FormatError, match="no call"):
        s.append_openai([{"role": "tool", "tool_call_id": "zz", "content": "orphan"}])


def test_async_api(store_url):
    async def go():
        s = manager(store_url).session("u", "async")
        a = assistant(calls=[("search", {"q": 1})])
        await s.aappend([system(), user("look"), a, *results(a, ["found"])])
        p = await s.aprepare()
        return p, await s.aevents(), await s.atranscript()

    p, events, transcript = asyncio.run(go())
    assert [m["role"] for m in p.payload] == ["system", "user", "assistant", "tool"]
    assert events == [] and transcript[0].role == "user"


def test_another_users_session_is_not_found_and_an_empty_session_cannot_prepare(store_url):
    from ctxwise import SessionNotFound

    cm = manager(store_url)
    cm.session("alice", "s1").append([system(), user("hi")])
    with pytest.raises(SessionNotFound):
        cm.session("mallory", "s1", create=False)
    assert len(cm.session("alice", "s1", create=False).messages) == 2
    with pytest.raises(PayloadInvalid, match="empty-payload"):
        cm.session("bob", "new").prepare()


def test_every_event_is_logged_as_one_json_line_handed_to_on_event_and_stored(store_url, caplog):
    import json as _json
    import logging

    from builders import tool_turn

    seen = []
    cm = ContextManager(store_url, Policy.preset("default", budget=6_000), on_event=seen.append)
    s = cm.session("u", "events")
    s.append([system()])
    for k in range(6):
        s.append(tool_turn(f"round {k}", [("search", {"q": k}, "r" * 1500)], f"answer {k}"))
    s.append([user("and now?")])
    with caplog.at_level(logging.INFO, logger="ctxwise"):
        p = s.prepare()
    assert p.events and [e.stage for e in seen] == [e.stage for e in p.events]
    lines = [_json.loads(r.getMessage()) for r in caplog.records if r.name == "ctxwise"]
    logged = [ln for ln in lines if ln.get("event") == "ctxwise.compaction"]
    assert [ln["stage"] for ln in logged] == [e.stage for e in p.events]
    assert all({"trigger", "size_before", "size_after", "affected_ids", "duration_ms"} <= set(ln) for ln in logged)
    stored = s.events()
    assert [e["stage"] for e in stored] == [e.stage for e in p.events]
    assert stored[0]["size_before"] > stored[0]["size_after"]


def test_append_errors_name_the_item_of_the_append_and_the_rule():
    """Kind: an append error whose index counts messages the caller did not send (the session's
    last tool cycle, read before the batch so results can answer its calls) or an index into a
    window of the context: the caller cannot find the message it names."""
    cm = ContextManager("memory://", Policy(budget=3000, unit="tokens", provider="openai"))
    s = cm.session("u", "c")
    s.append_openai([{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}])
    s.append_openai([{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_order", "arguments": "{}"}}]}])
    s.append_openai([{"role": "tool", "tool_call_id": "c1", "content": "ok"}])
    before = (s.version, s.messages)
    with pytest.raises(FormatError) as e:
        s.append_openai([{"role": "tool", "tool_call_id": "nope", "content": "x"}])
    assert str(e.value).startswith("item 0 of this append") and "[orphan-tool-result]" in str(e.value)
    assert "answer a tool call" in e.value.hint
    with pytest.raises(FormatError) as e:
        s.append_openai([{"role": "user", "content": "ok"}, {"role": "assistant", "content": "fine"},
                         {"role": "tool", "tool_call_id": "zz", "content": "x"}])
    assert str(e.value).startswith("item 2 of this append") and "[orphan-tool-result]" in str(e.value)
    with pytest.raises(PayloadInvalid) as e:
        s.append_openai([{"role": "tool", "tool_call_id": "c1", "content": "again"}])
    # session index 4; its call is the assistant message 2 before it (index 2), not "message 0"
    assert "message 4" in str(e.value) and "of the assistant message 2 message(s) before it" in str(e.value)
    assert (s.version, s.messages) == before  # nothing stored by any of them
    cm.close()
