"""Renamed repeated tool call ids stay within 40 characters (issue 25: OpenAI refuses longer
call ids) and keep the call/result pairing."""

from ctxwise.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from ctxwise.providers.render import MAX_CALL_ID_CHARS, unique_call_ids


def _cycle(call_id: str, n: int) -> list[Message]:
    return [
        Message(id=f"a{n}", role="assistant", blocks=[ToolUseBlock(id=call_id, name="f", input={})]),
        Message(id=f"t{n}", role="tool", blocks=[ToolResultBlock(tool_use_id=call_id, output=[TextBlock(text="ok")])]),
    ]


def test_reused_long_id_renamed_within_limit_and_paired() -> None:
    long_id = "call_" + "x" * 35  # exactly 40 characters
    msgs = [Message(id="u", role="user", blocks=[TextBlock(text="go")])]
    for n in range(3):
        msgs += _cycle(long_id, n)
    out = unique_call_ids(msgs)
    calls = [b.id for m in out for b in m.tool_uses]
    results = [b.tool_use_id for m in out if m.role == "tool" for b in m.blocks if isinstance(b, ToolResultBlock)]
    assert calls == results
    assert len(set(calls)) == 3 and calls[0] == long_id
    assert all(len(c) <= MAX_CALL_ID_CHARS for c in calls)
    assert unique_call_ids(msgs) == out  # deterministic
