"""Payloads checked by the official SDKs' request types, and throwaway in-memory sessions to build them."""

from __future__ import annotations

import itertools
from typing import Any

from pydantic import TypeAdapter

from ctxwise import ContextManager, Policy

_IDS = itertools.count()


def memory_session(provider: str, *, budget: int = 60_000, reserve_output: int = 0, **kw: Any) -> Any:
    """A new session of a fresh in-memory manager: ``provider``'s profile, a token budget
    counted with the offline ``estimate`` tokenizer, any other Policy setting from ``kw``."""
    pol = Policy(budget=budget, unit="tokens", tokenizer="estimate", reserve_output=reserve_output, provider=provider, **kw)
    return ContextManager("memory://", pol).session("u", f"s{next(_IDS)}")


def sdk_ok(provider: str, payload: Any) -> None:
    """Raises (pydantic ValidationError) when the SDK's request type refuses ``payload``:
    ``anthropic.types.MessageCreateParams`` (anthropic 2.17) for ``anthropic``, openai 3.63's
    ``ResponseCreateParams`` for ``openai_responses``, ``CompletionCreateParams`` otherwise."""
    if provider == "anthropic":
        import anthropic.types as at
        TypeAdapter(at.MessageCreateParams).validate_python({**payload, "model": "m", "max_tokens": 10})
    elif provider == "openai_responses":
        from openai.types.responses import ResponseCreateParams
        TypeAdapter(ResponseCreateParams).validate_python({"model": "m", "input": payload})
    else:
        from openai.types.chat import CompletionCreateParams
        TypeAdapter(CompletionCreateParams).validate_python({"model": "m", "messages": payload})
