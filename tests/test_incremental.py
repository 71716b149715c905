"""The per-message memos of the call path equal a from-scratch computation.

``prepare()`` keeps per-message results (rule findings, the wire check's verdict and
read-back of each rendered entry, the bound-reasoning digest chain, cleared copies) in
``Message.memo()`` so a call re-checks only what is new. Here every result computed on
messages whose memos are warm (the same objects, call after call, as a session's prefix grows,
with edits and faults mixed in) is compared with the same function on fresh copies (empty
memos): rules, the rendered payload and its wire check, the read-back, the digest chain, and
a compaction. And a recorded long session, driven through ``prepare()``, sends at every call
what a from-scratch render and check of its context give.
"""

from __future__ import annotations

from pathlib import Path
from unittest import mock
import importlib

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from test_compaction_properties import budgeting, sessions

from ctxwise import ContextManager, Policy
from ctxwise.compaction import compact
from ctxwise.compaction.clearing import growth_so_far
from ctxwise.compaction.context import head_end
from ctxwise.errors import ContextBudgetExceeded, PayloadInvalid
from ctxwise.formats import from_anthropic, load
from ctxwise.prices import TIMESTAMP_KEY, idle_seconds, message_time
from ctxwise.messages import (ImageBlock, Marker, Message, RefusalBlock, TextBlock, ThinkingBlock, ToolResultBlock,
                              fold_on)
from ctxwise.providers import check, check_wire, get_profile
from ctxwise.providers.binding import bound_digests, frozen_end, invalidated
from ctxwise.tokens import get_counter
from ctxwise.providers.convert import call_id_problem, convert
from ctxwise.providers.render import render_converted
from ctxwise.replay import metrics
from ctxwise.summarizers import DigestSummarizer

convert_module = importlib.import_module("ctxwise.providers.convert")

LONG = Path(__file__).resolve().parents[2] / "shared" / "data" / "long"


def fresh(msgs: list[Message]) -> list[Message]:
    """Deep copies with empty memos: what a from-scratch computation sees."""
    return [m.model_copy() for m in msgs]


def seen(violations: list) -> list[tuple[int, str, str]]:
    return [(v.index, v.rule, v.message) for v in violations]


def wire_of(msgs: list[Message], provider: str, sourced: bool) -> tuple[object, list[tuple[int, str, str]]]:
    """The rendered payload of ``msgs`` and its wire check, with the per-entry memos
    (``sourced``) or without them."""
    profile = get_profile(provider)
    sources: list[tuple[Message, ...]] = []
    payload = render_converted(convert(msgs, profile).messages, profile, sources if sourced else None)
    return payload, seen(check_wire(payload, provider, sources if sourced else None))


def _edit(m: Message, how: str) -> Message:
    """An edited copy of ``m`` (a new object), as a clearing, summary or caller's amend makes."""
    if how == "blank" and m.role in ("user", "assistant"):
        return m.model_copy(update={"blocks": [TextBlock(text=" ")]})
    if how == "empty-result" and m.role == "tool":
        return m.model_copy(update={"blocks": [b.model_copy(update={"output": [TextBlock(text="")]})
                                               if isinstance(b, ToolResultBlock) else b for b in m.blocks]})
    if how == "cache-mark" and m.blocks and isinstance(m.blocks[-1], TextBlock):
        last = m.blocks[-1].model_copy(update={"extra": {"cache_control": {"type": "ephemeral"}}})
        return m.model_copy(update={"blocks": [*m.blocks[:-1], last]})
    return m.model_copy(update={"blocks": [*m.blocks, TextBlock(text="edited")]}) if m.role == "user" else m


@st.composite
def histories(draw):
    """A generated session and edits to apply between calls: ``(call index, message index,
    kind)``; ``drop`` removes the message (an unanswered call, an orphan result)."""
    msgs, provider, thinking_on = draw(sessions())
    n = len(msgs)
    edits = draw(st.lists(st.tuples(st.integers(1, max(1, n)), st.integers(0, n - 1),
                                    st.sampled_from(["blank", "empty-result", "cache-mark", "text", "drop"])),
                          max_size=4))
    return msgs, provider, thinking_on, sorted(edits)


@settings(max_examples=200)  # each example checks every prefix of its session
@given(histories())
def test_memoized_checks_equal_from_scratch(history):
    msgs, provider, thinking_on, edits = history
    msgs = list(msgs)
    for k in range(1, len(msgs) + 1):
        for at, i, how in edits:
            if at == k and i < len(msgs):
                if how == "drop":
                    del msgs[i]
                else:
                    msgs[i] = _edit(msgs[i], how)
        prefix = msgs[:k]
        if not prefix:
            continue
        scratch = fresh(prefix)
        assert seen(check(prefix, provider)) == seen(check(scratch, provider))
        assert bound_digests(prefix) == bound_digests(scratch)
        payload, found = wire_of(prefix, provider, sourced=True)
        payload0, found0 = wire_of(scratch, provider, sourced=False)
        assert payload == payload0
        assert found == found0
        if provider == "anthropic":
            sources: list[tuple[Message, ...]] = []
            profile = get_profile(provider)
            again = render_converted(convert(prefix, profile).messages, profile, sources)
            back = from_anthropic(again, strict=False, memo=True, sources=sources)
            assert [m.model_dump() for m in back] == [m.model_dump() for m in from_anthropic(payload0, strict=False)]


@settings(max_examples=100)
@given(histories(), st.sampled_from(["anthropic", "openai", "deepseek", "openai_responses", "gemini"]))
def test_repeated_checks_of_one_list_equal_from_scratch(history, other):
    """A call checks its list more than once (the pipeline with itself as the reference and
    no binding rule, then as the payload): the memoized list rules answer each run as a
    from-scratch check with the same arguments, and a check under another provider meets no
    stale answer."""
    msgs, provider, thinking_on, _ = history
    prefix = list(msgs)
    scratch = fresh(prefix)
    runs = [(provider, {"reference": prefix, "binding": False, "thinking": thinking_on}), (provider, {}),
            (other, {}), (provider, {"binding": False})]
    for name, kw in runs:
        ref = kw.get("reference")
        kw0 = {**kw, "reference": scratch} if ref is not None else kw
        assert seen(check(prefix, name, **kw)) == seen(check(fresh(prefix), name, **kw0)), (name, kw)
    assert seen(check(prefix, provider)) == seen(check(scratch, provider))


@settings(max_examples=200)
@given(histories(), st.sampled_from([300, 1_000, 3_000]))
def test_memoized_compaction_equals_from_scratch(history, budget):
    msgs, provider, thinking_on, _ = history
    b = budgeting(budget, "chars", "default", provider)
    for k in range(2, len(msgs) + 1):
        outcome = []
        for ctx in (msgs[:k], fresh(msgs[:k])):
            try:
                r = compact(ctx, b, DigestSummarizer())
            except (ContextBudgetExceeded, PayloadInvalid) as e:
                outcome.append(type(e).__name__)
                continue
            outcome.append(([m.model_dump() for m in r.messages], r.size_before, r.size_after,
                            [(e.stage, e.affected_ids, e.size_after) for e in r.events]))
        assert outcome[0] == outcome[1]


def _drive(path: Path, provider: str, budget: int) -> tuple[int, int]:
    """Drive a recording as bench/long.py does; at every call, the payload sent equals a
    from-scratch render of the context sent, and neither check finds anything. Returns
    ``(calls, calls that edited the context)``."""
    conv = load(str(path))
    conv = conv[0] if isinstance(conv, list) else conv
    policy = Policy.preset("default", budget=budget, unit="tokens", provider=provider)
    calls = edited = 0
    with ContextManager("memory://", policy) as cm:
        s = cm.session("long", "incremental")
        for new, _, m in metrics.model_calls(conv.messages):
            if new:
                s.append(new)
            p = s.prepare()
            payload0, found0 = wire_of(fresh(list(p.messages)), provider, sourced=False)
            assert p.payload == payload0
            assert found0 == []
            assert check(fresh(list(p.messages)), provider) == []
            calls += 1
            edited += bool(p.events)
            s.append([m])
    return calls, edited


def test_recorded_long_sessions_send_what_a_from_scratch_render_gives():
    cc = LONG / "claude-code_spotter" / "cc_8463c716-a2ea-4c14-9efa-87158ebd9f20.json"
    msa = LONG / "mini-swe-agent_gemini-3-pro" / "msa_django__django-11087.json"
    calls, edited = _drive(cc, "anthropic", 32_000)
    assert calls > 100 and edited > 5
    calls, edited = _drive(msa, "openai", 32_000)
    assert calls > 10 and edited >= 1


def test_a_frozen_loop_runs_with_one_derived_policy_object():
    """While bound reasoning freezes the open loop, each call runs with the policy minus the
    in-flight cut and the summary: the same object for the same policy, so the memos that
    compare policies (cleared copies) find it by identity."""
    from ctxwise.core.prepare import _unfrozen

    p = Policy.preset("default", budget=32_000, provider="anthropic")
    once = _unfrozen(p)
    assert once is _unfrozen(p)
    assert once == p.with_(truncate_in_flight=False, summarize=False)
    assert not once.truncate_in_flight and not once.summarize
    other = p.with_(budget=64_000)
    assert _unfrozen(other) is not once and _unfrozen(other).budget == 64_000


@settings(max_examples=200)
@given(histories())
def test_in_flight_start_equals_the_forward_scan(history):
    """``in_flight_start`` reads the list's tail only; on every prefix of a session (with
    dropped messages: orphan results, unanswered calls) it names the start of the last tool
    cycle when that cycle is the tail (loop-closing notes aside), as a scan of every cycle
    does, else the list's length."""
    from ctxwise.compaction.context import in_flight_start
    from ctxwise.units import tool_cycles

    msgs, _, _, edits = history
    msgs = list(msgs)
    for _, i, how in edits:
        if how == "drop" and i < len(msgs):
            del msgs[i]
    for k in range(len(msgs) + 1):
        prefix = msgs[:k]
        end = len(prefix)
        while end and prefix[end - 1].kind == "loop_close":
            end -= 1
        cycles = tool_cycles(prefix[:end])
        want = cycles[-1].start if cycles and cycles[-1].end == end else len(prefix)
        assert in_flight_start(prefix) == want


STEPS = st.lists(st.tuples(st.sampled_from(["grow", "truncate", "swap", "copy", "edit", "drop", "again"]),
                           st.integers(0, 10_000)), min_size=1, max_size=12)


def _lists(pool: list[Message], steps: list[tuple[str, int]]):
    """The lists a session checks one after another: each step grows, truncates, re-orders,
    drops a message of, replaces a message by an equal copy (a new object) or by an edited one
    (same id, other content) or repeats the last list; yields ``(step, list)``."""
    cur = pool[:1]
    for how, k in steps:
        if how == "grow":
            cur = cur + pool[len(cur):len(cur) + 1 + k % 3]
        elif how == "truncate" and len(cur) > 1:
            cur = cur[:1 + k % (len(cur) - 1)]
        elif how == "swap" and len(cur) > 2:
            i = 1 + k % (len(cur) - 2)
            cur = [*cur[:i], cur[i + 1], cur[i], *cur[i + 2:]]
        elif how == "copy":
            i = k % len(cur)
            cur = [*cur[:i], cur[i].model_copy(), *cur[i + 1:]]
        elif how == "edit":
            i = k % len(cur)
            cur = [*cur[:i], _edit(_edit(cur[i], "blank"), "empty-result"), *cur[i + 1:]]
        elif how == "drop" and len(cur) > 1:
            i = k % len(cur)
            cur = cur[:i] + cur[i + 1:]
        yield how, cur


@settings(max_examples=200)
@given(histories(), STEPS, st.sampled_from(["anthropic", "openai", "deepseek", "openai_responses", "gemini"]))
def test_resumed_list_rules_equal_from_scratch(history, steps, other):
    """The list rules resume from the fold of an earlier list that the checked list extends
    (same objects): each check of a list grown, truncated, re-ordered, with a message dropped,
    edited or replaced by an equal copy (a new object), checked again, or under another provider,
    finds what a from-scratch check of fresh copies finds."""
    msgs, provider, _, _ = history
    for how, cur in _lists(list(msgs), steps):
        for name in (provider, other) if how == "again" else (provider,):
            assert seen(check(cur, name)) == seen(check(fresh(cur), name)), (how, name, len(cur))


@settings(max_examples=200)
@given(histories(), STEPS)
def test_resumed_folds_equal_from_scratch(history, steps):
    """:func:`ctxwise.messages.fold_on` and what runs on it (the bound-reasoning check, the
    frozen prefix, the call-id renames of a conversion, a call's sizes) answer each list of a changing sequence as a from-scratch
    computation: the replies carry the bound prefix of the session as generated, so a
    re-ordered or dropped message invalidates the reasoning after it."""
    msgs, provider, _, _ = history
    digests = bound_digests(list(msgs))
    pool = [m.model_copy(update={"metadata": Marker.with_(m, bound_prefix=digests[i])}) if m.role == "assistant" else m
            for i, m in enumerate(msgs)]
    profile = get_profile("anthropic")
    counter = get_counter("chars")
    for how, cur in _lists(pool, steps):
        scratch = fresh(cur)
        assert invalidated(cur) == invalidated(scratch), how
        assert frozen_end(cur, profile) == frozen_end(scratch, profile), how
        assert seen(check(cur, profile)) == seen(check(scratch, profile)), how
        for name in ("anthropic", "openai", "openai_responses", "gemini"):
            done, done0 = convert(cur, name), convert(scratch, name)
            assert [m.model_dump() for m in done.messages] == [m.model_dump() for m in done0.messages], (how, name)
            assert (done.conversions, done.call_ids) == (done0.conversions, done0.call_ids), (how, name)
            ids = [b.id for m in cur if m.role == "assistant" for b in m.tool_uses]
            refused = len(set(ids)) < len(ids) or any(call_id_problem(i, get_profile(name)) for i in ids)
            assert bool(done.call_ids) == refused, (how, name)  # renames exactly when an id is refused or repeated
        total = fold_on(cur, "test/sum", counter, 0, lambda n, i, m: n + (i + 1) * counter.count_message(m))
        assert total == sum((i + 1) * counter.count_message(m) for i, m in enumerate(scratch)), how


def _growth_scan(messages: list[Message], b, hard: int) -> tuple[int, int]:
    """growth_so_far as a forward scan of the whole list (the definition the fold resumes)."""
    start = head_end(messages)
    first = next((i for i in range(start, len(messages)) if messages[i].role == "user"), len(messages))
    steps: list[int] = []
    lead = 0
    for m in messages[first + 1:]:
        if m.role == "assistant":
            steps.append(lead + b.size_of(m))
            lead = 0
        elif steps:
            steps[-1] += b.size_of(m)
        else:
            lead += b.size_of(m)
    if not steps:
        return lead, 1
    kept = [x for x in steps if x <= hard // 4]
    return sum(kept), max(1, len(kept))


@settings(max_examples=200)
@given(histories(), STEPS, st.sampled_from([40, 400, 4_000, 40_000]))
def test_resumed_growth_equals_the_forward_scan(history, steps, hard):
    """growth_so_far (a fold resumed from the previous list) answers each list of a changing
    sequence (grown, truncated, re-ordered, dropped, edited, copied) as the forward scan of
    fresh copies, for hard limits that leave steps out and keep them all."""
    msgs, provider, _, _ = history
    b = budgeting(10_000, "chars", "default", provider)
    for how, cur in _lists(list(msgs), steps):
        assert growth_so_far(cur, b, hard) == _growth_scan(fresh(cur), b, hard), (how, hard)


_TOUCHES = ["image", "image-detail", "citation", "result-citation", "result-image", "refusal", "unsigned",
            "redacted", "rs-id", "gemini-signature", "developer"]


def _touch(m: Message, how: str) -> Message:
    """A copy of ``m`` that some per-message conversion changes or reports for some target."""
    cite = [{"type": "url_citation", "url": "https://example.com"}, {"type": "char_location", "cited_text": "x"}]
    if m.role == "system" and how == "developer":
        return m.model_copy(update={"metadata": {**m.metadata, "_openai": {"role": "developer"}}})
    if m.role in ("user", "system") and how in ("image", "image-detail", "citation"):
        extra = (ImageBlock(url="https://example.com/a.png", detail="high" if how == "image-detail" else None)
                 if how != "citation" else TextBlock(text="cited", citations=cite))
        return m.model_copy(update={"blocks": [*m.blocks, extra]})
    if m.role == "tool" and how in ("result-citation", "result-image"):
        out = (TextBlock(text="cited", citations=cite) if how == "result-citation"
               else ImageBlock(url="https://example.com/b.png", detail="low"))
        return m.model_copy(update={"blocks": [b.model_copy(update={"output": [*b.output, out]})
                                               if isinstance(b, ToolResultBlock) else b for b in m.blocks]})
    if m.role == "assistant" and how in ("refusal", "unsigned", "redacted", "rs-id"):
        extra = {"refusal": RefusalBlock(text="no"), "unsigned": ThinkingBlock(thinking="t"),
                 "redacted": ThinkingBlock(thinking="enc", redacted=True),
                 "rs-id": ThinkingBlock(thinking="r", signature="s", extra={"id": "rs_1"})}[how]
        return m.model_copy(update={"blocks": [extra, *m.blocks]})
    if m.role == "assistant" and how == "gemini-signature":
        return m.model_copy(update={"metadata": {**m.metadata, "extra_content": {"google": {"thought_signature": "x"}}}})
    return m


@settings(max_examples=150)
@given(histories(), STEPS, st.lists(st.tuples(st.integers(0, 6), st.sampled_from(_TOUCHES)), min_size=1, max_size=6))
def test_conversions_of_the_touched_messages_equal_the_full_scan(history, steps, touches):
    """convert() runs its per-message conversions only on the messages its resumed fold finds
    touched (an image, a citation, a refusal, unsigned or redacted thinking, a Gemini message
    signature, a developer message): on every target, each list of a changing sequence converts
    as the full scan of every message of fresh copies does."""
    msgs, _, _, _ = history
    pool = list(msgs)
    for k, how in touches:  # the lists below start small: touch the first messages
        pool[k % len(pool)] = _touch(pool[k % len(pool)], how)
    assume(any(a is not b for a, b in zip(pool, msgs)))
    every = lambda ms, profile: tuple(range(len(ms)))  # noqa: E731  the reference: visit every message
    for how, cur in _lists(pool, steps):
        for name in ("anthropic", "openai", "deepseek", "openai_responses", "gemini", "qwen"):
            done = convert(cur, name)
            with mock.patch.object(convert_module, "_touched", every):
                want = convert(fresh(cur), name)
            assert [m.model_dump() for m in done.messages] == [m.model_dump() for m in want.messages], (how, name)
            assert (done.conversions, done.call_ids) == (want.conversions, want.call_ids), (how, name)


@settings(max_examples=150)
@given(histories(), STEPS, st.lists(st.one_of(st.none(), st.integers(0, 10**6)), min_size=1, max_size=40))
def test_resumed_idle_seconds_equal_the_full_scan(history, steps, stamps):
    """idle_seconds' newest timestamp (a fold resumed from the previous list) answers each list
    of a changing sequence as the max over fresh copies does; messages without a time skipped."""
    msgs, _, _, _ = history
    pool = [m if stamps[i % len(stamps)] is None else
            m.model_copy(update={"metadata": {**m.metadata, TIMESTAMP_KEY: 1.7e9 + stamps[i % len(stamps)]}})
            for i, m in enumerate(msgs)]
    for how, cur in _lists(pool, steps):
        scratch = fresh(cur)
        times = [t for t in map(message_time, scratch) if t is not None]
        last = next((m for m in reversed(scratch) if m.role == "assistant"), None)
        then = message_time(last) if last is not None else None
        want = None if then is None or not times else max(0.0, max(times) - then)
        assert idle_seconds(cur) == want, how
