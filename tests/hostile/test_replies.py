"""Kinds of fault: ordinary model replies that used to make a session unusable, fields passed
straight through, and a turn interrupted between a tool call and its result.

Each reply is appended mid-session, then ten more rounds (user append + prepare + assistant
append) run on every provider and both backends. Before ctxwise.normalize, every ``prepare()``
after the reply raised PayloadInvalid (blank-text-block / empty-content) and nothing in the API
could repair the session.
"""

from __future__ import annotations

import datetime as dt
import json
import math

import pytest

from ctxwise import ContextManager, Policy
from ctxwise.errors import CtxwiseError, FormatError, PayloadInvalid
from ctxwise.messages import Message, TextBlock, ToolUseBlock

PROVIDERS = ["openai", "deepseek", "anthropic", "gemini", "qwen"]


def _call(args='{"order_id": "#W1"}', cid="call_1"):
    return [{"id": cid, "type": "function", "function": {"name": "get_order", "arguments": args}}]


# (kind of reply, the OpenAI-shaped reply, whether it carries a tool call)
REPLIES = {
    "blank content beside tool_calls (vLLM/Qwen/DeepSeek servers)": ({"role": "assistant", "content": "\n\n", "tool_calls": _call()}, True),
    "whitespace-only content beside tool_calls": ({"role": "assistant", "content": " \t ", "tool_calls": _call()}, True),
    "empty string reply": ({"role": "assistant", "content": ""}, False),
    "null content, no calls": ({"role": "assistant", "content": None}, False),
    "absent content": ({"role": "assistant"}, False),
    "whitespace-only reply": ({"role": "assistant", "content": "   "}, False),
    "refusal only (OpenAI refusal field)": ({"role": "assistant", "content": None, "refusal": "I can't help with that."}, False),
    "tool_calls: [] (no tool calls)": ({"role": "assistant", "content": "Here you go.", "tool_calls": []}, False),
    "tool_calls: null": ({"role": "assistant", "content": "Here you go.", "tool_calls": None}, False),
    "arguments given as an object": ({"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_order", "arguments": {"order_id": "#W1"}}}]}, True),
}


def _session(store_url, provider):
    cm = ContextManager(store_url, Policy.preset("default", budget=6000, unit="tokens", provider=provider))
    s = cm.session("u1", "s1")
    s.append_openai([{"role": "system", "content": "You are a shop assistant."},
                     {"role": "user", "content": "Where is my order #W1?"}])
    s.prepare()
    return cm, s


def _ten_more(s):
    for k in range(10):
        s.append_openai([{"role": "user", "content": f"And question {k}?"}])
        p = s.prepare()
        assert p.payload
        s.append_openai([{"role": "assistant", "content": f"Answer {k}."}])


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("kind", list(REPLIES))
def test_reply_never_bricks_the_session(store_url, provider, kind):
    reply, has_call = REPLIES[kind]
    cm, s = _session(store_url, provider)
    s.append_openai([dict(reply)])
    if has_call:
        s.append_openai([{"role": "tool", "tool_call_id": "call_1", "content": '{"status": "shipped"}'}])
        s.prepare()
    _ten_more(s)
    # the reply is in the transcript as it arrived, and the session reopens the same
    again = cm.session("u1", "s1")
    assert [m.id for m in again.messages] == [m.id for m in s.messages]
    assert len(again.prepare().payload) == len(s.prepare().payload)
    cm.close()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_empty_reply_after_tool_results_anthropic_end_turn(store_url, provider):
    """Anthropic end_turn with content [] right after tool results (issue 10 item 3), appended
    in the canonical shape: kept in the transcript, left out of the context, one event."""
    cm, s = _session(store_url, provider)
    s.append([Message(id="a1", role="assistant", blocks=[ToolUseBlock(id="toolu_1", name="get_order", input={"order_id": "#W1"})]),
               {"id": "t1", "role": "tool", "blocks": [{"type": "tool_result", "tool_use_id": "toolu_1", "output": [{"type": "text", "text": "shipped"}]}]}])
    s.prepare()
    s.append([Message(id="a2", role="assistant", blocks=[], metadata={"stop_reason": "end_turn"})])
    assert "a2" not in [m.id for m in s.messages]
    stored = cm.store.load("u1", "s1")
    assert "a2" in [r.message_id for r in stored.rows]
    ev = [e for e in s.events() if e["stage"] == "normalized"]
    assert ev and ev[-1]["affected_ids"] == ["a2"] and ev[-1]["detail"]["messages"][0]["rules"] == ["empty_reply"]
    _ten_more(s)
    cm.close()


def test_blank_text_dropped_keeps_the_original(store_url):
    cm, s = _session(store_url, "anthropic")
    s.append_openai([{"role": "assistant", "content": "\n\n", "tool_calls": _call()}])
    m = s.messages[-1]
    assert [b.type for b in m.blocks] == ["tool_use"]
    notes = m.metadata["ctxwise"]["normalized"]
    assert notes == [{"rule": "blank-text-dropped", "original": ["\n\n"]}]
    assert [e["stage"] for e in s.events()][-1] == "normalized"
    cm.close()


def test_arguments_object_is_serialized(store_url):
    cm, s = _session(store_url, "openai")
    s.append_openai([REPLIES["arguments given as an object"][0]])
    s.append_openai([{"role": "tool", "tool_call_id": "call_1", "content": "ok"}])
    call = s.prepare().payload[-2]["tool_calls"][0]
    assert isinstance(call["function"]["arguments"], str)
    assert json.loads(call["function"]["arguments"]) == {"order_id": "#W1"}
    cm.close()


def test_tool_calls_empty_list_is_not_sent_back(store_url):
    cm, s = _session(store_url, "openai")
    s.append_openai([{"role": "assistant", "content": "Here you go.", "tool_calls": []}])
    s.append_openai([{"role": "user", "content": "thanks"}])
    sent = s.prepare().payload
    assert all("tool_calls" not in m or m["tool_calls"] for m in sent)
    cm.close()


BAD = {
    "tool_calls is a string": ({"role": "assistant", "content": "x", "tool_calls": "nope"}, "tool_calls must be a list"),
    "a call that is not an object": ({"role": "assistant", "content": "x", "tool_calls": ["call"]}, "tool call must be an object"),
    "NaN in arguments": ({"role": "assistant", "content": None, "tool_calls": _call('{"qty": NaN}')}, "not valid JSON"),
    "Infinity in arguments": ({"role": "assistant", "content": None, "tool_calls": _call('{"qty": Infinity}')}, "not valid JSON"),
    "non-JSON arguments": ({"role": "assistant", "content": None, "tool_calls": _call("{'qty': 1}")}, "not valid JSON"),
    "arguments a JSON array": ({"role": "assistant", "content": None, "tool_calls": _call("[1, 2]")}, "must be a JSON object"),
    "NaN inside object arguments": ({"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": {"qty": math.nan}}}]}, "not JSON"),
}


@pytest.mark.parametrize("kind", list(BAD))
def test_bad_fields_are_a_format_error_naming_the_index_and_store_nothing(store_url, kind):
    reply, rule = BAD[kind]
    cm, s = _session(store_url, "openai")
    before = (s.version, len(s.transcript()))
    with pytest.raises(FormatError) as e:
        s.append_openai([{"role": "user", "content": "one more"}, reply])
    assert str(e.value).startswith("message 3") and rule in str(e.value)
    again = cm.session("u1", "s1")
    assert (again.version, len(again.transcript())) == before
    _ten_more(again)
    cm.close()


@pytest.mark.parametrize("value", [dt.datetime(2026, 1, 2, 3, 4), {1, 2}, b"bytes", math.inf], ids=["datetime", "set", "bytes", "inf"])
def test_tool_input_json_cannot_carry_is_refused_before_the_write(store_url, value):
    """Kind: a canonical tool input holding a non-JSON value (was committed, then raised)."""
    cm, s = _session(store_url, "anthropic")
    before = s.version
    bad = Message(id="a1", role="assistant", blocks=[ToolUseBlock(id="t", name="f", input={"when": value})])
    with pytest.raises(FormatError, match=r"^message 2, tool call 0"):
        s.append([bad])
    assert cm.session("u1", "s1").version == before
    cm.close()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_close_pending_lets_an_interrupted_turn_go_on(store_url, provider):
    """Kind: an app crashed between appending a tool call and its result."""
    cm, s = _session(store_url, provider)
    s.append_openai([{"role": "assistant", "content": None, "tool_calls": _call(cid="c1") + _call(cid="c2")}])
    s.append_openai([{"role": "tool", "tool_call_id": "c1", "content": "done"}])
    # a crash here; the app reopens the session
    again = cm.session("u1", "s1")
    with pytest.raises(PayloadInvalid):
        again.append_openai([{"role": "user", "content": "hello?"}])
    assert again.close_pending("the app restarted") == 1
    assert again.close_pending("twice") == 0
    last = again.messages[-1].tool_results[0]
    assert last.tool_use_id == "c2" and last.state == "error" and last.text == "interrupted: the app restarted"
    assert [e["stage"] for e in again.events()][-1] == "interrupted"
    _ten_more(again)
    cm.close()


def test_all_errors_are_ctxwise_errors(store_url):
    cm, s = _session(store_url, "openai")
    for reply, _ in BAD.values():
        with pytest.raises(CtxwiseError):
            s.append_openai([reply])
    cm.close()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_anthropic_shaped_replies_through_append_anthropic(store_url, provider):
    """Kind: Anthropic replies as the SDK returns them: whitespace text beside tool_use, and
    end_turn with content [] after tool results (issue 10 item 3)."""
    cm = ContextManager(store_url, Policy.preset("default", budget=6000, provider=provider))
    s = cm.session("u1", "s1")
    s.append_anthropic({"system": "You are a shop assistant.", "messages": [{"role": "user", "content": "Where is #W1?"}]})
    s.append_anthropic([{"role": "assistant", "content": [{"type": "text", "text": "  "},
                                                         {"type": "tool_use", "id": "toolu_1", "name": "get_order", "input": {}}]}])
    s.append_anthropic([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "shipped"}]}])
    s.prepare()
    s.append_anthropic([{"role": "assistant", "content": []}])
    assert [e["stage"] for e in s.events()].count("normalized") == 2
    for k in range(10):
        s.append_anthropic([{"role": "user", "content": f"question {k}"}])
        assert s.prepare().payload
        s.append_anthropic([{"role": "assistant", "content": f"answer {k}"}])
    cm.close()
