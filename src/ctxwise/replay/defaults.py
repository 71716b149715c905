"""What ``ctxwise replay FILE`` uses when the options do not say: settings read from the recording.

* **provider**, chosen per recording (:func:`recording_provider`): the model the recording
  names (:data:`MODEL_FIELDS`: tau2-bench's agent model, an OpenAI-style ``model`` field) picks
  its provider's profile and prices (``claude-*`` Anthropic, ``gpt-*`` and ``o*`` OpenAI,
  ``gemini-*``, ``deepseek-*``, ``qwen*``). A recording that names no model we know is judged by
  its reasoning (:func:`guess_provider`): signed or redacted thinking blocks are Anthropic
  extended thinking, replayed as ``anthropic`` so they are kept (and sent back byte-identical)
  as Anthropic requires; unsigned reasoning (``reasoning_content``) is DeepSeek thinking mode,
  replayed as ``deepseek``, which sends it back; Responses items are ``openai_responses``;
  anything else is ``openai`` (Chat Completions).
* **budget**: :data:`BUDGET_SHARE` of the median *peak context* of the recordings (the size of
  everything before a conversation's last recorded model call, in the policy unit), rounded up
  to :data:`ROUND_TO`, and never below twice the largest system prompt: small enough that
  compaction has work to do on most conversations, large enough that the pinned content fits.

The caller prints :attr:`RecordingDefaults.notes` in the header, so the user sees both values
and why they were picked.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import Counter as Tally
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import Message, ThinkingBlock
from ..providers import PROFILES
from ..tokens import get_counter

BUDGET_SHARE = 0.6
"""The default budget as a share of the recordings' median peak context."""
ROUND_TO = 500
"""The default budget is rounded up to a multiple of this (policy unit)."""


@dataclass
class RecordingDefaults:
    """``overrides`` for :meth:`~ctxwise.Policy.preset` (``provider``, ``budget``, ``unit``) and
    one ``notes`` line per value saying why it was picked."""

    overrides: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def guess_provider(conversations: Sequence[Any]) -> tuple[str, str]:
    """``(provider, why)`` for recorded conversations (objects with ``messages`` and ``format``)."""
    thinking = [b for c in conversations for m in c.messages for b in m.blocks if isinstance(b, ThinkingBlock)]
    if any(b.signature or b.redacted for b in thinking):
        return "anthropic", ("the recording has signed thinking blocks (Anthropic extended thinking): they are "
                             "kept and sent back unchanged, as Anthropic requires")
    if thinking:
        return "deepseek", ("the recording has unsigned reasoning (reasoning_content): DeepSeek thinking mode, "
                            "which sends it back")
    if conversations and all(getattr(c, "format", "") == "responses" for c in conversations):
        return "openai_responses", "the recording is OpenAI Responses items"
    return "openai", "the recording has no reasoning to send back: OpenAI Chat Completions"


MODEL_FIELDS: tuple[tuple[str, ...], ...] = (
    ("provider",), ("model",),
    ("payload", "provider"), ("payload", "model"),
    ("payload", "metadata", "provider"), ("payload", "metadata", "model"),
    ("results", "info", "agent_info", "llm"),
)
"""Where a recording's metadata names its provider or model, first match wins: top-level and
request ``provider`` / ``model`` fields, the ``metadata`` of an OpenAI-chat JSON file, and
tau2-bench's agent model (``results.info.agent_info.llm``; ``user_info`` is the simulated user's)."""

MODEL_PROVIDERS: tuple[tuple[str, str], ...] = (
    (r"claude", "anthropic"),
    (r"(ft:)?gpt|chatgpt|o\d", "openai"),
    (r"deepseek", "deepseek"),
    (r"gemini", "gemini"),
    (r"qwen|qwq", "qwen"),
)
"""Model-name patterns (matched at the start of the name, after any ``vendor/`` prefix, case
ignored) and the provider profile each model is served under."""


def recorded_model(conversation: Any) -> str | None:
    """The provider or model the recording's metadata names (:data:`MODEL_FIELDS`), or None."""
    metadata = getattr(conversation, "metadata", None)
    for path in MODEL_FIELDS:
        value: Any = metadata
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def provider_of_model(model: str) -> str | None:
    """The provider profile ``model`` (a model or provider name) is served under, or None when
    no pattern of :data:`MODEL_PROVIDERS` matches (``llama-4-maverick`` through OpenRouter)."""
    name = model.lower().rsplit("/", 1)[-1]
    if name in PROFILES:
        return name
    return next((provider for pattern, provider in MODEL_PROVIDERS if re.match(pattern, name)), None)


def recording_provider(conversation: Any) -> tuple[str, str]:
    """``(provider, why)`` for one recorded conversation: the provider of the model it names,
    else the one its reasoning follows (:func:`guess_provider`)."""
    model = recorded_model(conversation)
    by_content, why = guess_provider([conversation])
    provider = provider_of_model(model) if model else None
    if provider is None:
        return by_content, (f"the model it names ({model}) has no profile of its own; " + why if model else why)
    if provider == "openai" and getattr(conversation, "format", "") == "responses":
        provider = "openai_responses"
    named = f"the recording names model {model}"
    return provider, (f"{named}, and {why.removeprefix('the recording ')}" if by_content == provider else named)


def peak_context(messages: Sequence[Message], counter: Any) -> int:
    """The size of everything before the last assistant message (the largest context a
    recorded model call saw), in ``counter``'s unit; the whole list when there is none."""
    last = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=len(messages))
    return int(counter.count(list(messages[:last])))


def recording_defaults(conversations: Sequence[Any], *, provider: str | None = None, budget: int | None = None,
                       unit: str = "tokens", tokenizer: str = "o200k_base") -> RecordingDefaults:
    """The provider and budget to replay ``conversations`` with, for the values not given."""
    out = RecordingDefaults()
    if provider is None and conversations:
        out.overrides["provider"], note = provider_note(conversations)
        out.notes.append(note)
    if budget is None and conversations:
        counter = get_counter("chars" if unit == "chars" else tokenizer)
        peaks = [peak_context(c.messages, counter) for c in conversations]
        system = max((counter.count_message(m) for c in conversations for m in c.messages if m.role == "system"),
                     default=0)
        median = statistics.median(peaks)
        chosen = max(_round_up(BUDGET_SHARE * median), _round_up(2 * system))
        out.overrides.update(budget=chosen, unit=unit)
        what = "characters" if unit == "chars" else f"{tokenizer} tokens"
        reason = (f"{BUDGET_SHARE:.0%} of the median peak context of {len(peaks)} conversation(s), "
                  f"{median:,.0f} {what}, so compaction has work to do")
        if chosen > _round_up(BUDGET_SHARE * median):
            reason = f"twice the largest system prompt ({system:,} {what}), so the pinned content fits"
        if chosen >= median:
            reason += (f"; the recordings are small (median peak {median:,.0f} {what}): at this budget most calls "
                       "need no compaction, pass --budget to force it")
        out.notes.append(f"budget {chosen:,} {'chars' if unit == 'chars' else 'tokens'}: {reason}")
    return out


def provider_note(conversations: Sequence[Any]) -> tuple[str, str]:
    """The provider most recordings are replayed as, and one line saying how each is chosen:
    ``provider anthropic: the recording names model claude-sonnet-4-5, ...`` when they agree,
    ``providers per recording (...): openai 232, anthropic 38`` when not (``--json`` gives each
    session's reason)."""
    choices = [recording_provider(c) for c in conversations]
    counts = Tally(p for p, _ in choices)
    top = counts.most_common(1)[0][0]
    if len(counts) == 1:
        return top, f"provider {top}: {choices[0][1]}"
    parts = ", ".join(f"{p} {n}" for p, n in counts.most_common())
    return top, f"providers per recording (the model each names, else its reasoning): {parts}"


def _round_up(x: float) -> int:
    """``x`` rounded up to a round number: to ROUND_TO for budgets of thousands, to 50 below that
    (a small recording must not get a budget above its own peak by rounding alone)."""
    step = ROUND_TO if x >= 4 * ROUND_TO else 50
    return max(step, int(math.ceil(x / step)) * step)
