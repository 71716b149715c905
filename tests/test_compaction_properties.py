"""Property tests: generated sessions, many budgets, every provider profile.

For every generated session and budget, ``compact`` either raises ContextBudgetExceeded or
returns a context that satisfies every property in :data:`PROPERTIES`. The number of examples
comes from the Hypothesis profile (tests/conftest.py: ``ci`` 1,000, ``bench`` 10,000 -- the
bench run is bench/properties.py, its result bench/results/properties.md).

Fault kinds: invalid payloads after compaction (provider rules, and the rendered payload's wire
schema), over-budget output, reordering, edited pinned items, an edited latest assistant
thinking block (Anthropic), a budget error while a reducible item could still go, and
non-idempotent compaction (a second compact re-firing a stage, e.g. ``summarizer_failed``).
"""

from __future__ import annotations

import itertools
from typing import Callable

from hypothesis import given
from hypothesis import strategies as st

from ctxwise.compaction import Budgeting, compact
from ctxwise.compaction.context import current_turn_start, holds_provider_compaction, pinned_indices
from ctxwise.errors import ContextBudgetExceeded
from ctxwise.messages import (
    AudioBlock,
    DocumentBlock,
    ImageBlock,
    Message,
    ProviderBlock,
    SearchResultBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from ctxwise.policy import Policy
from ctxwise.providers import check, check_wire, get_profile, render, wire
from ctxwise.providers.profiles import BREAKPOINT_TARGETS, cache_breakpoint_profile
from ctxwise.summarizers import DigestSummarizer
from ctxwise.tokens import get_counter
from ctxwise.units import tool_cycles

WORDS = ["order", "#W2378156", "refund", "500 USD", "2025-03-14", "not", "耳机", "没有声音", "退货", "かな", "ok"]
PNG_1x1 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
PROVIDERS = ["openai", "openai_responses", "deepseek", "anthropic", "qwen", "gemini"]

text_st = st.lists(st.sampled_from(WORDS), min_size=1, max_size=40).map(" ".join)
body_st = st.integers(min_value=10, max_value=3000)


ID_STYLES = ["plain", "plain", "long", "foreign", "reused"]
"""Tool call id styles (issue 25 item 5): ``call_N``; over OpenAI's 40 characters; Kimi-style
``functions.name:N`` outside Anthropic's charset; tau-bench ids reused across turns."""


def _server_tool_blocks(draw, ids, provider: str) -> list:
    """A provider-run tool turn kept verbatim: Anthropic ``server_tool_use`` +
    ``web_search_tool_result`` (anthropic/types/server_tool_use_block_param.py,
    web_search_tool_result_block_param.py) and a cited answer; Responses ``web_search_call``
    or ``shell_call`` + ``shell_call_output`` (openai/types/responses/response_input_item_param.py)."""
    n = next(ids)
    body = "r" * draw(body_st)
    if provider == "anthropic":
        use = {"type": "server_tool_use", "id": f"srvtoolu_{n}", "name": "web_search", "input": {"query": draw(text_st)}}
        res = {"type": "web_search_tool_result", "tool_use_id": f"srvtoolu_{n}", "content": [
            {"type": "web_search_result", "url": f"https://e.x/{n}", "title": draw(text_st), "encrypted_content": body}]}
        cites = [{"type": "web_search_result_location", "url": f"https://e.x/{n}", "title": "t",
                  "encrypted_index": "Eo8", "cited_text": draw(text_st)}]
        return [ProviderBlock(provider="anthropic", kind="server_tool_use", raw=use, call_id=use["id"]),
                ProviderBlock(provider="anthropic", kind="web_search_tool_result", raw=res, call_id=use["id"]),
                TextBlock(text=draw(text_st), citations=cites)]
    if draw(st.booleans()):
        item = {"type": "web_search_call", "id": f"ws_{n}", "status": "completed",
                "action": {"type": "search", "query": draw(text_st)}}
        return [ProviderBlock(provider="openai_responses", kind="web_search_call", raw=item),
                TextBlock(text=draw(text_st))]
    call = {"type": "shell_call", "call_id": f"call_s{n}", "action": {"commands": ["ls"]}, "status": "completed"}
    out = {"type": "shell_call_output", "call_id": f"call_s{n}",
           "output": [{"stdout": body, "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}]}
    return [ProviderBlock(provider="openai_responses", kind="shell_call", raw=call, call_id=call["call_id"]),
            ProviderBlock(provider="openai_responses", kind="shell_call_output", raw=out, call_id=call["call_id"]),
            TextBlock(text=draw(text_st))]


def _user_blocks(draw, provider: str) -> list:
    """A user input, with a document (any provider that takes one), an Anthropic search result,
    an image (every provider: DeepSeek and Qwen3 get it as a reported note) or an audio clip
    (the targets that take one: OpenAI Chat Completions and Gemini's OpenAI endpoint)."""
    blocks: list = [TextBlock(text=draw(text_st))]
    kind = draw(st.sampled_from(["text", "text", "document", "search_result", "image", "audio"]))
    if kind == "image":
        blocks.append(ImageBlock(media_type="image/png", data=PNG_1x1))
    elif kind == "audio" and provider in ("openai", "gemini"):
        blocks.append(AudioBlock(data="UklGRg==", format="wav"))
    if kind == "document" and provider in ("anthropic", "openai_responses", "openai"):
        blocks.insert(0, DocumentBlock(source_type="base64", media_type="application/pdf", data="JVBERi0xLjQK" * draw(st.integers(1, 50)),
                                       title="doc" if provider == "anthropic" else None, filename=None if provider == "anthropic" else "a.pdf"))
    elif kind == "search_result" and provider == "anthropic":
        blocks.insert(0, SearchResultBlock(source="https://kb.e.x", title=draw(text_st),
                                           content=[TextBlock(text=draw(text_st))], citations={"enabled": True}))
    return blocks


@st.composite
def sessions(draw):
    """(messages, provider, thinking_on) for a random tool-using session, with
    mid-conversation system messages (reminders; issue 25 item 4) and call ids of every style
    (:data:`ID_STYLES`)."""
    provider = draw(st.sampled_from(PROVIDERS))
    thinking_on = provider in ("deepseek", "anthropic") and draw(st.booleans())
    ids = itertools.count()
    nid = lambda p: f"{p}{next(ids)}"  # noqa: E731
    id_style = draw(st.sampled_from(ID_STYLES))

    def call_id(name: str, k: int) -> str:
        n = next(ids)
        return {"plain": f"call_{n}", "long": f"call_{'x' * 45}_{n}", "foreign": f"functions.{name}:{n}",
                "reused": f"call_{k}"}[id_style]

    msgs = [Message(id=nid("s"), role="system", blocks=[TextBlock(text=draw(text_st))])]
    if provider == "anthropic" and draw(st.integers(0, 3)) == 0:
        # a history that opens with server-side compaction's block: ctxwise's native summary
        # (user) or the returned message swapped in front (assistant), SDK anthropic 2.17
        # types/compaction_block_misplaced_error.py: it must stay the first block
        raw = {"type": "compaction", "content": draw(text_st), "signature": f"sig-c{next(ids)}"}
        msgs.append(Message(id=nid("c"), role=draw(st.sampled_from(["user", "assistant"])),
                            blocks=[ProviderBlock(provider="anthropic", kind="compaction", raw=raw)]))

    def assistant(blocks):
        if thinking_on:
            sig = "sig-" + str(next(ids)) if provider == "anthropic" else None
            blocks = [ThinkingBlock(thinking=draw(text_st), signature=sig)] + blocks
        return Message(id=nid("a"), role="assistant", blocks=blocks)

    for _ in range(draw(st.integers(1, 9))):
        if draw(st.integers(0, 4)) == 0:  # a reminder before the user's input
            msgs.append(Message(id=nid("r"), role="system", blocks=[TextBlock(text="Reminder: " + draw(text_st))]))
        msgs.append(Message(id=nid("u"), role="user", blocks=_user_blocks(draw, provider)))
        if provider in ("anthropic", "openai_responses") and draw(st.integers(0, 3)) == 0:
            msgs.append(assistant(_server_tool_blocks(draw, ids, provider)))
            msgs.append(Message(id=nid("u"), role="user", blocks=[TextBlock(text=draw(text_st))]))
        for _ in range(draw(st.integers(0, 3))):
            n_par = draw(st.integers(1, 3))
            names = [draw(st.sampled_from(["search", "get_order", "screenshot"])) for _ in range(n_par)]
            uses = [ToolUseBlock(id=call_id(name, k), name=name, input={"q": draw(text_st)})
                    for k, name in enumerate(names)]
            msgs.append(assistant(list(uses)))
            for u in uses:
                out = [TextBlock(text="r" * draw(body_st) + " " + draw(text_st))]
                if u.name == "screenshot":
                    out.append(ImageBlock(media_type="image/png", data=PNG_1x1))
                state = draw(st.sampled_from(["success", "success", "error"]))
                msgs.append(Message(id=nid("t"), role="tool", blocks=[
                    ToolResultBlock(tool_use_id=u.id, name=u.name, state=state, output=out)]))
        msgs.append(assistant([TextBlock(text=draw(text_st))]))
        if draw(st.integers(0, 6)) == 0:  # a mode switch after the reply
            msgs.append(Message(id=nid("r"), role="system", blocks=[TextBlock(text="Mode: " + draw(text_st))]))
    if draw(st.booleans()):
        msgs.append(Message(id=nid("u"), role="user", blocks=[TextBlock(text=draw(text_st))]))
    return msgs, provider, thinking_on


def budgeting(budget: int, counter_name: str, preset: str, provider: str) -> Budgeting:
    unit = "chars" if counter_name == "chars" else "tokens"
    policy = Policy.preset(preset, budget=budget, unit=unit, tokenizer=counter_name if unit == "tokens" else "o200k_base",
                           provider=provider, clearable_tools=["*"])
    return Budgeting(policy, get_counter(policy.counter_name))


def floor_size(msgs: list[Message], b: Budgeting) -> int:
    """What no stage may remove from a context without an in-flight cycle: the pinned system
    messages, a provider's own compaction block or item (kept verbatim like a ctxwise summary,
    issue 25 item 2), the current user input and the current turn's messages outside completed
    tool cycles."""
    cur = current_turn_start(msgs)
    in_cycles = {i for c in tool_cycles(msgs) if c.complete for i in range(c.start, c.end)}
    pinned = pinned_indices(msgs)
    keep = [m for i, m in enumerate(msgs) if (m.role == "system" and i in pinned) or holds_provider_compaction(m)
            or (i >= cur and i not in in_cycles)]
    return b.overhead + sum(b.size_of(m) for m in keep)


Check = Callable[[list[Message], list[Message], Budgeting, object, str, bool], str | None]


def _rules(msgs, ctx, b, out, provider, thinking_on):
    v = check(ctx, provider, reference=msgs, thinking=thinking_on or None)
    return f"provider rules: {v[:3]}" if v else None


def _wire(msgs, ctx, b, out, provider, thinking_on):
    # with the SDK request types too (the test extra installs both SDKs), restored afterwards
    before = wire._always
    wire.use_sdk_types(True)
    try:
        v = check_wire(render(ctx, provider), provider)
        if not v and provider in BREAKPOINT_TARGETS:  # gpt-5.6: explicit cache breakpoints placed
            bp = cache_breakpoint_profile(get_profile(provider), 4)
            v = check_wire(render(ctx, bp), bp)
    finally:
        wire.use_sdk_types(before)
    return f"wire check: {v[:3]}" if v else None


def _budget(msgs, ctx, b, out, provider, thinking_on):
    hard = b.level(b.policy.hard_limit)
    if out.size_after > hard or b.size(ctx) != out.size_after:
        return f"size {out.size_after} (measured {b.size(ctx)}) vs hard limit {hard}"
    return None


def _order(msgs, ctx, b, out, provider, thinking_on):
    pos = {m.id: i for i, m in enumerate(msgs)}
    kept = [pos[m.id] for m in ctx if m.id in pos]
    return None if kept == sorted(kept) else f"order changed: {kept}"


def _pinned(msgs, ctx, b, out, provider, thinking_on):
    by_id = {m.id: m for m in ctx}
    bad = [msgs[i].id for i in pinned_indices(msgs) if by_id.get(msgs[i].id) != msgs[i]]
    return f"pinned items changed or gone: {bad}" if bad else None


def _latest_thinking(msgs, ctx, b, out, provider, thinking_on):
    if not get_profile(provider).keep_latest_assistant_thinking:
        return None
    last = next((m for m in reversed(ctx) if m.role == "assistant"), None)
    rec = {m.id: m for m in msgs}
    if last is not None and last.id in rec and last.thinking != rec[last.id].thinking:
        return f"latest assistant message {last.id} lost or changed its thinking"
    return None


def _provider_blocks(msgs, ctx, b, out, provider, thinking_on):
    """Provider blocks (server tools, hosted calls) are never edited: each one in the output is
    byte-identical to one of the input, and its message keeps every one it had."""
    def blocks(m):
        return [x for x in m.blocks if isinstance(x, ProviderBlock)]
    rec = {m.id: m for m in msgs}
    for m in ctx:
        if blocks(m) and (m.id not in rec or blocks(m) != blocks(rec[m.id])):
            return f"provider blocks of {m.id} changed"
    return None


def _idempotent(msgs, ctx, b, out, provider, thinking_on):
    again = compact(ctx, b, DigestSummarizer(), skip_summaries=out.failed_summaries)
    if again.events or again.messages != ctx:
        return f"a second compact changed something: {[(e.stage, e.detail) for e in again.events]}"
    return None


PROPERTIES: dict[str, Check] = {
    "valid under the provider rules": _rules,
    "rendered payload passes the wire check": _wire,
    "within the hard limit, size measured right": _budget,
    "input order kept": _order,
    "pinned items byte-identical": _pinned,
    "latest assistant thinking unchanged (Anthropic)": _latest_thinking,
    "idempotent (compacting the output changes nothing)": _idempotent,
    "provider blocks kept verbatim": _provider_blocks,
}
BUDGET_EXCEEDED = "ContextBudgetExceeded only when the floor does not fit"


def run_properties(session, budget: int, counter_name: str, preset: str) -> dict[str, str | None]:
    """Compact one generated session and check every property; property name -> failure text
    (None when it holds). Shared with bench/properties.py."""
    msgs, provider, thinking_on = session
    b = budgeting(budget, counter_name, preset, provider)
    try:
        out = compact(msgs, b, DigestSummarizer())
    except ContextBudgetExceeded as e:
        hard = b.level(b.policy.hard_limit)
        ok = e.report.total > hard and floor_size(msgs, b) > hard
        return {BUDGET_EXCEEDED: None if ok else f"raised with floor {floor_size(msgs, b)} <= hard limit {hard}"}
    result: dict[str, str | None] = {BUDGET_EXCEEDED: None}
    for name, fn in PROPERTIES.items():
        result[name] = fn(msgs, out.messages, b, out, provider, thinking_on)
    return result


@given(sessions(), st.integers(min_value=300, max_value=20_000), st.sampled_from(["chars", "o200k_base", "estimate"]),
       st.sampled_from(["default", "ragent"]))
def test_compacted_context_has_every_property(session, budget, counter_name, preset):
    failed = {k: v for k, v in run_properties(session, budget, counter_name, preset).items() if v}
    assert not failed, failed
