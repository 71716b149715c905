"""``check()`` and ``validate()``: the last look at an outgoing payload."""

from __future__ import annotations

import operator
from dataclasses import dataclass

from ..errors import PayloadInvalid, Violation
from ..messages import Message
from ..units import is_user_input
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


@dataclass(frozen=True)
class _Fold:
    """The state of the list rules of :func:`check` before ``cut`` (a non-tool message past
    the leading system messages, the last of ``prefix``): the findings of each rule there
    (rule order), whether a user input is among them, the provider-run call ids and the
    compaction blocks with content they hold. A list that starts with the same message objects
    as ``prefix`` (the cut message included: a tool message there would extend the cycle
    before it) resumes from the cut: what lies before it is decided by the prefix alone."""

    profile: ProviderProfile
    prefix: tuple[Message, ...]
    cut: int
    found: tuple[tuple[Violation, ...], ...]
    user: bool
    calls: frozenset[str]
    with_content: int


_USER = 2
"""The position of the user-present rule among the list rules (:func:`_scan_list_rules`)."""

_FOLDS = 4
"""Folds kept per first message (the context, the payload with its pinned blocks, their read-back)."""


def _list_rules(messages: list[Message], profile: ProviderProfile) -> tuple[Violation, ...]:
    """The findings of the rules of :func:`check` that read ``messages`` alone (neither the
    reference, the thinking mode nor the binding flag), in rule order. Resumed from the
    longest :class:`_Fold` kept in the first message's memo whose prefix ``messages`` starts
    with (same objects, same profile), so a call that adds messages to the list the previous
    call checked rules over the new messages only; from scratch otherwise."""
    if not messages:
        return tuple(v for found in _scan_list_rules(messages, profile) for v in found)
    memo = messages[0].memo()
    folds: list[_Fold] = memo.get("checker/list-folds") or []
    fold = max((f for f in folds if _extends(messages, f, profile)), key=lambda f: f.cut, default=None)
    per, after = _scan_from(messages, profile, fold)
    if after is not None:
        memo["checker/list-folds"] = ([f for f in folds if f is not fold] + [after])[-_FOLDS:]
    return tuple(v for found in per for v in found)


def _extends(messages: list[Message], fold: _Fold, profile: ProviderProfile) -> bool:
    """Whether ``messages`` starts with ``fold``'s prefix (the same objects), same profile."""
    return (len(fold.prefix) <= len(messages) and (fold.profile is profile or fold.profile == profile)
            and all(map(operator.is_, fold.prefix, messages)))


def _scan_from(messages: list[Message], profile: ProviderProfile,
               fold: _Fold | None) -> tuple[list[list[Violation]], _Fold | None]:
    """Each list rule's findings over ``messages`` (rule order), the messages before ``fold``'s
    cut taken from it; and the fold at this list's last cut (None when it has none)."""
    c = fold.cut if fold else 0
    user = fold.user if fold else False
    calls = set(fold.calls) if fold else set()
    with_content = fold.with_content if fold else 0
    suffix = _scan_list_rules(messages, profile, c, user, calls, with_content)
    per = [[*(fold.found[k] if fold else ()), *found] for k, found in enumerate(suffix)]
    # (the user-present finding, at index 0, is decided by the state alone: never kept in a fold)
    lead = rules.leading_systems(messages)
    cut = next((i for i in range(len(messages) - 1, max(c, lead), -1) if messages[i].role != "tool"), None)
    if cut is None:
        return per, None
    between = messages[c:cut]
    return per, _Fold(profile, tuple(messages[:cut + 1]), cut, tuple(tuple(v for v in found if v.index < cut) if k != _USER else ()
                                                                for k, found in enumerate(per)),
                      user or any(is_user_input(m) for m in between),
                      frozenset(calls | rules.provider_calls(between, profile)),
                      with_content + rules.compactions_with_content(between))


def _scan_list_rules(messages: list[Message], profile: ProviderProfile, start: int = 0, user: bool = False,
                     calls: set[str] | None = None, with_content: int = 0) -> list[list[Violation]]:
    """Each rule's findings from index ``start`` on (a cut of :class:`_Fold`, or 0), given
    the state before it: ``user`` (a user input before it), ``calls`` (the provider-run call
    ids before it), ``with_content`` (the compaction blocks with content before it)."""
    out: list[list[Violation]] = [[] for _ in range(6)]
    if profile.tool_pairing:
        out[0] = rules.check_tool_pairing(messages, profile, start)
    if profile.forbid_empty_content:
        out[1] = rules.check_empty_content(messages, profile, start)
    if profile.needs_user_message and not user:
        out[2] = rules.check_user_present(messages[start:], profile)
    if profile.calls_follow_user_or_tool:
        out[3] = rules.check_call_order(messages, profile, start)
    out[4] = rules.check_provider_blocks(messages, profile, start, calls)
    out[5] = rules.check_compaction_placement(messages, profile, start, with_content)
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
