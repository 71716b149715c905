"""The :class:`TokenCounter` base: how a counter walks a message, and the per-message cache.

A counter turns text into a size (``count_text``) and knows its provider's chat framing
(:class:`ChatFrame`: per-message overhead, tool-call wrappers, reply priming, the tool-list
preamble) and its image rule. ``count_message`` adds those up for one message and keeps the
result in ``Message.memo()`` under ``"tokens/<counter name>"``: messages are frozen and an
edited copy starts with an empty memo, so an unchanged message object is never counted twice
(ARCHITECTURE.md, decision 7, O(new work) per call).

What one message costs, in the counter's unit::

    frames * (per_message + role)          frames = number of tool results for a ``tool``
                                           message (each is its own OpenAI message), else 1
  + per_name + name                        when the message has a ``name``
  + text                                   every ``text`` block
  + per_thinking + thinking                every ``thinking`` block (redacted: its opaque data)
  + per_tool_call + tool name + input JSON every ``tool_use`` (``json.dumps(input, ensure_ascii=False)``)
  + per_tool_result + output text          every ``tool_result``
  + image rule                             every image, top-level or inside a tool result

``count(messages)`` is the sum plus ``reply_priming`` (the tokens that open the model's reply);
``count_tools(schemas)`` is ``tools_preamble`` plus, per schema, ``per_tool`` and its JSON.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from ..messages import ImageBlock, Message, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock

Unit = Literal["chars", "tokens"]


@dataclass(frozen=True)
class ChatFrame:
    """A provider's chat framing, in the counter's unit (tokens; all zero for ``chars``).

    ``role_counted``: the role name is encoded as text (OpenAI, Qwen) rather than folded into
    one special token (DeepSeek). ``per_name``: overhead when a message has a ``name`` (None =
    names are not counted at all). ``tools_preamble``: fixed text a chat template puts around
    the tool list, counted once when there are tools.
    """

    per_message: int = 0
    role_counted: bool = False
    per_name: int | None = None
    per_thinking: int = 0
    per_tool_call: int = 0
    per_tool_result: int = 0
    reply_priming: int = 0
    tools_preamble: str = ""
    per_tool: int = 0


def tool_input_json(block: ToolUseBlock) -> str:
    """A tool call's input as counted: ``json.dumps(input, ensure_ascii=False)``."""
    return json.dumps(block.input, ensure_ascii=False)


CHUNK_CHARS = 1 << 16
"""Text longer than this is counted in pieces of about this many characters (bounded memory)."""


def text_chunks(text: str, size: int = CHUNK_CHARS) -> Iterator[str]:
    """``text`` in consecutive pieces of at most ``size`` characters, for counting a huge tool
    result in bounded memory (a 20 MB result encoded whole held ~1 GB of token ids).

    Each cut is made before a space or newline that follows a letter or digit and precedes a
    letter: every BPE split pattern used here (o200k, cl100k, Qwen2, DeepSeek) starts a new
    pre-token there, so the count is exactly the count of the whole text. A piece with no such
    place (a run without spaces, e.g. base64) is cut at ``size``; each such cut can change the
    count by a token or so (documented approximation: at most one token per ``size``
    characters)."""
    n, start = len(text), 0
    while n - start > size:
        end = start + size
        cut = end
        lo = start + size // 2
        i = end
        while True:
            i = max(text.rfind(" ", lo, i), text.rfind("\n", lo, i))
            if i <= lo:
                break
            if text[i - 1].isalnum() and text[i + 1: i + 2].isalpha():
                cut = i
                break
        yield text[start:cut]
        start = cut
    yield text[start:]


class TokenCounter:
    """Sizes text and messages in one unit. Subclasses set ``name``, ``unit`` and ``count_text``.

    ``rules`` says in words how the counter counts messages, tool schemas and images.
    Instances are shared (see :func:`ctxwise.tokens.get_counter`) and hold no per-call state.
    """

    name: str = ""
    unit: Unit = "tokens"
    rules: str = ""
    frame: ChatFrame = ChatFrame()

    def count_text(self, text: str) -> int:
        """The size of ``text`` in ``unit``."""
        raise NotImplementedError

    def count_image(self, block: ImageBlock) -> int:
        """The size of one image in ``unit`` (by an image rule, never by base64 length)."""
        raise NotImplementedError

    # -- messages ----------------------------------------------------------------------

    @property
    def memo_key(self) -> str:
        """The key under which this counter stores a message's size in ``Message.memo()``."""
        return f"tokens/{self.name}"

    def count_message(self, message: Message) -> int:
        """The size of one message in ``unit``, computed once per message object."""
        memo = message.memo()
        key = self.memo_key
        size = memo.get(key)
        if size is None:
            size = self._count_message(message)
            memo[key] = size
        return size

    def count(self, messages: Iterable[Message]) -> int:
        """The size of a whole context: its messages plus ``reply_priming`` (0 for no messages)."""
        total = 0
        any_message = False
        for m in messages:
            total += self.count_message(m)
            any_message = True
        return total + self.frame.reply_priming if any_message else 0

    def count_tools(self, tool_schemas: list[dict[str, Any]] | None) -> int:
        """The size of the tool declarations sent with every call (0 when there are none).

        Each schema is counted as its JSON (``ensure_ascii=False``) plus ``per_tool``, and the
        template's ``tools_preamble`` once. Providers render schemas their own way (OpenAI as a
        TypeScript-like namespace), so this is an estimate; calibrate with provider usage.
        """
        if not tool_schemas:
            return 0
        f = self.frame
        total = self.count_text(f.tools_preamble) if f.tools_preamble else 0
        for schema in tool_schemas:
            total += f.per_tool + self.count_text(json.dumps(schema, ensure_ascii=False))
        return total

    def count_block(self, b: Any) -> int:
        """The size of one block of a message (without the message's frame).

        Text: its text, plus its ``citations`` as JSON text when it has them (sent back with
        it; an upper bound: Anthropic does not bill ``cited_text``); thinking, tool calls and
        results by the template frame; images by the image rule. Documents, search results,
        audio, refusals and provider blocks: their JSON text (``ensure_ascii=False``, sorted
        keys), an upper bound (a base64 payload is counted as text); never zero.
        """
        f = self.frame
        text = self.count_text
        if isinstance(b, TextBlock):
            return text(b.text) + (text(json.dumps(b.citations, ensure_ascii=False, sort_keys=True)) if b.citations else 0)
        if isinstance(b, ThinkingBlock):
            return f.per_thinking + text(b.thinking)
        if isinstance(b, ToolUseBlock):
            return f.per_tool_call + text(b.name) + text(tool_input_json(b))
        if isinstance(b, ToolResultBlock):
            return f.per_tool_result + sum(self.count_block(o) for o in b.output)
        if isinstance(b, ImageBlock):
            return self.count_image(b)
        return text(json.dumps(b.model_dump(mode="json"), ensure_ascii=False, sort_keys=True))

    def _count_message(self, m: Message) -> int:
        f = self.frame
        text = self.count_text
        frames = max(1, len(m.tool_results)) if m.role == "tool" else 1
        size = frames * (f.per_message + (text(m.role) if f.role_counted else 0))
        if m.name and f.per_name is not None:
            size += f.per_name + text(m.name)
        for b in m.blocks:
            size += self.count_block(b)
        for item in m.beside:
            size += self._count_beside(item)
        return size

    def _count_beside(self, item: Any) -> int:
        """One of :attr:`Message.beside`'s items: its JSON text (``ensure_ascii=False``), each
        inline ``data:image/<type>;base64,`` URL in it counted as an image instead. Raises
        :class:`~ctxwise.errors.FormatError` for an item nested deeper than
        :data:`ctxwise.nesting.MAX_DEPTH` (no store holds it)."""
        from ..errors import FormatError
        from ..nesting import too_deep

        why = too_deep(item)
        if why is not None:
            raise FormatError("metadata beside item", f"{why}; send deeper data as text or flatten it")
        images: list[ImageBlock] = []

        def strip(v: Any) -> Any:
            if isinstance(v, str) and v.startswith("data:image/") and ";base64," in v:
                head, data = v[5:].split(";base64,", 1)
                images.append(ImageBlock(media_type=head, data=data))
                return ""
            if isinstance(v, dict):
                return {k: strip(x) for k, x in v.items()}
            if isinstance(v, list):
                return [strip(x) for x in v]
            return v

        text = json.dumps(strip(item), ensure_ascii=False, default=str)
        return self.count_text(text) + sum(self.count_image(i) for i in images)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} ({self.unit})>"
