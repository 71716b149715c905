"""Kind: content the target wire cannot carry, dropped without a word (a fresh user's image in a
tool result vanished from Chat Completions payloads). On chat wires the tool message names the
images it could not carry; the Anthropic and Responses wires carry them."""

from __future__ import annotations

import pytest

from ctxwise import ContextManager, Policy
from ctxwise.providers import PROFILES

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="


def _session(provider: str):
    cm = ContextManager("memory://", Policy(provider=provider, budget=50_000, unit="chars"))
    s = cm.session("u", "s")
    s.append_openai([{"role": "user", "content": "show me the chart"},
                     {"role": "assistant", "content": None,
                      "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "chart", "arguments": "{}"}}]}])
    s.append_openai([{"role": "tool", "tool_call_id": "c1", "content": [
        {"type": "text", "text": "sales chart"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}]}])
    return s


@pytest.mark.parametrize("provider", [p for p, prof in PROFILES.items() if prof.wire == "chat"])
def test_chat_wires_name_the_images_a_tool_message_cannot_carry(provider):
    payload = _session(provider).prepare().payload
    (tool,) = [m for m in payload if m["role"] == "tool"]
    assert tool["content"].startswith("sales chart\n") and "1 image, not sent" in tool["content"]


def test_anthropic_carries_the_tool_result_image():
    payload = _session("anthropic").prepare().payload
    result = payload["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and [b["type"] for b in result["content"]] == ["text", "image"]
