"""Reasoning rules: what must travel back, what must stay unmodified, what may be dropped.

*Thinking mode* — whether the session uses reasoning — decides whether the pass-back rules
apply at all. Callers may state it (``thinking=True/False``); otherwise it is inferred: the
session thinks when the ``reference`` (the recorded messages the payload was built from) holds
any thinking block, or, without a reference, when the payload itself does. So a payload whose
every reasoning block was stripped can only be caught with a reference or ``thinking=True``.
"""

from __future__ import annotations

from ..errors import Violation
from ..messages import Message, ProviderBlock, ThinkingBlock
from ..units import last_user_index, turns
from .profiles import (
    LATEST_ASSISTANT_THINKING,
    REASONING_CHANGED,
    REASONING_ITEM_MISSING,
    REASONING_WITHOUT_FOLLOWING_ITEM,
    REASONING_MISSING,
    THINKING_MODIFIED,
    THINKING_NOT_FIRST,
    THINKING_REMOVED,
    ProviderProfile,
)


def _v(profile: ProviderProfile, index: int, rule: str, message: str) -> Violation:
    return Violation(index, rule, message, profile.error_text(rule, index))


def thinking_mode(
    messages: list[Message], reference: list[Message] | None = None, thinking: bool | None = None
) -> bool:
    """True when the session uses reasoning: ``thinking`` if given, else whether the reference
    (or, without one, the payload) holds any thinking block."""
    if thinking is not None:
        return thinking
    source = reference if reference is not None else messages
    return any(m.thinking for m in source)


def open_tool_turn(messages: list[Message]) -> int | None:
    """Index of the assistant message holding the open tool loop's latest ``tool_use``, or None.

    It is the last assistant message after the latest user input, when that message has tool
    calls (the loop is still running: the model has not answered with text yet).
    """
    u = last_user_index(messages)
    for i in range(len(messages) - 1, (u if u is not None else -1), -1):
        m = messages[i]
        if m.role == "assistant":
            return i if m.tool_uses else None
    return None


def latest_assistant_index(messages: list[Message]) -> int | None:
    """Index of the request's latest assistant message (the last one in the list), or None."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "assistant":
            return i
    return None


def _tool_span_ids(messages: list[Message]) -> set[str]:
    """Ids of assistant messages whose user-to-user span contains a tool call."""
    ids: set[str] = set()
    for t in turns(messages):
        span = messages[t.start:t.end]
        if any(m.role == "assistant" and m.tool_uses for m in span):
            ids.update(m.id for m in span if m.role == "assistant")
    return ids


def check_deepseek_reasoning(
    messages: list[Message],
    profile: ProviderProfile,
    reference: list[Message] | None = None,
    thinking: bool | None = None,
) -> list[Violation]:
    """DeepSeek thinking mode: assistant messages of tool-using spans carry their reasoning.

    Source: https://api-docs.deepseek.com/guides/thinking_mode — between two user messages, if
    the model made a tool call, every assistant message of that span keeps its
    ``reasoning_content`` in all later requests; in spans without tool calls it is ignored.

    A message must carry reasoning when its span in the payload makes a tool call, or when its
    span in the ``reference`` did (matched by message id). With a reference the reasoning must
    also equal the recorded one (``reasoning-content-changed``). A message the reference has
    without reasoning is still flagged: DeepSeek rejects it all the same. Only applies in
    thinking mode (see :func:`thinking_mode`).
    """
    if not thinking_mode(messages, reference, thinking):
        return []
    must = _tool_span_ids(messages)
    ref_by_id: dict[str, Message] = {}
    if reference is not None:
        must |= _tool_span_ids(reference)
        ref_by_id = {m.id: m for m in reference}
    out: list[Violation] = []
    for i, m in enumerate(messages):
        if m.role != "assistant" or m.id not in must:
            continue
        ref = ref_by_id.get(m.id)
        if not m.thinking:
            had = " (the record has it)" if ref is not None and ref.thinking else ""
            out.append(_v(profile, i, REASONING_MISSING,
                          f"assistant message {m.id!r} of a tool-using span has no "
                          f"reasoning_content{had}"))
        elif ref is not None and ref.thinking and m.thinking != ref.thinking:
            out.append(_v(profile, i, REASONING_CHANGED,
                          f"reasoning_content of {m.id!r} differs from the record"))
    return out


def _modified(profile: ProviderProfile, i: int, m: Message, ref: Message | None) -> list[Violation]:
    """``thinking-modified`` for each thinking block of ``m`` not equal to a block of ``ref``."""
    allowed = ref.thinking if ref is not None else []
    out: list[Violation] = []
    for k, b in enumerate(m.blocks):
        if isinstance(b, ThinkingBlock) and b not in allowed:
            why = (f"message {m.id!r} is not in the record" if ref is None
                   else f"it equals no thinking block of {m.id!r} in the record")
            out.append(_v(profile, i, THINKING_MODIFIED,
                          f"thinking block {k} was modified or moved: {why}"))
    return out


def check_responses_reasoning(
    messages: list[Message],
    profile: ProviderProfile,
    reference: list[Message] | None = None,
) -> list[Violation]:
    """OpenAI Responses: reasoning items travel with the item after them.

    Source: https://platform.openai.com/docs/guides/reasoning ("Keeping reasoning items in
    context") and the API's 400 answers quoted in ``cases/README.md``. In canonical form a
    reasoning item is a thinking block of the assistant message built from the items around it,
    so:

    * a thinking block must not be the last block of its message
      (``reasoning-without-following-item``);
    * with a ``reference``: thinking blocks are unmodified (``thinking-modified``: they carry
      ``encrypted_content``), and an assistant message with function calls keeps every thinking
      block the record gave it (``reasoning-item-missing``).
    """
    out: list[Violation] = []
    ref_by_id = {m.id: m for m in reference} if reference is not None else {}
    for i, m in enumerate(messages):
        if m.blocks and isinstance(m.blocks[-1], ThinkingBlock):
            out.append(_v(profile, i, REASONING_WITHOUT_FOLLOWING_ITEM,
                          "the message ends with a reasoning item"))
        if reference is None:
            continue
        ref = ref_by_id.get(m.id)
        modified = _modified(profile, i, m, ref)
        out += modified
        if m.role == "assistant" and m.tool_uses and ref is not None and not modified:
            if any(b not in m.thinking for b in ref.thinking):
                out.append(_v(profile, i, REASONING_ITEM_MISSING,
                              f"function call(s) of {m.id!r} lost their reasoning item"))
    return out


def _against_reference(messages: list[Message], profile: ProviderProfile,
                       reference: list[Message]) -> list[Violation]:
    """``thinking-modified`` and ``thinking-removed`` of :func:`check_anthropic_thinking`
    (a message that is its record's own object is neither)."""
    out: list[Violation] = []
    ref_by_id = {m.id: m for m in reference}
    u = last_user_index(messages)
    for i, m in enumerate(messages):
        ref = ref_by_id.get(m.id)
        if ref is m:
            continue  # the record's own message: nothing modified, nothing lost
        modified = _modified(profile, i, m, ref)
        out += modified
        current = u is None or i > u
        if m.role == "assistant" and ref is not None and current and not modified:
            lost = [b for b in ref.thinking if b not in m.thinking]
            if lost:
                out.append(_v(profile, i, THINKING_REMOVED,
                              f"{len(lost)} thinking block(s) of the current turn's "
                              f"message {m.id!r} were dropped"))
    return out


def check_anthropic_thinking(
    messages: list[Message],
    profile: ProviderProfile,
    reference: list[Message] | None = None,
    thinking: bool | None = None,
) -> list[Violation]:
    """Anthropic extended thinking: blocks unmodified, current turn's kept, open turn first.

    Source: https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking
    ("Preserving thinking blocks"): thinking blocks go back unmodified (the signature is
    checked); during a tool loop the turn's first assistant message starts with its thinking
    block;
    blocks of earlier turns may be omitted.

    * With a ``reference``: every thinking block in the payload equals (type, text, signature,
      redacted, extra fields) a block of the reference message with the same id
      (``thinking-modified``); assistant messages after the latest user input keep every
      thinking block the reference gave them (``thinking-removed``, reported only when the
      message has no modified block, so one edit is one violation).
    * With a ``reference`` and ``profile.keep_latest_assistant_thinking``: the latest assistant
      message of the request carries exactly the thinking / redacted_thinking blocks of its
      record, in order (``latest-assistant-thinking``; Anthropic answers "thinking or
      redacted_thinking blocks in the latest assistant message cannot be modified", whichever
      turn the message belongs to). Reported for a message of a completed turn when no block
      of it is modified (in the current turn ``thinking-removed`` says it already). On a
      profile that binds reasoning to its prefix (``binds_reasoning``) such a message may
      leave out all of its thinking: preserved thinking's advice for code that summarizes or
      trims older turns is to remove the thinking in the kept turns
      (platform.claude.com/docs/en/build-with-claude/preserved-thinking).
    * While a tool loop is open, in a turn run with thinking on (see :func:`_turn_thinks`):
      the turn's first assistant message starts with a thinking or redacted-thinking block
      (``thinking-not-first``).
    """
    out: list[Violation] = []
    if reference is not None and profile.keep_latest_assistant_thinking:
        last = latest_assistant_index(messages)
        ref = {m.id: m for m in reference}.get(messages[last].id) if last is not None else None
        u = last_user_index(messages)
        completed = last is not None and u is not None and last < u  # else thinking-removed reports it
        # Reasoning bound to its prefix: a completed turn's latest message may leave out all of
        # its thinking (preserved thinking: "remove the thinking in the kept turns").
        omitted = profile.binds_reasoning and last is not None and not messages[last].thinking
        if completed and last is not None and ref is not None and messages[last].thinking != ref.thinking \
                and not omitted:
            if not _modified(profile, last, messages[last], ref):
                out.append(_v(profile, last, LATEST_ASSISTANT_THINKING,
                              f"the latest assistant message {messages[last].id!r} has "
                              f"{len(messages[last].thinking)} of the record's {len(ref.thinking)} "
                              "thinking block(s), or not in their order"))
    if reference is not None:
        out += _against_reference(messages, profile, reference)
    if profile.thinking_first_in_open_tool_turn:
        first = open_turn_first(messages)
        if first is not None and _turn_thinks(messages, first, reference, thinking) \
                and not isinstance(messages[first].blocks[0], ThinkingBlock):
            out.append(_v(profile, first, THINKING_NOT_FIRST,
                          "the open tool turn's first assistant message does not start with a "
                          "thinking block"))
    return out


def open_turn_first(messages: list[Message]) -> int | None:
    """Index of the first assistant message after the latest user input while a tool loop is
    open (:func:`open_tool_turn` is not None), else None. Anthropic treats the whole tool loop
    as one assistant turn: its thinking comes at the start of that turn (without interleaved
    thinking the later messages of the loop carry none)."""
    if open_tool_turn(messages) is None:
        return None
    u = last_user_index(messages)
    start = 0 if u is None else u + 1
    return next((i for i in range(start, len(messages)) if messages[i].role == "assistant"), None)


def _turn_thinks(messages: list[Message], first: int, reference: list[Message] | None,
                 thinking: bool | None) -> bool:
    """Whether the open turn runs with thinking on. Stated (``thinking``) wins. Otherwise the
    turn's first assistant message says it, as recorded (the ``reference`` message with the
    same id) or as given: Anthropic allows one thinking configuration per assistant turn and
    a turn run with thinking on starts with a thinking block, so a turn whose first reply has
    none ran with thinking off, whatever earlier turns did (switching between turns is
    allowed). Source: platform.claude.com/docs/build-with-claude/thinking-tool-workflows
    ("Keep one thinking configuration per assistant turn")."""
    if thinking is not None:
        return thinking
    m = messages[first]
    if reference is not None:
        m = next((r for r in reference if r.id == m.id), m)
    return bool(m.thinking)


def droppable_thinking(messages: list[Message], profile: ProviderProfile) -> set[tuple[int, int]]:
    """``(message index, block index)`` of the thinking blocks the provider allows to drop.

    * ``completed_turns`` (OpenAI, Qwen, Gemini, Anthropic): every thinking block of assistant
      messages before the latest user input. OpenAI chat has no reasoning pass-back; the Qwen3
      template renders reasoning only after the last user query; Anthropic ignores thinking of
      earlier turns (extended-thinking docs), so a message drops all its blocks or none, and
      the open tool turn (after the latest user input) never drops any, nor does the latest
      assistant message of the request, whichever turn it belongs to
      (``keep_latest_assistant_thinking``: "thinking or redacted_thinking blocks in the latest
      assistant message cannot be modified").
    * ``completed_turns_without_tool_calls`` (OpenAI Responses): the same, except in messages
      with function calls (a function call needs its reasoning item; reasoning guide) or with
      provider items (hosted / shell / apply_patch calls, compaction: whether the API accepts
      them without the reasoning around them is not documented, so it is kept).
    * ``completed_spans_without_tool_calls`` (DeepSeek): every thinking block of assistant
      messages in completed user-to-user spans that made no tool call (thinking-mode docs);
      tool-using spans keep theirs, or are dropped whole by other stages.
    """
    out: set[tuple[int, int]] = set()
    latest = latest_assistant_index(messages) if profile.keep_latest_assistant_thinking else None
    keep_beside_calls = profile.droppable_reasoning == "completed_turns_without_tool_calls"
    if profile.droppable_reasoning in ("completed_turns", "completed_turns_without_tool_calls"):
        u = last_user_index(messages)
        ranges = [range(0, u)] if u is not None else []
    else:
        ranges = []
        for t in turns(messages)[:-1]:  # the last one is the current, uncompleted span
            span = messages[t.start:t.end]
            if not any(m.role == "assistant" and m.tool_uses for m in span):
                ranges.append(range(t.start, t.end))
    for r in ranges:
        for i in r:
            m = messages[i]
            calls = bool(m.tool_uses) or any(isinstance(b, ProviderBlock) for b in m.blocks)
            if m.role != "assistant" or (keep_beside_calls and calls) or i == latest:
                continue
            out.update((i, k) for k, b in enumerate(m.blocks) if isinstance(b, ThinkingBlock))
    return out
