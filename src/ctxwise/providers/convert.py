"""Render-time conversions: what a canonical list must become before a provider takes it.

    from ctxwise.providers.convert import convert
    done = convert(messages, "anthropic")   # -> Converted(messages, conversions, call_ids)

The canonical list (and so the transcript) keeps what the application sent; the rendered
request is built from the converted list. Each conversion answers one provider rule of
:mod:`ctxwise.providers.profiles` (its source is in the profile's ``sources``) and is reported
(:attr:`Converted.conversions`; ``prepare()`` turns them into one ``rendered`` event), never
done in silence. A provider is never refused input it or ctxwise can make valid:

* ``system-not-first`` — a system message after the leading ones (a reminder, a mode
  switch): as is where the provider takes it (``mid_system="as_is"``: OpenAI Chat
  Completions and Responses), else folded: its text goes into the user turn at its place under
  :data:`~ctxwise.providers.profiles.MID_SYSTEM_HEADER` (prepended to the next message when
  that is the user's input, else a user message of its own); system messages right after the
  first are merged into the system prompt.
* ``call-id-too-long`` / ``call-id-charset`` / ``duplicate-tool-call-id`` — a tool call id
  outside the provider's rules, or used a second time in the request, is renamed (call and
  results alike) by :func:`safe_call_id`: deterministic and stable across calls (it depends
  only on the original id, and for a repeat on the id of the message holding it), within
  ``^[a-zA-Z0-9_-]+$`` and 40 characters. :attr:`Converted.call_ids` maps each sent id back
  to the caller's.
* ``image-not-supported`` — on a provider without images (DeepSeek), each image of a user
  message becomes the text :data:`~ctxwise.providers.profiles.IMAGE_NOTE`.
* ``block-not-sendable`` (refusals) — an assistant refusal (OpenAI's ``refusal``) on a
  provider with no refusal block (Anthropic, ``anthropic/types/message_content_param.py``)
  is sent as assistant text of the same words.
* ``block-not-sendable`` (citations) — a text block's citations read from one provider
  family that the target has no form for are left out of the rendered text (the text is
  sent): an Anthropic citation (``anthropic/types/text_citation_param.py``: ``char_location``,
  ``page_location``, ``content_block_location``, ``web_search_result_location``,
  ``search_result_location``; each needs ``cited_text`` and a document / search-result
  location) has no Responses form, and a Responses annotation
  (``openai/types/responses/response_output_text_param.py``: ``url_citation``,
  ``file_citation``, ``container_file_citation``, ``file_path``) has no Anthropic form. Chat
  Completions takes no citations on a request message
  (``openai/types/chat/chat_completion_assistant_message_param.py``): all are left out there,
  reported the same way.
* ``block-not-sendable`` (unsigned thinking) — on Anthropic, a thinking block without its
  ``signature`` (reasoning read from another provider, or a reply stored without it) is left
  out of the request: ``ThinkingBlockParam.signature`` is required
  (``anthropic/types/thinking_block_param.py``) and only Anthropic can sign. The renderer
  leaves it out; the conversion reports it (the stored message is not changed; the size does
  not count the block: :func:`ctxwise.compaction.context.thinking_sent`).
* ``block-not-sendable`` (reasoning without its item id) — on OpenAI Responses, a thinking
  block not read from a Responses ``reasoning`` item (reasoning from another provider, or a
  reply stored without the item's ``rs_...`` id) is left out of the request: a reasoning input
  item needs its ``id`` (``openai/types/responses/response_reasoning_item_param.py``:
  ``id: Required[str]``) and only OpenAI can produce one. As for unsigned thinking on
  Anthropic, the renderer leaves it out, the conversion reports it, the stored message is not
  changed and the size does not count the block.
* ``reasoning-summary-added`` — on OpenAI Responses, a ``reasoning`` item given without its
  ``summary`` key (an encrypted-only item) is sent with ``"summary": []``: the request item
  needs the key (``openai/types/responses/response_reasoning_item_param.py``:
  ``summary: Required[Iterable[Summary]]``); the transcript keeps the item as given.
* ``first-message-role`` — a history that starts with an assistant message (an app that
  stores its greeting first) gets a minimal user turn,
  :data:`~ctxwise.providers.profiles.LEAD_USER_TEXT`, before it on a provider whose first
  message must be a user message (Anthropic); not before an assistant message that opens with
  the ``compaction`` block standing for the history before it, which must stay the first
  block of the conversation (``compaction-misplaced``).
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

from ..messages import (Block, ImageBlock, Message, ProviderBlock, RefusalBlock, TextBlock, ThinkingBlock, ToolResultBlock,
                        ToolUseBlock, fold_on)
from ..units import is_user_input
from .render_responses import reasoning_item_id, summary_added
from .rules import opens_with_compaction
from .profiles import (
    BLOCK_NOT_SENDABLE,
    CALL_ID_CHARSET,
    CALL_ID_TOO_LONG,
    DUPLICATE_TOOL_CALL_ID,
    DEVELOPER_AS_SYSTEM,
    CACHE_MARK_DROPPED,
    IMAGE_DETAIL_DROPPED,
    THOUGHT_SIGNATURE_DROPPED,
    REASONING_SUMMARY_ADDED,
    FIRST_MESSAGE_ROLE,
    IMAGE_NOT_SUPPORTED,
    IMAGE_NOTE,
    LEAD_USER_TEXT,
    MID_SYSTEM_HEADER,
    SYSTEM_NOT_FIRST,
    ProviderProfile,
    get_profile,
)

MAX_CALL_ID_CHARS = 40
"""Longest tool call id a renamed id may have, on every provider: OpenAI refuses tool call
ids over 40 characters (issue 25), and a rename that fits there fits everywhere."""

_SAFE = re.compile(r"[^a-zA-Z0-9_-]")
_HASH = 10


@dataclass(frozen=True)
class Conversion:
    """One render-time conversion: ``rule`` (the slug of the provider rule it satisfies),
    ``index`` (the message's place in the canonical list), ``message_id`` and ``detail`` (what
    was done, in words)."""

    rule: str
    index: int
    message_id: str
    detail: str


@dataclass
class Converted:
    """The list to render (``messages``), what was converted (``conversions``, in list order)
    and ``call_ids``: each renamed tool call id as sent -> the caller's original id (empty
    when none was renamed)."""

    messages: list[Message]
    conversions: list[Conversion] = field(default_factory=list)
    call_ids: dict[str, str] = field(default_factory=dict)


def safe_call_id(original: str, salt: str = "") -> str:
    """A tool call id for ``original`` within ``^[a-zA-Z0-9_-]+$`` and
    :data:`MAX_CALL_ID_CHARS` characters: the original's characters (others replaced by
    ``_``), cut to leave room for ``_`` and 10 hex digits of SHA-256 over ``original`` and
    ``salt`` (the holding message's id for a repeated id). Deterministic: the same arguments
    give the same id, whatever else the request holds."""
    digest = hashlib.sha256(f"{original}\0{salt}".encode("utf-8")).hexdigest()[:_HASH]
    stem = _SAFE.sub("_", original)[: MAX_CALL_ID_CHARS - _HASH - 1] or "call"
    return f"{stem}_{digest}"


def call_id_problem(call_id: str, profile: ProviderProfile) -> str | None:
    """The rule slug ``call_id`` breaks on ``profile`` (``call-id-too-long`` or
    ``call-id-charset``), or None when the provider takes it."""
    return _id_problem(call_id, profile.max_call_id_chars, profile.call_id_pattern)


@functools.lru_cache(maxsize=16384)
def _id_problem(call_id: str, max_chars: int | None, pattern: str | None) -> str | None:
    """:func:`call_id_problem` by the profile's two rules (a session asks about the same ids
    at every call; bounded, least recently used dropped)."""
    if max_chars is not None and len(call_id) > max_chars:
        return CALL_ID_TOO_LONG
    if pattern is not None and not re.fullmatch(pattern, call_id):
        return CALL_ID_CHARSET
    return None


def convert(messages: list[Message], provider: str | ProviderProfile) -> Converted:
    """``messages`` as ``provider`` takes them (see the module docstring for each conversion).
    Pure: the messages given are not changed; those that need no change are returned as they
    are. Raises :class:`~ctxwise.errors.PolicyError` for an unknown provider."""
    profile = get_profile(provider)
    out = Converted(list(messages))
    _rename_call_ids(out, profile)
    if profile.mid_system == "fold":
        _fold_system(out)
    at = _touched(out.messages, profile)
    if not profile.images:
        _images_to_notes(out, at)
    if profile.first_message_user:
        k = _lead_user_turn(out)
        if k >= 0:
            at = tuple(i + 1 if i >= k else i for i in at)
    if at:
        _per_message(out, profile, at)
    if profile.wire == "anthropic":
        _extra_cache_marks(out, profile.mid_system == "native")
    if out.conversions:
        where = {m.id: i for i, m in enumerate(messages)}
        out.conversions = [c if where.get(c.message_id, c.index) == c.index else replace(c, index=where[c.message_id])
                           for c in out.conversions]
    return out


def _per_message(out: Converted, profile: ProviderProfile, at: Sequence[int]) -> None:
    """The conversions that look at one message at a time (after the images became notes and
    the lead user turn was added), on the messages at positions ``at`` (the others are
    :func:`_untouched`)."""
    if profile.wire == "anthropic":
        _refusals_to_text(out, at)
        _unsigned_thinking(out, at)
        _image_detail(out, at)
    if profile.wire == "responses":
        _idless_reasoning(out, at)
        _summaries_added(out, at)
    if profile.wire == "chat":
        _signed_thinking_on_chat(out, at, profile.reasoning_field is not None)
    _drop_foreign_citations(out, at, profile)
    if profile.wire == "chat":
        _message_signatures(out, at)
    if profile.name not in DEVELOPER_TARGETS:
        _developer_as_system(out, at)


def _thinking_untouched(b: ThinkingBlock, profile: ProviderProfile) -> bool:
    """Whether no conversion leaves out or reports assistant thinking block ``b`` for ``profile``."""
    if profile.wire == "anthropic":
        return b.redacted or b.signature is not None
    if profile.wire == "responses":
        return reasoning_item_id(b) is not None and not summary_added(b)
    if profile.wire == "chat":
        return not b.redacted and profile.reasoning_field is not None
    return True


def _block_untouched(b: Any, m: Message, profile: ProviderProfile) -> bool:
    """Whether no per-message conversion changes or reports block ``b`` of ``m`` (a
    conservative answer: False may still convert nothing)."""
    if isinstance(b, TextBlock):
        return not b.citations
    if isinstance(b, ImageBlock):
        return ((profile.images or m.role in ("assistant", "tool"))
                and (b.detail is None or profile.wire != "anthropic" or m.role == "assistant"))
    if isinstance(b, RefusalBlock):
        return profile.wire != "anthropic" or m.role != "assistant"
    if isinstance(b, ThinkingBlock):
        return m.role != "assistant" or _thinking_untouched(b, profile)
    if isinstance(b, ToolResultBlock):
        return all(_block_untouched(o, m, profile) for o in b.output
                   if isinstance(o, TextBlock) or (isinstance(o, ImageBlock) and m.role != "assistant"))
    return True


def _untouched(m: Message, profile: ProviderProfile) -> bool:
    """Whether :func:`_per_message` (and :func:`_images_to_notes`) leave ``m`` as it is and
    report nothing about it for ``profile``."""
    if not all(_block_untouched(b, m, profile) for b in m.blocks):
        return False
    if profile.wire == "chat" and m.role == "assistant":
        extra = m.metadata.get("extra_content")
        google = extra.get("google") if isinstance(extra, dict) else None
        if isinstance(google, dict) and "thought_signature" in google:
            return False
    if m.role == "system" and profile.name not in DEVELOPER_TARGETS:
        from .render_chat import is_developer

        return not is_developer(m)
    return True


def _touched(msgs: list[Message], profile: ProviderProfile) -> tuple[int, ...]:
    """The positions of the messages of ``msgs`` that are not :func:`_untouched` (the
    per-message conversions visit only those): a fold resumed from the last list this one
    extends."""
    return fold_on(msgs, "convert/touched", profile, (),
                   lambda at, i, m: at if _untouched(m, profile) else (*at, i))


def _ids_step(profile: ProviderProfile) -> Callable[[tuple[frozenset[str], bool], int, Message],
                                                     tuple[frozenset[str], bool]]:
    """The step of :func:`_ids_clean`'s fold: ``(call ids so far, a rename is needed)``."""

    def step(state: tuple[frozenset[str], bool], _: int, m: Message) -> tuple[frozenset[str], bool]:
        used, dirty = state
        if dirty or m.role != "assistant" or not m.tool_uses:
            return state
        ids = [b.id for b in m.blocks if isinstance(b, ToolUseBlock)]
        dirty = (len(set(ids)) < len(ids) or any(i in used for i in ids)
                 or any(call_id_problem(i, profile) is not None for i in ids))
        return used | set(ids), dirty

    return step


def _ids_clean(msgs: list[Message], profile: ProviderProfile) -> bool:
    """Whether every tool call id of ``msgs`` is one ``profile`` takes and none repeats (then
    :func:`_rename_call_ids` renames nothing); a fold resumed from the last list this one
    extends (:func:`ctxwise.messages.fold_on`)."""
    init: tuple[frozenset[str], bool] = (frozenset(), False)
    return not fold_on(msgs, "convert/ids", profile, init, _ids_step(profile))[1]


def _rename_call_ids(out: Converted, profile: ProviderProfile) -> None:
    """Rename ids the provider refuses and ids already used in the request; results follow
    their call by position (the k-th result for an id in the tool messages right after an
    assistant message answers the k-th call with that id)."""
    msgs = out.messages
    if _ids_clean(msgs, profile):
        return
    used: set[str] = set()
    i = 0
    while i < len(msgs):
        m = msgs[i]
        if m.role != "assistant" or not m.tool_uses:
            i += 1
            continue
        renames: dict[str, list[str]] = {}
        blocks: list[Any] = []
        for k, b in enumerate(m.blocks):
            if isinstance(b, ToolUseBlock):
                orig = b.id  # the recorded id, which the results of this cycle answer
                new, rule = b.id, call_id_problem(b.id, profile)
                if rule is not None:
                    new = safe_call_id(b.id)
                if new in used:
                    rule, new = DUPLICATE_TOOL_CALL_ID, safe_call_id(b.id, f"{m.id}:{k}")
                if new != b.id:
                    out.call_ids[new] = b.id
                    out.conversions.append(Conversion(rule or DUPLICATE_TOOL_CALL_ID, i, m.id,
                                                      f"tool call id {b.id!r} sent as {new!r}"))
                    b = b.model_copy(update={"id": new})
                renames.setdefault(orig, []).append(new)
                used.add(new)
            blocks.append(b)
        if any(old != new for old, news in renames.items() for new in news):
            msgs[i] = m.model_copy(update={"blocks": blocks})
        j = i + 1
        while j < len(msgs) and msgs[j].role == "tool":
            t = msgs[j]
            rblocks, changed = [], False
            for r in t.blocks:
                if isinstance(r, ToolResultBlock) and renames.get(r.tool_use_id):
                    new = renames[r.tool_use_id].pop(0)
                    if new != r.tool_use_id:
                        r, changed = r.model_copy(update={"tool_use_id": new}), True
                rblocks.append(r)
            if changed:
                msgs[j] = t.model_copy(update={"blocks": rblocks})
            j += 1
        i = j


def _folded(m: Message) -> Block:
    return TextBlock(text=f"{MID_SYSTEM_HEADER}\n{m.text}")


def _fold_system(out: Converted) -> None:
    """System messages right after the first are merged into it; a later one goes into the
    user turn at its place (see the module docstring)."""
    src = out.messages
    if not any(m.role == "system" for m in src[1:]):
        return
    msgs: list[Message] = []
    pending: list[tuple[int, Message]] = []
    lead = True
    for i, m in enumerate(src):
        if m.role == "system":
            if lead and msgs:
                msgs[0] = msgs[0].model_copy(update={"blocks": [*msgs[0].blocks, *m.blocks]})
                out.conversions.append(Conversion(SYSTEM_NOT_FIRST, i, m.id, "merged into the system prompt"))
            elif lead:
                msgs.append(m)
            else:
                pending.append((i, m))
            continue
        lead = False
        if pending:
            folded = [_folded(s) for _, s in pending]
            if is_user_input(m):
                m = m.model_copy(update={"blocks": [*folded, *m.blocks]})
                where = f"folded into the next user message {m.id!r}"
            else:
                msgs.append(Message(id=pending[0][1].id, role="user", blocks=folded))
                where = "sent as a user message at its place"
            out.conversions += [Conversion(SYSTEM_NOT_FIRST, k, s.id, f"{where} under {MID_SYSTEM_HEADER!r}")
                                for k, s in pending]
            pending = []
        msgs.append(m)
    if pending:
        msgs.append(Message(id=pending[0][1].id, role="user", blocks=[_folded(s) for _, s in pending]))
        out.conversions += [Conversion(SYSTEM_NOT_FIRST, k, s.id, "sent as a user message at the end under "
                                       f"{MID_SYSTEM_HEADER!r}") for k, s in pending]
    out.messages = msgs


DEVELOPER_TARGETS = ("openai", "openai_responses")
"""The profiles whose API takes role ``developer`` (``openai/types/chat/
chat_completion_developer_message_param.py``; Responses ``easy_input_message_param.py``): a
message given as ``developer`` is sent as such there, as ``system`` elsewhere (reported)."""


def _developer_as_system(out: Converted, at: Sequence[int]) -> None:
    from .render_chat import is_developer

    for i in at:
        m = out.messages[i]
        if m.role == "system" and is_developer(m):
            out.conversions.append(Conversion(DEVELOPER_AS_SYSTEM, i, m.id, "role developer sent as system (the "
                                              "target has no developer role)"))


def _images_to_notes(out: Converted, at: Sequence[int]) -> None:
    for i in at:
        m = out.messages[i]
        if m.role == "assistant" or m.role == "tool" or not any(isinstance(b, ImageBlock) for b in m.blocks):
            continue
        n = sum(isinstance(b, ImageBlock) for b in m.blocks)
        blocks = [TextBlock(text=IMAGE_NOTE) if isinstance(b, ImageBlock) else b for b in m.blocks]
        out.messages[i] = m.model_copy(update={"blocks": blocks})
        out.conversions.append(Conversion(IMAGE_NOT_SUPPORTED, i, m.id,
                                          f"{n} image{'s' if n > 1 else ''} sent as the text {IMAGE_NOTE!r}"))


def _refusals_to_text(out: Converted, at: Sequence[int]) -> None:
    for i in at:
        m = out.messages[i]
        if m.role != "assistant" or not any(isinstance(b, RefusalBlock) for b in m.blocks):
            continue
        n = sum(isinstance(b, RefusalBlock) for b in m.blocks)
        blocks = [TextBlock(text=b.text) if isinstance(b, RefusalBlock) else b for b in m.blocks]
        out.messages[i] = m.model_copy(update={"blocks": blocks})
        out.conversions.append(Conversion(BLOCK_NOT_SENDABLE, i, m.id,
                                          f"{n} refusal{'s' if n > 1 else ''} sent as assistant text "
                                          "(Anthropic has no refusal block)"))


ANTHROPIC_CITATION_TYPES = frozenset({"char_location", "page_location", "content_block_location",
                                      "web_search_result_location", "search_result_location"})
"""``type`` values of Anthropic's ``TextCitationParam`` (``anthropic/types/text_citation_param.py``)."""

RESPONSES_ANNOTATION_TYPES = frozenset({"url_citation", "file_citation", "container_file_citation", "file_path"})
"""``type`` values of the Responses ``output_text`` annotations
(``openai/types/responses/response_output_text_param.py``: ``Annotation``)."""


def _citations_kept(b: TextBlock, wire: str) -> list[dict[str, Any]] | None:
    """The citations of ``b`` that ``wire`` has a form for (None: all kept)."""
    if not b.citations:
        return None
    # chat: a request message takes no citations at all
    allowed = {"anthropic": ANTHROPIC_CITATION_TYPES, "responses": RESPONSES_ANNOTATION_TYPES}.get(wire, frozenset())
    kept = [c for c in b.citations if isinstance(c, dict) and c.get("type") in allowed]
    return None if len(kept) == len(b.citations) else kept


def _strip_text(b: Any, wire: str, dropped: list[str]) -> Any:
    if isinstance(b, TextBlock):
        kept = _citations_kept(b, wire)
        if kept is None:
            return b
        dropped += [str(c.get("type")) if isinstance(c, dict) else type(c).__name__
                    for c in b.citations or [] if c not in kept]
        return b.model_copy(update={"citations": kept or None})
    if isinstance(b, ToolResultBlock) and any(isinstance(x, TextBlock) and x.citations for x in b.output):
        output = [_strip_text(x, wire, dropped) for x in b.output]
        return b.model_copy(update={"output": output}) if any(x is not y for x, y in zip(output, b.output)) else b
    return b


def _drop_foreign_citations(out: Converted, at: Sequence[int], profile: ProviderProfile) -> None:
    """Leave out the citations the target has no form for (module docstring)."""
    for i in at:
        m = out.messages[i]
        dropped: list[str] = []
        blocks = [_strip_text(b, profile.wire, dropped) for b in m.blocks]
        if not dropped:
            continue
        out.messages[i] = m.model_copy(update={"blocks": blocks})
        kinds = ", ".join(sorted(set(dropped)))
        out.conversions.append(Conversion(BLOCK_NOT_SENDABLE, i, m.id,
                                          f"{len(dropped)} citation{'s' if len(dropped) > 1 else ''} ({kinds}) "
                                          f"left out: {profile.title} has no form for them"))


def _unsigned_thinking(out: Converted, at: Sequence[int]) -> None:
    for i in at:
        m = out.messages[i]
        if m.role != "assistant":
            continue
        n = sum(1 for b in m.blocks if isinstance(b, ThinkingBlock) and not b.redacted and b.signature is None)
        if n:
            out.conversions.append(Conversion(BLOCK_NOT_SENDABLE, i, m.id,
                                              f"{n} thinking block{'s' if n > 1 else ''} without a signature left "
                                              "out (Anthropic takes thinking only with its signature)"))


def _signed_thinking_on_chat(out: Converted, at: Sequence[int], has_field: bool) -> None:
    """Report the reasoning a Chat Completions target cannot take: on a target with no
    reasoning field (OpenAI: ``openai/types/chat/chat_completion_assistant_message_param.py``
    has none) every thinking block, whatever it was read from (Anthropic thinking and
    ``redacted_thinking``, a Responses ``reasoning`` item, a chat ``reasoning_content``); on a
    target with one (DeepSeek) ``redacted_thinking`` (encrypted, no text), the others going as
    their text without a signature, which is its documented form
    (https://api-docs.deepseek.com/guides/thinking_mode)."""
    for i in at:
        m = out.messages[i]
        if m.role != "assistant" or not m.thinking:
            continue
        red = sum(1 for b in m.thinking if b.redacted)
        signed = 0 if has_field else sum(1 for b in m.thinking if not b.redacted and b.signature is not None)
        rest = 0 if has_field else len(m.thinking) - red - signed
        if red or signed or rest:
            what = ", ".join(x for x in (f"{signed} signed thinking" if signed else "",
                                         f"{rest} reasoning" if rest else "",
                                         f"{red} redacted_thinking" if red else "") if x)
            out.conversions.append(Conversion(BLOCK_NOT_SENDABLE, i, m.id,
                                              f"{what} block(s) left out (Chat Completions has no form for "
                                              f"{'them' if not has_field else 'encrypted reasoning'})"))


def _message_signatures(out: Converted, at: Sequence[int]) -> None:
    """Report a Gemini ``extra_content.google.thought_signature`` kept on an assistant message
    itself: the chat wire sends one only on a tool call
    (https://ai.google.dev/gemini-api/docs/thought-signatures, OpenAI compatibility), so it is
    left out."""
    for i in at:
        m = out.messages[i]
        extra = m.metadata.get("extra_content") if m.role == "assistant" else None
        google = extra.get("google") if isinstance(extra, dict) else None
        if isinstance(google, dict) and "thought_signature" in google:
            out.conversions.append(Conversion(THOUGHT_SIGNATURE_DROPPED, i, m.id,
                                              "the message's own extra_content.google.thought_signature left out "
                                              "(sent only on tool calls)"))


def _image_detail(out: Converted, at: Sequence[int]) -> None:
    """Report images whose ``detail`` the Anthropic image block cannot carry
    (``anthropic/types/image_block_param.py``: ``source`` and ``cache_control`` only)."""
    for i in at:
        m = out.messages[i]
        if m.role == "assistant":
            continue
        found = [b.detail for b in [*m.blocks, *(o for r in m.tool_results for o in r.output)]
                 if isinstance(b, ImageBlock) and b.detail is not None]
        if found:
            out.conversions.append(Conversion(IMAGE_DETAIL_DROPPED, i, m.id,
                                              f"image detail {', '.join(map(repr, found))} left out (the Anthropic "
                                              "image block has no detail)"))


def _marks_of(m: Message) -> list[dict[str, Any]]:
    """The ``cache_control`` marks message ``m`` renders with on Anthropic, in request order
    (a tool result's output before the result's own; none on thinking blocks); kept in the
    message's memo."""
    memo = m.memo()
    found: list[dict[str, Any]] | None = memo.get("convert/marks")
    if found is None:
        found = memo["convert/marks"] = _find_marks(m)
    return found


def _find_marks(m: Message) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for b in m.blocks:
        if isinstance(b, ThinkingBlock):
            continue
        if isinstance(b, ProviderBlock):
            cc = b.raw.get("cache_control") if b.provider == "anthropic" else None
        else:
            if isinstance(b, ToolResultBlock):
                found.extend(o.extra["cache_control"] for o in b.output
                             if isinstance(o.extra.get("cache_control"), dict))
            cc = b.extra.get("cache_control")
        if isinstance(cc, dict):
            found.append(cc)
    return found


def _extra_cache_marks(out: Converted, native_system: bool) -> None:
    """Report the ``cache_control`` marks the Anthropic render leaves out: at most
    :data:`~ctxwise.providers.render_anthropic.MAX_CACHE_BREAKPOINTS` per request, the system
    prompt's (the leading system messages) and then the newest kept
    (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching)."""
    from .render_anthropic import MAX_CACHE_BREAKPOINTS

    head = next((i for i, m in enumerate(out.messages) if m.role != "system"), len(out.messages))
    marks = [(i, cc) for i, m in enumerate(out.messages)
             if m.role != "system" or i < head or native_system for cc in _marks_of(m)]
    if len(marks) <= MAX_CACHE_BREAKPOINTS:
        return
    system = [k for k, (i, _) in enumerate(marks) if i < head]
    keep = set(system[len(system) - min(len(system), MAX_CACHE_BREAKPOINTS):])
    rest = [k for k in range(len(marks)) if k not in system]
    room = MAX_CACHE_BREAKPOINTS - len(keep)
    keep.update(rest[len(rest) - min(len(rest), room):] if room else [])
    dropped: dict[int, list[dict[str, Any]]] = {}
    for k, (i, cc) in enumerate(marks):
        if k not in keep:
            dropped.setdefault(i, []).append(cc)
    for i, ccs in sorted(dropped.items()):
        ttls = sorted({str(c["ttl"]) for c in ccs if "ttl" in c})
        out.conversions.append(Conversion(CACHE_MARK_DROPPED, i, out.messages[i].id,
                                          f"{len(ccs)} cache_control mark(s){' (ttl ' + ', '.join(ttls) + ')' if ttls else ''} "
                                          f"left out (Anthropic takes at most {MAX_CACHE_BREAKPOINTS} per request: "
                                          "the system prompt's and the newest are kept)"))


def _idless_reasoning(out: Converted, at: Sequence[int]) -> None:
    for i in at:
        m = out.messages[i]
        if m.role != "assistant":
            continue
        n = sum(1 for b in m.blocks if isinstance(b, ThinkingBlock) and reasoning_item_id(b) is None)
        if n:
            out.conversions.append(Conversion(BLOCK_NOT_SENDABLE, i, m.id,
                                              f"{n} thinking block{'s' if n > 1 else ''} without a reasoning item id "
                                              "left out (OpenAI Responses takes reasoning only as the item it "
                                              "returned, with its rs_ id)"))


def _summaries_added(out: Converted, at: Sequence[int]) -> None:
    for i in at:
        m = out.messages[i]
        n = sum(1 for b in m.blocks if isinstance(b, ThinkingBlock) and reasoning_item_id(b) is not None
                and summary_added(b)) if m.role == "assistant" else 0
        if n:
            out.conversions.append(Conversion(REASONING_SUMMARY_ADDED, i, m.id,
                                              f"{n} reasoning item{'s' if n > 1 else ''} given without 'summary' "
                                              "sent with \"summary\": [] (a request reasoning item needs the key: "
                                              "openai/types/responses/response_reasoning_item_param.py)"))


def _lead_user_turn(out: Converted) -> int:
    """Insert the lead user turn before a first assistant message; its position, or -1 when
    none was needed."""
    msgs = out.messages
    k = next((i for i, m in enumerate(msgs) if m.role != "system"), None)
    if k is None or msgs[k].role != "assistant" or opens_with_compaction(msgs[k]):
        return -1  # a compaction block must stay the first block of the conversation
    first = msgs[k]
    msgs.insert(k, Message(id=f"{first.id}-lead", role="user", blocks=[TextBlock(text=LEAD_USER_TEXT)]))
    out.conversions.append(Conversion(FIRST_MESSAGE_ROLE, k, first.id,
                                      f"a user message {LEAD_USER_TEXT!r} rendered before the first "
                                      "(assistant) message"))
    return k
