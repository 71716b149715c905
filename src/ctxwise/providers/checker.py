"""``check()`` and ``validate()``: the last look at an outgoing payload."""

from __future__ import annotations

from ..errors import PayloadInvalid, Violation
from ..messages import Message, memo_on
from . import binding as bound_rules
from . import reasoning, rules
from .profiles import ProviderProfile, get_profile


def check(
    messages: list[Message],
    provider: str | ProviderProfile,
    *,
    reference: list[Message] | None = None,
    thinking: bool | None = None,
    binding: bool = True,
) -> list[Violation]:
    """Every rule of ``provider`` that ``messages`` break, sorted by message index.

    ``messages`` is the canonical payload about to be sent (index 0 may be the system prompt).
    ``reference`` is the recorded context the payload was built from (same message ids); with
    it, reasoning that was removed or edited is caught (DeepSeek ``reasoning-content-*``,
    Anthropic ``thinking-modified`` / ``thinking-removed``). ``thinking`` states whether the
    session runs in thinking mode; None infers it (see
    :func:`ctxwise.providers.reasoning.thinking_mode`). ``binding``: on a profile that binds
    reasoning to its prefix (``binds_reasoning``, see :func:`ctxwise.providers.bound_profile`),
    check that every bound reasoning block still follows the prefix it was produced on
    (``reasoning-prefix-changed``; ``messages`` must then be the whole payload, pinned blocks
    included); False leaves that rule out (the compaction stages check lists without the pinned
    blocks).

    Returns an empty list for a valid payload. Raises :class:`~ctxwise.errors.PolicyError`
    for an unknown provider name.
    """
    profile = get_profile(provider)
    out = list(_list_rules(messages, profile))
    if profile.reasoning_passback == "tool_spans":
        out += reasoning.check_deepseek_reasoning(messages, profile, reference, thinking)
    if profile.reasoning_passback == "reasoning_items":
        out += reasoning.check_responses_reasoning(messages, profile, reference)
    if profile.reasoning_passback == "signed_blocks" or profile.thinking_first_in_open_tool_turn:
        out += reasoning.check_anthropic_thinking(messages, profile, reference, thinking)
    if binding and profile.binds_reasoning:
        out += bound_rules.check_bound_reasoning(messages, profile)
    return sorted(out, key=lambda v: v.index)


def _list_rules(messages: list[Message], profile: ProviderProfile) -> tuple[Violation, ...]:
    """The findings of the rules of :func:`check` that read ``messages`` alone (neither the
    reference, the thinking mode nor the binding flag), in rule order. Kept in the first
    message's memo for the same profile and the same message objects: a call checks its
    canonical list in the pipeline and again as the payload, with the same answer."""
    if not messages:
        return tuple(_scan_list_rules(messages, profile))
    return memo_on(messages, "checker/list-rules", profile, lambda: tuple(_scan_list_rules(messages, profile)))


def _scan_list_rules(messages: list[Message], profile: ProviderProfile) -> list[Violation]:
    """:func:`_list_rules`, computed."""
    out: list[Violation] = []
    if profile.tool_pairing:
        out += rules.check_tool_pairing(messages, profile)
    if profile.forbid_empty_content:
        out += rules.check_empty_content(messages, profile)
    if profile.needs_user_message:
        out += rules.check_user_present(messages, profile)
    if profile.calls_follow_user_or_tool:
        out += rules.check_call_order(messages, profile)
    out += rules.check_provider_blocks(messages, profile)
    out += rules.check_compaction_placement(messages, profile)
    return out


def validate(
    messages: list[Message],
    provider: str | ProviderProfile,
    *,
    reference: list[Message] | None = None,
    thinking: bool | None = None,
    binding: bool = True,
) -> None:
    """Return None when ``messages`` is a payload ``provider`` accepts.

    Raises :class:`~ctxwise.errors.PayloadInvalid` listing **every** violation (message index,
    rule slug, the provider's own error text where known) — see :func:`check` for the
    arguments — and :class:`~ctxwise.errors.PolicyError` for an unknown provider.
    """
    violations = check(messages, provider, reference=reference, thinking=thinking, binding=binding)
    if violations:
        raise PayloadInvalid(get_profile(provider).name, violations)


def droppable_thinking(
    messages: list[Message], provider: str | ProviderProfile
) -> set[tuple[int, int]]:
    """``(message index, block index)`` pairs of the thinking blocks ``provider`` lets
    compaction drop (see :func:`ctxwise.providers.reasoning.droppable_thinking` for each
    provider's rule and its source). Raises :class:`~ctxwise.errors.PolicyError` for an
    unknown provider."""
    return reasoning.droppable_thinking(messages, get_profile(provider))
