"""The failure cases of ../shared/cases, seen by the provider validator.

For every case that concerns validity, the violating payload (the input itself, or the naive
transform the case describes, e.g. the "naive cut" of ``budget_hint.note``) is flagged with the
right rule at the right index, and every ``acceptable_outputs`` entry of every case passes.

Case messages are read with the format adapters (``ctxwise.formats``); outputs are built on the
canonical messages from the notation of ``cases/README.md``: ints are input indices, ``"S"`` a
summary (a user-role message), ``"P3"`` input 3 with its tool-result body replaced by the
placeholder, ``"3*"`` input 3 with an empty body given a marker, ``"S+5"`` two items merged.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from ctxwise.formats.anthropic import from_anthropic
from ctxwise.formats.openai_chat import from_openai
from ctxwise.formats.responses import from_responses
from ctxwise.messages import Message, TextBlock, ThinkingBlock, ToolResultBlock
from ctxwise.providers import check, droppable_thinking

REPO = Path(__file__).resolve().parents[1]
CASES = Path(os.environ.get("CTXWISE_SHARED", REPO.parent / "shared")) / "cases"
PLACEHOLDER = "[tool result cleared to save context; the full output is stored under this call id]"
MARKER = "(empty)"


def load(case_id: str) -> dict:
    return json.loads((CASES / f"{case_id}.json").read_text(encoding="utf-8"))


def canonical(case: dict) -> list[Message]:
    """The case input as canonical messages, one per input message (asserted)."""
    fmt, raw = case["provider_format"], case["messages"]
    if fmt.startswith("openai_chat"):
        msgs = from_openai(raw)
    elif fmt.startswith("anthropic_messages"):
        msgs = from_anthropic({"system": raw[0]["content"], "messages": raw[1:]})
    elif fmt.startswith("openai_responses"):
        msgs = from_responses(raw)
    else:  # pragma: no cover - a new format needs a line here
        raise AssertionError(f"unknown format {fmt}")
    if not fmt.startswith("openai_responses"):
        assert len(msgs) == len(raw), case["id"]
    return msgs


def providers_for(case: dict) -> list[str]:
    """The profiles a case's payload is checked against."""
    fmt = case["provider_format"]
    if fmt.startswith("anthropic_messages"):
        return ["anthropic", "openai", "qwen", "gemini"]
    if fmt.startswith("openai_responses"):
        return ["openai_responses"]
    if "DeepSeek" in fmt:
        return ["deepseek", "openai", "qwen", "gemini"]
    return ["openai", "deepseek", "anthropic", "qwen", "gemini"]


SUMMARY = Message(
    id="ctxwise-summary-1",
    role="user",
    blocks=[TextBlock(text="[Summary of the earlier conversation]\nThe user asked for the task "
                      "above; the assistant used tools and reported the results.")],
    metadata={"ctxwise": {"kind": "summary"}},
)


def _placeholder(m: Message, text: str) -> Message:
    blocks = [b.model_copy(update={"output": [TextBlock(text=text)]})
              if isinstance(b, ToolResultBlock) else b for b in m.blocks]
    assert blocks != m.blocks or not m.tool_results
    return m.model_copy(update={"blocks": blocks})


def _marked(m: Message) -> Message:
    if m.tool_results:
        return _placeholder(m, MARKER)
    blocks = [b for b in m.blocks if not (isinstance(b, TextBlock) and not b.text.strip())]
    return m.model_copy(update={"blocks": [TextBlock(text=MARKER)] + blocks})


def _item(canon: list[Message], token: int | str) -> Message:
    if isinstance(token, int):
        return canon[token]
    if token == "S":
        return SUMMARY
    if "+" in token:
        parts = [_item(canon, t if not t.isdigit() else int(t)) for t in token.split("+")]
        last = parts[-1]
        return last.model_copy(update={"blocks": [b for p in parts for b in p.blocks]})
    if m := re.fullmatch(r"P(\d+)", token):
        return _placeholder(canon[int(m[1])], PLACEHOLDER)
    if m := re.fullmatch(r"(\d+)\*", token):
        return _marked(canon[int(m[1])])
    raise AssertionError(f"unknown notation {token!r}")


def build(canon: list[Message], notation: list[int | str]) -> list[Message]:
    """The output a notation describes, built on the canonical input."""
    return [_item(canon, t) for t in notation]


def strip_thinking(m: Message) -> Message:
    return m.model_copy(update={"blocks": [b for b in m.blocks if not isinstance(b, ThinkingBlock)]})


def rules_at(violations) -> set[tuple[int, str]]:
    return {(v.index, v.rule) for v in violations}


ALL_CASES = sorted(p.stem for p in CASES.glob("B*.json"))
WITH_OUTPUTS = [c for c in ALL_CASES if load(c)["expected"].get("acceptable_outputs")]


def test_cases_are_there():
    assert len(ALL_CASES) >= 16 and WITH_OUTPUTS


def test_notation_builder():
    canon = canonical(load("B10"))
    out = build(canon, [0, "S+5", 6, "P7"])
    assert out[1].id == canon[5].id and out[1].blocks[0] == SUMMARY.blocks[0]
    assert out[3].tool_results[0].text == PLACEHOLDER
    assert out[3].tool_results[0].tool_use_id == canon[7].tool_results[0].tool_use_id
    assert check(out, "openai") == []


@pytest.mark.parametrize("case_id", ALL_CASES)
def test_every_case_input_is_valid(case_id):
    """Every case input is a payload its provider accepts: the faults come from transforms."""
    case = load(case_id)
    canon = canonical(case)
    for p in providers_for(case):
        assert check(canon, p, reference=canon) == [], (case_id, p)


@pytest.mark.parametrize("case_id", WITH_OUTPUTS)
def test_acceptable_outputs_pass(case_id):
    case = load(case_id)
    canon = canonical(case)
    for notation in case["expected"]["acceptable_outputs"]:
        if case["provider_format"].startswith("openai_responses"):
            out = from_responses([case["messages"][i] for i in notation])
            ref = None  # ids are positional in this format; structure is what is checked
        else:
            out, ref = build(canon, notation), canon
        for p in providers_for(case):
            assert check(out, p, reference=ref) == [], (case_id, notation, p)


# -- violating transforms, one per fault the cases describe ----------------------------------

CHAT = ["openai", "deepseek", "anthropic", "qwen", "gemini"]


@pytest.mark.parametrize("provider", CHAT)
def test_b01_naive_cut_leaves_orphan_result(provider):
    out = build(canonical(load("B01")), [0, 3, 4, 5, 6, 7])
    v = check(out, provider)
    assert (1, "orphan-tool-result") in rules_at(v)
    if provider == "openai":
        assert "must be a response to a preceding message with 'tool_calls'" in v[0].provider_error


@pytest.mark.parametrize("provider", CHAT)
def test_b02_summary_cut_inside_parallel_batch(provider):
    out = build(canonical(load("B02")), [0, "S", 3, 4, 5, 6, 7])
    assert {(2, "orphan-tool-result"), (3, "orphan-tool-result"),
            (4, "orphan-tool-result")} <= rules_at(check(out, provider))


@pytest.mark.parametrize("provider", CHAT)
def test_b02_cut_after_the_call_leaves_it_unanswered(provider):
    # summarizing the results but keeping the assistant message that issued them
    out = build(canonical(load("B02")), [0, 1, 2, "S", 6, 7])
    assert (2, "unanswered-tool-call") in rules_at(check(out, provider))


@pytest.mark.parametrize("provider", CHAT)
def test_b02_summary_as_mid_list_system_message_is_rendered_not_refused(provider):
    """A mid-conversation system message is never the reason a payload is refused: OpenAI
    takes it as is, the others get it folded into a user turn at render time (issue 25 item 4;
    sources in ``ctxwise.providers.profiles``). The bad input of this case is now the cut
    that leaves the batch's results without their call."""
    from ctxwise.providers import check_wire, render

    canon = canonical(load("B02"))
    sys_summary = SUMMARY.model_copy(update={"role": "system"})
    out = [canon[0], sys_summary] + canon[6:]
    assert not any(rule == "system-not-first" for _, rule in rules_at(check(out, provider)))
    assert not any(v.rule == "system-not-first" for v in check_wire(render(out, provider), provider))
    cut = [canon[0], sys_summary] + canon[3:]
    assert (2, "orphan-tool-result") in rules_at(check(cut, provider))


@pytest.mark.parametrize("provider", CHAT)
def test_b04_plain_string_result_is_still_a_pair_member(provider):
    out = build(canonical(load("B04")), [0, 3, 4, 5])
    assert (1, "orphan-tool-result") in rules_at(check(out, provider))


def test_b06_oldest_first_trim_drops_the_only_user_message():
    out = build(canonical(load("B06")), [0, 7, 8, 9, 10, 11, 12, 13])
    v = check(out, "qwen")
    assert {(0, "no-user-message"), (1, "orphan-tool-result")} <= rules_at(v)
    assert "No user query found in messages." in [x.provider_error for x in v]
    for p in CHAT:
        assert (1, "orphan-tool-result") in rules_at(check(out, p))


def test_b06_trim_that_keeps_the_request_but_splits_a_pair():
    out = build(canonical(load("B06")), [0, 1, 9, 10, 11, 12, 13])
    assert rules_at(check(out, "qwen")) == {(2, "orphan-tool-result")}


@pytest.mark.parametrize("provider", CHAT)
def test_b10_blank_placeholder_is_empty(provider):
    canon = canonical(load("B10"))
    out = canon[:3] + [_placeholder(canon[3], " ")] + canon[4:]
    assert rules_at(check(out, provider)) == {(3, "empty-tool-result")}


@pytest.mark.parametrize("provider", CHAT)
def test_b10_in_flight_call_must_stay_structured(provider):
    # dropping the current call but keeping its pending result
    out = build(canonical(load("B10")), [0, "S", 5, 7])
    assert (3, "orphan-tool-result") in rules_at(check(out, provider))


def test_empty_tool_output_in_case_gets_a_marker():
    """``3*``: a tool result with an empty body is flagged; with the marker it passes."""
    canon = canonical(load("B06"))
    emptied = _placeholder(canon[13], "")
    bad = canon[:13] + [emptied, SUMMARY]
    assert rules_at(check(bad, "openai")) == {(13, "empty-tool-result")}
    fixed = canon[:13] + [_marked(emptied), SUMMARY]
    assert check(fixed, "openai") == []


# -- reasoning: B11 (DeepSeek) -------------------------------------------------------------------


def test_b11_serializer_drops_all_reasoning_content():
    canon = canonical(load("B11"))
    out = [strip_thinking(m) for m in canon]
    v = check(out, "deepseek", reference=canon)
    assert rules_at(v) == {(4, "reasoning-content-missing"), (7, "reasoning-content-missing")}
    assert any("message index 4" in x.provider_error for x in v)
    # stated thinking mode catches it without the record, too
    assert rules_at(check(out, "deepseek", thinking=True)) == rules_at(v)


@pytest.mark.parametrize("idx", [4, 7])
def test_b11_tool_span_message_loses_reasoning(idx):
    canon = canonical(load("B11"))
    out = list(canon)
    out[idx] = strip_thinking(out[idx])
    assert rules_at(check(out, "deepseek")) == {(idx, "reasoning-content-missing")}


def test_b11_chat_span_may_lose_reasoning_and_that_is_what_is_droppable():
    canon = canonical(load("B11"))
    drop = droppable_thinking(canon, "deepseek")
    assert {i for i, _ in drop} == {2}
    out = list(canon)
    out[2] = strip_thinking(out[2])
    assert check(out, "deepseek", reference=canon) == []


def test_b11_span_dropped_whole_is_valid():
    canon = canonical(load("B11"))
    out = [canon[0], SUMMARY, canon[8]]
    assert check(out, "deepseek", reference=canon) == []


def test_b11_reasoning_edited():
    canon = canonical(load("B11"))
    out = list(canon)
    blocks = [b.model_copy(update={"thinking": b.thinking[:10]}) if isinstance(b, ThinkingBlock)
              else b for b in canon[7].blocks]
    out[7] = canon[7].model_copy(update={"blocks": blocks})
    assert rules_at(check(out, "deepseek", reference=canon)) == {(7, "reasoning-content-changed")}


# -- reasoning: B12 (Anthropic) ------------------------------------------------------------------


def test_b12_rebuild_without_thinking():
    canon = canonical(load("B12"))
    out = list(canon)
    out[2] = strip_thinking(canon[2])
    v = check(out, "anthropic", reference=canon)
    assert rules_at(v) == {(2, "thinking-removed"), (2, "thinking-not-first")}
    assert any("Expected `thinking` or `redacted_thinking`" in (x.provider_error or "") for x in v)
    assert rules_at(check(out, "anthropic", thinking=True)) == {(2, "thinking-not-first")}


@pytest.mark.parametrize("field", ["thinking", "signature"])
def test_b12_thinking_block_edited(field):
    canon = canonical(load("B12"))
    blk = canon[2].blocks[0]
    assert isinstance(blk, ThinkingBlock)
    edited = blk.model_copy(update={field: getattr(blk, field) + " "})
    out = list(canon)
    out[2] = canon[2].model_copy(update={"blocks": [edited] + canon[2].blocks[1:]})
    assert rules_at(check(out, "anthropic", reference=canon)) == {(2, "thinking-modified")}


def test_b12_thinking_moved_after_tool_use():
    canon = canonical(load("B12"))
    out = list(canon)
    out[2] = canon[2].model_copy(update={"blocks": canon[2].blocks[1:] + canon[2].blocks[:1]})
    assert rules_at(check(out, "anthropic", reference=canon)) == {(2, "thinking-not-first")}


def test_b12_open_tool_turn_thinking_is_not_droppable():
    assert droppable_thinking(canonical(load("B12")), "anthropic") == set()


# -- reasoning: B14 (Responses items) ------------------------------------------------------------


def test_b14_last_four_items_start_with_an_orphan_output():
    # items [3..6] are canonical [2..4] (the Responses reader itself refuses the orphan item
    # list, so the cut is made on canonical messages, as compaction stages do)
    out = canonical(load("B14"))[2:]
    v = check(out, "openai_responses")
    assert (0, "orphan-tool-result") in rules_at(v)
    assert v[0].provider_error.startswith("No tool call found for function call output")


def test_b14_last_five_items_keep_a_function_call_without_its_reasoning():
    canon = canonical(load("B14"))  # [user, reasoning+call, output, reasoning+message, user]
    assert isinstance(canon[1].blocks[0], ThinkingBlock) and canon[1].tool_uses
    out = [strip_thinking(canon[1])] + canon[2:]
    assert rules_at(check(out, "openai_responses", reference=canon)) == {
        (0, "reasoning-item-missing")}


def test_b14_reasoning_item_cut_from_its_following_item():
    canon = canonical(load("B14"))
    lone = canon[3].model_copy(update={"blocks": [b for b in canon[3].blocks
                                                  if isinstance(b, ThinkingBlock)]})
    out = canon[:3] + [lone, canon[4]]
    assert (3, "reasoning-without-following-item") in rules_at(
        check(out, "openai_responses", reference=canon))
