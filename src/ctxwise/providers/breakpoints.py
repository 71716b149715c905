"""Explicit prompt-cache breakpoints on the OpenAI wires (the gpt-5.6 family).

    from ctxwise.providers.breakpoints import place_breakpoints
    place_breakpoints(payload, messages, profile)   # marks content parts in place

Source: ``openai`` 3.63 types. A content part (Chat Completions
``chat/chat_completion_content_part_text_param.py`` and the image / input_audio / file parts;
Responses ``responses/response_input_text_param.py``, ``response_input_image_param.py``,
``response_input_file_param.py`` and the ``*_content_param.py`` parts of a
``function_call_output``) may carry ``prompt_cache_breakpoint: {"mode": "explicit"}``,
"the exact end of a reusable prompt prefix"; ``PromptCacheOptions``
(``chat/completion_create_params.py``, ``responses/response_create_params.py``): gpt-5.6 and
later, up to four breakpoints written per request (in the default ``implicit`` mode OpenAI adds
one of its own and writes the latest three explicit ones), the latest 80 considered for a hit,
the TTL inherited from the request's ``prompt_cache_options.ttl``; guide
https://developers.openai.com/api/docs/guides/prompt-caching.

ctxwise's cost model (:mod:`ctxwise.prices`, :mod:`ctxwise.compaction.cost`) assumes a call
is served the longest unchanged prefix of the previous request, and that an edit re-bills from
the first message it changes; pinned messages are never edited by a stage. Two breakpoints
make the cache match that model, at most :data:`MAX_PLACED` of the four:

* the end of the **stable prefix**: the leading run of the system prompt and the pinned
  blocks (user memory, summary, facts), the part an edit of the history never re-bills;
* the end of the **request**: the next call, which appends to it, is served all of it.

A breakpoint goes on the last content part of the last message at or before its boundary that
has one (an assistant message made only of tool calls, a reasoning item or a function call has
no content part: the breakpoint moves back to the nearest one). A string ``content`` becomes
one text part to carry it. Placed only for a profile with ``cache_breakpoints`` (OpenAI Chat
Completions or Responses under a price model with explicit breakpoints, ``Policy.profile``).
"""

from __future__ import annotations

from typing import Any

from ..messages import Message
from .profiles import ProviderProfile

BREAKPOINT: dict[str, str] = {"mode": "explicit"}
"""The mark written: ``PromptCacheBreakpoint`` with its required ``mode`` (TTL inherited)."""

MAX_PLACED = 2
"""Breakpoints ctxwise writes per request (OpenAI writes at most three explicit ones besides
its implicit one in the default mode)."""

_PINNED = ("summary", "facts", "user_memory")
_CHAT_PARTS = ("text", "image_url", "input_audio", "file")
_RESPONSES_PARTS = ("input_text", "input_image", "input_file")


def stable_prefix(messages: list[Message]) -> int:
    """How many leading messages are the stable prefix: system messages and pinned blocks
    (``user_memory``, ``summary``, ``facts``) before the first other message."""
    n = 0
    for m in messages:
        if m.role != "system" and m.kind not in _PINNED:
            break
        n += 1
    return n


def _mark(item: Any, wire: str) -> bool:
    """Put :data:`BREAKPOINT` on ``item``'s last content part; False when it has none."""
    if not isinstance(item, dict):
        return False
    key = "output" if item.get("type") == "function_call_output" else "content"
    if wire == "responses" and key == "content" and item.get("role") == "assistant":
        return False  # output_text parts take no breakpoint (response_output_text_param.py)
    content = item.get(key)
    if isinstance(content, str):
        if not content:
            return False
        content = [{"type": "input_text" if wire == "responses" else "text", "text": content}]
        item[key] = content
    if not isinstance(content, list) or not content or not isinstance(content[-1], dict):
        return False
    kinds = _RESPONSES_PARTS if wire == "responses" else _CHAT_PARTS
    if content[-1].get("type") not in kinds:
        return False
    content[-1]["prompt_cache_breakpoint"] = dict(BREAKPOINT)
    return True


def _mark_before(items: list[Any], end: int, wire: str) -> int | None:
    """Mark the last markable item before ``end``; its index, or None."""
    for k in range(min(end, len(items)) - 1, -1, -1):
        if _mark(items[k], wire):
            return k
    return None


def place_breakpoints(payload: list[Any], messages: list[Message], profile: ProviderProfile,
                      rendered_prefix: int) -> list[int]:
    """Mark ``payload`` (a Chat Completions message list or Responses input items, rendered
    from ``messages`` for ``profile``) in place: the end of the stable prefix (its first
    ``rendered_prefix`` items are the rendering of :func:`stable_prefix` messages) and the end
    of the request. Returns the payload indices marked (none for a profile without
    ``cache_breakpoints``, or an empty payload)."""
    if not profile.cache_breakpoints or profile.wire not in ("chat", "responses") or not payload:
        return []
    last = _mark_before(payload, len(payload), profile.wire)
    if last is None:
        return []
    if not 0 < rendered_prefix <= last:
        return [last]  # no stable prefix, or it ends where the request does: one boundary
    first = _mark_before(payload, rendered_prefix, profile.wire)
    return [last] if first is None else [first, last]
