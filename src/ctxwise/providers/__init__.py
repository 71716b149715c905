"""Provider profiles and ``validate()``: the last check on the final outgoing payload.

    from ctxwise.providers import check, validate, droppable_thinking
    check(messages, "anthropic", reference=recorded)   # -> list[Violation]
    validate(messages, "deepseek")                     # raises PayloadInvalid listing all
    droppable_thinking(messages, "deepseek")           # -> {(message index, block index)}

Known providers: ``openai`` (Chat Completions), ``openai_responses``, ``deepseek`` (thinking mode), ``anthropic``, ``qwen`` (Qwen3
chat template on vLLM & co.), ``gemini``. Rule slugs are in :data:`RULES`.
"""

from .checker import check, droppable_thinking, validate
from .profiles import PROFILES, RULES, ProviderProfile, get_profile
from .reasoning import open_tool_turn, thinking_mode

__all__ = [
    "PROFILES",
    "RULES",
    "ProviderProfile",
    "check",
    "droppable_thinking",
    "get_profile",
    "open_tool_turn",
    "thinking_mode",
    "validate",
]
