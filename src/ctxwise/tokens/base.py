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
  + per_thinking + thinking                every ``thinking`` block (its summary text; redacted: none)
  + opaque payloads                        see below
  + per_tool_call + tool name + input JSON every ``tool_use`` (``json.dumps(input, ensure_ascii=False)``)
  + per_tool_result + output text          every ``tool_result``
  + image rule                             every image, top-level or inside a tool result

Opaque payloads (one rule for all of them): Anthropic ``redacted_thinking`` data, a Responses
``reasoning`` item's ``encrypted_content``, and every ``encrypted_content`` string inside a
provider block (Anthropic ``web_search_result``, Responses ``compaction``) are sent with the
message, so they count, by :func:`opaque_size`: in a ``chars`` counter their length; in tokens
the reasoning tokens the item stands for when the reply's ``usage`` reported them
(``output_tokens_details.reasoning_tokens``, ``openai/types/responses/response_usage.py``,
shared among the reply's encrypted reasoning items by payload length), else
``ceil(len / OPAQUE_CHARS_PER_TOKEN)``. A payload is never run through the tokenizer: random
base64 tokenizes at about 1.45 characters per o200k token, three to four times what the
provider bills for the reasoning it stands for.

``count(messages)`` is the sum plus ``reply_priming`` (the tokens that open the model's reply);
``count_tools(schemas)`` is ``tools_preamble`` plus, per schema, ``per_tool`` and its JSON.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from ..messages import ImageBlock, Message, ProviderBlock, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock

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


OPAQUE_CHARS_PER_TOKEN = 4
"""Characters of an opaque (encrypted, base64) payload per token it is assumed to stand for,
when no provider figure is known. No provider documents the ratio; an encrypted reasoning
item is a base64 Fernet-style token (``gAAAA...``) of the reasoning, i.e. 4/3 characters per
byte plus a fixed envelope, so 4 characters per token assumes at most 3 bytes per reasoning
token: an over-count (the budget side) for any serialization at or above 3 bytes a token."""


def opaque_size(unit: Unit, payload: str, stands_for: int | None = None) -> int:
    """The size of an opaque payload sent as is (encrypted reasoning, redacted thinking,
    ``encrypted_content``): its length for ``unit == "chars"``; in tokens ``stands_for`` (the
    provider's own count of the tokens it stands for) when given, else
    ``ceil(len(payload) / OPAQUE_CHARS_PER_TOKEN)``. Never negative; 0 only for ``""``."""
    if unit == "chars":
        return len(payload)
    if stands_for is not None and stands_for >= 0:
        return stands_for
    return -(-len(payload) // OPAQUE_CHARS_PER_TOKEN)


def reply_reasoning_tokens(m: Message) -> int | None:
    """The reasoning tokens the reply ``m`` reported in its kept ``usage``
    (``metadata["usage"]["output_tokens_details"]["reasoning_tokens"]``, Responses
    ``openai/types/responses/response_usage.py``), or None when it reported none."""
    usage = m.metadata.get("usage")
    det = usage.get("output_tokens_details") if isinstance(usage, dict) else None
    n = det.get("reasoning_tokens") if isinstance(det, dict) else None
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None


def _encrypted_strings(v: Any, found: list[str]) -> Any:
    """``v`` with every ``encrypted_content`` string replaced by "" (collected in ``found``)."""
    if isinstance(v, dict):
        out: dict[str, Any] = {}
        for k, x in v.items():
            if k == "encrypted_content" and isinstance(x, str):
                found.append(x)
                out[k] = ""
            else:
                out[k] = _encrypted_strings(x, found)
        return out
    if isinstance(v, list):
        return [_encrypted_strings(x, found) for x in v]
    return v


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

    def count_block(self, b: Any, stands_for: int | None = None) -> int:
        """The size of one block of a message (without the message's frame).

        ``stands_for``: for a thinking block with an opaque payload, the tokens the provider
        reported for it (see :func:`opaque_size`); ignored for other blocks.

        Text: its text, plus its ``citations`` as JSON text when it has them (sent back with
        it; an upper bound: Anthropic does not bill ``cited_text``); thinking, tool calls and
        results by the template frame; images by the image rule. Documents, search results,
        audio, refusals and provider blocks: their JSON text (``ensure_ascii=False``, sorted
        keys), an upper bound (a base64 payload is counted as text, except ``encrypted_content``
        strings in a provider block: :func:`opaque_size`); never zero.
        """
        f = self.frame
        text = self.count_text
        if isinstance(b, TextBlock):
            return text(b.text) + (text(json.dumps(b.citations, ensure_ascii=False, sort_keys=True)) if b.citations else 0)
        if isinstance(b, ThinkingBlock):
            opaque = b.opaque()
            if opaque is None:
                return f.per_thinking + text(b.thinking)
            return f.per_thinking + (0 if b.redacted else text(b.thinking)) + opaque_size(self.unit, opaque, stands_for)
        if isinstance(b, ToolUseBlock):
            return f.per_tool_call + text(b.name) + text(tool_input_json(b))
        if isinstance(b, ToolResultBlock):
            return f.per_tool_result + sum(self.count_block(o) for o in b.output)
        if isinstance(b, ImageBlock):
            return self.count_image(b)
        found: list[str] = []
        dumped = b.model_dump(mode="json")
        if isinstance(b, ProviderBlock):
            dumped = _encrypted_strings(dumped, found)
        return text(json.dumps(dumped, ensure_ascii=False, sort_keys=True)) + sum(opaque_size(self.unit, e) for e in found)

    def _count_message(self, m: Message) -> int:
        f = self.frame
        text = self.count_text
        frames = max(1, len(m.tool_results)) if m.role == "tool" else 1
        size = frames * (f.per_message + (text(m.role) if f.role_counted else 0))
        if m.name and f.per_name is not None:
            size += f.per_name + text(m.name)
        shares = self._reasoning_shares(m)
        for b in m.blocks:
            size += self.count_block(b, shares.get(id(b)))
        for item in m.beside:
            size += self._count_beside(item)
        return size

    @staticmethod
    def _reasoning_shares(m: Message) -> dict[int, int]:
        """Block id -> reasoning tokens for each encrypted (not redacted) thinking block of a
        reply that reported ``reasoning_tokens``: the figure shared by payload length (the
        last block takes the rounding remainder). Empty when there is no figure."""
        n = reply_reasoning_tokens(m)
        if n is None:
            return {}
        enc = [(b, p) for b in m.blocks if isinstance(b, ThinkingBlock) and not b.redacted
               and (p := b.opaque()) is not None]
        total = sum(len(p) for _, p in enc)
        out: dict[int, int] = {}
        left = n
        for i, (b, p) in enumerate(enc):
            share = left if i == len(enc) - 1 else n * len(p) // total
            out[id(b)] = share
            left -= share
        return out

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
