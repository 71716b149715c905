"""Append/format defects a second fresh-user check of issue 25 found (reproductions run on real
sessions, the real SDK request types and the ``estimate`` tokenizer)."""

from __future__ import annotations

from typing import Any

import pytest

from sdkcheck import memory_session, sdk_ok
from ctxwise import ContextManager, Policy
from ctxwise.errors import FormatError
from ctxwise.formats import from_openai, to_openai

def sess(provider: str, **kw: Any) -> Any:
    return memory_session(provider, reserve_output=0, **kw)


# -- 1. LiteLLM thinking_blocks ------------------------------------------------------------

LITELLM_REPLY = {
    "role": "assistant", "content": "", "reasoning_content": "I should call f",
    "thinking_blocks": [{"type": "thinking", "thinking": "I should call f", "signature": "EqQBSIG"},
                        {"type": "redacted_thinking", "data": "ENCRYPTED"}],
    "tool_calls": [{"id": "toolu_01", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}


def test_litellm_signed_thinking_reaches_anthropic() -> None:
    """LiteLLM returns Claude's thinking as ``thinking_blocks`` beside ``reasoning_content``
    (https://docs.litellm.ai/docs/reasoning_content); Anthropic needs the signed blocks back before
    the tool_use (anthropic/types/thinking_block_param.py, redacted_thinking_block_param.py)."""
    s = sess("anthropic")
    s.append_openai([{"role": "system", "content": "sys"}, {"role": "user", "content": "q"}])
    s.append_openai([LITELLM_REPLY])
    s.append_openai([{"role": "tool", "tool_call_id": "toolu_01", "content": "r"}])
    p = s.prepare()
    assert [c.rule for c in p.conversions] == []
    blocks = p.payload["messages"][1]["content"]
    assert blocks[0] == {"type": "thinking", "thinking": "I should call f", "signature": "EqQBSIG"}
    assert blocks[1] == {"type": "redacted_thinking", "data": "ENCRYPTED"}
    assert blocks[2]["type"] == "tool_use"
    sdk_ok("anthropic", p.payload)


def test_litellm_thinking_blocks_round_trip_and_count_once() -> None:
    msgs = from_openai([{"role": "user", "content": "q"}, LITELLM_REPLY])
    thinking = msgs[1].thinking
    assert [(t.signature, t.redacted) for t in thinking] == [("EqQBSIG", False), (None, True)]
    assert to_openai(msgs, extras=False)[1] == {**LITELLM_REPLY}
    assert from_openai(to_openai(msgs)) == msgs


@pytest.mark.parametrize("bad", [
    "x", [{"type": "thinking", "thinking": 3, "signature": "s"}], [{"type": "redacted_thinking"}],
    [{"type": "note", "text": "x"}], [7]])
def test_malformed_thinking_blocks_are_refused(bad: Any) -> None:
    s = sess("anthropic")
    s.append_openai([{"role": "user", "content": "q"}])
    with pytest.raises(FormatError, match="thinking"):
        s.append_openai([{"role": "assistant", "content": "a", "thinking_blocks": bad}])
    assert len(s.transcript()) == 1


# -- 2. image_url with no url ------------------------------------------------------------------

@pytest.mark.parametrize("iu", [{}, {"url": ""}, {"url": None}, {"detail": "low"}, ""])
def test_image_url_without_url_is_refused_at_append(iu: Any) -> None:
    """A chat image part needs its ``image_url.url`` (``openai/types/chat/``
    ``chat_completion_content_part_image_param.py``: ``url: Required[str]``)."""
    s = sess("openai")
    s.append_openai([{"role": "user", "content": "start"}])
    with pytest.raises(FormatError, match=r"item 0 of this append, part 1: an image_url part needs a non-empty"):
        s.append_openai([{"role": "user", "content": [{"type": "text", "text": "look"},
                                                      {"type": "image_url", "image_url": iu}]}])
    assert len(s.transcript()) == 1


# -- 4. Responses reasoning items -------------------------------------------------------------

def test_reasoning_item_without_summary_is_reported_when_sent() -> None:
    """``summary`` is required on a request reasoning item
    (``openai/types/responses/response_reasoning_item_param.py``): sent as ``[]`` and reported."""
    from ctxwise.formats import from_responses, to_responses
    items = [{"role": "user", "content": "start"},
             {"type": "reasoning", "id": "rs_1", "encrypted_content": "ENC"},
             {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok",
                                                                   "annotations": []}]}]
    s = sess("openai_responses")
    s.append_responses(items)
    p = s.prepare()
    assert p.payload[1] == {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "ENC"}
    assert [(c.rule, c.index) for c in p.conversions] == [("reasoning-summary-added", 1)]
    sdk_ok("openai_responses", p.payload)
    assert "summary" not in to_responses(from_responses(items))[1]  # the stored form is the one given


def test_reasoning_item_with_summary_is_not_reported() -> None:
    s = sess("openai_responses")
    s.append_responses([{"role": "user", "content": "start"},
                        {"type": "reasoning", "id": "rs_1", "summary": []},
                        {"type": "message", "role": "assistant", "content": "ok"}])
    assert s.prepare().conversions == []


# -- 5 / 6. clear errors for user mistakes -----------------------------------------------------

@pytest.mark.parametrize("item", [None, 3, "text", ["nested"]])
def test_append_of_a_non_message_names_the_item(item: Any) -> None:
    s = sess("openai")
    with pytest.raises(FormatError, match=r"item 0 of this append: expected a Message or a message dict"):
        s.append([item])
    assert s.transcript() == []


def test_anthropic_system_prompt_of_the_wrong_type_is_named_as_such() -> None:
    s = sess("anthropic")
    with pytest.raises(FormatError, match=r"^system: the system prompt must be a string or a list"):
        s.append_anthropic({"system": 5, "messages": [{"role": "user", "content": "q"}]})
    assert s.transcript() == []


def test_langchain_messages_are_named_with_the_way_in() -> None:
    from langchain_core.messages import AIMessage, HumanMessage, message_to_dict
    for call, what in [("append_openai", HumanMessage("hi")), ("append", HumanMessage("hi")),
                       ("append_anthropic", AIMessage("hi")), ("append_openai", message_to_dict(HumanMessage("hi")))]:
        s = sess("anthropic" if call == "append_anthropic" else "openai")
        with pytest.raises(FormatError, match="LangChain") as e:
            getattr(s, call)([what])
        assert "ctxwise.integrations.langchain" in str(e.value.hint)
        assert s.transcript() == []


def test_gemini_native_content_is_named_with_the_openai_compatible_endpoint() -> None:
    s = sess("gemini")
    with pytest.raises(FormatError, match="Gemini-native") as e:
        s.append_openai([{"role": "user", "parts": [{"text": "hi"}]}])
    assert "generativelanguage.googleapis.com/v1beta/openai" in str(e.value.hint)


# -- 5. tool schemas checked at session() ------------------------------------------------------

CHAT_TOOL = {"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object"}}}
ANTHROPIC_TOOL = {"name": "f", "description": "d", "input_schema": {"type": "object"}}
RESPONSES_TOOL = {"type": "function", "name": "f", "description": "d", "parameters": {"type": "object"},
                  "strict": None}


@pytest.mark.parametrize("provider,tools,match", [
    ("openai", "x", r"^tools: tools must be a list"), ("openai", 42, r"^tools: tools must be a list"),
    ("openai", [CHAT_TOOL, 3], r"^tool 1: expected a tool schema object"),
    ("openai", [{"bad": 1}], r"^tool 0: a Chat Completions tool needs"),
    ("openai", [ANTHROPIC_TOOL], r"^tool 0: an Anthropic-shaped tool"),
    ("deepseek", [RESPONSES_TOOL], r"^tool 0: a Responses-shaped"),
    ("anthropic", [CHAT_TOOL], r"^tool 0: an OpenAI-shaped tool"),
    ("anthropic", [{"name": "f"}], r"^tool 0: an Anthropic custom tool needs an 'input_schema'"),
    ("openai_responses", [CHAT_TOOL], r"^tool 0: a Chat Completions-shaped"),
    ("openai_responses", [ANTHROPIC_TOOL], r"^tool 0: a Responses tool needs a string 'type'"),
])
def test_tools_of_the_wrong_shape_are_refused_at_session(provider: str, tools: Any, match: str) -> None:
    """Tool shapes: openai/types/chat/chat_completion_function_tool_param.py,
    anthropic/types/tool_param.py, openai/types/responses/function_tool_param.py."""
    cm = ContextManager("memory://", Policy(provider=provider, tokenizer="estimate"))
    with pytest.raises(FormatError, match=match):
        cm.session("u", "t", tools=tools)
    with pytest.raises(Exception):  # nothing stored
        cm.session("u", "t", create=False)


@pytest.mark.parametrize("provider,tool", [
    ("openai", CHAT_TOOL), ("qwen", {"type": "custom", "custom": {"name": "g"}}), ("anthropic", ANTHROPIC_TOOL),
    ("anthropic", {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}),
    ("openai_responses", RESPONSES_TOOL), ("openai_responses", {"type": "web_search"})])
def test_tools_of_the_provider_shape_are_taken(provider: str, tool: Any) -> None:
    s = ContextManager("memory://", Policy(provider=provider, tokenizer="estimate")).session("u", "t", tools=[tool])
    assert s.tools == [tool]
    bare = ContextManager("memory://", Policy(provider=provider, tokenizer="estimate")).session("u", "t")
    assert s.overhead > bare.overhead


def test_chat_tools_of_an_integration_take_the_provider_shape() -> None:
    from ctxwise.providers.tools import from_chat_tools
    assert from_chat_tools([CHAT_TOOL], "anthropic") == [ANTHROPIC_TOOL]
    assert from_chat_tools([CHAT_TOOL], "openai_responses") == [RESPONSES_TOOL]
    assert from_chat_tools([CHAT_TOOL], "gemini") == [CHAT_TOOL]


# -- 3. content-bearing keys and usage values --------------------------------------------------

def test_ollama_images_key_is_refused_not_dropped() -> None:
    s = sess("openai")
    with pytest.raises(FormatError, match=r"item 0 of this append: 'images' \(Ollama") as e:
        s.append_openai([{"role": "user", "content": "see", "images": ["iVBORw0KGgo="]}])
    assert "image_url" in str(e.value.hint)
    assert s.transcript() == []


@pytest.mark.parametrize("usage,rule", [
    ({"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": "x"}}, "prompt_tokens_details.cached_tokens"),
    ({"prompt_tokens": "10"}, "usage.prompt_tokens must be"),
    ({"prompt_tokens": 10, "prompt_tokens_details": "x"}, "prompt_tokens_details must be an object"),
    ("garbage", "usage must be an object"),
    ({"total_tokens": 3}, "no provider usage ctxwise reads")])
@pytest.mark.parametrize("where", ["top", "metadata"])
def test_usage_of_the_wrong_type_is_refused_wherever_it_is_given(usage: Any, rule: str, where: str) -> None:
    """Usage shapes: openai/types/completion_usage.py (CompletionUsage), anthropic/types/usage.py."""
    s = sess("openai")
    s.append_openai([{"role": "user", "content": "q"}])
    reply: dict[str, Any] = {"role": "assistant", "content": "a"}
    reply.update({"usage": usage} if where == "top" else {"metadata": {"usage": usage}})
    with pytest.raises(FormatError, match=rule):
        s.append_openai([reply])
    assert len(s.transcript()) == 1


def test_anthropic_usage_of_the_wrong_type_is_refused() -> None:
    s = sess("anthropic")
    s.append_anthropic([{"role": "user", "content": "q"}])
    with pytest.raises(FormatError, match="usage.input_tokens must be a non-negative integer"):
        s.append_anthropic([{"role": "assistant", "content": "x", "usage": {"input_tokens": "lots"}}])
    s.append_anthropic([{"role": "assistant", "content": "x",
                         "usage": {"input_tokens": 5, "output_tokens": 1, "cache_read_input_tokens": 0}}])
    assert len(s.transcript()) == 2


# -- 6. async forms of every append call ------------------------------------------------------

def test_async_forms_of_the_format_appends() -> None:
    import asyncio

    async def run() -> None:
        s = sess("openai")
        v1 = await s.aappend_openai([{"role": "user", "content": "q"}])
        v2 = await s.aappend_openai([{"role": "assistant", "content": "a"}])
        assert v2 > v1 and len(s.transcript()) == 2
        with pytest.raises(FormatError, match="message 0"):
            await s.aappend_openai([None])
        a = sess("anthropic")
        await a.aappend_anthropic({"system": "sys", "messages": [{"role": "user", "content": "q"}]})
        assert a.prepare().payload == {"system": "sys", "messages": [{"role": "user", "content": "q"}]}
        r = sess("openai_responses")
        await r.aappend_responses([{"role": "user", "content": "q"}])
        assert len(r.transcript()) == 1

    asyncio.run(run())
