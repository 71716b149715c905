"""One renderer per wire shape: canonical messages -> the JSON a provider receives.

    from ctxwise.providers import render
    payload = render(messages, "anthropic")   # {"system"?, "messages"}
    payload = render(messages, "deepseek")    # [chat messages] with reasoning_content
    payload = render(messages, "openai_responses")  # [Responses input items]

The shape is the profile's ``wire`` (:data:`ctxwise.providers.profiles.PROFILES` is the one
list of providers). A renderer writes only keys the provider documents, built from the
canonical fields: round-trip notes of :mod:`ctxwise.formats` (``_openai``, ``_responses``,
``_anthropic``, ``_ctxwise``), ``Message.metadata`` and block ``extra`` never reach a payload
(they stay in storage). Before rendering, the list is converted to the provider's rules
(:mod:`ctxwise.providers.convert`: mid-conversation system messages, tool call ids, images,
the first message's role).
"""

from __future__ import annotations

from typing import Any

from ..messages import Message
from . import render_anthropic, render_chat, render_responses
from .breakpoints import place_breakpoints, stable_prefix
from .convert import MAX_CALL_ID_CHARS, Conversion, convert, safe_call_id
from .profiles import ProviderProfile, get_profile

__all__ = ["MAX_CALL_ID_CHARS", "conversions", "render", "render_converted", "safe_call_id", "unique_call_ids"]


def render(messages: list[Message], provider: str | ProviderProfile) -> Any:
    """The request payload for ``provider`` (see the module docstring for the shapes), built
    from :func:`ctxwise.providers.convert.convert` of ``messages`` (what each conversion does
    and why: that module; :func:`conversions` lists them).

    Raises :class:`~ctxwise.errors.PolicyError` for an unknown provider; never raises for a
    canonical list (what the provider would reject is reported by :func:`ctxwise.providers.check_wire`).
    """
    profile = get_profile(provider)
    return render_converted(convert(messages, profile).messages, profile)


def render_converted(msgs: list[Message], profile: ProviderProfile,
                     sources: list[tuple[Message, ...]] | None = None) -> Any:
    """The payload for a list :func:`~ctxwise.providers.convert.convert` already converted
    for ``profile``; with ``profile.cache_breakpoints``, its prompt-cache breakpoints placed
    (:mod:`ctxwise.providers.breakpoints`). ``sources``, when given, receives the messages each
    payload entry was rendered from (Anthropic: ``system`` first when written, then each of
    ``messages``), for :func:`ctxwise.providers.check_wire`; left empty on the other wires."""
    if profile.wire == "anthropic":
        return render_anthropic.render(msgs, native_system=profile.mid_system == "native", sources=sources)
    payload = _render_list(msgs, profile)
    if profile.cache_breakpoints:
        k = stable_prefix(msgs)
        place_breakpoints(payload, profile, len(_render_list(msgs[:k], profile)) if k else 0)
    return payload


def _render_list(msgs: list[Message], profile: ProviderProfile) -> list[dict[str, Any]]:
    if profile.wire == "responses":
        return render_responses.render(msgs)
    return render_chat.render(msgs, reasoning_field=profile.reasoning_field,
                              tool_names=profile.tool_message_name, extensions=profile.thought_signatures,
                              developer=profile.name == "openai")


def conversions(messages: list[Message], provider: str | ProviderProfile) -> list[Conversion]:
    """The render-time conversions :func:`render` makes for ``provider`` (empty when the list
    is sent as it is). Raises :class:`~ctxwise.errors.PolicyError` for an unknown provider."""
    return convert(messages, provider).conversions


def unique_call_ids(messages: list[Message]) -> list[Message]:
    """``messages`` with every tool call id used once in the request.

    Anthropic rejects a repeated ``tool_use`` id ("tool_use ids must be unique") and recorded
    tau-bench sessions reuse call ids across turns. Pairing is positional (the results in the
    tool messages right after an assistant message answer its calls; the k-th result for an
    id answers the k-th call with it), so a repeated id is renamed by
    :func:`~ctxwise.providers.convert.safe_call_id` (a stable hash of the id and the holding
    message's id, at most 40 characters) in the call and in the results of that same tool
    cycle. Deterministic: the same list gives the same ids. Messages that need no change are
    returned as they are.
    """
    from dataclasses import replace

    from .profiles import OPENAI

    # the id rules of no provider: only repeats are renamed
    return convert(messages, replace(OPENAI, max_call_id_chars=None, mid_system="as_is")).messages
