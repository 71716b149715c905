"""Explicit prompt-cache breakpoints on the OpenAI wires (the gpt-5.6 family).

    from ctxwise.providers.breakpoints import place_breakpoints
    place_breakpoints(payload, profile, rendered_prefix)   # marks content parts in place

Source: ``openai`` 3.63 types. A content part (Chat Completions
``chat/chat_completion_content_part_text_param.py`` and the image / input_audio / file parts;
Responses ``responses/response_input_text_param.py``, ``response_input_image_param.py``,
``response_input_file_param.py`` and the ``*_content_param.py`` parts of a
``function_call_output``) may carry ``prompt_cache_breakpoint: {"mode": "explicit"}``,
"the exact end of a reusable prompt prefix"; ``PromptCacheOptions``
(``chat/completion_create_params.py``, ``responses/response_create_params.py``): gpt-5.6 and
later, up to four breakpoints written per request (in the default ``implicit`` mode OpenAI adds
one of its own and writes the latest three explicit ones), "for cache matching, OpenAI
considers up to the latest 80 breakpoints in the conversation", the TTL inherited from the
request's ``prompt_cache_options.ttl``; guide
https://developers.openai.com/api/docs/guides/prompt-caching.

ctxwise's cost model (:mod:`ctxwise.prices`, :mod:`ctxwise.compaction.cost`) assumes a call
is served the longest unchanged prefix of the previous request, and that an edit re-bills from
the first message it changes; pinned messages are never edited by a stage. The marks make the
cache match that model:

* the end of the **stable prefix**: the leading run of the system prompt and the pinned
  blocks (user memory, summary, facts), the part an edit of the history never re-bills;
* the end of every **earlier model call's input** (the input item before each run of model
  output) and of **this request**: the next call, which appends to it, is served all of it,
  and after an edit the cache still serves up to the last call boundary before the edit. The
  marks stay on the same items in every later request (byte-stable), the latest
  :data:`MAX_CONSIDERED` of them.

A breakpoint goes on the last content part of the last item at or before its boundary that has
one (an assistant message made only of tool calls, a reasoning item or a function call has no
content part, nor has a Responses assistant message: the mark moves back to the nearest input).
A string ``content`` becomes one text part to carry it. Placed only for a profile with
``cache_breakpoints`` (OpenAI Chat Completions or Responses under a price model with explicit
breakpoints, ``Policy.profile``).
"""

from __future__ import annotations

from typing import Any

from ..messages import Message
from .profiles import ProviderProfile

BREAKPOINT: dict[str, str] = {"mode": "explicit"}
"""The mark written: ``PromptCacheBreakpoint`` with its required ``mode`` (TTL inherited)."""

MAX_CONSIDERED = 80
"""Breakpoints OpenAI considers for a cache match (the latest ones); ctxwise places no more."""

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


def _is_output(item: Any) -> bool:
    """Whether a payload item is model output: an assistant message, a reasoning item, or a
    call the model made (``function_call``, hosted ``*_call``; not a ``*_call_output``)."""
    if not isinstance(item, dict):
        return False
    kind = str(item.get("type") or "")
    return item.get("role") == "assistant" or kind == "reasoning" or (kind.endswith("_call") and kind != "")


def _parts_key(item: Any, wire: str) -> str | None:
    """The key of ``item``'s content parts that can carry a breakpoint, or None."""
    if not isinstance(item, dict):
        return None
    key = "output" if item.get("type") == "function_call_output" else "content"
    if wire == "responses" and key == "content" and item.get("role") == "assistant":
        return None  # output_text parts take no breakpoint (response_output_text_param.py)
    content = item.get(key)
    if isinstance(content, str):
        return key if content else None
    if not isinstance(content, list) or not content or not isinstance(content[-1], dict):
        return None
    return key if content[-1].get("type") in (_RESPONSES_PARTS if wire == "responses" else _CHAT_PARTS) else None


def _mark(item: dict[str, Any], key: str, wire: str) -> None:
    """Put :data:`BREAKPOINT` on ``item[key]``'s last part (a string becomes one text part)."""
    content = item[key]
    if isinstance(content, str):
        content = item[key] = [{"type": "input_text" if wire == "responses" else "text", "text": content}]
    content[-1]["prompt_cache_breakpoint"] = dict(BREAKPOINT)


def _markable_before(items: list[Any], end: int, wire: str) -> int | None:
    """The index of the last item before ``end`` that can carry a breakpoint, or None."""
    for k in range(min(end, len(items)) - 1, -1, -1):
        if _parts_key(items[k], wire) is not None:
            return k
    return None


def place_breakpoints(payload: list[Any], profile: ProviderProfile, rendered_prefix: int) -> list[int]:
    """Mark ``payload`` (a Chat Completions message list or Responses input items rendered for
    ``profile``) in place, as the module docstring says: the end of the stable prefix (its
    first ``rendered_prefix`` items render the :func:`stable_prefix` messages), of every
    earlier call's input and of the request. Returns the payload indices marked, in order
    (none for a profile without ``cache_breakpoints``, or an empty payload)."""
    if not profile.cache_breakpoints or profile.wire not in ("chat", "responses") or not payload:
        return []
    wire = profile.wire
    ends = [k for k in range(1, len(payload)) if _is_output(payload[k]) and not _is_output(payload[k - 1])]
    calls = {_markable_before(payload, end, wire) for end in [*ends, len(payload)]} - {None}
    stable = _markable_before(payload, rendered_prefix, wire) if rendered_prefix > 0 else None
    keep = sorted(k for k in calls if k is not None)[-(MAX_CONSIDERED - (stable is not None)):]
    marked = sorted({*keep, *([stable] if stable is not None else [])})
    for k in marked:
        key = _parts_key(payload[k], wire)
        if key is not None:
            _mark(payload[k], key, wire)
    return marked
