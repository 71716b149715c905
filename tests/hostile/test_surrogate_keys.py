"""Kind of fault: a lone surrogate in a tool-argument *key* stored mangled (issue 28, low). A
lone surrogate in a value was refused at append (``MessageNotStorable``, rule
``lone-surrogate``); in a key it went through pydantic's JSON serializer, which wrote it as
U+FFFD, and the stored call no longer matched what the model sent. Keys are refused like values
now, naming the message index, and nothing is stored."""

from __future__ import annotations

from typing import Any

import pytest

from ctxwise import ContextManager, Policy
from ctxwise.errors import MessageNotStorable
from ctxwise.messages import Message, TextBlock, ToolUseBlock


def _assistant(input_: dict[str, Any] | None = None, **metadata: Any) -> Message:
    blocks = [ToolUseBlock(id="c1", name="f", input=input_)] if input_ is not None else [TextBlock(text="ok")]
    return Message(id="a1", role="assistant", blocks=blocks, metadata=metadata)


CASES = {
    "input key": lambda s: s.append([_assistant({"k\udc80": 1})]),
    "nested input key": lambda s: s.append([_assistant({"outer": [{"k\ud800": 1}]})]),
    "metadata key": lambda s: s.append([_assistant(None, tags={"\udcff": "x"})]),
    "openai arguments text": lambda s: s.append_openai([{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"k\\udc80": 1}'}}]}]),
    "openai arguments object": lambda s: s.append_openai([{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"k\udc80": 1}}}]}]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_lone_surrogate_in_a_key_is_refused_by_index(store_url, case):
    cm = ContextManager(store_url, Policy.preset("default", provider="openai"))
    s = cm.session("u1", f"sur-{case.replace(' ', '-')}")
    s.append([Message(id="u0", role="user", blocks=[TextBlock(text="hi")])])
    with pytest.raises(MessageNotStorable) as e:
        CASES[case](s)
    assert e.value.index == 1 and e.value.rule == "lone-surrogate" and "key" in str(e.value)
    again = ContextManager(store_url).session("u1", s.session_id)
    assert [m.id for m in again.messages] == ["u0"]
    s.append([_assistant({"k": "fine"})])
    assert ContextManager(store_url).session("u1", s.session_id).messages[-1].tool_uses[0].input == {"k": "fine"}
    cm.close()
