"""Token counters: how big a context is, in ``chars`` or in ``tokens`` of a named tokenizer.

>>> from ctxwise.tokens import get_counter
>>> counter = get_counter("o200k_base")
>>> counter.count_text("hello world")
2

A :class:`TokenCounter` has ``name``, ``unit`` (``"chars"`` or ``"tokens"``), ``rules`` (how it
counts messages, tool schemas and images) and:

* ``count_text(s)``: the size of a string;
* ``count_message(m)``: the size of one message, framing included, cached in ``m.memo()`` so an
  unchanged message object is never counted twice;
* ``count(messages)``: a whole context (the messages plus the reply priming);
* ``count_tools(schemas)``: the tool declarations sent with every call.

Built-in counters (:data:`COUNTER_NAMES`):

=============  ======  ===========================================  ======================
name           unit    text                                         images
=============  ======  ===========================================  ======================
chars          chars   ``len`` (Ragent's rule)                      4 x Anthropic tokens
o200k_base     tokens  tiktoken o200k (GPT-4o, 4.1, o-series)       OpenAI tiles
cl100k_base    tokens  tiktoken cl100k (GPT-4, 3.5)                 OpenAI tiles
deepseek       tokens  DeepSeek V3 / V4 ``tokenizer.json``          Anthropic w*h/750
qwen           tokens  Qwen2 / 2.5 / 3 BPE                          Anthropic w*h/750
estimate       tokens  script-aware estimate (CJK 1.5 chars/token)  Anthropic w*h/750
=============  ======  ===========================================  ======================

All of them work with no network: the tokenizer files come from installed packages.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ..errors import PolicyError
from .base import ChatFrame, TokenCounter, Unit, tool_input_json
from .counters import (
    CharsCounter,
    DeepSeekCounter,
    EstimateCounter,
    QwenCounter,
    TiktokenCounter,
)
from .estimate import estimate_tokens
from .images import anthropic_image_tokens, image_size, openai_image_tokens

__all__ = [
    "COUNTER_NAMES",
    "ChatFrame",
    "CharsCounter",
    "DeepSeekCounter",
    "EstimateCounter",
    "QwenCounter",
    "TiktokenCounter",
    "TokenCounter",
    "Unit",
    "anthropic_image_tokens",
    "estimate_tokens",
    "get_counter",
    "image_size",
    "openai_image_tokens",
    "tool_input_json",
]

_FACTORIES: dict[str, Callable[[], TokenCounter]] = {
    "chars": CharsCounter,
    "o200k_base": lambda: TiktokenCounter("o200k_base"),
    "cl100k_base": lambda: TiktokenCounter("cl100k_base"),
    "deepseek": DeepSeekCounter,
    "qwen": QwenCounter,
    "estimate": EstimateCounter,
}
COUNTER_NAMES: tuple[str, ...] = tuple(_FACTORIES)
"""The names :func:`get_counter` knows."""

_COUNTERS: dict[str, TokenCounter] = {}
_LOCK = threading.Lock()


def get_counter(name: str) -> TokenCounter:
    """The shared counter called ``name``, built on first use (loading a vocabulary takes ~0.2 s).

    Raises :class:`~ctxwise.errors.PolicyError` for an unknown name, listing the known ones.
    """
    counter = _COUNTERS.get(name)
    if counter is not None:
        return counter
    factory = _FACTORIES.get(name)
    if factory is None:
        raise PolicyError(
            f"unknown token counter {name!r}; known counters: {', '.join(COUNTER_NAMES)}"
        )
    with _LOCK:
        counter = _COUNTERS.get(name)
        if counter is None:
            counter = factory()
            _COUNTERS[name] = counter
    return counter
