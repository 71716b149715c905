"""The shared failure cases and the seed's AgentScope payload round-trip exactly."""

from __future__ import annotations

import json
import re

import pytest

from conftest import CASES, SHARED
from ctxwise.formats import READERS, WRITERS, dump, from_agentscope, load, to_agentscope
from ctxwise.messages import TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock

CASE_FILES = sorted(CASES.glob("B*.json"))


@pytest.mark.parametrize("path", CASE_FILES, ids=lambda p: p.stem)
def test_case_loads_and_dumps_byte_identical(path):
    (conv,) = load(path)
    assert conv.id == path.stem
    original = json.loads(path.read_text())
    assert json.dumps(dump(conv, conv.format)) == json.dumps(original)
    for fmt in ("openai", "anthropic", "agentscope", "responses"):
        assert READERS[fmt](WRITERS[fmt](conv.messages)) == conv.messages


def test_b12_thinking_signature_roundtrip_equal():
    (conv,) = load(CASES / "B12.json")
    case = json.loads((CASES / "B12.json").read_text())
    m = conv.messages
    assert [x.role for x in m] == ["system", "user", "assistant", "tool"]
    think = m[2].blocks[0]
    assert isinstance(think, ThinkingBlock) and think.signature.startswith("SIG-B12-")
    assert isinstance(m[2].blocks[1], ToolUseBlock)
    assert m[3].blocks[0].name == "get_weather"  # from the tool_use
    # roundtrip_equal: load(save(x)) == x, provider fields included, via the Anthropic shape
    out = WRITERS["anthropic"](m)
    assert out["messages"] == case["messages"]
    assert READERS["anthropic"](out) == m


def test_b14_responses_items_roundtrip_equal():
    (conv,) = load(CASES / "B14.json")
    items = json.loads((CASES / "B14.json").read_text())["messages"]
    m = conv.messages
    assert [x.role for x in m] == ["user", "assistant", "tool", "assistant", "user"]
    r1 = m[1].blocks[0]
    assert isinstance(r1, ThinkingBlock) and r1.extra["_responses"]["item"]["encrypted_content"] == "ENC-B14-1"
    assert isinstance(m[1].blocks[1], ToolUseBlock) and m[1].blocks[1].input == {"customer": "ACME", "status": "open"}
    assert isinstance(m[2].blocks[0], ToolResultBlock) and m[2].blocks[0].name == "list_invoices"
    assert [type(b) for b in m[3].blocks] == [ThinkingBlock, TextBlock]
    assert WRITERS["responses"](m) == items


def test_b11_reasoning_content_and_empty_content_kept():
    (conv,) = load(CASES / "B11.json")
    raw = json.loads((CASES / "B11.json").read_text())["messages"]
    a = conv.messages[4]
    assert isinstance(a.blocks[0], ThinkingBlock) and a.blocks[0].signature is None
    out = WRITERS["openai"](conv.messages, extras=False)
    assert out == raw  # content "" with tool_calls, reasoning_content, key order
    assert "reasoning_content" not in WRITERS["openai"](conv.messages, reasoning_field=None, extras=False)[4]


def _seed_payload() -> dict:
    """The t_agent_state.payload snapshot printed in seed 000 (its // comments removed)."""
    text = (SHARED / "seeds" / "000_33adaf2773327789.txt").read_text()
    start = text.index('{\n  "context"')
    end = text.index("\n}", start) + 2
    return json.loads("\n".join(re.sub(r"^\s*//.*$", "", line) for line in text[start:end].splitlines()))


def test_seed_agentscope_payload_roundtrip_identical():
    payload = _seed_payload()
    msgs = from_agentscope(payload)
    assert [m.role for m in msgs] == ["user", "assistant", "tool", "assistant", "tool", "assistant", "user", "assistant"]
    assert msgs[2].blocks[0].tool_use_id == msgs[1].blocks[1].id and msgs[2].blocks[0].name == "load_skill"
    assert json.dumps(to_agentscope(msgs), ensure_ascii=False) == json.dumps(payload, ensure_ascii=False)
    # extra keys on messages and blocks come back too
    payload["context"][0]["timestamp"] = "2026-09-01 10:00:00"
    payload["context"][0]["id"] = "msg-1"
    payload["context"][1]["content"][0]["signature"] = "sig"
    payload["context"][2]["content"][0]["raw"] = {"x": 1}
    msgs = from_agentscope(payload)
    assert msgs[0].id == "msg-1" and msgs[0].metadata["timestamp"] == "2026-09-01 10:00:00"
    assert msgs[1].blocks[0].signature == "sig" and msgs[2].blocks[0].extra == {"raw": {"x": 1}}
    assert json.dumps(to_agentscope(msgs)) == json.dumps(payload)
