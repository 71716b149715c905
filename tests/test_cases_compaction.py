"""The failure cases of ../shared/cases, run through the product: what ctxwise DOES with each input.

Each case's messages are read with the format adapter of its ``provider_format``, the product
runs on them (the ``compact()`` pipeline under a ``Budgeting(policy, counter)``, or the engine's
``Session.prepare()`` over a real SQLite file for the persistence cases), the output is mapped
back to input indices by message id, and every check of ``expected.assertions`` is asserted
(the check vocabulary of ``cases/README.md`` is implemented below, one small function per
check), plus membership in ``acceptable_outputs`` when the case lists them.

Output labels follow the README notation: an int is an input message kept verbatim, ``"S"``
the summary (``kind == "summary"``), ``"P3"`` input 3 with its tool-result body replaced by the
placeholder (a cleared message keeps its id). For Responses items a canonical message may
stand for several input items; labels are then item indices.

Budget units: ``tokens`` use a real counter (``estimate`` or ``o200k_base``; the cases state
wide margins so any real tokenizer gives the same verdict); ``messages`` and ``items`` use the
two tiny counters below (a unit of measure, not a mock). ``Policy.unit`` only names the unit
in events, so those policies say ``tokens``.

Policies are chosen to put each case in the situation it describes; the comment at each
policy says why.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest

from ctxwise.compaction import Budgeting, compact, placeholder_text
from ctxwise.messages import Marker
from ctxwise import ContextManager
from ctxwise.providers import render as to_payload
from ctxwise.errors import ContextBudgetExceeded
from ctxwise.formats import from_anthropic, from_openai, from_responses, to_anthropic, to_openai, to_responses
from ctxwise.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from ctxwise.policy import Policy
from ctxwise.providers import check as provider_check
from ctxwise.summarizers import DigestSummarizer
from ctxwise.tokens import ChatFrame, get_counter
from ctxwise.tokens.estimate import cjk_count

# -- units of measure for the message- and item-count budgets ------------------------------


class MessageCounter:
    """``messages`` unit: every message is 1."""

    name = "messages"
    unit = "tokens"
    frame = ChatFrame()

    def count_message(self, m: Message) -> int:
        return 1


class ItemCounter:
    """``items`` unit (Responses API): a message is as many items as it is written as."""

    name = "items"
    unit = "tokens"
    frame = ChatFrame()

    def count_message(self, m: Message) -> int:
        return len(to_responses([m], extras=False))


class CountingDigest(DigestSummarizer):
    """The real digest summarizer, counting how often it is asked (B19)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def summarize(self, material, previous, target_chars, *, facts=()):
        self.calls += 1
        return super().summarize(material, previous, target_chars, facts=facts)


def policy(**kw: Any) -> Policy:
    # The cases were written for the watermark triggers (clearing above clear_at, summaries at
    # a turn boundary above summarize_at): they test what a stage keeps, cuts and stores, so
    # they pin those triggers. When an edit pays is tested in test_clearing_cost.py and
    # test_summary_segments.py.
    return Policy.preset("default", **{"edit_when": "watermark", **kw})


# -- loading a case and labelling an output --------------------------------------------------


def load_case(shared_dir: Path, cid: str) -> dict:
    return json.loads((shared_dir / "cases" / f"{cid}.json").read_text(encoding="utf-8"))


def fmt_of(case: dict) -> str:
    return {"openai_chat": "openai", "anthropic_messages": "anthropic",
            "openai_responses_items": "responses"}[case["provider_format"].split(" ")[0]]


def read(case: dict) -> list[Message]:
    fmt, raw = fmt_of(case), case["messages"]
    msgs = {"openai": from_openai, "anthropic": from_anthropic, "responses": from_responses}[fmt](raw)
    if fmt != "responses":
        assert len(msgs) == len(raw), "the adapter must give one canonical message per case message"
    return msgs


def write(msgs: list[Message], fmt: str, deepseek: bool = False) -> list[dict]:
    """The provider payload as a list in the case's own shape (system first for Anthropic)."""
    if fmt == "openai":
        return to_openai(msgs, reasoning_field="reasoning_content" if deepseek else None, extras=False)
    if fmt == "anthropic":
        p = to_anthropic(msgs, extras=False)
        system = p.get("system")
        return ([{"role": "system", "content": system}] if system is not None else []) + p["messages"]
    return to_responses(msgs, extras=False)


@dataclass
class Run:
    """One product run on one case: input and output, canonical and as provider payload."""

    case: dict
    inp: list[Message]
    out: list[Message]
    deepseek: bool = False
    counter: Any = None
    budgeting: Budgeting | None = None
    labels: list[Any] = field(default_factory=list)
    """One label per output *message* (openai / anthropic) or per output *item* (responses)."""
    items_of: dict[str, list[int]] = field(default_factory=dict)
    """Input message id -> its input indices (items for Responses, one index otherwise)."""

    def __post_init__(self) -> None:
        fmt = fmt_of(self.case)
        k = 0
        for m in self.inp:
            n = len(to_responses([m], extras=False)) if fmt == "responses" else 1
            self.items_of[m.id] = list(range(k, k + n))
            k += n
        assert k == len(self.case["messages"])
        by_id = {m.id: m for m in self.inp}
        self.labels = []
        for m in self.out:
            if m.kind == "summary":
                self.labels.append("S")
                continue
            assert m.id in by_id, f"output message {m.id} is neither an input message nor the summary"
            idx = self.items_of[m.id]
            if m == by_id[m.id]:
                self.labels.extend(idx)
            elif Marker.read(m).cleared is not None:
                assert len(idx) == 1
                self.labels.append(f"P{idx[0]}")
            else:
                self.labels.extend(f"~{i}" for i in idx)  # edited in some other way

    @property
    def fmt(self) -> str:
        return fmt_of(self.case)

    @property
    def raw(self) -> list[dict]:
        return self.case["messages"]

    @property
    def payload(self) -> list[dict]:
        return write(self.out, self.fmt, self.deepseek)

    def present(self, i: int) -> bool:
        """Input index ``i`` is represented in the output (verbatim or placeholder)."""
        return i in self.labels or f"P{i}" in self.labels

    def kept_indices(self) -> list[int]:
        out = []
        for lab in self.labels:
            if isinstance(lab, int):
                out.append(lab)
            elif isinstance(lab, str) and lab[:1] in "P~":
                out.append(int(lab[1:]))
        return out

    def summary(self) -> Message:
        s = [m for m in self.out if m.kind == "summary"]
        assert len(s) == 1, f"expected one summary message, got {len(s)}"
        return s[0]

    def payload_of(self, i: int) -> dict:
        """The payload entry standing for input index ``i`` (openai / anthropic: 1 to 1)."""
        assert self.fmt != "responses"
        pos = [k for k, lab in enumerate(self.labels) if lab == i or lab == f"P{i}" or lab == f"~{i}"]
        assert pos, f"input {i} is not in the output {self.labels}"
        return self.payload[pos[0]]


def run_compact(case: dict, pol: Policy, counter: Any, summarizer: Any = None, messages: list[Message] | None = None,
                deepseek: bool = False) -> Run:
    inp = read(case)
    b = Budgeting(pol, counter)
    res = compact(inp if messages is None else messages, b, summarizer or DigestSummarizer())
    r = Run(case, inp, res.messages, deepseek=deepseek, counter=counter, budgeting=b)
    # The product's own promise: the output is valid for the provider and within the hard limit.
    assert provider_check(res.messages, pol.provider, reference=inp) == []
    assert res.size_after <= b.level(pol.hard_limit)
    assert b.size(res.messages) == res.size_after
    return r


# -- the check vocabulary of cases/README.md ---------------------------------------------------


def _tool_calls_openai(d: dict) -> list[str]:
    return [c["id"] for c in d.get("tool_calls") or []]


def _blocks(d: dict) -> list[dict]:
    c = d.get("content")
    return c if isinstance(c, list) else []


def c_no_orphan_tool_results(r: Run, spec: dict) -> None:
    p = r.payload
    if r.fmt == "openai":
        for j, d in enumerate(p):
            if d["role"] != "tool":
                continue
            k = j - 1
            while k >= 0 and p[k]["role"] == "tool":
                k -= 1
            assert k >= 0 and p[k]["role"] == "assistant" and d["tool_call_id"] in _tool_calls_openai(p[k]), \
                f"orphan tool message at output {j}: {r.labels}"
    elif r.fmt == "anthropic":
        for j, d in enumerate(p):
            ids = [b["tool_use_id"] for b in _blocks(d) if b.get("type") == "tool_result"]
            if not ids:
                continue
            prev = p[j - 1] if j else {}
            uses = {b["id"] for b in _blocks(prev) if b.get("type") == "tool_use"} if prev.get("role") == "assistant" else set()
            assert set(ids) <= uses, f"orphan tool_result at output {j}: {r.labels}"
    else:
        seen: set[str] = set()
        for j, it in enumerate(p):
            if it.get("type") == "function_call":
                seen.add(it["call_id"])
            if it.get("type") == "function_call_output":
                assert it["call_id"] in seen, f"function_call_output at output item {j} has no call: {r.labels}"


def c_no_unanswered_tool_calls(r: Run, spec: dict) -> None:
    p = r.payload
    if r.fmt == "openai":
        for j, d in enumerate(p):
            want = set(_tool_calls_openai(d))
            if not want:
                continue
            k, got = j + 1, set()
            while k < len(p) and p[k]["role"] == "tool":
                got.add(p[k]["tool_call_id"])
                k += 1
            assert want <= got, f"unanswered tool calls at output {j}: {sorted(want - got)}"
    elif r.fmt == "anthropic":
        for j, d in enumerate(p):
            want = {b["id"] for b in _blocks(d) if b.get("type") == "tool_use"}
            if want:
                nxt = p[j + 1] if j + 1 < len(p) else {}
                got = {b["tool_use_id"] for b in _blocks(nxt) if b.get("type") == "tool_result"}
                assert want <= got, f"unanswered tool_use at output {j}"
    else:
        for j, it in enumerate(p):
            if it.get("type") == "function_call":
                assert any(x.get("type") == "function_call_output" and x["call_id"] == it["call_id"] for x in p[j + 1:])


def c_system_preserved(r: Run, spec: dict) -> None:
    assert r.labels[0] == 0, f"output[0] is not input[0]: {r.labels}"
    assert r.out[0] == r.inp[0]
    assert json.dumps(r.payload[0], sort_keys=True) == json.dumps(r.raw[0], sort_keys=True)


def c_current_user_preserved(r: Run, spec: dict) -> None:
    i = spec["input_index"]
    assert i in r.labels, f"current user input {i} missing or edited: {r.labels}"
    if r.fmt != "responses":
        assert r.payload_of(i) == r.raw[i]
    # "nothing after it was dropped": B06's own acceptable output drops completed cycles after
    # the input (last resort), so this reads as: the newest message, the one the model answers
    # next (in-flight result or the input itself), is still there and still last.
    last = len(r.raw) - 1
    assert r.present(last) and r.kept_indices()[-1] == last, f"the newest message {last} was dropped: {r.labels}"


def c_kept_verbatim(r: Run, spec: dict) -> None:
    for i in spec["input_indices"]:
        assert i in r.labels, f"input {i} not kept verbatim: {r.labels}"
        if r.fmt != "responses":
            assert r.payload_of(i) == r.raw[i]


def c_atomic_group(r: Run, spec: dict) -> None:
    there = [r.present(i) for i in spec["input_indices"]]
    assert all(there) or not any(there), f"group {spec['input_indices']} split: {r.labels}"


def c_order_preserved(r: Run, spec: dict) -> None:
    kept = r.kept_indices()
    assert kept == sorted(kept), f"order changed: {r.labels}"


def c_first_non_system_role(r: Run, spec: dict) -> None:
    p = [d for d in r.payload if d.get("role") != "system"]
    assert p and p[0]["role"] in spec["allowed"], f"first non-system message is {p[0]['role'] if p else None}"


def c_removed_is_prefix_after_system(r: Run, spec: dict) -> None:
    removed = [i for i in range(len(r.raw)) if not r.present(i)]
    start = 1 if r.raw and r.raw[0].get("role") == "system" else 0
    assert removed == list(range(start, start + len(removed))), f"removed {removed}"


def rule_tokens(text: str) -> float:
    """The cases' approximate rule: CJK 1 token per character, anything else 1 per 4."""
    n = cjk_count(text)
    return n + (len(text) - n) / 4


def _message_text(m: Message) -> str:
    parts = []
    for b in m.blocks:
        if isinstance(b, TextBlock):
            parts.append(b.text)
        elif isinstance(b, ToolUseBlock):
            parts.append(b.name + json.dumps(b.input, ensure_ascii=False))
        elif isinstance(b, ToolResultBlock):
            parts.append(b.text)
        elif getattr(b, "thinking", None):
            parts.append(b.thinking)
    return "".join(parts)


def c_within_budget(r: Run, spec: dict) -> None:
    p = r.payload
    if "max_messages" in spec:
        assert len(p) <= spec["max_messages"], f"{len(p)} messages > {spec['max_messages']}: {r.labels}"
    if "max_non_system_messages" in spec:
        n = sum(1 for d in p if d.get("role") != "system")
        assert n <= spec["max_non_system_messages"], f"{n} non-system messages: {r.labels}"
    if "max_items" in spec:
        assert len(p) <= spec["max_items"], f"{len(p)} items > {spec['max_items']}: {r.labels}"
    if "max_tokens" in spec:
        # the product's own counter, and the case's stated rule (CJK 1/char, other 1/4 chars)
        assert r.budgeting is not None and r.budgeting.size(r.out) <= spec["max_tokens"]
        by_rule = sum(rule_tokens(_message_text(m)) for m in r.out)
        assert by_rule <= spec["max_tokens"], f"{by_rule:.0f} tokens by the case's rule > {spec['max_tokens']}"


def c_output_equals_input(r: Run, spec: dict) -> None:
    assert r.out == r.inp and r.labels == list(range(len(r.raw)))
    assert r.payload == r.raw


def c_last_message_is(r: Run, spec: dict) -> None:
    assert r.labels[-1] == spec["input_index"], f"output ends with {r.labels[-1]}"


def c_summary_position(r: Run, spec: dict) -> None:
    pos = r.labels.index("S")
    after = spec["after_input_index"]
    before_s = [x for x in r.labels[:pos]]
    after_s = [int(str(x).lstrip("P~")) for x in r.labels[pos + 1:]]
    assert before_s and before_s[-1] == after, f"summary not right after input {after}: {r.labels}"
    assert all(int(str(x).lstrip("P~")) <= after for x in before_s)
    assert all(x > after for x in after_s)
    if "before_input_index" in spec:
        assert after_s and after_s[0] == spec["before_input_index"], f"summary not before {spec['before_input_index']}: {r.labels}"


def c_summary_role(r: Run, spec: dict) -> None:
    assert r.summary().role in spec["allowed"]


def c_summary_contains(r: Run, spec: dict) -> None:
    text = r.summary().text
    for pat in spec["patterns"]:
        assert re.search(pat, text), f"summary lacks /{pat}/:\n{text}"


def c_no_system_after_first(r: Run, spec: dict) -> None:
    assert all(d.get("role") != "system" for d in r.payload[1:])


def c_contains_role(r: Run, spec: dict) -> None:
    assert sum(1 for d in r.payload if d.get("role") == spec["role"]) >= spec["min_count"]


def c_no_empty_content(r: Run, spec: dict) -> None:
    for j, m in enumerate(r.out):
        final_assistant = j == len(r.out) - 1 and m.role == "assistant"
        assert m.blocks or final_assistant, f"output {j} is empty"
        for b in m.blocks:
            if isinstance(b, TextBlock):
                assert b.text.strip(), f"output {j} has a blank text block"
            if isinstance(b, ToolResultBlock):
                assert b.output and (b.text.strip() or any(not isinstance(o, TextBlock) for o in b.output))


def c_reasoning_content_preserved(r: Run, spec: dict) -> None:
    for i in spec["input_indices"]:
        if r.present(i):
            assert r.payload_of(i).get("reasoning_content") == r.raw[i]["reasoning_content"]


def c_thinking_blocks_unmodified(r: Run, spec: dict) -> None:
    for j, d in enumerate(r.payload):
        for b in _blocks(d):
            if b.get("type") in ("thinking", "redacted_thinking"):
                src = r.raw[r.kept_indices()[j]] if r.fmt != "responses" else None
                assert src is not None and b in _blocks(src), f"thinking block at output {j} was edited or moved"


def c_thinking_first_in_open_tool_turn(r: Run, spec: dict) -> None:
    d = r.payload_of(spec["input_index"])
    assert _blocks(d) and _blocks(d)[0]["type"] in ("thinking", "redacted_thinking")


def c_estimate_at_least(r: Run, spec: dict) -> None:
    assert r.counter.count_message(r.inp[spec["target_input_index"]]) >= spec["min_tokens"]


def c_estimate_at_most(r: Run, spec: dict) -> None:
    assert r.counter.count_message(r.inp[spec["target_input_index"]]) <= spec["max_tokens"]


def c_over_budget_detected(r: Run, spec: dict) -> None:
    assert r.budgeting is not None
    assert r.budgeting.size(r.inp) > r.budgeting.level(r.budgeting.policy.hard_limit)


CHECKS: dict[str, Callable[[Run, dict], None]] = {
    name[2:]: fn for name, fn in globals().items() if name.startswith("c_") and callable(fn)
}


def assert_case(r: Run, *, skip: tuple[str, ...] = (), run: str | None = None) -> None:
    """Every assertion of the case (those of another run or checked by the test itself are
    named in ``skip``), and membership in ``acceptable_outputs``."""
    for spec in r.case["expected"]["assertions"]:
        name = spec["check"]
        if name in skip or spec.get("run") != run:
            continue
        assert name in CHECKS, f"no implementation for check {name!r}"
        CHECKS[name](r, spec)
    ok = r.case["expected"].get("acceptable_outputs")
    if ok is not None and run is None:
        assert r.labels in ok, f"output {r.labels} is not one of {ok}"


# -- hard trim: B01, B04, B05, B06 -------------------------------------------------------------


def test_b01_trim_never_leaves_a_leading_tool_result(shared_dir: Path) -> None:
    case = load_case(shared_dir, "B01")
    # A pure hard-trim case: budget 6 messages with the system prompt counted, no summarizing.
    pol = policy(budget=6, unit="tokens", summarize=False)
    r = run_compact(case, pol, MessageCounter())
    assert_case(r)


def test_b04_tool_role_with_plain_string_content_is_a_pair_member(shared_dir: Path) -> None:
    case = load_case(shared_dir, "B04")
    # 3 non-system messages; the system prompt counts separately (count_system=False). The
    # last message is the assistant's reply, so the current turn is [4, 5]; pure trim.
    pol = policy(budget=3, unit="tokens", count_system=False, summarize=False)
    r = run_compact(case, pol, MessageCounter())
    assert_case(r)


def test_b05_system_prompt_is_never_truncated(shared_dir: Path) -> None:
    case = load_case(shared_dir, "B05")
    # Truncation (no summarizing) to 3 non-system messages; the system prompt is kept apart.
    pol = policy(budget=3, unit="tokens", count_system=False, summarize=False)
    r = run_compact(case, pol, MessageCounter())
    assert_case(r)


def test_b06_current_user_input_survives_a_long_tool_loop(shared_dir: Path) -> None:
    case = load_case(shared_dir, "B06")
    # 8 messages with the system prompt; one user turn of 6 cycles, the last one in flight.
    # Nothing older than the current turn exists, so only the last resort can act.
    pol = policy(budget=8, unit="tokens")
    r = run_compact(case, pol, MessageCounter())
    assert_case(r)
    assert any(e.stage == "trimming" for e in compact(r.inp, r.budgeting, DigestSummarizer()).events)


# -- summaries: B02, B08, B20 --------------------------------------------------------------------


def test_b02_summary_cut_never_splits_a_parallel_batch(shared_dir: Path) -> None:
    case = load_case(shared_dir, "B02")
    # "summarize all but the last 5" (system not counted): budget 7 messages, summarizing fires
    # above 0.8 x 7 and wants to keep 0.72 x 7 = 5 recent messages verbatim. Keeping the last 5
    # would cut between the results of the parallel batch 2..5. No clearing (messages unit:
    # a placeholder saves nothing) and no hard trim needed.
    pol = policy(budget=7, unit="tokens", count_system=False, summary_keep_recent=0.72,
                 summarize_at=0.8, hard_limit=1.0)
    r = run_compact(case, pol, MessageCounter())
    assert_case(r)
    assert r.summary().role == "user"


def test_b08_summary_replaces_exactly_the_summarized_range(shared_dir: Path) -> None:
    case = load_case(shared_dir, "B08")
    # 10 non-system messages, budget 10: summarizing fires above 8 and keeps 5 recent messages
    # verbatim (0.5 x 10), so the material is 1..5 (request + steps 1-2) and 6..10 stay.
    pol = policy(budget=10, unit="tokens", count_system=False, summary_keep_recent=0.5)
    r = run_compact(case, pol, MessageCounter())
    assert_case(r)


def test_b20_constraints_survive_two_compactions_and_rerun_is_a_no_op(shared_dir: Path) -> None:
    case = load_case(shared_dir, "B20")
    # Budget 6 messages (system counted): the 8-message input is over the hard limit and at a
    # turn boundary, summarizing keeps only the current input (0.2 x 6 = 1 message) and turns
    # 1..6 into one summary; [0, S, 7] (3) is under clear_at (3), so a rerun is a no-op.
    pol = policy(budget=6, unit="tokens")
    counter = MessageCounter()
    out1 = run_compact(case, pol, counter)
    assert out1.labels == [0, "S", 7]
    assert_case(out1, run="out1", skip=("idempotent",))
    assert_case(out1, skip=("summary_contains", "idempotent"))

    # out2: the agent goes on, the user adds a message; the summary is rolled into a new one.
    more = [Message(id="x-a1", role="assistant", blocks=[TextBlock(text="Booking venue 0.")]),
            Message(id="x-u1", role="user", blocks=[TextBlock(text="Confirm the headcount.")])]
    b = Budgeting(pol, counter)
    res2 = compact(out1.out + more, b, DigestSummarizer())
    assert any(e.stage == "summarizing" and e.detail["rolled_previous"] for e in res2.events)
    out2 = Run(case, out1.inp, [m for m in res2.messages if m.id not in ("x-a1", "x-u1")], counter=counter, budgeting=b)
    assert_case(out2, run="out2")
    assert res2.messages[-1].id == "x-u1"

    # out1b: compaction of an unchanged history changes nothing.
    res1b = compact(out1.out, b, DigestSummarizer())
    assert res1b.events == [] and res1b.messages == out1.out


# -- in-flight results and tokens: B10, B15, B16 -------------------------------------------------


@pytest.mark.parametrize("keep_recent", [1, 2])
def test_b10_in_flight_result_stays_structured_and_last(shared_dir: Path, keep_recent: int) -> None:
    case = load_case(shared_dir, "B10")
    # 1000 tokens (estimate counter). The last message is the fresh df result: no summary
    # mid-turn, clearing is the stage that acts. keep_recent_cycles=1 protects only the
    # latest cycle (the in-flight one), so the old host list (index 3) is cleared at clear_at;
    # with the default 2 it is protected there, and cleared above the hard limit rather than
    # its whole turn dropped.
    pol = policy(budget=1000, unit="tokens", tokenizer="estimate", keep_recent_cycles=keep_recent)
    r = run_compact(case, pol, get_counter("estimate"))
    assert_case(r)


@pytest.mark.parametrize("tokenizer", ["estimate", "o200k_base"])
def test_b15_cjk_history_is_over_budget_and_reduced(shared_dir: Path, tokenizer: str) -> None:
    case = load_case(shared_dir, "B15")
    # 1000 tokens; CJK counted by the real estimate (>= 0.6 per character) or o200k.
    pol = policy(budget=1000, unit="tokens", tokenizer=tokenizer)
    r = run_compact(case, pol, get_counter(tokenizer))
    assert_case(r)


def test_b16_image_in_tool_result_fits_so_nothing_changes(shared_dir: Path) -> None:
    case = load_case(shared_dir, "B16")
    # 4000 tokens, Anthropic: images by the w*h/750 rule (estimate counter), never base64.
    pol = policy(budget=4000, unit="tokens", tokenizer="estimate", provider="anthropic")
    r = run_compact(case, pol, get_counter("estimate"))
    assert r.out is r.inp or r.out == r.inp
    assert_case(r)


# -- reasoning: B11, B12 ---------------------------------------------------------------------------


def test_b11_deepseek_reasoning_content_is_passed_back(shared_dir: Path) -> None:
    case = load_case(shared_dir, "B11")
    # 100k tokens: it fits, nothing changes, and the payload carries reasoning_content.
    pol = policy(budget=100_000, unit="tokens", tokenizer="deepseek", provider="deepseek")
    r = run_compact(case, pol, get_counter("deepseek"), deepseek=True)
    assert_case(r)


@pytest.mark.parametrize("budget", [8, 7, 6, 5, 4])
def test_b11_under_pressure_the_tool_span_goes_whole_or_stays_whole(shared_dir: Path, budget: int) -> None:
    case = load_case(shared_dir, "B11")
    # Squeezed in messages, with summarizing keeping only 1-2 recent messages: any cut inside
    # the tool-using span 3..7 would strip reasoning_content from part of it. Whatever stage
    # acts, the span's assistant/tool messages stay together with their reasoning_content.
    pol = policy(budget=budget, unit="tokens", provider="deepseek", summary_keep_recent=0.3)
    r = run_compact(case, pol, MessageCounter(), deepseek=True)
    for spec in case["expected"]["assertions"]:
        CHECKS[spec["check"]](r, spec)
    c_current_user_preserved(r, {"input_index": 8})
    c_system_preserved(r, {})


def unbound(m):
    """``m`` without the ``bound_prefix`` key ctxwise's marker adds at append."""
    mark = {k: v for k, v in m.metadata.get("ctxwise", {}).items() if k != "bound_prefix"}
    meta = {k: v for k, v in m.metadata.items() if k != "ctxwise"}
    return m.model_copy(update={"metadata": {**meta, **({"ctxwise": mark} if mark else {})}})


def test_b12_thinking_block_survives_persist_and_reload(shared_dir: Path, tmp_path: Path) -> None:
    case = load_case(shared_dir, "B12")
    url = f"sqlite:///{tmp_path / 'b12.db'}"
    pol = policy(budget=100_000, unit="tokens", tokenizer="estimate", provider="anthropic")
    inp = read(case)
    cm = ContextManager(url, pol)
    s = cm.session("u1", "b12")
    s.append(inp)                                   # save(session)
    cm.close()
    cm2 = ContextManager(url, pol)                  # a new process: load(session_id)
    s2 = cm2.session("u1", "b12")
    # roundtrip_equal, canonical; ctxwise's own marker adds the digest of the prefix each
    # thinking block is bound to (Anthropic preserved thinking), a key of its own, never sent
    assert [unbound(m) for m in s2.messages] == inp
    assert write(s2.messages, "anthropic") == case["messages"]
    assert to_anthropic([unbound(m) for m in s2.messages]) == to_anthropic(inp)
    prepared = s2.prepare()                         # request = build_request(session2)
    cm2.close()
    assert prepared.payload == to_payload(prepared.messages, "anthropic")
    r = Run(case, inp, [unbound(m) for m in prepared.messages], counter=get_counter("estimate"))
    assert r.payload == case["messages"]
    assert_case(r, skip=("roundtrip_equal",))
    # the provider request carries the system prompt top-level (Anthropic has no system role)
    assert prepared.payload["system"] == case["messages"][0]["content"]
    first = prepared.payload["messages"][1]["content"][0]
    assert first == case["messages"][2]["content"][0]  # text and signature byte-identical


# -- clearing persisted through the engine: B18 ------------------------------------------------


def test_b18_cleared_state_is_persisted_stable_and_only_grows(shared_dir: Path, tmp_path: Path) -> None:
    case = load_case(shared_dir, "B18")
    # The case's sizes are "1 token per 4 characters" (the supplier lists are dense digits and
    # commas, which real tokenizers split far finer), so the budget is in chars: clearing
    # fires above 12,000 chars (= 3,000 tokens by the case's rule; 0.5 x 24,000) and keeps the
    # last 2 tool results (keep_recent_cycles=2, the default). Summarizing (0.8) and the hard
    # limit are not reached once clearing has run.
    pol = policy(budget=24_000, unit="chars", clear_at=0.5, keep_recent_cycles=2)
    url = f"sqlite:///{tmp_path / 'b18.db'}"
    inp = read(case)
    cm = ContextManager(url, pol)
    s = cm.session("u1", "b18")
    s.append(inp)
    p1 = s.prepare()                                                    # out1, persisted
    out1 = Run(case, inp, p1.messages, counter=s.counter)
    cleared1 = [int(str(x)[1:]) for x in out1.labels if str(x).startswith("P")]
    assert cleared1 == [3, 5]                                           # cleared_input_indices
    assert len(p1.messages) == len(inp)                                 # message_count_unchanged
    _tool_ids_preserved(inp, p1.messages)
    for i in cleared1:
        _placeholder_ok(pol, inp, i, p1.messages[i])
    # persisted_equals_sent: a fresh manager on the same file reads back exactly what was sent
    cm_b = ContextManager(url, pol)
    s_b = cm_b.session("u1", "b18")
    assert s_b.messages == p1.messages
    assert to_payload(s_b.messages, pol.provider) == p1.payload
    cm_b.close()

    # out1b: preparing again with nothing new is a no-op (nothing edited, nothing written)
    v = s.version
    p1b = s.prepare()
    assert p1b.events == [] and p1b.messages == p1.messages and p1b.payload == p1.payload and s.version == v

    # out2: the E call and its result (same size as the others) arrive; the session reloads
    # from the store (the next turn starts from the persisted, cleared state).
    body = case["messages"][3]["content"].replace("supplier A", "supplier E").replace("A-", "E-")
    e_call = Message(id="m0012", role="assistant", blocks=[ToolUseBlock(id="call_p5", name="get_price", input={"supplier": "E"})])
    e_res = Message(id="m0013", role="tool", blocks=[ToolResultBlock(tool_use_id="call_p5", name="get_price",
                                                                       output=[TextBlock(text=body)])])
    cm2 = ContextManager(url, pol)
    s2 = cm2.session("u1", "b18")
    s2.append([e_call, e_res])
    p2 = s2.prepare()
    hist2 = inp + [e_call, e_res]
    out2 = Run({**case, "messages": case["messages"] + to_openai([e_call, e_res], extras=False)}, hist2, p2.messages)
    cleared2 = [int(str(x)[1:]) for x in out2.labels if str(x).startswith("P")]
    assert cleared2 == [3, 5, 7]                                        # cleared_superset, 9 and 13 kept
    assert set(cleared1) <= set(cleared2)
    for i in range(11):                                                 # prefix_stable
        if i != 7:
            assert p2.messages[i] == p1.messages[i]
            assert p2.payload[i] == p1.payload[i]
    assert p2.messages[13] == e_res and p2.messages[9] == inp[9]
    _tool_ids_preserved(hist2, p2.messages)
    _placeholder_ok(pol, inp, 7, p2.messages[7])
    cm3 = ContextManager(url, pol)
    assert cm3.session("u1", "b18").messages == p2.messages            # persisted_equals_sent (out2)
    cm3.close()
    cm2.close()
    cm.close()


def _tool_ids_preserved(before: list[Message], after: list[Message]) -> None:
    assert [(m.id, m.role) for m in after] == [(m.id, m.role) for m in before]
    for a, b in zip(before, after):
        assert [(u.id, u.name, u.input) for u in a.tool_uses] == [(u.id, u.name, u.input) for u in b.tool_uses]
        assert [(t.tool_use_id, t.name, t.state) for t in a.tool_results] == [
            (t.tool_use_id, t.name, t.state) for t in b.tool_results]


def _placeholder_ok(pol: Policy, inp: list[Message], i: int, cleared: Message) -> None:
    """placeholder_non_empty_and_constant: one non-empty text block, a pure function of the
    cleared result and its call (so the same result always gets the same bytes)."""
    res = cleared.tool_results[0]
    assert len(res.output) == 1 and isinstance(res.output[0], TextBlock) and res.text.strip()
    call = inp[i - 1].tool_uses[0]
    assert res.text == placeholder_text(pol, inp[i].tool_results[0], call.input)


# -- the floor above the budget: B19 -----------------------------------------------------------


@pytest.mark.parametrize("tokenizer", ["estimate", "o200k_base"])
def test_b19_floor_over_budget_raises_without_summarizing_again(shared_dir: Path, tokenizer: str) -> None:
    case = load_case(shared_dir, "B19")
    pol = policy(budget=2000, unit="tokens", tokenizer=tokenizer)
    counter = get_counter(tokenizer)
    inp = read(case)
    b = Budgeting(pol, counter)
    summ = CountingDigest()
    with pytest.raises(ContextBudgetExceeded) as r1:                    # status: over_budget
        compact(inp, b, summ)
    assert summ.calls <= 1                                              # max_summarizer_calls per call
    rep = r1.value.report
    assert rep.pinned > rep.budget and rep.unit == "tokens"             # names the irreducible size
    # r2: called again with nothing new, no further summarization attempt
    summ2 = CountingDigest()
    with pytest.raises(ContextBudgetExceeded):
        compact(inp, b, summ2)
    assert summ2.calls == 0
    # system_preserved / current_user_preserved: nothing was dropped or truncated to get under
    assert inp == read(case)


# -- Responses items: B14 ---------------------------------------------------------------------


def test_b14_responses_history_is_cut_only_at_group_boundaries(shared_dir: Path) -> None:
    case = load_case(shared_dir, "B14")
    # 4 items; a pure trim (no summarizing), under the Responses profile.
    pol = policy(budget=4, unit="tokens", summarize=False, provider="openai_responses")
    r = run_compact(case, pol, ItemCounter())
    assert_case(r)


def test_b19_kind_no_summary_attempt_when_the_floor_is_over_even_with_old_material(shared_dir: Path) -> None:
    case = load_case(shared_dir, "B19")
    # The same floor, with a long old turn that summarizing could condense: still no attempt,
    # because no summary can bring system prompt + current input under the budget.
    raw = json.loads(json.dumps(case["messages"]))
    raw[2]["content"] = "Two changes: a new canary stage and a longer health-check timeout. " * 60
    inp = from_openai(raw)
    pol = policy(budget=2000, unit="tokens", tokenizer="estimate")
    b = Budgeting(pol, get_counter("estimate"))
    for _ in range(2):
        summ = CountingDigest()
        with pytest.raises(ContextBudgetExceeded) as e:
            compact(inp, b, summ)
        assert summ.calls == 0
        assert e.value.report.pinned > e.value.report.budget
