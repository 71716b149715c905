"""Kind of fault: a session that reuses a call id (the tau-bench recordings do, 63 times). A
placeholder named only the call id, so ``recall_tool_result`` returned another call's body
(found by a fresh-user check: 8 of 10 cleared results recalled the wrong body). Now a
placeholder, or an in-flight cut note, names the message id too whenever the context holds more
than one result under its call id, and the recall tool takes it; the bare id means the oldest
cleared result in the context, the one whose placeholder names it alone.

Checked on the real recordings: every placeholder of every payload, recalled with exactly what
it names, gives back the body of that very message, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import re

import pytest

from ctxwise import ContextManager, Policy, recall_tool_output
from ctxwise.formats import load
from ctxwise.recall import recall_tool_result
from ctxwise.errors import ToolResultNotFound

KEY = re.compile(r'recall_tool_result\("(.+?)"\)')


def _placeholders(payload: list[dict]) -> list[tuple[str, str]]:
    """(recall key, the tool_call_id of the message) of every placeholder in a chat payload."""
    return [(KEY.search(m["content"]).group(1), m["tool_call_id"]) for m in payload
            if m["role"] == "tool" and isinstance(m["content"], str) and KEY.search(m["content"])]


def _recall_whole(s, key: str) -> str:
    """The original ``key`` names, its pages (sized from the session's budget) put together."""
    got, offset = "", 0
    while True:
        text, is_error = recall_tool_output(s, {"tool_use_id": key, "offset": offset})
        assert not is_error, text
        page, sep, note = text.partition("\n[ctxwise: characters ")
        got += page
        if not sep:
            return got
        offset = int(note.rsplit("offset=", 1)[1].rstrip(")]"))


def _check_every_placeholder(s, payload, originals: dict[str, str]) -> int:
    """Recall each placeholder by what it names; it must give the body of its own message."""
    n = 0
    for key, call_id in _placeholders(payload):
        text = _recall_whole(s, key)
        mid = key.split(", message_id ")[1] if ", message_id " in key else None
        # which message's body is it? the one the key names, or the only/oldest cleared one
        assert text in originals.values()
        if mid is not None:
            assert text == originals[mid]
        n += 1
    return n


def test_recorded_sessions_that_reuse_call_ids_recall_each_body(store_url, shared_dir):
    convs = load(shared_dir / "data/trajectories/tau-bench/gpt-4o-airline_subset.json")
    reusing = [c for c in convs if len({u.id for m in c.messages for u in m.tool_uses})
               < sum(len(m.tool_uses) for m in c.messages)][:6]
    assert len(reusing) == 6
    cm = ContextManager(store_url, Policy.preset("default", budget=3000, unit="tokens", provider="openai",
                                                   summarize=False))  # placeholders, not summaries
    checked = named = 0
    for c in reusing:
        s = cm.session("u1", c.id)
        originals: dict[str, str] = {}
        for m in c.messages:
            if m.role == "assistant" and len(s.messages) > 1:
                p = s.prepare()
                checked += _check_every_placeholder(s, p.payload, originals)
                named += sum(", message_id " in k for k, _ in _placeholders(p.payload))
            s.append([m])
            stored = s.messages[-1]
            for r in stored.tool_results:
                originals[stored.id] = r.text
    assert checked > 50 and named > 0  # placeholders were there, some under a reused id


def _session(store_url):
    cm = ContextManager(store_url, Policy.preset("default", budget=3000, unit="chars", provider="openai"))
    s = cm.session("u", "s")
    s.append_openai([{"role": "system", "content": "sys"}, {"role": "user", "content": "do all the lookups"}])
    return s


def _cycle(s, cid: str, k: int) -> None:
    s.append_openai([{"role": "assistant", "content": None, "tool_calls": [
        {"id": cid, "type": "function", "function": {"name": "get", "arguments": json.dumps({"k": k})}}]}])
    s.append_openai([{"role": "tool", "tool_call_id": cid, "content": f"BODY-{k} " + "x" * 400}])


@pytest.mark.parametrize("ids", [
    pytest.param(["call_0"] * 12, id="one-id-every-call"),
    pytest.param(["a", "b"] * 6, id="two-ids-alternating"),
    pytest.param(["call_0"] + [f"u{k}" for k in range(10)] + ["call_0"], id="reused-once-much-later"),
])
def test_every_placeholder_recalls_its_own_body(store_url, ids):
    s = _session(store_url)
    for k, cid in enumerate(ids):
        _cycle(s, cid, k)
        p = s.prepare()
        for m in p.payload:
            if m["role"] == "tool" and "(recall_tool_result)" in m["content"]:
                key = KEY.search(m["content"]).group(1)
                k_named = json.loads(re.search(r"get (\{.*?\})", m["content"]).group(1))["k"]
                text, err = recall_tool_output(s, {"tool_use_id": key})
                assert not err and text.startswith(f"BODY-{k_named} "), (key, text[:12])


def test_recall_takes_the_message_id_apart_and_refuses_a_wrong_pair(store_url):
    s = _session(store_url)
    for k in range(6):
        _cycle(s, "call_0", k)
    mid = [m for m in s.messages if m.role == "tool"][1].id  # the second result
    assert recall_tool_result(s, "call_0", mid).startswith("BODY-1 ")
    assert recall_tool_output(s, {"tool_use_id": "call_0", "message_id": mid})[0].startswith("BODY-1 ")
    with pytest.raises(ToolResultNotFound, match="in message"):
        recall_tool_result(s, "other", mid)
    assert recall_tool_output(s, {"tool_use_id": "call_0", "message_id": 7})[1] is True  # bad type: an error for the model


@pytest.mark.parametrize("args", [
    lambda mid: {"tool_use_id": f"  call_0 ,  message_id  {mid} "},
    lambda mid: {"tool_use_id": f"tool_use_id call_0, message_id {mid}"},
    lambda mid: {"tool_use_id": f"call_0; message_id {mid}"},
    lambda mid: {"tool_use_id": " call_0 ", "message_id": f" {mid} "},
    lambda mid: {"message_id": mid},
    lambda mid: json.dumps({"tool_use_id": f"call_0, message_id {mid}"}),
])
def test_recall_key_as_a_model_may_copy_it(store_url, args):
    # found by a fresh-user check: spaces, the placeholder's own words, a ';' were errors
    s = _session(store_url)
    for k in range(4):
        _cycle(s, "call_0", k)
    mid = [m for m in s.messages if m.role == "tool"][2].id
    text, is_error = recall_tool_output(s, args(mid))
    assert not is_error and text.startswith("BODY-2 "), text


@pytest.mark.parametrize("args", [{"tool_use_id": "call_0", "message_id": 7}, {"message_id": "nope"}, [1, 2], "[]"])
def test_recall_bad_arguments_are_an_error_for_the_model(store_url, args):
    s = _session(store_url)
    _cycle(s, "call_0", 0)
    text, is_error = recall_tool_output(s, args)
    assert is_error, text
