"""Every recorded conversation loads, writes back to its own file shape, and survives
canonical → OpenAI / Anthropic / AgentScope / Responses → canonical with no loss."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import TRAJECTORIES
from ctxwise.formats import READERS, WRITERS, dump, load, to_taubench, to_tau2
from ctxwise.messages import ThinkingBlock, ToolResultBlock, ToolUseBlock

FILES = sorted(TRAJECTORIES.glob("*/*.json"))


@pytest.fixture(scope="module")
def loaded() -> dict[Path, list]:
    assert len(FILES) == 4, f"expected the 4 trajectory files under {TRAJECTORIES}"
    return {f: load(f) for f in FILES}


def test_all_conversations_load(loaded):
    counts = {f.name: len(c) for f, c in loaded.items()}
    assert sum(counts.values()) == 270
    for convs in loaded.values():
        assert len({c.id for c in convs}) == len(convs)
        for c in convs:
            assert c.messages[0].role == "system" and c.messages[0].text
            assert [m.id for m in c.messages] == [f"m{i:04d}" for i in range(len(c.messages))]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_file_writes_back_identically(path, loaded):
    convs = loaded[path]
    original = json.loads(path.read_text())
    back = to_tau2(convs) if convs[0].format == "tau2" else to_taubench(convs)
    assert back == original
    # the upstream byte layout too (indent=2, ASCII; tau-bench adds a trailing newline)
    assert json.dumps(back, indent=2, ensure_ascii=True) == path.read_text().rstrip("\n")
    for c, rec in zip(convs, original["simulations"] if isinstance(original, dict) else original):
        assert dump(c, c.format) == rec


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "agentscope", "responses"])
def test_canonical_round_trip_through_every_format(fmt, loaded):
    for convs in loaded.values():
        for c in convs:
            out = WRITERS[fmt](c.messages)
            json.dumps(out)  # JSON-able
            assert READERS[fmt](out) == c.messages, f"{c.source}: {c.id} via {fmt}"


def test_extras_false_gives_clean_payloads(loaded):
    """extras=False: no ctxwise keys; loses only what the docstrings say (metadata, signatures
    in chat, the error state in chat, the split of parallel results in Anthropic)."""
    conv = next(c for c in loaded[TRAJECTORIES / "tau2-bench" / "airline_claude-sonnet-4-5-thinking_subset.json"]
                if any(m.thinking and m.tool_uses for m in c.messages))
    chat = WRITERS["openai"](conv.messages, extras=False)
    text = json.dumps(chat)
    assert "_ctxwise" not in text and "raw_data" not in text and "turn_idx" not in text
    back = READERS["openai"](chat)
    assert len(back) == len(conv.messages)
    for a, b in zip(back, conv.messages):
        assert [x.type for x in a.blocks] == [x.type for x in b.blocks]
        assert [t.thinking for t in a.thinking] == [t.thinking for t in b.thinking]
        assert all(t.signature is None for t in a.thinking)  # chat cannot hold signatures
    anth = WRITERS["anthropic"](conv.messages, extras=False)
    assert "_ctxwise" not in json.dumps(anth)
    sigs = [b["signature"] for m in anth["messages"] if m["role"] == "assistant"
            for b in m["content"] if isinstance(b, dict) and b.get("type") == "thinking"]
    assert sigs and all(sigs)


def test_tau2_keeps_usage_thinking_and_pairs(loaded):
    convs = loaded[TRAJECTORIES / "tau2-bench" / "airline_claude-sonnet-4-5-thinking_subset.json"]
    with_thinking = 0
    for c in convs:
        calls = {}
        for m in c.messages:
            if m.role == "assistant" and m.metadata.get("raw_data"):
                assert m.metadata["usage"]["prompt_tokens"] > 0
                assert isinstance(m.blocks[0], ThinkingBlock) and m.blocks[0].signature
                assert "thinking_blocks" not in m.metadata["raw_data"]  # not kept twice
                with_thinking += 1
            for u in m.tool_uses:
                calls[u.id] = u
            for r in m.tool_results:
                assert r.name == calls[r.tool_use_id].name
    assert with_thinking == 376
    assert convs[0].id == json.loads(convs[0].source and Path(convs[0].source).read_text())["simulations"][0]["id"]


def test_taubench_reused_call_ids_pair_by_position(loaded):
    convs = loaded[TRAJECTORIES / "tau-bench" / "gpt-4o-airline_subset.json"]
    reused = 0
    for c in convs:
        seen = set()
        for i, m in enumerate(c.messages):
            for u in m.tool_uses:
                reused += u.id in seen
                seen.add(u.id)
                nxt = c.messages[i + 1]
                assert isinstance(nxt.blocks[0], ToolResultBlock) and nxt.blocks[0].tool_use_id == u.id
                assert nxt.blocks[0].name == u.name
    assert reused == 63
    assert sum(c.messages[-1].role == "tool" for c in convs) == 35
    assert convs[0].id == "task0-trial0"
    assert all(isinstance(b, ToolUseBlock) for m in convs[0].messages for b in m.tool_uses)
