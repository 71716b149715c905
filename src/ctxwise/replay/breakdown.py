"""Where a context's size goes: the seeds' breakdown by category.

Categories (:data:`CATEGORIES`):

* ``system``: the system prompt;
* ``dialogue``: what the user and the assistant said (text and images);
* ``tool calls``: tool names and inputs;
* ``tool results``: tool result bodies (cleared placeholders included);
* ``thinking``: model reasoning;
* ``summary``: ctxwise's own messages (summaries, pinned facts, user memory).

Sizes come from a token counter (``chars`` or a tokenizer). The per-message framing a counter
adds (role tokens, call wrappers) is charged to the message's main category, so the parts
always add up to ``counter.count_message(m)``.
"""

from __future__ import annotations

from collections.abc import Iterable

from .. import ImageBlock, Message, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from ..tokens import Counter, tool_input_json

CATEGORIES: tuple[str, ...] = ("system", "dialogue", "tool calls", "tool results", "thinking", "summary")


def _main_category(m: Message) -> str:
    if m.kind is not None:
        return "summary"
    if m.role == "system":
        return "system"
    if m.role == "tool" or m.tool_results:
        return "tool results"
    if m.tool_uses and not m.text:
        return "tool calls"
    return "dialogue"


def message_breakdown(m: Message, counter: Counter) -> dict[str, int]:
    """The size of ``m`` split by category; values sum to ``counter.count_message(m)``.

    Memoised per message object and counter (messages are frozen).
    """
    key = f"replay/breakdown/{counter.name}"
    memo = m.memo()
    hit: dict[str, int] | None = memo.get(key)
    if hit is not None:
        return hit
    main = _main_category(m)
    parts: dict[str, int] = {}

    def add(cat: str, n: int) -> None:
        parts[cat] = parts.get(cat, 0) + n

    if main in ("summary", "system"):
        add(main, counter.count_message(m))
    else:
        for b in m.blocks:
            if isinstance(b, TextBlock):
                add("dialogue", counter.count_text(b.text))
            elif isinstance(b, ImageBlock):
                add("dialogue", counter.count_image(b))
            elif isinstance(b, ThinkingBlock):
                add("thinking", counter.count_text(b.thinking))
            elif isinstance(b, ToolUseBlock):
                add("tool calls", counter.count_text(b.name) + counter.count_text(tool_input_json(b)))
            elif isinstance(b, ToolResultBlock):
                add("tool results", sum(
                    counter.count_text(o.text) if isinstance(o, TextBlock) else counter.count_image(o)
                    for o in b.output if isinstance(o, (TextBlock, ImageBlock))))
        rest = counter.count_message(m) - sum(parts.values())
        if rest:
            add(main, rest)
    memo[key] = parts
    return parts


def breakdown(messages: Iterable[Message], counter: Counter) -> dict[str, int]:
    """The size of a message list by category, every category present (0 when empty).

    The counter's reply priming (a few tokens per request) is not included, so the values sum
    to ``counter.count(messages)`` minus that constant.
    """
    out = dict.fromkeys(CATEGORIES, 0)
    for m in messages:
        for cat, n in message_breakdown(m, counter).items():
            out[cat] += n
    return out
