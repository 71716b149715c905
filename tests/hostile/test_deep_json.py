"""Kind of fault: JSON nested deeper than Python's recursion can walk (issue 28, "Under attack").

A tool result holding ``"[" * 10_000`` (20 KB) stored fine, then every ``prepare()`` raised a raw
``RecursionError`` once clearing reached it, for good and in any process. Every walker of user
JSON is bounded now (:mod:`ctxwise.nesting`): JSON *text* nested too deep is read as plain text
(the placeholder, the digest, recall and a reopen all work); a JSON *value* nested too deep (a
tool input, metadata, a block's ``extra``) is refused at append with ``MessageNotStorable``
naming the message index and the rule ``too-deep``, and nothing is stored."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from ctxwise import ContextManager, Policy
from ctxwise.errors import CtxwiseError, FormatError, MessageNotStorable
from ctxwise.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from ctxwise.nesting import MAX_DEPTH, TooDeep, depth, loads, text_depth
from ctxwise.recall import recall_tool_output

from builders import assistant, results, system, user

DEEP = 10_000
DEEP_TEXT = "[" * DEEP + "]" * DEEP
DEEP_OBJECT_TEXT = '{"a":' * DEEP + "1" + "}" * DEEP


def deep_value(levels: int) -> dict[str, Any]:
    """``{"a": {"a": ... {"a": 1}}}``, ``levels`` objects deep, built without recursion."""
    out: dict[str, Any] = {"a": 1}
    for _ in range(levels - 1):
        out = {"a": out}
    return out


def policy(**kw: Any) -> Policy:
    """A small budget, editing at the watermarks: clearing and summarizing both fire."""
    return Policy.preset("default", budget=3000, provider="openai", edit_when="watermark", **kw)


def grow(s: Any, body: str, turns: int = 8) -> tuple[list[str], str]:
    """Append ``body`` as the first tool result, then turns that outgrow the budget; prepare
    after each. Returns the stages of every event fired and the first call's id."""
    s.append([system(), user("please look up the order W123 for me")])
    stages: list[str] = []
    first = ""
    for i in range(turns):
        a = assistant(calls=[("lookup", {"q": i})])
        first = first or a.tool_uses[0].id
        s.append([a, *results(a, [body if i == 0 else f"order W{i} status pending " + "x " * 250])])
        s.append([assistant(f"done step {i}"), user(f"next question {i} " + "y " * 80)])
        stages += [e.stage for e in s.prepare().events]
    return stages, first


def stored_ids(store_url: str, session_id: str) -> list[str]:
    """The ids of every message stored for ``session_id`` (hidden ones included)."""
    cm = ContextManager(store_url)
    try:
        return [r.message_id for r in cm.store.load("u1", session_id, include_hidden=True).rows]
    finally:
        cm.close()


@pytest.mark.parametrize("body", [DEEP_TEXT, DEEP_OBJECT_TEXT, "[" * 900 + "]" * 900],
                         ids=["array-10000", "object-10000", "array-900"])
def test_a_deep_json_result_is_cleared_summarized_recalled_and_reopened(store_url: str, body: str):
    cm = ContextManager(store_url, policy())
    s = cm.session("u1", "deep")
    stages, call = grow(s, body)
    assert "clearing" in stages and "summarizing" in stages, stages
    text, offset = "", 0  # the original comes back whole, in pages (each names the next offset)
    while True:
        page, is_error = recall_tool_output(s, {"tool_use_id": call, "offset": offset})
        assert not is_error
        part, sep, note = page.partition("\n[ctxwise: characters ")
        text += part
        if not sep:
            break
        offset = int(note.rsplit("offset=", 1)[1].rstrip(")]"))
    assert text == body
    again = ContextManager(store_url).session("u1", "deep")  # a reopen in a fresh manager
    again.append([assistant("anything else?"), user("no, thanks")])
    assert again.prepare().payload
    cm.close()


def test_the_placeholder_and_the_digest_read_deep_json_as_text():
    from ctxwise.compaction import placeholder_text
    from ctxwise.distill import key_items
    from ctxwise.summarizers import DigestSummarizer

    block = ToolResultBlock(tool_use_id="call_1", name="lookup", output=[TextBlock(text=DEEP_TEXT)])
    assert "call_1" in placeholder_text(Policy.preset("default"), block, {})
    assert key_items(DEEP_OBJECT_TEXT) == []  # no values in it: read as text, nothing salient
    a = Message(id="a1", role="assistant", blocks=[ToolUseBlock(id="call_1", name="lookup", input={})])
    msgs = [user("order W123?"), a, Message(id="t1", role="tool", blocks=[block]),
            Message(id="a2", role="assistant", blocks=[TextBlock(text=DEEP_OBJECT_TEXT)])]
    assert DigestSummarizer().summarize(msgs, None, 400).text


@pytest.mark.parametrize("where", ["tool input", "metadata", "block extra", "beside"])
def test_a_deep_value_is_refused_at_append_by_index_and_nothing_is_stored(store_url: str, where: str):
    cm = ContextManager(store_url, policy())
    s = cm.session("u1", "deep-value")
    s.append([system(), user("hello")])
    deep = deep_value(DEEP)
    if where == "tool input":
        bad = Message(id="a-deep", role="assistant", blocks=[ToolUseBlock(id="c1", name="lookup", input=deep)])
    elif where == "metadata":
        bad = Message(id="a-deep", role="assistant", blocks=[TextBlock(text="ok")], metadata={"d": deep})
    elif where == "block extra":
        bad = Message(id="a-deep", role="assistant", blocks=[TextBlock(text="ok", extra={"d": deep})])
    else:
        bad = Message(id="a-deep", role="assistant", blocks=[TextBlock(text="ok")],
                      metadata={"ctxwise": {"beside": [deep]}})
    with pytest.raises(MessageNotStorable) as e:
        s.append([bad])
    assert e.value.index == 2 and e.value.rule == "too-deep" and "message 2" in str(e.value)
    assert len(stored_ids(store_url, "deep-value")) == 2
    s.append([assistant("fine")])
    assert s.prepare().payload
    cm.close()


def test_the_limit_is_the_same_just_below_python_s_recursion_limit(store_url: str):
    """A value 900 deep passes json and pydantic in a shallow stack and broke the walkers in a
    deeper one (prepare, a server thread): the rule is by depth, not by what happened to work."""
    cm = ContextManager(store_url, policy())
    s = cm.session("u1", "limit")
    s.append([system(), user("hello")])
    ok = Message(id="a-ok", role="assistant", blocks=[ToolUseBlock(id="c1", name="f", input=deep_value(MAX_DEPTH - 1))])
    s.append([ok, Message(id="t-ok", role="tool", blocks=[ToolResultBlock(tool_use_id="c1", name="f",
                                                                         output=[TextBlock(text="done")])])])
    for levels in (MAX_DEPTH + 1, 900):
        bad = Message(id="a-bad", role="assistant", blocks=[ToolUseBlock(id="c2", name="f", input=deep_value(levels))])
        with pytest.raises(MessageNotStorable, match="too-deep"):
            s.append([bad])
    assert s.prepare().payload
    cm.close()


@pytest.mark.parametrize("arguments", ["[" * DEEP, DEEP_OBJECT_TEXT])
def test_deep_openai_arguments_are_refused_naming_the_call(store_url: str, arguments: str):
    cm = ContextManager(store_url, policy())
    s = cm.session("u1", "args")
    s.append_openai([{"role": "user", "content": "hi"}])
    call = {"role": "assistant", "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments}}]}
    with pytest.raises(FormatError, match=r"message 1, tool call 0.*nested"):
        s.append_openai([call])
    assert len(stored_ids(store_url, "args")) == 1
    cm.close()


def test_format_readers_refuse_deep_arguments_by_name():
    from ctxwise.formats import from_anthropic, from_openai

    with pytest.raises(FormatError, match="nested"):
        from_openai([{"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": DEEP_OBJECT_TEXT}}]}])
    with pytest.raises(CtxwiseError, match="nested"):
        from_anthropic({"messages": [{"role": "assistant", "content": [
            {"type": "tool_use", "id": "c1", "name": "f", "input": deep_value(DEEP)}]}]})


def test_a_deep_result_in_a_thread_with_a_small_stack(store_url: str):
    """Server workers run prepare in threads; the outcome is the same there."""
    out: list[Any] = []

    def work() -> None:
        try:
            cm = ContextManager(store_url, policy())
            out.append(grow(cm.session("u1", "thread"), DEEP_TEXT)[0])
            cm.close()
        except BaseException as e:  # noqa: BLE001 - reported below
            out.append(e)

    threading.stack_size(512 * 1024)
    try:
        t = threading.Thread(target=work)
        t.start()
        t.join()
    finally:
        threading.stack_size(0)
    assert isinstance(out[0], list) and "clearing" in out[0], out


def test_the_service_routes_survive_deep_json(tmp_path):
    from fastapi.testclient import TestClient

    from ctxwise.server import create_app

    from tests.server.conftest import POLICY, make_keys

    url = f"sqlite:///{tmp_path / 'srv.db'}"
    app = create_app(url, POLICY.with_(budget=3000, edit_when="watermark"))
    key = make_keys(url)[0]["a"]
    h, q = {"X-API-Key": key}, {"user_id": "u1"}
    with TestClient(app, raise_server_exceptions=False) as http:
        def send(messages: list[dict[str, Any]]) -> Any:
            return http.post("/v1/sessions/s1/messages", params=q, headers=h,
                             json={"format": "openai", "messages": messages})

        assert send([{"role": "system", "content": "You are an agent."},
                     {"role": "user", "content": "look up W1"}]).status_code == 200
        fired: list[str] = []
        for i in range(8):
            r = send([{"role": "assistant", "content": None, "tool_calls": [
                          {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                      {"role": "tool", "tool_call_id": f"c{i}", "content": DEEP_TEXT if i == 0 else "z " * 300},
                      {"role": "assistant", "content": f"step {i}"},
                      {"role": "user", "content": f"and then {i} " + "w " * 80}])
            assert r.status_code == 200, r.text
            p = http.post("/v1/sessions/s1/prepare", params=q, headers=h, json={})
            assert p.status_code == 200, p.text
            fired += [e["stage"] for e in p.json()["events"]]
        assert "clearing" in fired
        r = send([{"role": "assistant", "content": None, "tool_calls": [
            {"id": "cx", "type": "function", "function": {"name": "f", "arguments": DEEP_OBJECT_TEXT}}]}])
        assert r.status_code in (400, 422) and "nested" in r.text, r.text
        deep_args = {"role": "assistant", "content": None, "tool_calls": [
            {"id": "cy", "type": "function", "function": {"name": "f", "arguments": deep_value(MAX_DEPTH + 5)}}]}
        r = send([deep_args])
        assert r.status_code in (400, 422) and "deep" in r.text, r.text
        assert http.post("/v1/sessions/s1/prepare", params=q, headers=h, json={}).status_code == 200


def test_bounded_loads_and_depth_agree_with_json():
    for text in ("[]", "{}", '[[1,[2]]]', '"[[["', '{"a":"]]]\\"[[","b":[{}]}', "5", '["\\\\", [[]]]'):
        assert text_depth(text) == depth(json.loads(text)), text
    assert text_depth(DEEP_TEXT) == DEEP and depth(deep_value(DEEP)) == MAX_DEPTH + 1
    with pytest.raises(TooDeep):
        loads(DEEP_TEXT)
    assert loads('{"a": [1, 2]}') == {"a": [1, 2]}


def test_a_deep_beside_item_in_an_amendment_is_a_ctxwise_error(store_url: str):
    cm = ContextManager(store_url, policy())
    s = cm.session("u1", "amend")
    s.append([system(), user("hello"), assistant("hi")])
    for md in ({"x": deep_value(DEEP)}, {"ctxwise": {"beside": [deep_value(DEEP)]}}):
        with pytest.raises(CtxwiseError, match="deep"):
            s.amend(lambda m, md=md: m.model_copy(update={"metadata": {**m.metadata, **md}}))
    assert ContextManager(store_url).session("u1", "amend").messages[-1].metadata == {}
    assert s.prepare().payload
    cm.close()
