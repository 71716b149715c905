"""Small builders of canonical messages for compaction tests (no format adapters involved)."""

from __future__ import annotations

import itertools

from ctxwise.messages import Message, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock

_ids = itertools.count()


def nid(prefix: str = "m") -> str:
    return f"{prefix}{next(_ids):05d}"


def system(text: str = "You are a helpful after-sales agent.") -> Message:
    return Message(id=nid("s"), role="system", blocks=[TextBlock(text=text)])


def user(text: str) -> Message:
    return Message(id=nid("u"), role="user", blocks=[TextBlock(text=text)])


def assistant(text: str = "", *, thinking: str | None = None, calls: list[tuple[str, dict]] = (), signature: str | None = None) -> Message:
    blocks = []
    if thinking is not None:
        blocks.append(ThinkingBlock(thinking=thinking, signature=signature))
    if text:
        blocks.append(TextBlock(text=text))
    for name, inp in calls:
        blocks.append(ToolUseBlock(id=nid("call_"), name=name, input=inp))
    return Message(id=nid("a"), role="assistant", blocks=blocks)


def results(call_msg: Message, bodies: list[str], *, state: str = "success") -> list[Message]:
    out = []
    for use, body in zip(call_msg.tool_uses, bodies, strict=True):
        out.append(Message(id=nid("t"), role="tool", blocks=[
            ToolResultBlock(tool_use_id=use.id, name=use.name, state=state, output=[TextBlock(text=body)])]))
    return out


def tool_turn(question: str, calls: list[tuple[str, dict, str]], answer: str, *, thinking: str | None = None) -> list[Message]:
    """A user turn with one model call per tool (sequential cycles) and a final answer."""
    out = [user(question)]
    for name, inp, body in calls:
        a = assistant(thinking=thinking, calls=[(name, inp)])
        out += [a, *results(a, [body])]
    out.append(assistant(answer, thinking=thinking))
    return out
