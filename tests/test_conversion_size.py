"""What is sent is what is counted (issue 25): ``Prepared.size`` and the budget the stages
work to include the render-time conversions (:mod:`ctxwise.providers.convert`: a folded
mid-conversation system message, the lead user turn before an assistant-first history, an
image sent as a note). Real engine, real SQLite store, the real chars counter."""

from __future__ import annotations

from builders import assistant, system, tool_turn, user
from ctxwise import ContextManager, ImageBlock, Message, TextBlock
from ctxwise.compaction import Budgeting
from ctxwise.compaction.exceeded import fits_at
from ctxwise.policy import Policy
from ctxwise.providers.convert import convert
from ctxwise.tokens import get_counter

COUNTER = get_counter("chars")


def greeting_first_with_a_reminder() -> list[Message]:
    """An app that stores its greeting first (Anthropic gets a lead user turn) and a reminder
    system message before the last question (folded into it under a header)."""
    out = [system(), assistant("Hello! I can look up your orders.")]
    out += tool_turn("Order #W1 status?", [("lookup", {"order": 1}, "order 1 " + "x" * 600)], "It ships today.")
    out += [Message(id="rem", role="system", blocks=[TextBlock(text="Reminder: answer in one sentence.")]),
            user("And order #W2?")]
    return out


def sent_size(policy: Policy, messages: list[Message]) -> int:
    """The size of what the provider receives: the converted list, counted as the stages count."""
    return Budgeting(policy, COUNTER).size(convert(messages, policy.profile).messages)


def test_a_conversion_that_crosses_the_hard_limit_makes_the_context_shrink(tmp_path) -> None:
    """The canonical list sits exactly at the hard limit and its conversions (lead user turn,
    folded reminder) add 37 chars: counted before, the request went out over the budget with
    ``size`` under it; now the stages see the converted size, clear, and ``size`` is the size
    of what is sent, under the hard limit."""
    base = Policy.preset("default", provider="anthropic", unit="chars", budget=100_000, clear_at=1.0,
                         summarize_at=1.0, summarize=False, keep_recent_cycles=0)
    msgs = greeting_first_with_a_reminder()
    canonical = Budgeting(base, COUNTER).size(msgs)
    added = sent_size(base, msgs) - canonical
    assert added > 0 and sorted(c.rule for c in convert(msgs, base.profile).conversions) == [
        "first-message-role", "system-not-first"]
    policy = base.with_(budget=fits_at(base, canonical))  # the hard limit holds the canonical list exactly
    hard = policy.level(policy.hard_limit)
    assert canonical <= hard < canonical + added
    with ContextManager(f"sqlite:///{tmp_path / 's.db'}", policy) as cm:
        s = cm.session("u", "s")
        s.append(msgs)
        p = s.prepare()
    assert p.size_before == canonical + added
    assert [e.stage for e in p.events] == ["clearing"]
    assert p.size == sent_size(policy, p.messages) <= hard


def test_size_counts_an_image_as_the_note_sent(tmp_path) -> None:
    """DeepSeek takes no images (https://api-docs.deepseek.com/api/create-chat-completion): the
    image goes as a short note, and ``size`` counts the note, not the image; with nothing to
    compact, ``size`` is the converted list's size, below the canonical one."""
    policy = Policy.preset("default", provider="deepseek", unit="chars", budget=100_000)
    msgs = [system(), Message(id="u1", role="user", blocks=[
        TextBlock(text="What is on this label?"), ImageBlock(media_type="image/png", data="iVBORw0KGgo=" * 200)])]
    canonical = Budgeting(policy, COUNTER).size(msgs)
    with ContextManager(f"sqlite:///{tmp_path / 's.db'}", policy) as cm:
        s = cm.session("u", "s")
        s.append(msgs)
        p = s.prepare()
    assert p.events == [] and [c.rule for c in p.conversions] == ["image-not-supported"]
    assert p.size == sent_size(policy, p.messages) < canonical


def test_a_conversion_is_counted_once_per_message() -> None:
    """DESIGN.md decision 7 (O(new work) per call): renamed call ids (tau-bench reuses them, so
    every call renames them again) are counted on the first call only; a later call's fresh
    conversion of the same stored messages reads the size kept with them, and gives the same
    total."""
    from builders import results
    from ctxwise.core.prepare import conversion_size
    from ctxwise.messages import ToolUseBlock

    policy = Policy.preset("default", provider="anthropic", unit="chars", budget=100_000)
    b = Budgeting(policy, COUNTER)
    msgs = [system()]
    for k in range(3):  # the same call id in every turn
        a = Message(id=f"a{k}", role="assistant", blocks=[ToolUseBlock(id="functions.get:0", name="get", input={})])
        msgs += [user(f"q{k}"), a, *results(a, [f"r{k}"]), assistant(f"done {k}")]
    counted: list[str] = []

    def size_of(m: Message) -> int:
        counted.append(m.id)
        return b.size_of(m)

    made = [m for m in convert(msgs, policy.profile).messages if all(m is not x for x in msgs)]
    assert made  # the renames really made new messages
    first = conversion_size(msgs, convert(msgs, policy.profile), size_of, "k")
    assert first == sent_size(policy, msgs) - b.size(msgs)
    assert len(counted) == 2 * len(made)  # each converted message and the stored one it replaces
    counted.clear()
    again = conversion_size(msgs, convert(msgs, policy.profile), size_of, "k")
    assert again == first and len(counted) == len(made)  # the converted ones come from the memo
