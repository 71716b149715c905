"""The one :class:`Counter` protocol: what every part of ctxwise asks of a token counter.

The engine, the compaction stages, the fact book and the replay's measures all size messages
through this protocol, so any object that has these members works everywhere a counter is
taken. :class:`~ctxwise.tokens.TokenCounter` implements it (subclass it and write
``count_text`` and ``count_image``); :func:`~ctxwise.tokens.register_counter` makes one
available by name (a policy's ``tokenizer``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

from ..messages import ImageBlock, Message
from .base import ChatFrame, Unit


@runtime_checkable
class Counter(Protocol):
    """Sizes text, messages and tool declarations in one ``unit``.

    ``name`` identifies the counter (a message's cached size is kept under it, so two counters
    that count differently never share a name); ``unit`` is ``"chars"`` or ``"tokens"``;
    ``frame`` is the provider's chat framing in that unit (per-message overhead, reply
    priming). Every size is a non-negative ``int``. A counter holds no per-call state and may
    be shared between threads.
    """

    @property
    def name(self) -> str:
        """The counter's name (the key of its cached sizes; a registered counter's registry name)."""
        ...

    @property
    def unit(self) -> Unit:
        """``"chars"`` or ``"tokens"``."""
        ...

    @property
    def frame(self) -> ChatFrame:
        """The chat framing, in ``unit`` (all zero for ``chars``)."""
        ...

    def count_text(self, text: str) -> int:
        """The size of ``text``."""
        ...

    def count_image(self, block: ImageBlock) -> int:
        """The size of one image (by an image rule, never by the length of its data)."""
        ...

    def count_message(self, message: Message) -> int:
        """The size of one message, framing included."""
        ...

    def count(self, messages: Iterable[Message]) -> int:
        """The size of a whole context: its messages plus the reply priming (0 for none)."""
        ...

    def count_tools(self, tool_schemas: list[dict[str, Any]] | None) -> int:
        """The size of the tool declarations sent with every call (0 for none)."""
        ...
