"""Hard trim from the oldest end only, and ContextBudgetExceeded only when nothing reducible is left.

Fault kinds covered, each with its own test:

* *trim removing from the middle of the history* -- the hard trim kept an older user request
  and dropped the tool cycle after it (an exception written for case B14). A hard trim removes
  one contiguous run of whole units right after the system prompt and summary; B14 itself is
  satisfied by the prefix alternative ``[4, 5, 6]`` (tests/test_cases_compaction.py).
* *budget declared exceeded while a summary could shrink* -- the summary is reducible: it is
  shortened, then dropped, each with an event, before ContextBudgetExceeded.
* *budget declared exceeded while another combination fits* -- an in-flight batch of an
  image-only result and a large log, over by a little: it fits once the image is replaced by a
  note, so the truncation must be able to replace image outputs too.
"""

from __future__ import annotations

import pytest

from builders import assistant, results, system, user
from ctxwise.compaction import Budgeting, compact
from ctxwise.errors import ContextBudgetExceeded
from ctxwise.messages import ImageBlock, Message, TextBlock, ToolResultBlock
from ctxwise.policy import Policy
from ctxwise.providers import check
from ctxwise.summarizers import DigestSummarizer
from ctxwise.summarizers.base import SUMMARY_HEADER
from ctxwise.tokens import get_counter

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="


def trim_budgeting(budget: int, provider: str = "openai") -> Budgeting:
    # no summarizing, no clearing: the hard trim alone decides
    pol = Policy.preset("default", budget=budget, provider=provider, summarize=False, clear_at=0.99, clearable_tools=[],
                        clear_target=0.98, summarize_at=0.995)
    return Budgeting(pol, get_counter("chars"))


def removed_indices(inp: list[Message], out: list[Message]) -> list[int]:
    kept = {m.id for m in out}
    return [i for i, m in enumerate(inp) if m.id not in kept]


def two_old_turns():
    call = assistant(calls=[("search", {"q": "porto weather"})])
    return [
        system(),
        user("Hi, I am going to Porto."),
        assistant("Nice! How can I help?"),
        user("What is the forecast for Porto tomorrow?"),
        call, *results(call, ["x" * 3000]),
        assistant("Tomorrow: 12 to 19 C with light rain."),
        user("Thanks. Now list three indoor museums there."),
    ]


@pytest.mark.parametrize("provider", ["openai", "anthropic", "deepseek", "qwen", "gemini"])
@pytest.mark.parametrize("budget", [2_000, 3_000, 3_500, 4_000])
def test_hard_trim_removes_a_contiguous_run_right_after_the_system_prompt(provider, budget):
    msgs = two_old_turns()
    b = trim_budgeting(budget, provider)
    out = compact(msgs, b, DigestSummarizer())
    gone = removed_indices(msgs, out.messages)
    assert gone == list(range(1, 1 + len(gone))), f"removed {gone}: not a prefix after the system prompt"
    assert check(out.messages, provider, reference=msgs) == []
    assert out.size_after <= b.level(b.policy.hard_limit)


def test_the_newest_old_turn_keeps_its_answer_not_its_question_when_that_fits():
    # was: [0, 1, 4, 5] (question kept, the cycle after it dropped: a hole in the middle)
    call = assistant(calls=[("list_invoices", {"customer": "ACME"})])
    msgs = [system(), user("Summarize the open invoices for ACME."), call, *results(call, ["y" * 3000]),
            assistant("ACME has 2 open invoices totalling 2,000."), user("Email that total to the manager.")]
    out = compact(msgs, trim_budgeting(1_000), DigestSummarizer())
    assert removed_indices(msgs, out.messages) == [1, 2, 3]
    # Anthropic wants a user message first: the run goes on to the current input instead
    out = compact(msgs, trim_budgeting(1_000, "anthropic"), DigestSummarizer())
    assert removed_indices(msgs, out.messages) == [1, 2, 3, 4]


def with_summary(body_chars: int) -> list[Message]:
    s = Message(id="summary-old", role="user", blocks=[TextBlock(text=f"{SUMMARY_HEADER}\n" + "The user wants a refund. " * (body_chars // 25))],
                metadata={"ctxwise": {"kind": "summary", "replaced": ["u0"], "rounds": 3}})
    return [system(), s, user("And what about order #W2378156?")]


def test_a_summary_that_does_not_fit_is_shortened_with_an_event_not_a_budget_error():
    msgs = with_summary(3_000)
    b = trim_budgeting(1_500)
    out = compact(msgs, b, DigestSummarizer())  # was: ContextBudgetExceeded (the summary was pinned)
    assert out.size_after <= b.level(b.policy.hard_limit)
    short = next(m for m in out.messages if m.kind == "summary")
    assert short.text.startswith(SUMMARY_HEADER) and "shortened this summary" in short.text
    assert [e.detail.get("summary") for e in out.events] == ["shortened"]
    assert out.messages[-1] == msgs[-1] and out.messages[0] == msgs[0]


def test_a_summary_with_no_room_left_is_dropped_with_an_event_then_the_budget_is_exceeded_only_if_still_over():
    msgs = with_summary(3_000)
    floor = sum(get_counter("chars").count_message(m) for m in (msgs[0], msgs[2]))
    b = trim_budgeting(floor + 30)  # room for the system prompt and the question, not for a summary
    out = compact(msgs, b, DigestSummarizer())
    assert [m.id for m in out.messages] == [msgs[0].id, msgs[2].id]
    assert [e.detail.get("summary") for e in out.events] == ["dropped"]
    with pytest.raises(ContextBudgetExceeded):
        compact(msgs, trim_budgeting(floor - 30), DigestSummarizer())  # nothing reducible is left


def test_an_in_flight_image_is_replaced_by_a_note_when_that_is_what_makes_the_call_fit():
    call = assistant(calls=[("screenshot", {"url": "x"}), ("read_log", {"path": "/var/log/app.log"})])
    shot = Message(id="t-shot", role="tool", blocks=[ToolResultBlock(
        tool_use_id=call.tool_uses[0].id, name="screenshot", output=[ImageBlock(media_type="image/png", data=PNG)])])
    log = Message(id="t-log", role="tool", blocks=[ToolResultBlock(
        tool_use_id=call.tool_uses[1].id, name="read_log", output=[TextBlock(text="GET /health 200\n" * 26_250)])])  # 420 KB
    msgs = [system(), user("Why does the app crash?"), call, shot, log]
    counter = get_counter("o200k_base")
    img = counter.count_message(shot)
    fixed = sum(counter.count_message(m) for m in msgs[:3])
    pol = Policy.preset("default", budget=fixed + img - 197 + 400, unit="tokens", tokenizer="o200k_base",
                        clearable_tools=["*"])
    b = Budgeting(pol, counter)
    out = compact(msgs, b, DigestSummarizer())  # was: ContextBudgetExceeded although this fits
    assert out.size_after <= b.level(pol.hard_limit)
    got = {m.id: m for m in out.messages}
    assert not any(isinstance(o, ImageBlock) for o in got["t-shot"].tool_results[0].output)
    assert "left out 1 image" in got["t-shot"].tool_results[0].text
    assert "GET /health 200" in got["t-log"].tool_results[0].text  # the log keeps its head
    # each note names the recall call for its full result, as a placeholder does
    for mid in ("t-shot", "t-log"):
        r = got[mid].tool_results[0]
        assert f'recall_tool_result("{r.tool_use_id}")' in r.text, r.text[-200:]
    assert check(out.messages, "openai", reference=msgs) == []


def test_a_recalled_result_too_big_for_the_budget_is_cut_without_sending_the_model_back_for_it():
    """Kind: a cut note that points at the recall call on the recall tool's own result: the model
    recalls, gets the same cut and the same pointer, and loops."""
    from ctxwise.compaction.trimming import RECALL_TOOL
    from ctxwise.recall import RECALL_TOOL_NAME

    assert RECALL_TOOL == RECALL_TOOL_NAME
    words = " ".join(f"row{k}" for k in range(4000))  # ~36,000 characters, breaks between words
    first = assistant(calls=[("export_rows", {})])
    again = assistant(calls=[(RECALL_TOOL_NAME, {"tool_use_id": first.tool_uses[0].id})])
    msgs = [system(), user("Export the rows."), first, *results(first, ["[export_rows result cleared]"]),
            again, *results(again, [words])]
    b = Budgeting(Policy.preset("default", budget=3000, unit="chars"), get_counter("chars"))
    out = compact(msgs, b, DigestSummarizer())
    assert out.size_after <= b.level(1.0)
    text = out.messages[-1].tool_results[0].text
    assert "this recalled page" in text and "recall_tool_result(" not in text, text[-300:]
    head = text.split("\n[ctxwise cut", 1)[0]
    assert head and words.startswith(head) and head.endswith(tuple("0123456789"))  # ends at a word break
    assert not words[len(head):].startswith(tuple("0123456789"))
