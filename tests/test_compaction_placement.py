"""Where an Anthropic ``compaction`` block may stand (issue 25 item 3): the first block of the
conversation, never in a system message, one with content at a time.

Sources: SDK anthropic 2.17 ``types/compaction_block_misplaced_error.py`` ("The `compaction`
block is not the first block of the conversation, or is in a `system` message"),
``types/compaction_block_ambiguous_error.py`` ("`messages` holds more than one `compaction`
block with content. Send only the block the conversation returned last");
https://platform.claude.com/docs/en/build-with-claude/compaction-background (the returned
message takes the place of the messages sent, at the front of the history)."""

from __future__ import annotations

import anthropic  # noqa: F401  the SDK half of the wire check

from builders import system, user
from ctxwise import ContextManager, Message, Policy, ProviderBlock, TextBlock
from ctxwise.changes import apply_changes
from ctxwise.core.prepare import with_pinned
from ctxwise.messages import Marker
from ctxwise.providers import check, check_wire, render
from ctxwise.providers.profiles import COMPACTION_MISPLACED
from test_native_compaction import stub  # noqa: F401  the stub server fixture

BLOCK = {"type": "compaction", "content": "The user asked for order A1; it shipped on 2026-03-02.",
         "signature": "sig-Zm9vYmFy", "encrypted_content": "opaque-meta-1"}


def compaction(role: str = "user", raw: dict | None = None, mid: str = "cmp") -> Message:
    return Message(id=mid, role=role, blocks=[ProviderBlock(provider="anthropic", kind="compaction",
                                                            raw=raw or BLOCK)])


def rules(msgs) -> list[tuple[int, str]]:
    return [(v.index, v.rule) for v in check(msgs, "anthropic")]


def test_a_compaction_block_first_in_the_conversation_is_valid() -> None:
    """Right after the system prompt (which becomes the top-level ``system``), as the first
    block of the first message: valid, and sent there verbatim."""
    msgs = [system(), compaction(), user("Go on.")]
    assert rules(msgs) == []
    payload = render(msgs, "anthropic")
    assert payload["messages"][0]["content"][0] == BLOCK and check_wire(payload, "anthropic") == []


def test_a_compaction_block_after_the_pinned_task_is_misplaced() -> None:
    """A pinned first user message (the task) before the compaction block: the API answers
    compaction_block_misplaced; the check names the compaction's message and the rule, with
    the provider's own error text."""
    msgs = [system(), user("Task: refund order A1."), compaction(), user("Go on.")]
    found = check(msgs, "anthropic")
    assert [(v.index, v.rule) for v in found] == [(2, COMPACTION_MISPLACED)]
    assert "compaction_block_misplaced" in (found[0].provider_error or "")
    assert [(v.index, v.rule) for v in check_wire(render(msgs, "anthropic"), "anthropic")] == [(2, COMPACTION_MISPLACED)]


def test_a_compaction_block_in_a_system_message_is_misplaced() -> None:
    """In a system message (here a later one, sent in the beta native form or folded): refused."""
    msgs = [system(), user("Hi."), Message(id="s2", role="system", blocks=[
        ProviderBlock(provider="anthropic", kind="compaction", raw=BLOCK)]), user("Go on.")]
    assert (2, COMPACTION_MISPLACED) in rules(msgs)


def test_a_second_compaction_block_with_content_is_refused() -> None:
    """Two compaction blocks with content (an earlier summary segment left in front of a newer
    one): compaction_block_ambiguous, reported at the second one; a failed compaction
    (``content`` null, a no-op for the server) is not counted as content."""
    newer = {**BLOCK, "content": "Later: A2 was refunded.", "signature": "sig-2"}
    two = Message(id="cmp", role="user", blocks=[ProviderBlock(provider="anthropic", kind="compaction", raw=BLOCK),
                                                 ProviderBlock(provider="anthropic", kind="compaction", raw=newer)])
    found = check([system(), two, user("Go on.")], "anthropic")
    assert {(v.index, v.rule) for v in found} == {(1, COMPACTION_MISPLACED)}
    assert any("second compaction block" in v.message for v in found)
    failed = {"type": "compaction", "content": None}
    assert rules([system(), compaction(raw=BLOCK), user("x"), compaction(raw=failed, mid="c2"), user("y")]) == [
        (3, COMPACTION_MISPLACED)]  # still not first, but no ambiguity


def test_the_returned_assistant_message_opens_the_history_without_a_lead_turn(tmp_path) -> None:
    """The documented swap puts the returned (assistant) message in front: no lead user turn is
    rendered before it (that would make the block misplaced), and the payload passes the wire
    check, first-message-role included."""
    with ContextManager(f"sqlite:///{tmp_path / 's.db'}", Policy.preset("default", provider="anthropic")) as cm:
        s = cm.session("u", "s")
        s.append_anthropic({"system": "Be brief.", "messages": [{"role": "assistant", "content": [BLOCK]},
                                                               {"role": "user", "content": "Go on."}]})
        p = s.prepare()
    assert p.payload["messages"][0] == {"role": "assistant", "content": [BLOCK]}
    assert p.conversions == [] and check_wire(p.payload, "anthropic") == []


def test_user_memory_goes_after_a_leading_compaction_block() -> None:
    """The pinned user-memory block normally stands right after the system prompt; before a
    leading compaction block it would make the block misplaced, so it goes right after it."""
    memory = Message(id="mem", role="user", blocks=[TextBlock(text="[User memory]\nPrefers email.")],
                     metadata=Marker.with_({}, kind="user_memory"))
    sent = with_pinned([system(), compaction(), user("Go on.")], [memory], None, "when_compacted")
    assert [m.id for m in sent][1:3] == ["cmp", "mem"]
    assert rules(sent) == []
    plain = with_pinned([system(), user("Hi.")], [memory], None, "when_compacted")
    assert plain[1].id == "mem"


def test_a_native_summary_after_the_pinned_task_is_sent_as_text(stub) -> None:
    """Anthropic's own compaction as the summarizer (against the stub server of
    tests/test_native_compaction.py): a summary standing first in the conversation keeps the
    returned block verbatim; one standing after the pinned task (ranges start after it,
    ``ctxwise.compaction.context.task_end``) could not be sent as a compaction block, so it is
    the block's text under ctxwise's summary header, and the list stays valid."""
    import time

    from builders import assistant, results
    from ctxwise.compaction import Budgeting
    from ctxwise.compaction.summarizing import summarize_range
    from ctxwise.summarizers.anthropic_native import AnthropicNativeSummarizer
    from ctxwise.tokens import get_counter
    from test_native_compaction import BLOCK as RETURNED

    _, url = stub
    summarizer = AnthropicNativeSummarizer(base_url=url, api_key="test", max_retries=0)
    b = Budgeting(Policy.preset("default", provider="anthropic", bound_reasoning="off"), get_counter("chars"))
    a1 = assistant(calls=[("get_order", {"id": "A1"})])
    msgs = [system(), user("Task: check order A1, then A2."), a1, *results(a1, ["order A1: shipped " * 40]),
            assistant("A1 shipped."), user("Now A2?"), assistant("A2 is packed.")]
    size = b.size(msgs)
    for start, native in ((1, True), (2, False)):
        out = apply_changes(msgs, summarize_range(msgs, b, size, summarizer, start, 5, trigger="test",
                                                  t0=time.perf_counter()).changes)
        summary = next(m for m in out if m.kind == "summary")
        assert [isinstance(x, ProviderBlock) for x in summary.blocks] == [native]
        assert RETURNED["content"] in summary.text or native
        assert rules(out) == []
