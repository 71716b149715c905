"""One renderer per wire shape: canonical messages -> the JSON a provider receives.

    from ctxwise.providers import render
    payload = render(messages, "anthropic")   # {"system"?, "messages"}
    payload = render(messages, "deepseek")    # [chat messages] with reasoning_content
    payload = render(messages, "openai_responses")  # [Responses input items]

The shape is the profile's ``wire`` (:data:`ctxwise.providers.profiles.PROFILES` is the one
list of providers). A renderer writes only keys the provider documents, built from the
canonical fields: round-trip notes of :mod:`ctxwise.formats` (``_openai``, ``_responses``,
``_anthropic``, ``_ctxwise``), ``Message.metadata`` and block ``extra`` never reach a payload
(they stay in storage). Before rendering, tool call ids are made unique within the request
(:func:`unique_call_ids`).
"""

from __future__ import annotations

from typing import Any

from ..messages import Message, ToolResultBlock, ToolUseBlock
from . import render_anthropic, render_chat, render_responses
from .profiles import ProviderProfile, get_profile


def render(messages: list[Message], provider: str | ProviderProfile) -> Any:
    """The request payload for ``provider`` (see the module docstring for the shapes).

    Raises :class:`~ctxwise.errors.PolicyError` for an unknown provider; never raises for a
    canonical list (what the provider would reject is reported by :func:`ctxwise.providers.check_wire`).
    """
    profile = get_profile(provider)
    msgs = unique_call_ids(messages)
    if profile.wire == "anthropic":
        return render_anthropic.render(msgs)
    if profile.wire == "responses":
        return render_responses.render(msgs)
    return render_chat.render(msgs, reasoning_field=profile.reasoning_field)


MAX_CALL_ID_CHARS = 40
"""Longest tool call id a renamed id may have: OpenAI refuses tool call ids over 40
characters (reported in issue 25)."""


def renamed_id(original: str, n: int) -> str:
    """The ``n``-th rename of call id ``original``: ``<id>_<n>``, the id cut from the right so
    the whole stays within :data:`MAX_CALL_ID_CHARS` characters. Deterministic; keeps the
    characters of ``original`` (so ``^[a-zA-Z0-9_-]+$`` ids stay valid)."""
    suffix = f"_{n}"
    return original[: max(1, MAX_CALL_ID_CHARS - len(suffix))] + suffix


def unique_call_ids(messages: list[Message]) -> list[Message]:
    """``messages`` with every tool call id used once in the request.

    Anthropic rejects a repeated ``tool_use`` id ("tool_use ids must be unique") and recorded
    tau-bench sessions reuse call ids across turns. Pairing is positional (the results in the
    tool messages right after an assistant message answer its calls; the k-th result for an
    id answers the k-th call with it), so a repeated id is renamed ``<id>_<n>`` (the first
    free ``n`` from 2; see :func:`renamed_id`, at most 40 characters) in the call and in the results of that same tool cycle. Deterministic:
    the same list gives the same ids. Messages that need no change are returned as they are.
    """
    seen: set[str] = set()
    for m in messages:
        for use in m.tool_uses:
            seen.add(use.id)
    used: set[str] = set()
    out = list(messages)
    i = 0
    while i < len(out):
        m = out[i]
        if m.role != "assistant" or not m.tool_uses:
            i += 1
            continue
        renames: dict[str, list[str]] = {}
        blocks: list[Any] = []
        for b in m.blocks:
            if isinstance(b, ToolUseBlock):
                orig = new = b.id  # the recorded id, which the results of this cycle answer
                if new in used:
                    n = 2
                    while renamed_id(b.id, n) in used or renamed_id(b.id, n) in seen:
                        n += 1
                    new = renamed_id(b.id, n)
                    b = b.model_copy(update={"id": new})
                renames.setdefault(orig, []).append(new)
                used.add(new)
            blocks.append(b)
        if any(old != new for old, news in renames.items() for new in news):
            out[i] = m.model_copy(update={"blocks": blocks})
        j = i + 1
        while j < len(out) and out[j].role == "tool":
            t = out[j]
            changed = False
            rblocks = []
            for r in t.blocks:
                if isinstance(r, ToolResultBlock) and renames.get(r.tool_use_id):
                    new = renames[r.tool_use_id].pop(0)
                    if new != r.tool_use_id:
                        r = r.model_copy(update={"tool_use_id": new})
                        changed = True
                rblocks.append(r)
            if changed:
                out[j] = t.model_copy(update={"blocks": rblocks})
            j += 1
        i = j
    return out


