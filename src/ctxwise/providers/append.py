"""What an append may add, checked in one place: the batch against the tail it joins.

A batch is checked against a window of the context, not the whole of it: the tool cycle still
open at the tail (looked for among the last :data:`WINDOW` messages), or nothing; so an append
costs O(batch + last cycle). DeepSeek-style providers also check the current user-to-user span
for reasoning (:func:`missing_reasoning`).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Any, Callable, Mapping, Sequence, TypeVar

from pydantic import ValidationError

from ..errors import FormatError, PayloadInvalid, Violation
from ..messages import Message, ProviderBlock, ToolUseBlock
from ..units import last_user_index, tool_cycles
from . import rules as provider_rules
from .profiles import (BLOCK_NOT_SENDABLE, DUPLICATE_TOOL_CALL_ID, EMPTY_CONTENT, FOREIGN_PROVIDER_BLOCK, PROVIDER_RESULT_WITHOUT_CALL,
                       UNANSWERED_TOOL_CALL, WIRE_SCHEMA, ProviderProfile,
                       get_profile)

WINDOW = 64
"""How many messages at the tail are searched for the tool cycle a batch may continue."""


F = TypeVar("F", bound=Callable[..., Any])


def refuse_deep_input(method: F) -> F:
    """Wrap an append call so that input nested deeper than Python's parsers and serializers
    can walk (``"[" * 5000`` as tool arguments, a tool input 3,000 objects deep), or that a
    format reader could not build a message from (``"name": 5``, a tool input with a non-string
    key), raises :class:`~ctxwise.errors.FormatError` naming the field instead of a raw
    RecursionError / pydantic ValidationError. The wrapped call fails before anything is
    stored."""

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except RecursionError:
            raise FormatError("input", "nested too deeply to read or store (RecursionError); send the value "
                                       "flattened or as text") from None
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(str(x) for x in err.get("loc", ())) or e.title
            raise FormatError(f"input ({e.title} {where})", str(err.get("msg", e))) from None
    return wrapper  # type: ignore[return-value]


def as_message_list(messages: object, call: str) -> list[Any]:
    """``messages`` as a list: a single message (a dict or a Message) is a list of one; a
    string or anything not iterable raises :class:`~ctxwise.errors.FormatError` naming
    ``call`` (never its characters or a dict's keys read as messages)."""
    if isinstance(messages, (Mapping, Message)):
        return [messages]
    if isinstance(messages, (str, bytes)) or not hasattr(messages, "__iter__"):
        raise FormatError(f"{call}()", f"expected a list of messages, got {type(messages).__name__}",
                          hint=f"pass a list of messages: {call}([message, ...])")
    return list(messages)


def open_cycle_start(context: Sequence[Message]) -> int:
    """Where the tool cycle still open at the tail of ``context`` starts (its results may come
    in a later batch), looked for among the last :data:`WINDOW` messages; ``len(context)``
    when there is none."""
    base = len(context)
    if not context:
        return base
    cycles = tool_cycles(list(context[-WINDOW:]))
    offset = max(0, base - WINDOW)
    if cycles and cycles[-1].end + offset == base:
        return cycles[-1].start + offset
    return base


def pending_calls(context: Sequence[Message]) -> list[ToolUseBlock]:
    """The tool_use blocks of the open tool cycle at the tail that have no result yet."""
    i = len(context) - 1
    while i >= 0 and context[i].role == "tool":
        i -= 1
    if i < 0 or context[i].role != "assistant" or not context[i].tool_uses:
        return []
    answered: dict[str, int] = {}
    for m in context[i + 1:]:
        for r in m.tool_results:
            answered[r.tool_use_id] = answered.get(r.tool_use_id, 0) + 1
    out = []
    for u in context[i].tool_uses:
        if answered.get(u.id, 0) > 0:
            answered[u.id] -= 1
        else:
            out.append(u)
    return out


def coerce(items: Sequence[Message | Mapping[str, Any]], base: int, provider: str) -> list[Message]:
    """``items`` as Messages (dicts in the canonical shape validated). Raises PayloadInvalid
    (rule ``message-shape``) naming the item and its place ``base + k`` in the session."""
    from ..formats.sdk import refuse_foreign
    out: list[Message] = []
    for k, item in enumerate(items):
        if isinstance(item, Message):
            out.append(item)
            continue
        refuse_foreign(item, f"item {k} of this append")
        if not isinstance(item, Mapping):
            raise FormatError(f"item {k} of this append", f"expected a Message or a message dict, got "
                                                          f"{type(item).__name__}")
        try:
            out.append(Message.model_validate(item))
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(str(x) for x in err.get("loc", ()))
            hint = " (for OpenAI-shaped dicts use append_openai())" if "role" in item and "blocks" not in item else ""
            raise PayloadInvalid(provider, [Violation(base + k, "message-shape", f"{where}: {err.get('msg')}{hint}",
                                                      where=f"item {k} of this append")]) from None
    return out


@dataclasses.dataclass(frozen=True)
class Thinking:
    """DeepSeek thinking mode as an append sees it: ``seen`` (a message of the session carried
    reasoning; None: not looked at yet) and ``declared`` (what ``prepare(thinking=...)`` said)."""

    seen: bool | None
    declared: bool | None


def check_append(context: Sequence[Message], ids: frozenset[str], batch: list[Message],
                 stored: list[Message] | None, provider: str, thinking: Thinking) -> bool | None:
    """Check ``batch`` (the messages joining the context) against the tail of ``context``;
    ids are checked over everything ``stored`` (omitted replies included; default ``batch``)
    against ``ids``. Returns ``thinking.seen``, looked at when the check needed it. Raises
    PayloadInvalid listing every violation, indexed by place in the session."""
    base = len(context)
    problems = _duplicates(ids, batch if stored is None else stored, base) + _repeated_calls(context, batch)
    start = open_cycle_start(context)
    window = list(context[start:]) + batch
    profile = get_profile(provider)
    found = provider_rules.check_tool_pairing(window, profile) + provider_rules.check_empty_content(window, profile)
    cycles = tool_cycles(window)
    last = cycles[-1] if cycles else None
    for v in found:
        if v.rule == UNANSWERED_TOOL_CALL and last is not None and last.end == len(window) and v.index == last.start:
            continue  # the in-flight cycle: its results may still come
        if v.rule == EMPTY_CONTENT and v.index < base - start:
            continue  # an earlier final assistant message is no longer final: not the batch's fault
        text = re.sub(r"before message (\d+)", lambda g: f"before message {int(g.group(1)) + start}", v.message)
        problems.append(Violation(v.index + start, v.rule, text, v.provider_error))
    problems += unsendable_blocks(batch, base, profile, context)
    seen, missing = missing_reasoning(context, batch, provider, thinking)
    problems += missing
    if problems:
        # the index is the message's place in the session's context; name the appended one too
        named = [dataclasses.replace(v, where=f"appended id {batch[v.index - base].id!r}")
                 if 0 <= v.index - base < len(batch) and not v.where and v.rule != "duplicate-message-id" else v
                 for v in problems]
        raise PayloadInvalid(provider, sorted(named, key=lambda v: v.index))
    return seen


def unsendable_blocks(batch: list[Message], base: int, profile: ProviderProfile,
                      context: Sequence[Message] = ()) -> list[Violation]:
    """The blocks of ``batch`` that ``profile``'s wire can never send, whatever the session
    holds: another provider family's block (``foreign-provider-block``) and a block the wire
    has no form for (``block-not-sendable``, :func:`ctxwise.providers.rules.not_sendable`), and
    a provider-run tool's result with no call before it in ``context`` or the batch
    (``provider-result-without-call``),
    indexed by place in the session (``base + k``). Refused at append: stored, such a block
    would be refused by every later ``prepare()``. Sources: those of
    :func:`ctxwise.providers.rules.check_provider_blocks`."""
    keep = (BLOCK_NOT_SENDABLE, FOREIGN_PROVIDER_BLOCK, PROVIDER_RESULT_WITHOUT_CALL)
    found = provider_rules.check_provider_blocks(batch, profile)
    if context and any(v.rule == PROVIDER_RESULT_WITHOUT_CALL for v in found):  # its call may be stored already
        found = provider_rules.check_provider_blocks(batch, profile, calls=provider_rules.provider_calls(context, profile))
    out = [dataclasses.replace(v, index=v.index + base) for v in found if v.rule in keep]
    return out + malformed_provider_blocks(batch, base, profile)


def malformed_provider_blocks(batch: list[Message], base: int, profile: ProviderProfile) -> list[Violation]:
    """The :class:`~ctxwise.messages.ProviderBlock` of ``batch`` (of ``profile``'s family)
    whose verbatim ``raw`` breaks its request type (rule ``wire-schema``,
    :func:`ctxwise.providers.wire.provider_block_problem`), indexed by place in the session:
    stored, each would make every later ``prepare()`` raise PayloadInvalid."""
    from .wire import provider_block_problem

    fam = provider_rules.family(profile)
    out: list[Violation] = []
    for k, m in enumerate(batch):
        blocks = [*m.blocks, *(o for r in m.tool_results for o in r.output)]
        for j, b in enumerate(blocks):
            if isinstance(b, ProviderBlock) and b.provider == fam:
                why = provider_block_problem(fam, b.kind, b.raw)
                if why:
                    out.append(Violation(base + k, WIRE_SCHEMA, f"block {j}: not a valid {b.kind} block: {why}"))
    return out


def _repeated_calls(context: Sequence[Message], batch: list[Message]) -> list[Violation]:
    """A call of the batch with the id of a call stored at the tail still waiting for its
    result (rule ``duplicate-tool-call-id``): the same reply appended twice, most likely."""
    pending = {u.id for u in pending_calls(context)} if batch and context else set()
    if not pending:
        return []
    at = next(i for i in range(len(context) - 1, -1, -1) if context[i].role == "assistant")
    return [Violation(len(context) + k, DUPLICATE_TOOL_CALL_ID,
                      f"call {u.id!r} ({u.name}) is already stored, in message {at} ({context[at].id!r}), and still "
                      "waits for its result: the same reply appended twice? append the tool results instead")
            for k, m in enumerate(batch) if m.role == "assistant" for u in m.tool_uses if u.id in pending]


def _duplicates(ids: frozenset[str], batch: list[Message], base: int) -> list[Violation]:
    seen: set[str] = set()
    out: list[Violation] = []
    for k, m in enumerate(batch):
        if m.id in ids or m.id in seen:
            where = "earlier in this batch" if m.id in seen else "in the session"
            out.append(Violation(base + k, "duplicate-message-id", f"id {m.id!r} is already {where}"))
        seen.add(m.id)
    return out


def missing_reasoning(context: Sequence[Message], batch: list[Message], provider: str,
                      thinking: Thinking) -> tuple[bool | None, list[Violation]]:
    """DeepSeek thinking mode: a reply of a tool-using span without ``reasoning_content`` is
    refused at append, before it is stored (else every later ``prepare()`` raises
    ``reasoning-content-missing`` and the session is stuck). Thinking mode is on once any
    message of the session carried reasoning. Checks the current user-to-user span only
    (O(span + batch)); a batch that turns reasoning on inside a span whose stored replies have
    none is refused too. Returns ``(thinking.seen, looked at when needed; the violations)``.
    Source: api-docs.deepseek.com/guides/thinking_mode."""
    profile = get_profile(provider)
    if profile.reasoning_passback != "tool_spans" or not any(m.role == "assistant" for m in batch):
        return thinking.seen, []
    if thinking.declared is False:  # prepare(thinking=False): the app turned thinking off
        return thinking.seen, []
    seen = thinking.seen if thinking.seen is not None else any(m.thinking for m in context)
    if not (seen or thinking.declared or any(m.thinking for m in batch)):
        return seen, []
    from .reasoning import check_deepseek_reasoning

    base = len(context)
    u = last_user_index(list(context))
    start = 0 if u is None else u
    window = list(context[start:]) + batch
    found = check_deepseek_reasoning(window, profile, thinking=True)
    out = [Violation(v.index + start, v.rule, v.message, v.provider_error) for v in found if v.index + start >= base]
    earlier = [v for v in found if v.index + start < base]
    if earlier and not seen:
        out.append(_switched_on(batch, window, earlier[0], (base, start), provider))
    return seen, out


def _switched_on(batch: list[Message], window: list[Message], first: Violation, at: tuple[int, int],
                 provider: str) -> Violation:
    """Reasoning switched on inside a turn whose earlier replies ran without it: the provider
    refuses the whole turn from now on, and nothing can give those replies reasoning.
    (Switched on between turns, the earlier turns are folded into a summary at prepare():
    compaction.reasoning_gap.)"""
    base, start = at
    k = next(i for i, m in enumerate(batch) if m.thinking)
    return Violation(base + k, first.rule,
                     f"reasoning switched on inside a tool-using turn: message {first.index + start} "
                     f"({window[first.index].id!r}) of this turn was stored without reasoning_content, so "
                     f"{provider} thinking mode would refuse every later request of the turn; "
                     "append this reply without reasoning_content to finish the turn without thinking "
                     "(thinking can start with the next user input)",
                     get_profile(provider).error_text(first.rule, first.index + start))


def read_after(reader: Callable[[list[dict[str, Any]]], list[Message]], prefix: list[dict[str, Any]],
               new: list[dict[str, Any]], skip: int) -> list[Message]:
    """``new`` read after ``prefix`` (the open cycle, so new results find their calls), the
    first ``skip`` messages read dropped. A FormatError's place counts the prefix, so it says
    so: raises FormatError naming the item of this append."""
    try:
        return reader(prefix + new)[skip:]
    except FormatError as e:
        if not prefix:  # the reader's "message N" is the batch's item N
            raise FormatError(re.sub(r"^message (\d+)", r"item \1 of this append", e.place), e.rule,
                              hint=e.hint) from None
        place = re.sub(r"^message (\d+)", lambda m: (
            f"item {int(m.group(1)) - len(prefix)} of this append" if int(m.group(1)) >= len(prefix)
            else f"message {m.group(1)} of the session's last tool cycle, given before this append"), e.place)
        raise FormatError(f"{place} (read after the session's last tool cycle, {len(prefix)} message(s), so "
                          "results can answer its calls)", e.rule, hint=e.hint) from None


def read_openai(context: Sequence[Message], messages: Any) -> tuple[list[Message], list[bool], dict[int, list[dict[str, Any]]]]:
    """Messages in the OpenAI chat shape (dicts or the SDK's objects; one message is a list of
    one) read after the tool cycle open at the tail of ``context``: ``(messages, whether each
    carried its own "id", the normalization notes)``. Raises FormatError naming the item."""
    from ..formats import from_openai, to_openai
    from ..formats.sdk import openai_dicts
    from ..normalize import prepare_openai

    new, notes = prepare_openai(openai_dicts(messages), len(context))
    cycle = list(context[open_cycle_start(context):])
    prefix = to_openai(cycle, extras=False) if cycle else []
    return read_after(from_openai, prefix, new, len(prefix)), [("id" in raw) for raw in new], notes


def read_responses(context: Sequence[Message], items: Any) -> list[Message]:
    """OpenAI Responses items (a ``Response``, or a list of input / output items; see
    :func:`ctxwise.formats.sdk.responses_items`) read after the tool cycle open at the tail of
    ``context``; a ``Response``'s ``usage`` and ``prompt_cache_diagnostics`` go into the
    ``metadata["usage"]`` / ``metadata["cache_diagnostics"]`` of the last assistant message it
    gave. Raises FormatError naming the item, also when the batch's first items would join the
    open cycle's assistant message (an assistant's items after calls still waiting for results)."""
    from ..formats import from_responses, to_responses
    from ..formats.sdk import responses_items
    from ..usage import DIAGNOSTICS_KEY, USAGE_KEY

    new, usage, diagnostics = responses_items(items)
    verbatim_problems(new, "openai_responses")
    cycle = list(context[open_cycle_start(context):])
    prefix = to_responses(cycle, extras=False) if cycle else []
    alone = from_responses(prefix, strict=False) if prefix else []
    both = read_after(lambda xs: from_responses(xs), prefix, new, 0)
    if alone and len(both[len(alone) - 1].blocks) != len(alone[-1].blocks):
        raise FormatError("item 0 of this append", "assistant items after tool calls still waiting for their "
                          "results: they would join the earlier assistant message",
                          hint="append the function_call_output items first")
    read = both[len(alone):]
    if usage or diagnostics:
        k = next((j for j in range(len(read) - 1, -1, -1) if read[j].role == "assistant"), None)
        if k is None:
            raise FormatError("response", "a Response whose output holds no assistant item to keep its usage with")
        meta = {**read[k].metadata, **({USAGE_KEY: usage} if usage else {}),
                **({DIAGNOSTICS_KEY: diagnostics} if diagnostics else {})}
        read[k] = read[k].model_copy(update={"metadata": meta})
    return read


def read_anthropic(context: Sequence[Message], messages: Any) -> tuple[list[Message], list[bool] | None]:
    """Messages in the Anthropic Messages shape read after the tool cycle open at the tail of
    ``context``: ``(messages, whether each carried its own "id", or None when the reading
    split or merged messages)``. Raises FormatError naming the item."""
    from ..formats import from_anthropic
    from ..formats.sdk import anthropic_dicts
    from . import render_anthropic

    new = anthropic_dicts(messages)
    verbatim_problems(new, "anthropic")
    cycle = list(context[open_cycle_start(context):])
    prefix = render_anthropic.render(cycle)["messages"] if cycle else []
    skip = len(from_anthropic({"messages": prefix}, strict=False)) if prefix else 0
    read = read_after(lambda ms: from_anthropic({"messages": ms}), prefix, new, skip)
    return read, ([("id" in raw) for raw in new] if len(read) == len(new) else None)


def verbatim_problems(new: list[Any], provider: str) -> None:
    """Check the blocks (Anthropic: server-tool, MCP, container and compaction blocks of a
    message's content) or items (Responses: hosted-tool, compaction and client items) that
    ctxwise keeps verbatim against their request types
    (:func:`ctxwise.providers.wire.provider_block_problem`). Stored, a malformed one would make
    every later ``prepare()`` raise PayloadInvalid; raises FormatError naming the item of this
    append, the block and the first violation, before anything is stored."""
    from ..formats.anthropic import PROVIDER_KINDS
    from ..formats.responses import PROVIDER_ITEMS
    from .wire import provider_block_problem

    for i, raw in enumerate(new):
        if not isinstance(raw, dict):
            continue
        if provider == "openai_responses":
            t = raw.get("type")
            why = provider_block_problem(provider, t, raw) if t in PROVIDER_ITEMS else None
            if why:
                raise FormatError(f"item {i} of this append ({t} item)", f"not a valid {t} item: {why}")
            continue
        content = raw.get("content")
        for j, b in enumerate(content if isinstance(content, list) else ()):
            t = b.get("type") if isinstance(b, dict) else None
            why = provider_block_problem(provider, t, b) if t in PROVIDER_KINDS else None
            if why:
                raise FormatError(f"item {i} of this append, block {j} ({t})", f"not a valid {t} block: {why}")
