"""Provider profiles and ``validate()``: the last check on the final outgoing payload.

    from ctxwise.providers import check, validate, droppable_thinking
    check(messages, "anthropic", reference=recorded)   # -> list[Violation]
    validate(messages, "deepseek")                     # raises PayloadInvalid listing all
    droppable_thinking(messages, "deepseek")           # -> {(message index, block index)}
    payload = render(messages, "anthropic")            # the JSON the provider receives
    check_wire(payload, "anthropic")                   # -> list[Violation] on what is sent

Known providers: ``openai`` (Chat Completions), ``openai_responses``, ``deepseek`` (thinking mode), ``anthropic``, ``qwen`` (Qwen3
chat template on vLLM & co.), ``gemini``. Rule slugs are in :data:`RULES`.
"""

from .checker import check, droppable_thinking, validate
from .convert import Converted, convert
from .profiles import PROFILES, RULES, ProviderProfile, bound_profile, get_profile
from .reasoning import open_tool_turn, thinking_mode
from .render import render, unique_call_ids
from .tools import from_chat_tools
from .wire import check_wire, validate_wire

__all__ = [
    "PROFILES",
    "RULES",
    "Converted",
    "ProviderProfile",
    "bound_profile",
    "check",
    "check_wire",
    "convert",
    "droppable_thinking",
    "from_chat_tools",
    "get_profile",
    "open_tool_turn",
    "render",
    "thinking_mode",
    "unique_call_ids",
    "validate",
    "validate_wire",
]
