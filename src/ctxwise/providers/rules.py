"""Structural checks shared by every provider: pairing, roles, emptiness, call order.

Each check takes the canonical message list and a :class:`ProviderProfile` and returns a list
of :class:`~ctxwise.errors.Violation` (empty when the rule holds). They never raise.
"""

from __future__ import annotations

from collections import Counter

from ..errors import Violation
from typing import Any, Sequence

from ..messages import (
    memo_on,
    PROVIDER_CALL_KINDS,
    PROVIDER_RESULT_KINDS,
    AudioBlock,
    DocumentBlock,
    ImageBlock,
    Message,
    ProviderBlock,
    RefusalBlock,
    SearchResultBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from ..units import is_user_input
from .profiles import (
    BLANK_TEXT_BLOCK,
    BLOCK_NOT_SENDABLE,
    COMPACTION_MISPLACED,
    FOREIGN_PROVIDER_BLOCK,
    PROVIDER_RESULT_WITHOUT_CALL,
    DUPLICATE_TOOL_RESULT,
    EMPTY_CONTENT,
    EMPTY_TOOL_RESULT,
    NO_USER_MESSAGE,
    ORPHAN_TOOL_RESULT,
    SYSTEM_NOT_FIRST,
    TOOL_CALL_ORDER,
    UNANSWERED_TOOL_CALL,
    ProviderProfile,
)


_BLOCKS = ("signed_blocks", "reasoning_items")


def _v(profile: ProviderProfile, index: int, rule: str, message: str) -> Violation:
    return Violation(index, rule, message, profile.error_text(rule, index))


def check_tool_pairing(messages: list[Message], profile: ProviderProfile, start: int = 0) -> list[Violation]:
    """Every call answered, every result preceded by its call, no duplicate result.

    Pairing goes by position (as in :mod:`ctxwise.units`): the results of a tool message belong
    to the nearest earlier assistant message with ``tool_use`` blocks, with only tool messages
    between; ids are matched within that cycle only (tau-bench reuses call ids). A call is
    unanswered when no result for it comes before the next non-tool message. A parallel batch
    must be complete.

    ``start`` (a non-tool message's index, or 0): the findings at that index and after, those of
    the cycles from there on (the scan visits every non-tool message).
    """
    out: list[Violation] = []
    n = len(messages)
    i = start
    while i < n:
        m = messages[i]
        if m.role == "tool":
            out.extend(_orphans(profile, i, m, "no assistant message with tool calls precedes it "
                                "(only tool messages may sit between)"))
            i += 1
            continue
        for r in m.tool_results:
            out.append(_v(profile, i, ORPHAN_TOOL_RESULT,
                          f"tool_result for {r.tool_use_id!r} sits in a {m.role} message, "
                          "not in a tool message"))
        if m.role != "assistant" or not m.tool_uses:
            i += 1
            continue
        j = i + 1
        while j < n and messages[j].role == "tool":
            j += 1
        if _cycle_clean(messages[i:j]):
            i = j
            continue
        wanted = Counter(b.id for b in m.tool_uses)
        answered: Counter[str] = Counter()
        j = i + 1
        while j < n and messages[j].role == "tool":
            t = messages[j]
            if not t.tool_results:
                out.append(_v(profile, j, ORPHAN_TOOL_RESULT, "tool message holds no tool_result"))
            for r in t.tool_results:
                cid = r.tool_use_id
                if wanted[cid] == 0:
                    out.append(_v(profile, j, ORPHAN_TOOL_RESULT,
                                  f"result for {cid!r} answers no call of the assistant message {j - i} message(s) before it"))
                elif answered[cid] >= wanted[cid]:
                    out.append(_v(profile, j, DUPLICATE_TOOL_RESULT,
                                  f"second result for call {cid!r} of the assistant message {j - i} message(s) before it"))
                else:
                    answered[cid] += 1
            j += 1
        missing = [b for b in m.tool_uses if answered[b.id] < wanted[b.id]]
        seen: set[str] = set()
        for b in missing:
            if b.id in seen:
                continue
            seen.add(b.id)
            where = f"message {j}" if j < n else "the end of the payload"
            out.append(_v(profile, i, UNANSWERED_TOOL_CALL,
                          f"call {b.id!r} ({b.name}) has no result before {where}"))
        i = j
    return out


def _cycle_clean(cycle: list[Message]) -> bool:
    """Whether a tool cycle (an assistant message with calls, then its tool messages) breaks
    no pairing rule of :func:`check_tool_pairing`: every call id once, every tool message
    holding only results, one for each call (a function of the cycle alone, kept in the
    memo of its messages)."""

    def clean() -> bool:
        ids = [b.id for b in cycle[0].tool_uses]
        got: list[str] = []
        for t in cycle[1:]:
            results = t.tool_results
            if not results:
                return False
            got += [r.tool_use_id for r in results]
        return len(set(ids)) == len(ids) and sorted(got) == sorted(ids)

    return memo_on(cycle, "rules/cycle-clean", None, clean)


def _orphans(profile: ProviderProfile, i: int, m: Message, why: str) -> list[Violation]:
    if not m.tool_results:
        return [_v(profile, i, ORPHAN_TOOL_RESULT, f"tool message holds no tool_result; {why}")]
    return [_v(profile, i, ORPHAN_TOOL_RESULT, f"result for {r.tool_use_id!r}: {why}")
            for r in m.tool_results]


def leading_systems(messages: list[Message]) -> int:
    """How many system messages open the list."""
    return next((i for i, m in enumerate(messages) if m.role != "system"), len(messages))


def check_system_position(messages: list[Message], profile: ProviderProfile) -> list[Violation]:
    """On a provider that takes no system message after the leading ones
    (``mid_system="fold"``), none is there. A wire rule: it runs on a rendered payload read
    back (:func:`ctxwise.providers.check_wire`); the canonical list may hold system messages
    anywhere, since rendering folds them (:mod:`ctxwise.providers.convert`)."""
    if profile.mid_system != "fold":
        return []
    lead = leading_systems(messages)
    return [_v(profile, i, SYSTEM_NOT_FIRST, "system message after the leading ones")
            for i, m in enumerate(messages) if i > lead and m.role == "system"]


def _blank(text: str) -> bool:
    return not text.strip()


def check_empty_content(messages: list[Message], profile: ProviderProfile, start: int = 0) -> list[Violation]:
    """No empty message, blank text block or empty tool result, except the final assistant
    message (Anthropic's prefill).

    A tool result whose output has no image and only blank text is empty (so is a blank
    placeholder). Thinking blocks count as content only for providers that carry them as
    content blocks or items (Anthropic, OpenAI Responses). ``start``: the findings from that
    index on.
    """
    out: list[Violation] = []
    last = len(messages) - 1
    thinking = profile.reasoning_passback in _BLOCKS
    for i, m in enumerate(messages[start:], start):
        if i == last and m.role == "assistant":
            continue
        out += [_v(profile, i, rule, text) for rule, text in _empty_findings(m, thinking)]
    return out


def _empty_findings(m: Message, thinking: bool) -> tuple[tuple[str, str], ...]:
    """``(rule, message)`` of every :func:`check_empty_content` finding in ``m`` (thinking
    blocks count as content when ``thinking``), kept in the message's memo."""
    memo = m.memo()
    key = "rules/empty-thinking" if thinking else "rules/empty"
    found = memo.get(key)
    if found is None:
        found = memo[key] = tuple(_empty_scan(m, thinking))
    return found


def _empty_scan(m: Message, thinking: bool) -> list[tuple[str, str]]:
    """The findings of :func:`_empty_findings`, computed."""
    found: list[tuple[str, str]] = []
    has_content = False
    for k, b in enumerate(m.blocks):
        if isinstance(b, TextBlock):
            if _blank(b.text):
                found.append((BLANK_TEXT_BLOCK, f"block {k} is an empty or whitespace-only text block"))
            else:
                has_content = True
        elif isinstance(b, ToolResultBlock):
            if _result_empty(b):
                found.append((EMPTY_TOOL_RESULT, f"block {k}: result for {b.tool_use_id!r} has an empty body"))
            else:
                has_content = True
                for q, ob in enumerate(b.output):
                    if isinstance(ob, TextBlock) and _blank(ob.text):
                        found.append((BLANK_TEXT_BLOCK, f"block {k}: output block {q} of result for "
                                      f"{b.tool_use_id!r} is blank"))
        elif isinstance(b, (ImageBlock, ToolUseBlock, DocumentBlock, SearchResultBlock, AudioBlock,
                            RefusalBlock, ProviderBlock)):
            has_content = True
        elif isinstance(b, ThinkingBlock) and thinking:
            has_content = True
    if not has_content and not found:
        found.append((EMPTY_CONTENT, f"{m.role} message has no content"))
    return found


def _result_empty(b: ToolResultBlock) -> bool:
    if any(not isinstance(o, TextBlock) for o in b.output):
        return False
    return _blank(b.text)


def check_user_present(messages: list[Message], profile: ProviderProfile) -> list[Violation]:
    """At least one user input (a user message that is not a tool-result carrier)."""
    if any(is_user_input(m) for m in messages):
        return []
    return [_v(profile, 0, NO_USER_MESSAGE, "the payload has no user message")]


def check_call_order(messages: list[Message], profile: ProviderProfile, start: int = 0) -> list[Violation]:
    """An assistant message with tool calls directly follows a user or a tool message (a
    system message after the leading ones counts as the user turn it is folded into, on a
    ``mid_system="fold"`` profile). ``start``: the findings from that index on."""
    out: list[Violation] = []
    lead = leading_systems(messages)
    for i, m in enumerate(messages[start:], start):
        if m.role != "assistant" or not m.tool_uses:
            continue
        prev = messages[i - 1].role if i > 0 else None
        if prev == "system" and i - 1 >= lead and profile.mid_system == "fold":
            prev = "user"
        if prev not in ("user", "tool"):
            after = f"a {prev} message" if prev else "nothing (it is first)"
            out.append(_v(profile, i, TOOL_CALL_ORDER,
                          f"assistant message with tool calls follows {after}"))
    return out


def family(profile: ProviderProfile) -> str:
    """The :class:`~ctxwise.messages.ProviderBlock` family a profile's wire sends:
    ``anthropic``, ``openai_responses``, or ``openai_chat`` (``gemini`` for the Gemini profile)."""
    if profile.wire == "anthropic":
        return "anthropic"
    if profile.wire == "responses":
        return "openai_responses"
    return "gemini" if profile.name == "gemini" else "openai_chat"


def not_sendable(b: Any, role: str, profile: ProviderProfile) -> str | None:
    """Why block ``b`` of a ``role`` message cannot be sent on ``profile``'s wire, or None.

    Sources: Anthropic ``anthropic/types/message_content_param.py`` (no audio or refusal block: an assistant refusal is converted to text by :mod:`ctxwise.providers.convert`);
    Responses ``openai/types/responses/response_input_content_param.py`` (``input_text`` /
    ``input_image`` / ``input_file``: a document goes as ``input_file`` from base64, a URL or a
    file id) and ``response_output_message_param.py`` (``refusal`` in assistant output);
    Chat Completions ``openai/types/chat/chat_completion_content_part_param.py`` (user parts:
    text, ``image_url`` with a URL, ``input_audio``, ``file`` from base64 or a file id) and
    ``chat_completion_assistant_message_param.py`` (``refusal``). Then the target's own list,
    ``profile.unsendable`` (block type -> source: DeepSeek and Qwen3 text models take no audio
    or file part, Gemini's OpenAI-compatible endpoint no file part).
    """
    refused = profile.unsendable.get(b.type)
    if refused is not None:
        return f"{profile.title} takes no {b.type} block (source: {refused})"
    wire = profile.wire
    if isinstance(b, SearchResultBlock) and wire != "anthropic":
        return "search_result blocks are Anthropic-only"
    if isinstance(b, AudioBlock):
        if wire != "chat":
            return f"{profile.title} takes no audio input block"
        if role != "user":
            return "input_audio is a user content part"
    if isinstance(b, RefusalBlock) and role != "assistant":
        return "a refusal is assistant content"  # on Anthropic, an assistant refusal is sent as text (convert)
    if isinstance(b, DocumentBlock) and wire != "anthropic":
        ok = ("base64", "url", "file") if wire == "responses" else ("base64", "file")
        if b.source_type not in ok:
            return f"a document from a {b.source_type!r} source has no {profile.title} form (takes {', '.join(ok)})"
        if role != "user" and not (wire == "responses" and role == "tool"):
            return "a file part is user content (or, on Responses, a function_call_output part)"
    if isinstance(b, ImageBlock) and wire == "chat" and b.data is None and b.url is None:
        return "a Files-API image (file_id) has no Chat Completions form (image_url takes a URL)"
    return None


_PLAIN = (TextBlock, ThinkingBlock, ToolUseBlock, ToolResultBlock)
_PLAIN_TYPES = ("text", "thinking", "tool_use", "tool_result")


def _plain(m: Message) -> bool:
    """Whether every block of ``m`` (and every output block of its tool results) is text,
    thinking, a tool call or a tool result: blocks :func:`not_sendable` flags on no wire
    (unless a profile's ``unsendable`` names one) and no provider block. Kept in the
    message's memo."""
    memo = m.memo()
    found = memo.get("rules/plain")
    if found is None:
        found = memo["rules/plain"] = all(isinstance(b, _PLAIN) for b in m.blocks) and all(
            isinstance(o, TextBlock) for r in m.tool_results for o in r.output)
    return bool(found)


def is_compaction(b: Any) -> bool:
    """Whether ``b`` is an Anthropic ``compaction`` block (server-side compaction's summary)."""
    return isinstance(b, ProviderBlock) and b.provider == "anthropic" and b.kind == "compaction"


def opens_with_compaction(m: Message) -> bool:
    """Whether message ``m``'s first block is an Anthropic ``compaction`` block."""
    return bool(m.blocks) and is_compaction(m.blocks[0])


def check_compaction_placement(messages: list[Message], profile: ProviderProfile, start: int = 0,
                               with_content: int = 0) -> list[Violation]:
    """Anthropic: a ``compaction`` block stands only as the first block of the conversation
    (the first block of the first message after the leading system messages, which become the
    top-level ``system``), never in a system message, and one only with content (SDK anthropic
    2.17 ``types/compaction_block_misplaced_error.py``, ``compaction_block_ambiguous_error.py``).
    So a pinned first user message (the task) or a user-memory block cannot stand before it.
    ``start``: the findings from that index on, ``with_content`` the compaction blocks with
    content before it (:func:`compactions_with_content`)."""
    if profile.wire != "anthropic":
        return []
    first = leading_systems(messages)
    out: list[Violation] = []
    for i, m in enumerate(messages[start:], start):
        if _plain(m):  # no provider block, so no compaction block
            continue
        for k, b in enumerate(m.blocks):
            if not is_compaction(b):
                continue
            if m.role == "system":
                out.append(_v(profile, i, COMPACTION_MISPLACED, f"block {k}: a compaction block in a system message"))
            elif (i, k) != (first, 0):
                out.append(_v(profile, i, COMPACTION_MISPLACED, f"block {k}: a compaction block that is not the first "
                              f"block of the conversation (that is block 0 of message {first})"))
            if isinstance(b, ProviderBlock) and b.raw.get("content"):
                with_content += 1
                if with_content > 1:
                    out.append(_v(profile, i, COMPACTION_MISPLACED, f"block {k}: a second compaction block with "
                                  "content (send only the one the conversation returned last)"))
    return out


def compactions_with_content(messages: Sequence[Message]) -> int:
    """How many Anthropic ``compaction`` blocks with content ``messages`` hold (the state
    :func:`check_compaction_placement` carries from one message to the next)."""
    return sum(1 for m in messages if not _plain(m) for b in m.blocks
               if is_compaction(b) and isinstance(b, ProviderBlock) and b.raw.get("content"))


def provider_calls(messages: Sequence[Message], profile: ProviderProfile) -> set[str]:
    """The ids of the provider-run calls of ``profile``'s family in ``messages`` (the state
    :func:`check_provider_blocks` carries from one message to the next)."""
    fam = family(profile)
    kinds = PROVIDER_CALL_KINDS.get(fam, ())
    return {b.call_id for m in messages if not _plain(m)
            for b in [*m.blocks, *(o for r in m.tool_results for o in r.output)]
            if isinstance(b, ProviderBlock) and b.provider == fam and b.kind in kinds and b.call_id is not None}


def file_issuer(b: Any) -> str | None:
    """The provider family that issued image or document block ``b``'s Files-API ``file_id``,
    when the reader knows it (``anthropic``: read from an Anthropic ``{"type": "file"}``
    source, anthropic 2.17 ``types/file_image_source_param.py``), else None. A file id is
    valid only at the provider that issued it."""
    if not isinstance(b, (ImageBlock, DocumentBlock)) or b.file_id is None:
        return None
    book = b.extra.get("_anthropic")
    return "anthropic" if isinstance(book, dict) and book.get("file_issuer") == "anthropic" else None


def check_provider_blocks(messages: list[Message], profile: ProviderProfile, start: int = 0,
                          calls: set[str] | None = None) -> list[Violation]:
    """Blocks the target can send: no other family's :class:`~ctxwise.messages.ProviderBlock`
    (``foreign-provider-block``), no block the wire has no form for (``block-not-sendable``,
    see :func:`not_sendable`), and every provider-run result after its call
    (``provider-result-without-call``: Anthropic "tool_use ids ... must have a corresponding
    server_tool_use block"; Responses "No tool call found for ... output with call_id").
    A tool result's output blocks are checked as content of the tool message. ``start``: the
    findings from that index on, ``calls`` the provider-run call ids before it
    (:func:`provider_calls`; not changed)."""
    fam = family(profile)
    out: list[Violation] = []
    calls = set(calls or ())
    skip_plain = not any(t in profile.unsendable for t in _PLAIN_TYPES)
    for i, m in enumerate(messages[start:], start):
        if skip_plain and _plain(m):
            continue
        blocks: list[Any] = list(m.blocks) + [o for r in m.tool_results for o in r.output]
        for k, b in enumerate(blocks):
            where = f"block {k}" if k < len(m.blocks) else "tool result output"
            if isinstance(b, ProviderBlock):
                if b.provider != fam:
                    out.append(_v(profile, i, FOREIGN_PROVIDER_BLOCK,
                                  f"{where}: a {b.provider} {b.kind!r} block cannot be sent to {profile.title}"))
                    continue
                if b.kind in PROVIDER_CALL_KINDS.get(fam, ()) and b.call_id is not None:
                    calls.add(b.call_id)
                elif b.kind in PROVIDER_RESULT_KINDS.get(fam, ()) and b.call_id not in calls:
                    out.append(_v(profile, i, PROVIDER_RESULT_WITHOUT_CALL,
                                  f"{where}: {b.kind} for {b.call_id!r} has no call with that id before it"))
                continue
            issuer = file_issuer(b)
            if issuer is not None and issuer != fam:
                out.append(_v(profile, i, FOREIGN_PROVIDER_BLOCK,
                              f"{where}: {b.type} block: Files-API id {b.file_id!r} was issued by {issuer}; "
                              f"{profile.title} cannot read it (upload the file there, or send its data)"))
                continue
            why = not_sendable(b, m.role, profile)
            if why:
                out.append(_v(profile, i, BLOCK_NOT_SENDABLE, f"{where}: {b.type} block: {why}"))
    return out
