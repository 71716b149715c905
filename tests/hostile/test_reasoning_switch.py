"""Kind of fault: reasoning switched on or off during a session (issue 15, found by a fresh-user
check). Each reply was accepted at append, and then every later ``prepare()`` raised, with
nothing in the API to repair the session:

* DeepSeek: tool-using turns answered without reasoning, then thinking mode turned on. DeepSeek
  refuses the earlier turns from then on (their replies have no ``reasoning_content``); they
  are now folded into a summary segment at ``prepare()`` (``compaction.reasoning_gap``), with a
  ``summarizing`` event that names the cause. Turned on *inside* a turn, the reply with
  reasoning is refused at append (the provider would refuse the whole turn) and nothing is
  stored.
* Anthropic: a turn run with thinking off after a thinking turn, and a tool loop that thinks
  once at its start (no interleaved thinking): one thinking configuration per assistant turn,
  read from the turn's first reply.

Every case runs ten more model calls afterwards, on SQLite and PostgreSQL, and every payload
passes the wire check.
"""

from __future__ import annotations

import json

import pytest

from ctxwise import ContextManager, PayloadInvalid, Policy
from ctxwise.providers import check_wire


def _call(cid: str, reasoning: str | None = None) -> dict:
    m: dict = {"role": "assistant", "content": None,
               "tool_calls": [{"id": cid, "type": "function", "function": {"name": "get_order",
                                                                           "arguments": json.dumps({"id": cid})}}]}
    if reasoning is not None:
        m["reasoning_content"] = reasoning
    return m


def _result(cid: str) -> dict:
    return {"role": "tool", "tool_call_id": cid, "content": f"order {cid}: shipped, total $12.50"}


def _answer(text: str, reasoning: str | None = None) -> dict:
    m: dict = {"role": "assistant", "content": text}
    if reasoning is not None:
        m["reasoning_content"] = reasoning
    return m


def _deepseek(store_url: str, budget: int = 6000):
    cm = ContextManager(store_url, Policy.preset("default", budget=budget, unit="tokens", provider="deepseek"))
    s = cm.session("u1", "s1")
    s.append_openai([{"role": "system", "content": "You are a shop assistant."}])
    return cm, s


def _turn(s, k: int, reasoning: bool, tools: int = 1) -> None:
    r = (lambda t: f"thinking about {t}") if reasoning else (lambda t: None)
    s.append_openai([{"role": "user", "content": f"Question {k}: where is order W{k}?"}])
    for j in range(tools):
        s.append_openai([_call(f"c{k}_{j}", r("call"))])
        s.append_openai([_result(f"c{k}_{j}")])
    s.append_openai([_answer(f"Order W{k} has shipped.", r("answer"))])


def _ten_more_deepseek(s, start: int) -> None:
    for k in range(start, start + 10):
        s.append_openai([{"role": "user", "content": f"Question {k}?"}])
        p = s.prepare()
        assert check_wire(p.payload, "deepseek") == []
        s.append_openai([_call(f"x{k}", "look it up")])
        s.append_openai([_result(f"x{k}")])
        p = s.prepare()
        assert check_wire(p.payload, "deepseek") == []
        s.append_openai([_answer(f"Answer {k}.", "done")])


@pytest.mark.parametrize("earlier", [
    pytest.param([(False, 1)], id="one-tool-turn"),
    pytest.param([(False, 2), (False, 0), (False, 3)], id="several-turns-one-without-tools"),
    pytest.param([(False, 1), (True, 1)], id="switched-on-off-on"),
])
def test_deepseek_thinking_turned_on_between_turns_folds_the_earlier_tool_turns(store_url, earlier):
    cm, s = _deepseek(store_url)
    for k, (reasoning, tools) in enumerate(earlier):
        if reasoning:  # a turn with reasoning between two without it is refused when it lacks some
            _turn(s, k, True, tools)
            continue
        _turn(s, k, False, tools)
    s.append_openai([{"role": "user", "content": "And now think it through: order W9?"}])
    s.append_openai([_call("c9", "I should look it up")])
    s.append_openai([_result("c9")])
    shown = s.transcript()
    p = s.prepare()  # raised reasoning-content-missing before
    assert check_wire(p.payload, "deepseek") == []
    folded = [e for e in s.events() if "reasoning switched on" in e["trigger"]]
    assert len(folded) == 1 and folded[0]["stage"] == "summarizing"
    # the summary stands where the turns stood; nothing left without reasoning in a tool span
    msgs = p.payload["messages"] if isinstance(p.payload, dict) else p.payload
    assert any("Summary of the earlier conversation" in (m.get("content") or "") for m in msgs)
    for m in msgs:
        if m["role"] == "assistant" and m.get("tool_calls"):
            assert m.get("reasoning_content")
    assert s.transcript() == shown  # what a person sees is untouched
    assert s.original("c0_0") is not None  # the original result is still recallable
    _ten_more_deepseek(s, 10)
    # a reopened session gives the same payload (the fold is stored, not redone)
    again = cm.session("u1", "s1")
    again.append_openai([{"role": "user", "content": "last one"}])
    assert check_wire(again.prepare().payload, "deepseek") == []
    assert len([e for e in again.events() if "reasoning switched on" in e["trigger"]]) == 1


@pytest.mark.parametrize("switch_at", ["second call", "final answer"])
def test_deepseek_thinking_turned_on_inside_a_turn_is_refused_and_nothing_stored(store_url, switch_at):
    cm, s = _deepseek(store_url)
    s.append_openai([{"role": "user", "content": "Where is W1?"}])
    s.append_openai([_call("c1")])
    s.append_openai([_result("c1")])
    before = len(s.messages)
    reply = _call("c2", "now I think") if switch_at == "second call" else _answer("Shipped.", "now I think")
    with pytest.raises(PayloadInvalid) as e:
        s.append_openai([reply])
    v = e.value.violations[0]
    assert v.rule == "reasoning-content-missing" and v.index == before
    assert "switched on inside a tool-using turn" in v.message and "message 2" in v.message
    assert len(cm.session("u1", "s1").messages) == before  # nothing stored
    # the turn goes on without thinking, and thinking can start with the next user input
    s.append_openai([{k: x for k, x in reply.items() if k != "reasoning_content"}])
    if switch_at == "second call":
        s.append_openai([_result("c2")])
        s.append_openai([_answer("Shipped.")])
    _ten_more_deepseek(s, 20)


def test_deepseek_session_that_never_thinks_is_not_folded(tmp_path):
    cm, s = _deepseek(f"sqlite:///{tmp_path / 'ds.db'}")
    for k in range(3):
        _turn(s, k, False)
    s.append_openai([{"role": "user", "content": "more?"}])
    s.prepare()
    assert s.events() == []


# -- Anthropic ---------------------------------------------------------------------------

TH = {"type": "thinking", "thinking": "Plan: look the order up.", "signature": "c2lnbmF0dXJl"}


def _tool_use(cid: str, thinking: bool) -> dict:
    return {"role": "assistant", "content": ([TH] if thinking else []) + [
        {"type": "tool_use", "id": cid, "name": "get_order", "input": {"id": cid}}]}


def _tool_result(cid: str, size: int = 40) -> dict:
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": cid,
                                         "content": f"order {cid}: shipped " + "x" * size}]}


def _anthropic(store_url: str, budget: int = 8000):
    cm = ContextManager(store_url, Policy.preset("default", budget=budget, unit="chars", provider="anthropic"))
    s = cm.session("u1", "s1")
    s.append_anthropic([{"role": "user", "content": "Hi, where is W1?"}])
    return cm, s


def _ten_more_anthropic(s, start: int, thinking: bool) -> None:
    for k in range(start, start + 10):
        s.append_anthropic([{"role": "user", "content": f"And W{k}?"}])
        s.append_anthropic([_tool_use(f"t{k}", thinking)])
        s.append_anthropic([_tool_result(f"t{k}")])
        assert check_wire(s.prepare().payload, "anthropic") == []
        s.append_anthropic([{"role": "assistant", "content": ([TH] if thinking else []) + [
            {"type": "text", "text": f"W{k} shipped."}]}])


@pytest.mark.parametrize("first_thinks,then_thinks", [(True, False), (False, True), (True, True)])
def test_anthropic_thinking_switched_between_turns(store_url, first_thinks, then_thinks):
    cm, s = _anthropic(store_url)
    s.append_anthropic([_tool_use("t0", first_thinks)])
    s.append_anthropic([_tool_result("t0")])
    s.append_anthropic([{"role": "assistant", "content": [{"type": "text", "text": "It shipped."}]}])
    s.append_anthropic([{"role": "user", "content": "And W2?"}])
    s.append_anthropic([_tool_use("t1", then_thinks)])
    s.append_anthropic([_tool_result("t1")])
    assert check_wire(s.prepare().payload, "anthropic") == []  # raised thinking-not-first before
    _ten_more_anthropic(s, 3, then_thinks)


def test_anthropic_tool_loop_that_thinks_once_survives_the_last_resort_trim(store_url):
    # one long turn, thinking only in its first reply (no interleaved thinking), in a budget
    # that forces dropping the turn's own completed cycles: the first reply stays first
    cm, s = _anthropic(store_url, budget=3000)
    for k in range(60):  # placeholders are small: enough cycles that even they do not fit
        s.append_anthropic([_tool_use(f"t{k}", k == 0)])
        s.append_anthropic([_tool_result(f"t{k}", 600)])
        p = s.prepare()
        assert check_wire(p.payload, "anthropic") == []
        first_reply = next(m for m in p.payload["messages"] if m["role"] == "assistant")
        assert first_reply["content"][0]["type"] == "thinking"
    assert any(e["stage"] == "trimming" for e in s.events())


def test_deepseek_thinking_turned_on_in_a_reply_without_tools(store_url):
    # the first reply with reasoning calls no tool: once its reasoning is pruned (a span
    # without tool calls may drop it), the session is still in thinking mode
    cm, s = _deepseek(store_url)
    _turn(s, 0, False)
    s.append_openai([{"role": "user", "content": "Think about it."}])
    s.append_openai([_answer("Sure.", "thinking is on now")])
    s.append_openai([{"role": "user", "content": "Next?"}])
    assert check_wire(s.prepare().payload, "deepseek") == []  # raised before
    assert [e["stage"] for e in s.events() if "reasoning switched on" in e["trigger"]] == ["summarizing"]
    _ten_more_deepseek(s, 30)


def _deepseek_payload_ok(payload) -> None:
    """DeepSeek thinking mode's rule, checked on the wire payload itself: every assistant
    message of a user-to-user span with a tool call carries reasoning_content."""
    msgs = payload["messages"] if isinstance(payload, dict) else payload
    span: list[dict] = []
    for m in msgs + [{"role": "user"}]:
        if m["role"] == "user":
            if any(x.get("tool_calls") for x in span):
                assert all(x.get("reasoning_content") for x in span), span
            span = []
        elif m["role"] == "assistant":
            span.append(m)


def test_deepseek_first_thinking_request_is_folded_when_the_app_says_so(store_url):
    # found by a fresh-user check: the fold waited for the first reply with reasoning, but
    # the request that asks for it already carried the old tool turns DeepSeek refuses
    cm, s = _deepseek(store_url)
    for k in range(3):
        _turn(s, k, False)
    s.append_openai([{"role": "user", "content": "Now think it through."}])
    assert any(m.get("tool_calls") for m in s.prepare().payload)  # not told: sent as it was
    p = s.prepare(thinking=True)
    _deepseek_payload_ok(p.payload)
    assert check_wire(p.payload, "deepseek") == []
    assert [e["stage"] for e in s.events() if "reasoning switched on" in e["trigger"]] == ["summarizing"]
    _ten_more_deepseek(s, 40)


def test_deepseek_thinking_turned_off_by_the_app_accepts_replies_without_reasoning(store_url):
    cm, s = _deepseek(store_url)
    _turn(s, 0, True)
    s.append_openai([{"role": "user", "content": "Quick one, no thinking."}])
    s.prepare()
    with pytest.raises(PayloadInvalid):  # not told: a tool reply without reasoning is refused
        s.append_openai([_call("n1")])
    s.prepare(thinking=False)
    s.append_openai([_call("n1")])
    s.append_openai([_result("n1")])
    p = s.prepare(thinking=False)
    assert check_wire(p.payload, "deepseek") == []
    s.append_openai([_answer("Done.")])


def test_prepare_thinking_takes_a_bool(tmp_path):
    from ctxwise.errors import FormatError

    cm, s = _deepseek(f"sqlite:///{tmp_path / 'x.db'}")
    s.append_openai([{"role": "user", "content": "hi"}])
    with pytest.raises(FormatError, match="thinking"):
        s.prepare(thinking="yes")
