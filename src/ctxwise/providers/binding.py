"""Reasoning bound to its prefix: the digest each bound reasoning block was produced on, and
the check that it still holds.

Rule (sources in :mod:`ctxwise.providers.profiles`): on a profile with ``binds_reasoning``, a
reasoning block sent back is valid only while everything before it is what it was in the
request that produced it. Anthropic preserved thinking checks ``system``, ``tools`` and every
earlier message, and also fails "if a thinking block between others was omitted or moved"
(platform.claude.com/docs/en/build-with-claude/preserved-thinking/prefix-checks); a change
makes that block and every later one invalid. OpenAI Responses with
``reasoning.context="all_turns"`` drops reasoning items that follow a prefix change
(developers.openai.com/api/docs/guides/keep-prefix-unchanged).

ctxwise remembers, per assistant message that carries reasoning, the digest of what was sent
before it (:func:`bound_digest`): the canonical payload of the request that produced it (the
context as prepared, pinned blocks included, then the messages of the same append before it)
and its own blocks before its last reasoning block. It is stored at append in the message's
marker (:attr:`ctxwise.messages.Marker.bound_prefix`), so it survives a reopen. A message
whose marker has no digest (appended while binding was off) is not checked: its prefix is not
known. ``system`` is message 0 of the canonical list; the ``tools`` list is the caller's, sent
outside the message list, and is not covered.
"""

from __future__ import annotations

import hashlib
import json
from typing import Sequence

from ..errors import Violation
from ..messages import Marker, Message, ThinkingBlock, fold_on
from ..units import last_user_index
from .profiles import REASONING_PREFIX_CHANGED, ProviderProfile

_MEMO = "ctxwise/bound-content"
_MEMO_OWN = "ctxwise/bound-own"
_MEMO_CHAIN = "ctxwise/bound-chain"
"""Per message: the chain digest before it -> (its :func:`bound_digest`, the chain after it)."""


def content_digest(m: Message) -> str:
    """SHA-256 hex of what the provider sees of ``m``: its role, name and blocks (metadata
    and id excluded: they are not sent). Kept in the message's memo."""
    memo = m.memo()
    found = memo.get(_MEMO)
    if found is None:
        body = {"role": m.role, "name": m.name, "blocks": [b.model_dump(mode="json") for b in m.blocks]}
        found = memo[_MEMO] = hashlib.sha256(
            json.dumps(body, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()
    return found


def _step(chain: str, digest: str) -> str:
    return hashlib.sha256((chain + digest).encode("ascii")).hexdigest()


def _own(m: Message) -> str:
    """The digest of ``m``'s blocks before its last reasoning block (its own prefix). Kept in
    the message's memo."""
    memo = m.memo()
    found = memo.get(_MEMO_OWN)
    if found is None:
        last = max((k for k, b in enumerate(m.blocks) if isinstance(b, ThinkingBlock)), default=0)
        head = [b.model_dump(mode="json") for b in m.blocks[:last]]
        found = memo[_MEMO_OWN] = hashlib.sha256(json.dumps(
            head, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()
    return found


def bound_digests(messages: Sequence[Message]) -> list[str]:
    """For each index ``i``: the digest of ``messages[:i]`` and of the own blocks of
    ``messages[i]`` before its last reasoning block (:func:`bound_digest`), in one pass."""
    out: list[str] = []
    chain = ""
    for m in messages:
        own, chain = _chained(chain, m)
        out.append(own)
    return out


def _chained(chain: str, m: Message) -> tuple[str, str]:
    """``(bound digest of m, chain after m)`` for ``m`` following the prefix digested as
    ``chain``; kept in ``m``'s memo for its last few prefixes."""
    steps = m.memo().setdefault(_MEMO_CHAIN, {})
    found: tuple[str, str] | None = steps.get(chain)
    if found is None:
        if len(steps) >= 4:  # bounded: a message follows few different prefixes
            steps.clear()
        found = steps[chain] = (_step(chain, _own(m)), _step(chain, content_digest(m)))
    return found


def _invalid_step(state: tuple[str, tuple[int, ...]], i: int, m: Message) -> tuple[str, tuple[int, ...]]:
    """One step of :func:`_invalid_fold`: the chain after ``m`` and the indices found so far."""
    chain, found = state
    own, after = _chained(chain, m)
    d = bound_prefix(m)
    return after, (found + (i,) if d is not None and d != own else found)


def _invalid_fold(messages: Sequence[Message]) -> tuple[int, ...]:
    """Indices of the messages whose marker's bound prefix is not the digest before them in
    ``messages`` (:func:`bound_digests`), resumed from the last list this one extends
    (:func:`ctxwise.messages.fold_on`)."""
    init: tuple[str, tuple[int, ...]] = ("", ())
    return fold_on(messages, "binding/invalid", None, init, _invalid_step)[1]


def bound_digest(messages: Sequence[Message], i: int) -> str:
    """The digest reasoning of ``messages[i]`` is bound to: every message before it and its
    own blocks before its last reasoning block (SHA-256 hex chain)."""
    chain = ""
    for m in messages[:i]:
        chain = _step(chain, content_digest(m))
    return _step(chain, _own(messages[i]))


def bound_prefix(m: Message) -> str | None:
    """The digest stored in ``m``'s marker at append (None: not bound, or not known)."""
    if m.role != "assistant" or not m.thinking:
        return None
    return Marker.read(m).bound_prefix


def invalidated(messages: Sequence[Message]) -> list[int]:
    """Indices of the assistant messages whose reasoning is bound to a prefix that is no
    longer the one before them in ``messages`` (the canonical payload, pinned blocks included)."""
    if not fold_on(messages, "binding/any", None, False, lambda seen, _, m: seen or bool(bound_prefix(m))):
        return []
    return list(_invalid_fold(messages))


def frozen_end(messages: Sequence[Message], profile: ProviderProfile) -> int | None:
    """The index of the current turn's latest assistant message with valid bound reasoning,
    on a profile that refuses a changed prefix (``prefix_mismatch == "error"``), else None.

    The current turn's reasoning may not be dropped (Anthropic: the open tool turn starts with
    its thinking block and keeps it; a tool loop is one assistant turn), so nothing up to that
    message may change: an edit there is refused by the planner."""
    if not profile.binds_reasoning or profile.prefix_mismatch != "error":
        return None
    u = last_user_index(list(messages))
    start = 0 if u is None else u + 1
    bound = [i for i in range(start, len(messages)) if bound_prefix(messages[i]) is not None]
    if not bound:
        return None
    changed = set(_invalid_fold(messages))
    valid = [i for i in bound if i not in changed]
    return max(valid) if valid else None


def may_drop_bound(messages: Sequence[Message], i: int, profile: ProviderProfile) -> bool:
    """Whether the reasoning of ``messages[i]`` may be left out, all of it, once invalidated.

    Anthropic: every assistant message before the latest user input, the latest assistant
    message of a completed turn included: preserved thinking's own advice for code that
    summarizes or trims older turns is to "remove the thinking in the kept turns"
    (preserved-thinking, "If your code changes the system prompt, tools or history"), and
    thinking of earlier turns may be omitted (extended-thinking, "Preserving thinking blocks");
    not while the turn is open. OpenAI Responses: completed turns, not beside a function call
    (a function call travels with its reasoning item; reasoning guide); the API drops the
    others itself. A message left without content never drops."""
    m = messages[i]
    if m.role != "assistant" or not any(not isinstance(b, ThinkingBlock) for b in m.blocks):
        return False
    u = last_user_index(list(messages))
    if u is None or i > u:
        return False
    return not (profile.droppable_reasoning == "completed_turns_without_tool_calls" and m.tool_uses)


def check_bound_reasoning(messages: list[Message], profile: ProviderProfile) -> list[Violation]:
    """``reasoning-prefix-changed`` for each message whose bound reasoning follows a changed
    prefix, on a profile with ``binds_reasoning``. Anthropic (``prefix_mismatch="error"``):
    every such message (the API answers 400 "The block is bound to a different conversation").
    Responses (``"dropped"``): only where ctxwise could have left the reasoning out
    (:func:`may_drop_bound`): elsewhere the API drops it itself, as its guide says."""
    if not profile.binds_reasoning:
        return []
    out: list[Violation] = []
    for i in invalidated(messages):
        if profile.prefix_mismatch == "dropped" and not may_drop_bound(messages, i, profile):
            continue
        out.append(Violation(i, REASONING_PREFIX_CHANGED,
                             f"the reasoning of {messages[i].id!r} is bound to the prefix of the request that "
                             "produced it, and an earlier message (or its own earlier blocks) changed since",
                             profile.error_text(REASONING_PREFIX_CHANGED, i)))
    return out
