"""Kind: a reply the provider would refuse when sent back is stored, and the session is stuck.

DeepSeek thinking mode rejects a request in which an assistant message of a tool-using
user-to-user span lacks its ``reasoning_content``. Before this rule, ``append_openai`` stored
such a reply and every later ``prepare()`` raised ``reasoning-content-missing`` with nothing in the
API to repair it. Now the append is refused (``PayloadInvalid`` naming the message index) and
nothing is stored, whichever message of the span lacks it (the tool-calling reply or the final
answer after the tool result), while a session that never used reasoning is not affected."""

from __future__ import annotations

import pytest

from ctxwise import ContextManager, PayloadInvalid, Policy


def _session(tmp_path):
    cm = ContextManager(f"sqlite:///{tmp_path / 'ds.db'}",
                        Policy.preset("default", budget=8000, unit="chars", provider="deepseek"))
    s = cm.session("u", "s")
    s.append_openai([{"role": "system", "content": "You are a shop assistant."},
                     {"role": "user", "content": "Where is order 1234?"}])
    return cm, s


CALL = {"role": "assistant", "content": "", "tool_calls": [
    {"id": "c1", "type": "function", "function": {"name": "query_order", "arguments": "{\"id\": \"1234\"}"}}]}


def test_tool_call_without_reasoning_in_thinking_mode_is_refused_and_nothing_stored(tmp_path):
    cm, s = _session(tmp_path)
    s.append_openai([{"role": "assistant", "content": "Hello.", "reasoning_content": "greet"}])
    s.append_openai([{"role": "user", "content": "Where is order 1234?"}])
    before = len(s.messages)
    with pytest.raises(PayloadInvalid) as e:
        s.append_openai([CALL])
    assert e.value.violations[0].rule == "reasoning-content-missing"
    assert e.value.violations[0].index == before
    assert len(s.messages) == before
    assert len(cm.session("u", "s").messages) == before  # nothing stored
    s.prepare()  # still usable


def test_final_answer_of_a_tool_span_without_reasoning_is_refused(tmp_path):
    cm, s = _session(tmp_path)
    s.append_openai([{**CALL, "reasoning_content": "look it up"}])
    s.append_openai([{"role": "tool", "tool_call_id": "c1", "content": "shipped"}])
    with pytest.raises(PayloadInvalid) as e:
        s.append_openai([{"role": "assistant", "content": "It shipped."}])
    assert e.value.violations[0].rule == "reasoning-content-missing"
    s.append_openai([{"role": "assistant", "content": "It shipped.", "reasoning_content": "answer"}])
    s.append_openai([{"role": "user", "content": "Thanks"}])
    s.prepare()


def test_a_session_without_reasoning_is_not_in_thinking_mode(tmp_path):
    cm, s = _session(tmp_path)
    s.append_openai([CALL])
    s.append_openai([{"role": "tool", "tool_call_id": "c1", "content": "shipped"}])
    s.append_openai([{"role": "assistant", "content": "It shipped."}])
    s.prepare()
