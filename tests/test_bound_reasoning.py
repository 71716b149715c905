"""Reasoning bound to its prefix.

Source: Anthropic preserved thinking (platform.claude.com/docs/en/build-with-claude/preserved-thinking
and its prefix-checks page; SDK anthropic 2.17 types/beta/beta_thinking_block_binding_param.py):
a replayed thinking block is valid only while system, tools and every earlier message are
unchanged since it was produced, else a 400 "The block is bound to a different conversation"
(prefix_mismatch_behavior "error", the default). OpenAI Responses reasoning.context="all_turns"
(SDK openai 3.63 types/shared/reasoning.py; guide keep-prefix-unchanged): reasoning items after
a prefix change are dropped by the API.

Fault kind covered: *bound reasoning sent after an edit of its prefix* -- on the signed Claude
tool loops, ctxwise cleared, summarized and pruned earlier messages and kept later signed
thinking after them (342 of 375 calls at 3,000 tokens with binding off, by the independent
check below).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import assistant, results, system, user
from conftest import TRAJECTORIES
from test_engine_acceptance import drive
from ctxwise import ContextManager
from ctxwise.compaction import Budgeting
from ctxwise.compaction.bound import drop_invalidated_reasoning
from ctxwise.errors import ContextBudgetExceeded
from ctxwise.formats import load
from ctxwise.messages import Marker, Message, TextBlock, ToolResultBlock
from ctxwise.policy import Policy
from ctxwise.providers import bound_profile, check, check_wire
from ctxwise.providers.binding import bound_digests
from ctxwise.tokens import get_counter

CLAUDE = TRAJECTORIES / "tau2-bench" / "airline_claude-sonnet-4-5-thinking_subset.json"


def seen(m: Message) -> tuple:
    """What the provider sees of a message (independent of ctxwise's digests)."""
    return (m.role, m.name, [b.model_dump(mode="json") for b in m.blocks])


def replay(tmp_path, budget: int, setting: str) -> dict:
    """Replay the signed Claude tool loops as an Anthropic agent; check every payload against
    the payload of the request that produced each retained thinking-carrying message."""
    policy = Policy.preset("default", budget=budget, unit="tokens", tokenizer="o200k_base", provider="anthropic",
                           bound_reasoning=setting)
    cm = ContextManager(f"sqlite:///{tmp_path / f'{budget}{setting}.db'}", policy)
    out = {"calls": 0, "violations": 0, "wire": 0, "after_changed_prefix": 0, "drops": 0, "over_budget": 0}
    for conv in load(CLAUDE):
        produced: dict[str, list[tuple]] = {}
        for prepared, history in drive(cm.session("u", conv.id), conv.messages, none_over_budget=True):
            if prepared is None:
                continue
            out["calls"] += 1
            msgs = prepared.messages
            produced[conv.messages[len(history)].id] = [seen(m) for m in msgs]
            out["after_changed_prefix"] += sum(
                1 for i, m in enumerate(msgs)
                if m.role == "assistant" and m.thinking and m.id in produced and [seen(x) for x in msgs[:i]] != produced[m.id])
            out["violations"] += len(check(msgs, policy.profile))
            out["wire"] += len(check_wire(prepared.payload, "anthropic"))
            out["drops"] += sum(1 for e in prepared.events if e.detail.get("bound_reasoning") == "prefix_changed")
            out["over_budget"] += prepared.size > policy.effective_budget
    cm.close()
    return out


@pytest.mark.parametrize("budget", [3_000, 6_000, 12_000])
def test_signed_claude_loops_never_send_thinking_after_a_changed_prefix(tmp_path, budget):
    got = replay(tmp_path, budget, "auto")
    assert got["calls"] > 250
    assert got["after_changed_prefix"] == 0, got
    assert got["violations"] == 0 and got["wire"] == 0 and got["over_budget"] == 0, got
    assert got["drops"] > 0, "the budget must force edits that invalidate bound reasoning, or the test proves nothing"


def test_without_binding_the_same_replay_sends_thinking_after_a_changed_prefix(tmp_path):
    """The independent check can fail: binding off (older models) keeps signed thinking after edits."""
    got = replay(tmp_path, 3_000, "off")
    assert got["after_changed_prefix"] > 100, got


def signed_loop() -> list[Message]:
    """A completed turn and an open tool loop, every reply with signed thinking, each stamped
    as appended after the request that produced it (what Session.append writes)."""
    a1 = assistant(thinking="look up the order", signature="s1", calls=[("get_order", {"id": "A1"})])
    r1 = results(a1, ["order A1: shipped " * 40])
    a2 = assistant("It shipped.", thinking="answer", signature="s2")
    a3 = assistant(thinking="check the refund", signature="s3", calls=[("get_refund", {"id": "A1"})])
    r3 = results(a3, ["refund pending " * 40])
    msgs = [system(), user("where is A1?"), a1, *r1, a2, user("and the refund?"), a3, *r3]
    digests = bound_digests(msgs)
    return [m.model_copy(update={"metadata": Marker.with_(m, bound_prefix=digests[i])})
            if m.role == "assistant" else m for i, m in enumerate(msgs)]


def cleared(m: Message) -> Message:
    blocks = [b.model_copy(update={"output": [TextBlock(text="[cleared]")]}) if isinstance(b, ToolResultBlock) else b
              for b in m.blocks]
    return m.model_copy(update={"blocks": blocks})


def test_the_wire_check_names_the_message_and_the_rule():
    """Clearing result 3 changes the prefix of replies 4 and 6 (Anthropic: 400 "The block is
    bound to a different conversation"); each is reported at its index with the provider's text."""
    msgs = signed_loop()
    assert check(msgs, "anthropic") == []
    edited = [*msgs[:3], cleared(msgs[3]), *msgs[4:]]
    found = check(edited, "anthropic")
    assert [(v.index, v.rule) for v in found] == [(4, "reasoning-prefix-changed"), (6, "reasoning-prefix-changed")]
    assert "bound to a different conversation" in (found[0].provider_error or "")
    assert check(edited, bound_profile("anthropic", "off")) == []  # older models: no binding


def test_invalidated_reasoning_of_completed_turns_is_dropped_as_an_event_the_open_turns_is_not():
    msgs = signed_loop()
    edited = [*msgs[:3], cleared(msgs[3]), *msgs[4:]]
    b = Budgeting(Policy.preset("default", budget=10_000, provider="anthropic"), get_counter("chars"))
    res = drop_invalidated_reasoning(edited, edited, b, b.size(edited), bound_profile("anthropic"))
    assert [c.message_id for c in res.changes] == [msgs[4].id]  # a2: completed turn; a3 (open loop) stays
    ev = res.events[0]
    assert ev.stage == "thinking" and ev.detail["bound_reasoning"] == "prefix_changed"
    assert ev.detail["dropped_blocks"] == 1 and ev.detail["dropped_size"] > 0
    assert [v.index for v in check(res.messages, "anthropic")] == [6]  # the open loop must never be edited


def test_an_open_bound_loop_that_must_shrink_is_closed_by_a_note(tmp_path):
    """Over the budget inside an open loop (source: preserved-thinking prefix checks; a tool
    loop is one assistant turn, thinking-tool-workflows): the loop's older cycles are edited,
    the loop's thinking after the edit is dropped with an event giving its tokens, and a
    ctxwise note (a user turn) closes the loop, so the payload is valid with the binding
    rule; never a payload with invalid thinking, never an open turn without its thinking."""
    policy = Policy.preset("default", budget=900, unit="chars", provider="anthropic")
    cm = ContextManager(f"sqlite:///{tmp_path / 'o.db'}", policy)
    s = cm.session("u", "open")
    plain = [m.model_copy(update={"metadata": {}}) for m in signed_loop()]
    s.append(plain[:6])
    s.prepare()
    s.append(plain[6:])
    prepared = s.prepare()
    assert check(prepared.messages, policy.profile) == []
    assert check_wire(prepared.payload, "anthropic") == []
    assert prepared.messages[-1].kind == "loop_close" and prepared.messages[-1].role == "user"
    assert [e.stage for e in prepared.events].count("loop_closed") == 1
    drops = [e for e in prepared.events if e.detail.get("bound_reasoning") == "prefix_changed"]
    assert drops and all(e.detail["dropped_size"] > 0 for e in drops)
    assert not any(m.thinking for m in prepared.messages if m.role == "assistant" and m.id in {x.id for x in plain[6:]})
    assert prepared.size <= policy.effective_budget
    # the model's next reply opens a new turn on the closed prefix and keeps its thinking
    a7 = assistant(thinking="refund is pending: say so", signature="s7", calls=[("get_refund", {"id": "A2"})])
    s.append([a7, *results(a7, ["refund A2: none"])])
    again = s.prepare()
    assert check(again.messages, policy.profile) == []
    assert again.messages[-2].id == a7.id and again.messages[-2].thinking
    assert prepared.messages[-1].id in {m.id for m in again.messages}
    cm.close()


def test_the_prefix_digest_survives_a_reopen(tmp_path):
    url = f"sqlite:///{tmp_path / 'r.db'}"
    policy = Policy.preset("default", budget=100_000, provider="anthropic")
    plain = [m.model_copy(update={"metadata": {}}) for m in signed_loop()]
    with ContextManager(url, policy) as cm:
        s = cm.session("u", "r")
        s.append(plain[:2])
        s.prepare()
        s.append(plain[2:4])
        first = Marker.read(s.prepare().messages[2]).bound_prefix
    assert first
    with ContextManager(url, policy) as cm:
        again = cm.session("u", "r").prepare().messages[2]
    assert Marker.read(again).bound_prefix == first


def test_responses_all_turns_binds_only_when_the_policy_says_so():
    """Responses reasoning.context defaults to all_turns only on gpt-5.6: off unless set."""
    assert not Policy(provider="openai_responses").profile.binds_reasoning
    assert Policy(provider="openai_responses", bound_reasoning="on").profile.binds_reasoning
    assert Policy(provider="anthropic").profile.binds_reasoning
    assert not Policy(provider="deepseek", bound_reasoning="on").profile.binds_reasoning  # never bound


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.sampled_from(["clear", "prune", "hide"])), max_size=4))
def test_any_edit_plan_leaves_no_bound_reasoning_after_a_changed_prefix(plan):
    """Random edits of the completed turns, then the planner's drop: the result passes the
    wire check and every retained bound reply follows exactly the prefix it was produced on."""
    msgs = signed_loop() + [assistant("Pending.", thinking="done", signature="s4"), user("thanks")]
    digests = bound_digests(msgs)
    msgs = [m.model_copy(update={"metadata": Marker.with_(m, bound_prefix=digests[i])}) if m.role == "assistant"
            else m for i, m in enumerate(msgs)]
    original = {m.id: [seen(x) for x in msgs[:i]] for i, m in enumerate(msgs)}
    edited = list(msgs)
    last_user = max(i for i, m in enumerate(edited) if m.role == "user" and not m.tool_results)
    for at, kind in plan:
        i = 1 + at % (last_user - 1)
        m = edited[i]
        if kind == "clear" and m.role == "tool":
            edited[i] = cleared(m)
        elif kind == "prune" and m.role == "assistant" and m.thinking and (m.text or m.tool_uses):
            edited[i] = m.model_copy(update={"blocks": [b for b in m.blocks if b not in m.thinking]})
        elif kind == "hide" and m.role == "user" and not m.tool_results and i < last_user:
            edited[i] = m.model_copy(update={"blocks": [TextBlock(text="[summary]")]})
    b = Budgeting(Policy.preset("default", budget=10_000, provider="anthropic"), get_counter("chars"))
    out = drop_invalidated_reasoning(edited, edited, b, b.size(edited), bound_profile("anthropic")).messages
    assert check(out, "anthropic") == []
    for i, m in enumerate(out):
        if m.role == "assistant" and m.thinking:
            assert [seen(x) for x in out[:i]] == original[m.id]


@pytest.mark.parametrize("provider", ["qwen", "deepseek"])
def test_thinking_is_not_pruned_while_the_full_history_fits(tmp_path, provider):
    """DESIGN.md decision 4: no edit unless the context must shrink or the edit pays. On the
    Claude thinking recording at 12,000 tokens, in every conversation that no management sends
    within budget, default prunes no thinking (before: pruned above clear_at, a cache break
    for nothing) and until its first edit event each call sends what no management sends."""
    policy = Policy.preset("default", budget=12_000, unit="tokens", tokenizer="o200k_base", provider=provider)
    cm = ContextManager(f"sqlite:///{tmp_path / 'on.db'}", policy)
    off = ContextManager(f"sqlite:///{tmp_path / 'off.db'}", policy.with_(enabled=False))
    fitting = pruned = differing = 0
    for conv in load(CLAUDE):
        sent = [p for p, _ in drive(off.session("u", conv.id), conv.messages, none_over_budget=True)]
        if not all(p is not None and p.size <= policy.effective_budget for p in sent):
            continue
        fitting += 1
        made = [p for p, _ in drive(cm.session("u", conv.id), conv.messages, none_over_budget=True)]
        pruned += sum(1 for p in made if p is not None for e in p.events if e.stage == "thinking")
        # until the first edit event, each call sends exactly what no management sends
        for a, o in zip(made, sent, strict=True):
            if a is not None and a.events:
                break
            differing += a is None or a.payload != o.payload
    cm.close()
    off.close()
    assert fitting > 20
    assert pruned == 0
    assert differing == 0


def test_the_independent_check_flags_thinking_sent_after_an_edited_prefix():
    """metrics.bound_reasoning_violations reads only the payloads (no ctxwise digest): the
    reply produced on call 0 and sent unchanged on call 1 passes; sent after a cleared
    result (an edit of its prefix) on call 1 it is flagged, at that call, once."""
    from ctxwise.replay.metrics import bound_reasoning_violations

    msgs = signed_loop()
    first = msgs[:2]
    reply = msgs[2]
    same = [*msgs[:4]]
    edited = [msgs[0], cleared(msgs[1]) if msgs[1].tool_results else user("where is A1 now?"), *msgs[2:4]]
    assert bound_reasoning_violations([first, same], [reply, msgs[4]]) == []
    assert bound_reasoning_violations([first, edited], [reply, msgs[4]]) == [(1, reply.id)]
    with pytest.raises(ValueError):
        bound_reasoning_violations([first], [])
