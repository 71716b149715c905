"""ctxwise.transcript.derive: the person's record, folded incrementally from context messages."""

from __future__ import annotations

from ctxwise.messages import Message, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock, text_message
from ctxwise.transcript import derive


def call(mid: str, *ids: str, thinking: str = "") -> Message:
    blocks = [ThinkingBlock(thinking=thinking)] if thinking else []
    return Message(id=mid, role="assistant", blocks=blocks + [ToolUseBlock(id=i, name="f", input={"i": i}) for i in ids])


def result(mid: str, cid: str, text: str, state: str = "success") -> Message:
    return Message(id=mid, role="tool", blocks=[ToolResultBlock(tool_use_id=cid, state=state,
                                                                output=[TextBlock(text=text)])])


def test_one_reply_collects_the_timeline_of_all_model_calls() -> None:
    msgs = [Message(id="sys", role="system", blocks=[TextBlock(text="rules")]),
            text_message("u", "user", "help"),
            call("a1", "c1", "c2", thinking="plan"), result("t1", "c1", "r1"), result("t2", "c2", "boom", "error"),
            call("a2", "c1"), result("t3", "c1", "again"),
            Message(id="a3", role="assistant", blocks=[ThinkingBlock(thinking="done"), TextBlock(text="answer")])]
    entries, still_open = derive([], msgs)
    assert still_open == []
    assert [(e.role, e.status) for e in entries] == [("user", "normal"), ("assistant", "normal")]
    reply = entries[1]
    assert reply.text == "answer" and reply.message_ids == ["a1", "t1", "t2", "a2", "t3", "a3"]
    assert [(b["kind"], b.get("result")) for b in reply.blocks] == [
        ("reasoning", None), ("tool", "r1"), ("tool", "boom"), ("tool", "again"), ("reasoning", None), ("answer", None)]
    assert reply.blocks[2]["status"] == "error"


def test_incremental_equals_all_at_once() -> None:
    msgs = [text_message("u", "user", "q"), call("a1", "c1"), result("t1", "c1", "r"),
            text_message("a2", "assistant", "fin"), text_message("u2", "user", "q2"), call("a3", "c9"),
            text_message("u3", "user", "q3")]
    whole, open_whole = derive([], msgs)
    parts, pending = [], []
    for m in msgs:
        got, pending = derive(pending, [m])
        parts += got
    assert [(e.role, e.status, e.message_ids) for e in parts] == [(e.role, e.status, e.message_ids) for e in whole]
    assert pending == open_whole == []
    assert whole[-2].status == "interrupted" and whole[-2].blocks[0]["status"] == "no_result"


def test_summaries_and_system_messages_are_not_transcript() -> None:
    summary = text_message("s", "user", "Summary", ctxwise={"kind": "summary"})
    entries, _ = derive([], [summary, Message(id="sys", role="system"), text_message("u", "user", "hi")])
    assert [e.message_ids for e in entries] == [["u"]]
