"""Token counters: how big a context is, in ``chars`` or in ``tokens`` of a named tokenizer.

>>> from ctxwise.tokens import get_counter
>>> counter = get_counter("o200k_base")
>>> counter.count_text("hello world")
2

Every counter follows one protocol, :class:`Counter`, and is found by name in one registry
(tiktoken's pattern): :func:`get_counter` builds a counter on first use and shares it,
:func:`list_counters` names them all, :func:`register_counter` adds your own (then usable as a
policy's ``tokenizer``)::

    class MyCounter(TokenCounter):
        name, unit = "my-tokenizer", "tokens"
        def count_text(self, text): return len(text.split())
        def count_image(self, block): return 1000

    register_counter("my-tokenizer", MyCounter)
    Policy(unit="tokens", tokenizer="my-tokenizer")

A :class:`TokenCounter` (the base the built-in counters share) has ``name``, ``unit`` (``"chars"`` or ``"tokens"``), ``rules`` (how it
counts messages, tool schemas and images) and:

* ``count_text(s)``: the size of a string;
* ``count_message(m)``: the size of one message, framing included, cached in ``m.memo()`` so an
  unchanged message object is never counted twice;
* ``count(messages)``: a whole context (the messages plus the reply priming);
* ``count_tools(schemas)``: the tool declarations sent with every call.

Built-in counters (:data:`COUNTER_NAMES`, registered lazily: no tokenizer loads at import):

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
from .protocol import Counter
from .registry import BUILTIN_COUNTERS, CounterFactory, get_counter, list_counters, register_counter

__all__ = [
    "COUNTER_NAMES",
    "ChatFrame",
    "CharsCounter",
    "Counter",
    "CounterFactory",
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
    "list_counters",
    "openai_image_tokens",
    "register_counter",
    "tool_input_json",
]

COUNTER_NAMES: tuple[str, ...] = BUILTIN_COUNTERS
"""The names of the built-in counters (:func:`list_counters` adds the registered ones)."""
