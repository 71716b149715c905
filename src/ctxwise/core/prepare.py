"""The plan of one model call: :func:`plan_prepare` (compact, persist, render, check)."""

from __future__ import annotations

import math
import operator

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Callable, Sequence

from ..changes import Change, InsertSummary, Replace
from ..compaction import Budgeting, CompactionEvent
from ..compaction.bound import drop_invalidated_reasoning
from ..compaction.context import sent_view
from ..compaction.cost import time_of
from ..compaction.loop_close import close_loop, close_note, close_policy
from ..compaction.pipeline import PipelineResult, irreducible_size
from ..errors import ContextBudgetExceeded, FormatError, PayloadInvalid, Violation
from ..memory.session import Facts
from ..messages import Message, fold_on
from ..providers import check as check_payload
from ..providers import check_wire, get_profile
from ..providers.convert import Conversion, Converted, convert
from ..providers.render import render_converted
from ..providers.beta import BetaRequirement, beta_requirements
from ..providers.binding import frozen_end
from ..providers.rules import opens_with_compaction
from ..policy import Policy
from ..tokens import Counter
from ..units import is_user_input, turns
from .plan import ApplyWrite, Plan
from .view import Deps, SessionView, changed_state, with_sizes


@dataclass
class Prepared:
    """What one ``prepare()`` produced.

    ``messages`` is the canonical context sent (pinned blocks included); ``payload`` the
    provider's JSON, rendered by :func:`ctxwise.providers.render` and checked by
    :func:`ctxwise.providers.check_wire` (a list of chat messages for OpenAI-style providers,
    ``{"system"?, "messages"}`` for Anthropic, a list of input items for ``openai_responses``);
    ``size`` / ``size_before`` the context size after / before compaction in the policy unit
    (tool-schema overhead included, and what the render-time conversions add or take away:
    what is sent is what is counted, :func:`conversion_size`); ``chars`` the size by the ``chars`` rule; ``events`` the
    compaction events fired by this call (a ``rendered`` event, when the payload needed
    render-time conversions, goes to ``on_event`` and the log only); ``latency_ms`` the call's time in milliseconds; ``conversions``
    those conversions (:class:`ctxwise.providers.convert.Conversion`: a mid-conversation
    system message folded, a tool call id renamed, an image sent as a note, a lead user turn);
    ``call_ids`` each renamed tool call id as sent -> the caller's id; ``beta`` what the
    payload needs from Anthropic's beta Messages API
    (:class:`ctxwise.providers.beta.BetaRequirement`: ``mcp_tool_use`` / ``mcp_tool_result``
    blocks need ``client.beta.messages`` with an ``mcp-client-*`` beta header, a ``compaction``
    block a ``compact-*`` one; ctxwise sets neither), empty when the standard API takes it.
    """

    messages: list[Message]
    payload: Any
    size: int
    size_before: int
    chars: int
    unit: str
    events: list[CompactionEvent] = field(default_factory=list)
    latency_ms: float = 0.0
    conversions: list[Conversion] = field(default_factory=list)
    call_ids: dict[str, str] = field(default_factory=dict)
    beta: list[BetaRequirement] = field(default_factory=list)


def rendered_event(converted: Converted, provider: str, unit: str, size: int) -> CompactionEvent:
    """The ``rendered`` event of a call whose payload needed render-time conversions
    (:mod:`ctxwise.providers.convert`): the rules converted for (``detail["rules"]``: slug ->
    count), the messages affected, and the tool call ids renamed (``detail["call_ids"]``: sent
    -> original). Emitted with the call (``on_event``, the log), neither stored nor in
    ``Prepared.events``: it edits nothing, the transcript keeps the original."""
    rules: dict[str, int] = {}
    for c in converted.conversions:
        rules[c.rule] = rules.get(c.rule, 0) + 1
    return CompactionEvent(stage="rendered", trigger=f"{provider} takes these messages only as converted",
                           unit=unit, size_before=size, size_after=size,
                           affected_ids=list(dict.fromkeys(c.message_id for c in converted.conversions)),
                           detail={"rules": rules, "call_ids": dict(converted.call_ids),
                                   "conversions": [c.detail for c in converted.conversions]})


def now_arg(now: object) -> float | None:
    """``prepare(now=...)`` as epoch seconds: None, a finite number of epoch seconds, 0 or
    more, or a ``datetime`` (read as UTC when it names no zone) from 1970 on. Raises
    :class:`~ctxwise.errors.FormatError` for anything else (a string, a bool, NaN, an
    infinity, a time before the epoch)."""
    if now is None:
        return None
    t = time_of(now) if isinstance(now, (int, float, datetime)) and not isinstance(now, bool) else None
    if t is None:
        raise FormatError("prepare(now=...)", f"takes epoch seconds or a datetime, not {type(now).__name__}",
                          hint="pass the time of the request, e.g. time.time(), or leave it out")
    if not math.isfinite(t) or t < 0:
        raise FormatError("prepare(now=...)", f"takes a finite time from 1970 on (epoch seconds >= 0), not {t!r}",
                          hint="pass the time of the request, e.g. time.time(), or leave it out")
    return t


def check_thinking_arg(thinking: object) -> None:
    """Raise :class:`~ctxwise.errors.FormatError` unless ``thinking`` (``prepare(thinking=...)``)
    is True, False or None."""
    if thinking is not None and not isinstance(thinking, bool):
        raise FormatError("prepare(thinking=...)", f"takes True, False or None, not {type(thinking).__name__}",
                          hint="say whether the request runs in the provider's thinking mode, or leave it out")


def thinks(view: SessionView) -> bool | None:
    """DeepSeek-style providers (reasoning passed back in tool spans): True once any message
    of the session carried reasoning, since thinking mode stays on from then. Else None: the
    rules infer it from the messages. What the app said with ``prepare(thinking=...)`` wins."""
    if get_profile(view.provider).reasoning_passback != "tool_spans":
        return None
    if view.thinking_declared is not None:
        return view.thinking_declared
    return True if view.thinking_seen else None


@dataclass
class _Run:
    """The state of one prepare while it compacts (local to :func:`plan_prepare`)."""

    view: SessionView
    deps: Deps
    facts: Facts
    block: Message | None
    failed: frozenset[str]
    lossy: bool
    frozen: frozenset[str] = frozenset()
    idle: float | None = None
    reserve: int = 0
    """Room held back for a message added after the stages (the note closing a loop)."""
    conv: int = 0
    """What the render-time conversions add to the size (:func:`conversion_size`; negative
    when they make the request smaller, e.g. an image sent as a short note)."""
    converted: tuple[list[Message], Converted] | None = None
    """The last list converted and its conversion (reused when the list sent is the same)."""

    def extra(self) -> int:
        """Fixed overhead, the pinned blocks, the render-time conversions (:attr:`conv`) and
        :attr:`reserve`, in the policy unit."""
        d = self.deps
        return (d.overhead + self.reserve + self.conv + sum(d.sz(m) for m in d.head)
                + (d.sz(self.block) if self.block is not None else 0))

    def sent(self, context: Sequence[Message]) -> list[Message]:
        """The list sent for ``context``: the pinned blocks in their places."""
        return with_pinned(list(context), list(self.deps.head), self.block, self.view.policy.facts_mode)

    def convert(self, sent: list[Message]) -> Converted:
        """:func:`~ctxwise.providers.convert.convert` of ``sent`` for the policy's profile, the
        last answer reused when ``sent`` holds the same message objects."""
        if self.converted is not None:
            was, done = self.converted
            if len(was) == len(sent) and all(map(operator.is_, was, sent)):
                return done
        done = convert(sent, self.view.policy.profile)
        self.converted = (sent, done)
        return done

    def conversion_size(self, context: Sequence[Message]) -> int:
        """:func:`conversion_size` of the list sent for ``context``."""
        sent = self.sent(context)
        return conversion_size(sent, self.convert(sent), self.deps.sz, self.deps.size_key)

    def measure(self, messages: Sequence[Message]) -> int:
        """The size of ``messages`` in the policy unit (a running total resumed from the last
        list this one extends)."""
        sizer = self.deps.sizer
        return fold_on(messages, "prepare/size", sizer, 0, lambda n, _, m: n + sizer.size_of(m))

    def compact(self, ctx: list[Message], size: int, policy: Policy | None = None) -> PipelineResult:
        """Run the pipeline over ``ctx``. While bound reasoning freezes the open loop, the
        in-flight results are not cut (a loop that no longer fits is closed instead, see
        :func:`_close_loop`, which keeps the model's fresh results whole where it can) and no
        summary is asked for (every summary would stand before the frozen reply and be held
        back: a summarizer call paid for nothing)."""
        d, v = self.deps, self.view
        policy = policy or v.policy
        if self.frozen and (policy.truncate_in_flight or policy.summarize):
            policy = _unfrozen(policy)
        b = Budgeting(policy, d.counter, self.extra(), parts={  # named in a ContextBudgetExceeded
            "user memory": sum(d.sz(m) for m in d.head), "pinned facts": d.sz(self.block) if self.block else 0},
            idle=self.idle)
        result = d.pipeline.run(ctx, b, d.summarizer, size=size, facts=self.facts.pinned_texts(v.policy),
                                skip_summaries=self.failed, thinking_mode=thinks(v), frozen=self.frozen)
        self.failed = self.failed | {e.detail["key"] for e in result.events
                                     if e.stage == "summarizer_failed" and "key" in e.detail}
        return result


_UNFROZEN: dict[int, tuple[Policy, Policy]] = {}
"""``id(policy) -> (policy, derived)`` for :func:`_unfrozen` (the policy held, so its id is not reused)."""


def _unfrozen(policy: Policy) -> Policy:
    """``policy`` without the in-flight cut and the summary (what a call runs with while bound
    reasoning freezes the open loop), the same object for the same ``policy`` object: the
    per-message memos that compare policies (cleared copies) then find it by identity, call
    after call, instead of comparing every field. Bounded (the oldest 64 entries go)."""
    hit = _UNFROZEN.get(id(policy))
    if hit is not None and hit[0] is policy:
        return hit[1]
    derived = policy.with_(truncate_in_flight=False, summarize=False)
    if len(_UNFROZEN) >= 64:
        _UNFROZEN.pop(next(iter(_UNFROZEN)), None)
    _UNFROZEN[id(policy)] = (policy, derived)
    return derived


def conversion_size(sent: Sequence[Message], converted: Converted, size_of: Callable[[Message], int],
                    memo_key: str | None = None) -> int:
    """What the render-time conversions of ``sent`` (``converted``, from
    :func:`~ctxwise.providers.convert.convert`) add to its size, by ``size_of`` (the policy
    unit): the size of the messages the conversions made (a folded system message's user
    turn, the lead user turn, a message whose image became a note or whose call ids were
    renamed) less the size of those they replaced. 0 when nothing was converted; O(converted
    messages): the others are the same objects and are not counted. With ``memo_key`` (what
    ``size_of`` measures with), a converted message's size is kept with the message it
    converts, so a later call does not count the same conversion again."""
    if not converted.conversions:
        return 0
    before = {id(m) for m in sent}
    after = {id(m) for m in converted.messages}
    replaced = {m.id: m for m in sent if id(m) not in after}
    made = 0
    for m in converted.messages:
        if id(m) not in before:
            was = replaced.get(m.id)
            made += size_of(m) if was is None or memo_key is None else _converted_size(was, m, size_of, memo_key)
    return made - sum(size_of(m) for m in replaced.values())


def _converted_size(was: Message, now: Message, size_of: Callable[[Message], int], memo_key: str) -> int:
    """``size_of(now)``, kept in the memo of ``was`` (the stored message ``now`` converts): the
    same conversion of the same message (same blocks, ids and text lengths) is counted once per
    process, not on every call (DESIGN.md decision 7)."""
    sig = tuple((b.type, getattr(b, "id", None) or getattr(b, "tool_use_id", None), len(getattr(b, "text", "") or ""))
                for b in now.blocks)
    key = f"conv/{memo_key}/{hash((now.role, sig))}"
    memo = was.memo()
    size = memo.get(key)
    if size is None:
        size = memo[key] = size_of(now)
    return int(size)


def plan_prepare(view: SessionView, deps: Deps, thinking: bool | None = None, idle: float | None = None) -> Plan[Prepared]:
    """Compact the context if a watermark is crossed (one ``SessionStore.apply`` of what the
    stages returned when any fired; none otherwise), then render and check the payload. The
    result is the :class:`Prepared` call (``latency_ms`` 0). ``idle``: seconds the prompt
    cache has gone unused (:func:`ctxwise.compaction.cost.idle_seconds`; None: unknown): past
    the price model's lifetime an edit is free. Raises PayloadInvalid when the
    context is empty and ContextBudgetExceeded when pinned content alone does not fit; a
    payload that fails the final check is the plan's ``error`` (raised after the commit)."""
    if thinking is not None:
        view = replace(view, thinking_declared=thinking)
    if not view.messages:
        raise PayloadInvalid(view.provider, [Violation(0, "empty-payload",
                             "the session has no messages yet: append() the system prompt and user input first")])
    facts, block, evicted, evicted_changed = view.facts.block(view.policy, deps.counter, view.lossy)
    run = _Run(view, deps, facts, block, view.failed_summaries, view.lossy, idle=idle)
    run.frozen = frozen_prefix(view, deps, block)
    run.conv = run.conversion_size(view.messages)  # what is sent is what is counted
    size_before = view.size + run.extra()
    try:
        result = _first_compact(run, size_before)
    except ContextBudgetExceeded:
        if not run.frozen:
            raise
        result = _close_loop(run, size_before)
    events = list(result.events)
    for _ in range(3):
        # User input that left the context puts its facts into the facts block (it changes
        # only here, where a summary or trim already broke the cached prefix). The block's
        # room comes from the same budget: when it grew past it, compact once more.
        kept = {m.id for m in result.messages}
        run.facts, gained = run.facts.lose([m for m in view.messages if m.id not in kept], view.policy)
        if not gained:
            break
        run.lossy = True
        run.facts, run.block, more, more_changed = run.facts.block(view.policy, deps.counter, True)
        evicted, evicted_changed = evicted + more, evicted_changed or more_changed
        size = run.measure(result.messages) + run.extra()
        if run.block is None or size <= view.policy.level(view.policy.hard_limit):
            break
        again = run.compact(result.messages, size)
        result.messages, result.changes = again.messages, result.changes + again.changes
        events += again.events
    _recount_conversions(run, result, events)
    dropped = drop_invalidated_reasoning(
        result.messages, with_pinned(list(result.messages), list(deps.head), run.block, view.policy.facts_mode),
        Budgeting(view.policy, deps.counter, run.extra()), run.measure(result.messages) + run.extra(),
        view.policy.profile)
    if dropped.changes:
        result.messages, result.changes = dropped.messages, result.changes + dropped.changes
        events += dropped.events
    if evicted_changed:
        size = run.measure(result.messages) + run.extra()
        events.append(CompactionEvent(
            stage="facts_evicted", trigger=f"facts block over its share {view.policy.facts_share} of the budget",
            unit=view.policy.unit, size_before=size, size_after=size, affected_ids=[f.id for f in evicted],
            detail={"evicted": [f.text for f in evicted]}))
    new = replace(view, facts=run.facts, lossy=run.lossy, failed_summaries=run.failed)
    write = None
    if events:
        new, write = _persist(new, deps, run, result.messages, result.changes, events)
    return _finish(new, deps, run, size_before, events, write)


def _recount_conversions(run: _Run, result: PipelineResult, events: list[CompactionEvent]) -> None:
    """After the stages: the conversions of what they left are counted (:attr:`_Run.conv`), so the
    size the last event reports is the size sent; when they add more than those of the list the
    stages started from and that puts the context over the hard limit, the stages run once more."""
    if not result.changes:
        return
    conv = run.conversion_size(result.messages)
    grew, run.conv = conv > run.conv, conv
    if not grew:  # smaller (a summary took the message a lead user turn stood before): counted as is
        return
    p = run.view.policy
    size = run.measure(result.messages) + run.extra()
    if size > p.level(p.hard_limit):
        again = run.compact(result.messages, size)
        result.messages, result.changes = again.messages, result.changes + again.changes
        events += again.events


def turn_headroom(view: SessionView, deps: Deps) -> int:
    """Room (policy unit) a turn that starts now is expected to need, when reasoning bound to
    its prefix will freeze it: on a profile that refuses a changed prefix, in a session with
    reasoning, at a turn's first call (the latest message is the user's input). Once the
    turn's first reply carries bound reasoning, nothing before its latest reply may change
    until the turn ends (:func:`frozen_prefix`), so only the turn's own fresh results can be
    cut: the edits the turn will need are placed now, before it. The estimate is the largest
    completed turn still in the context (user input excluded); 0 otherwise."""
    profile = view.policy.profile
    msgs = list(view.messages)
    if not (profile.binds_reasoning and profile.prefix_mismatch == "error" and view.thinking_seen) \
            or not msgs or not is_user_input(msgs[-1]):
        return 0
    grown = [sum(deps.sz(m) for m in msgs[t.start + 1:t.end]) for t in turns(msgs)[:-1] if not t.preamble]
    return max(grown) if grown else 0


def _first_compact(run: _Run, size: int) -> PipelineResult:
    """The call's compaction; at a turn's first call under bound reasoning, with the hard
    limit lowered by the room the turn is expected to need (:func:`turn_headroom`) when the
    context must shrink anyway (it is over the hard limit): the cut goes deeper, no extra cut
    is made (DESIGN.md decision 4), and a context the cut left under the hard limit is not cut
    again (falling back to the policy's own limits when that
    cannot be met). Events of a lowered run say so (``detail["turn_headroom"]``)."""
    view, p = run.view, run.view.policy
    room = turn_headroom(view, run.deps)
    hard = p.level(p.hard_limit)
    if not room or size <= hard:
        return run.compact(list(view.messages), size)
    share = max(0.5, (hard - room) / p.effective_budget) / p.hard_limit
    lowered = p.with_(**{k: getattr(p, k) * share for k in ("clear_at", "clear_target", "summarize_at", "hard_limit")},
                      trim_target=None if p.trim_target is None else p.trim_target * share)
    try:
        result = run.compact(list(view.messages), size, lowered)
    except ContextBudgetExceeded:
        return run.compact(list(view.messages), size)
    for e in result.events:
        e.detail["turn_headroom"] = room
    return result


def _close_loop(run: _Run, size: int) -> PipelineResult:
    """The call's compaction when reasoning bound to its prefix froze the open tool loop and the
    loop no longer fits (:mod:`ctxwise.compaction.loop_close`): the stages run unfrozen with
    the watermarks lowered to :attr:`Policy.loop_keep_recent` of the budget (the policy's own
    when that cannot be met), then a ctxwise note closes the loop. The loop's reasoning the
    edits invalidated is dropped afterwards, with its event, like any completed turn's.
    Raises ContextBudgetExceeded when even the unfrozen stages cannot fit."""
    view, p = run.view, run.view.policy
    frozen, run.frozen = len(run.frozen), frozenset()
    b = Budgeting(p, run.deps.counter, run.extra())
    run.reserve = run.deps.sz(close_note(view.messages[-1]))
    try:
        lowered = close_policy(p, irreducible_size(list(view.messages), b) + run.reserve)
        try:
            result = run.compact(list(view.messages), size + run.reserve, lowered)
        except ContextBudgetExceeded:
            result = run.compact(list(view.messages), size + run.reserve)
    finally:
        run.reserve = 0
    after = run.measure(result.messages) + run.extra()
    ctx, change, event = close_loop(list(result.messages), b, after, frozen)
    result.messages, result.changes = ctx, [*result.changes, change]
    result.events = [*result.events, event]
    return result


def frozen_prefix(view: SessionView, deps: Deps, block: Message | None) -> frozenset[str]:
    """Ids of the context messages no edit may touch on this call: everything up to the
    current turn's latest assistant message whose reasoning is bound to its prefix, on a
    profile that refuses a changed prefix (:func:`ctxwise.providers.binding.frozen_end`).
    Empty when nothing is bound."""
    profile = view.policy.profile
    if not profile.binds_reasoning or profile.prefix_mismatch != "error":
        return frozenset()
    sent = with_pinned(list(view.messages), list(deps.head), block, view.policy.facts_mode)
    end = frozen_end(sent, profile)
    return frozenset() if end is None else frozenset(m.id for m in sent[:end + 1])


def _persist(view: SessionView, deps: Deps, run: _Run, context: list[Message], changes: list[Change],
             events: list[CompactionEvent]) -> tuple[SessionView, ApplyWrite]:
    """The view after the stages' changes and the write that stores them, with the new sizes
    of the rows it wrote and the engine state when it changed."""
    sent = run.measure(context) + run.extra()
    if sent != events[-1].size_after:
        # the facts block appeared or grew after the stages measured: the size this call
        # sends, for whoever rebuilds the call from the events (the inspector)
        events[-1].detail["size_sent"] = sent
    records = tuple(e.model_dump(mode="json") for e in events)
    written = {c.message_id for c in changes if isinstance(c, Replace)}
    written |= {c.summary.id for c in changes if isinstance(c, InsertSummary)}
    fresh = {m.id: deps.sz(m) for m in context if m.id in written or m.id not in view.sizes}
    state, dumped = changed_state(view, deps.size_key)
    sizes = {m.id: fresh[m.id] if m.id in fresh else view.sizes[m.id] for m in context}
    new = replace(view, messages=tuple(context), ids=view.ids | {m.id for m in context}, sizes=with_sizes(sizes),
                  size=run.measure(context), saved_state=dumped)
    return new, ApplyWrite(tuple(changes), records, {k: v for k, v in fresh.items() if k in written}, state)


def _finish(view: SessionView, deps: Deps, run: _Run, size_before: int, events: list[CompactionEvent],
            write: ApplyWrite | None) -> Plan[Prepared]:
    """Render and check what is sent: the rendered payload against the request types and the
    provider rules (providers.wire), after the rules on the canonical list."""
    final = with_pinned(list(view.messages), list(deps.head), run.block, view.policy.facts_mode)
    thinking = thinks(view)
    if thinking is False:
        # prepare(thinking=False) on a provider that passes reasoning back in tool spans: the
        # request runs without thinking, which needs none of it; sending it would make the
        # request look like thinking mode, whose rules the new replies cannot meet.
        final = [sent_view(m) for m in final]
    converted = run.convert(final)
    sources: list[tuple[Message, ...]] = []
    payload = render_converted(converted.messages, view.policy.profile, sources)
    violations = (check_payload(final, view.policy.profile, thinking=thinking)
                  or check_wire(payload, view.policy.profile if view.policy.native_system else view.provider,
                                sources))
    run.conv = conversion_size(final, converted, deps.sz, deps.size_key)
    size = view.size + run.extra()
    emit = [*events, rendered_event(converted, view.provider, view.policy.unit, size)] if converted.conversions else events
    prepared = Prepared(messages=final, payload=payload, size=size, size_before=size_before,
                        chars=_chars(final, deps.chars), unit=view.policy.unit, events=events,
                        conversions=converted.conversions, call_ids=converted.call_ids,
                        beta=beta_requirements(final, view.policy.profile))
    error = PayloadInvalid(view.provider, violations, hint=PREPARE_HINT) if violations else None
    return Plan(view, write, prepared, emit=tuple(emit), error=error)


PREPARE_HINT = ("the session still holds what the payload was rendered from (index: the message's place in the "
                "payload, system first); remove the message named with Session.pop() (it takes the newest, so the "
                "later ones go too: append them again after) and prepare() again; the rule slugs are explained in "
                "ctxwise.providers.rules")
"""The hint of a PayloadInvalid from ``prepare()``: nothing was sent, but the stored messages
that caused it are still there (unlike an append's refusal, which stores nothing)."""


def _chars(messages: Sequence[Message], chars: Counter) -> int:
    """The size of ``messages`` in characters (a running total resumed from the last list this
    one extends)."""
    return fold_on(messages, "prepare/chars", chars, 0, lambda n, _, m: n + chars.count_message(m))


def with_pinned(ctx: list[Message], head: list[Message], facts: Message | None, facts_mode: str) -> list[Message]:
    """The payload list (a new list): the user-memory block right after the system prompt (after
    a message opening with an Anthropic ``compaction`` block there, which must stay first);
    the facts block where additions never move it: right after the last summary, or right
    after the head when there is none (``when_compacted``), or before the current user input
    (``always``)."""
    out = list(ctx)
    if facts is not None:
        if facts_mode == "always":
            at = next((i for i in range(len(out) - 1, -1, -1) if is_user_input(out[i]) and out[i].kind is None), None)
        else:
            summaries = [i for i, m in enumerate(out) if m.kind == "summary"]
            at = summaries[-1] + 1 if summaries else (1 if out and out[0].role == "system" else 0)
            if at < len(out) and opens_with_compaction(out[at]):
                at += 1
        if at is not None:
            out.insert(at, facts)
    if head:
        at = 1 if out and out[0].role == "system" else 0
        if at < len(out) and opens_with_compaction(out[at]):
            at += 1  # Anthropic: the compaction block stays the first block of the conversation
        out[at:at] = head
    return out
