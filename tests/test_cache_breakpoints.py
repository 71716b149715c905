"""Explicit prompt-cache breakpoints on the OpenAI wires (issue 25 item 7).

Source: ``openai`` 3.63 types: ``prompt_cache_breakpoint: {"mode": "explicit"}`` on content
parts (``types/chat/chat_completion_content_part_text_param.py``,
``types/responses/response_input_text_param.py``, ...), ``PromptCacheOptions`` in
``types/chat/completion_create_params.py`` and ``types/responses/response_create_params.py``
(gpt-5.6 and later, up to four written per request). ctxwise places them where its cost model
puts the cache boundary: after the stable prefix (system prompt, pinned blocks) and at the end
of the request, which the next call appends to. Payloads are validated against the SDK's own
request types, closed at every depth."""

from __future__ import annotations

import json

import pytest
import openai  # noqa: F401  the SDK half of the wire check
from openai.types.chat import ChatCompletionMessageParam
from openai.types.responses import ResponseInputItemParam

from builders import assistant, results, system, tool_turn, user
from ctxwise import ContextManager, Policy
from ctxwise.providers import check_wire
from ctxwise.providers.wire import strict_validator

CHAT = strict_validator(ChatCompletionMessageParam)
RESPONSES = strict_validator(ResponseInputItemParam)


def conversation() -> list:
    a = assistant(calls=[("lookup", {"order": 2})])
    return [system(), *tool_turn("Where is order #W1?", [("lookup", {"order": 1}, "order 1: shipped")],
                                 "It shipped."), user("And #W2?"), a, *results(a, ["order 2: packed"])]


def prepared(tmp_path, provider: str, price_model: str | None):
    policy = Policy.preset("default", provider=provider, price_model=price_model)
    with ContextManager(f"sqlite:///{tmp_path / f'{provider}-{price_model}.db'}", policy) as cm:
        s = cm.session("u", "s")
        s.append(conversation())
        return s.prepare().payload


def marked(payload: list) -> list[int]:
    """Indices of the payload items holding a breakpoint, anywhere inside."""
    return [k for k, item in enumerate(payload) if "prompt_cache_breakpoint" in json.dumps(item)]


@pytest.mark.parametrize("provider,validate", [("openai", CHAT), ("openai_responses", RESPONSES)])
def test_gpt56_payload_marks_the_stable_prefix_and_the_call_boundaries(tmp_path, provider, validate) -> None:
    """Under the gpt-5.6 price model, the system prompt's part, the last input before each
    model call's output (the user question at 1, the tool output at 3, the next question at 5)
    and the request's last part carry ``{"mode": "explicit"}``, nothing else does, and every
    item is valid for the SDK's request type (a string content became one text part)."""
    payload = prepared(tmp_path, provider, "openai_gpt56")
    assert len(payload) == 8 and marked(payload) == [0, 1, 3, 5, 7]
    text_type = "text" if provider == "openai" else "input_text"
    assert payload[0]["content"] == [{"type": text_type, "text": "You are a helpful after-sales agent.",
                                      "prompt_cache_breakpoint": {"mode": "explicit"}}]
    last = payload[-1]
    assert last[("content" if provider == "openai" else "output")][-1]["prompt_cache_breakpoint"] == {"mode": "explicit"}
    for item in payload:
        validate(item)
    assert check_wire(payload, Policy.preset("default", provider=provider, price_model="openai_gpt56").profile) == []


@pytest.mark.parametrize("provider", ["openai", "openai_responses"])
def test_no_breakpoint_without_a_breakpoint_price_model(tmp_path, provider) -> None:
    """The default OpenAI price model (automatic prefix caching, before gpt-5.6) places none:
    the payload is the one sent before, with string contents."""
    payload = prepared(tmp_path, provider, None)
    assert marked(payload) == [] and isinstance(payload[0]["content"], str)


def test_only_openai_profiles_take_breakpoints() -> None:
    """Anthropic's price model writes breakpoints too (cache_control) but its renderer keeps the
    caller's own marks; chat-compatible providers (DeepSeek, Qwen, Gemini) document no
    ``prompt_cache_breakpoint``: their profiles never carry it."""
    assert Policy.preset("default", provider="openai", price_model="openai_gpt56_12h").profile.cache_breakpoints
    assert not Policy.preset("default", provider="anthropic").profile.cache_breakpoints
    assert not Policy.preset("default", provider="deepseek", price_model="openai_gpt56").profile.cache_breakpoints


def test_an_assistant_tail_moves_the_mark_back_on_responses() -> None:
    """Responses output_text parts take no breakpoint (``response_output_text_param.py`` has
    none): when the request ends on an assistant reply (a prefill-style call), the end mark
    goes on the nearest input part before it."""
    from ctxwise.providers import render

    profile = Policy.preset("default", provider="openai_responses", price_model="openai_gpt56").profile
    payload = render([system(), user("Say hi."), assistant("Hi")], profile)
    assert marked(payload) == [0, 1]
    for item in payload:
        RESPONSES(item)


@pytest.mark.parametrize("provider", ["openai", "openai_responses"])
def test_marks_are_byte_stable_from_call_to_call(provider) -> None:
    """The cost model's cached prefix is the whole previous request: the request of one call
    is, item for item, the start of the next call's (its end mark stays, now a call boundary),
    so the prefix the cache wrote is the one the next call sends."""
    from ctxwise.providers import render

    profile = Policy.preset("default", provider=provider, price_model="openai_gpt56").profile
    msgs = conversation()
    earlier = render(msgs[:6], profile)  # the call made after "And #W2?"
    later = render(msgs, profile)
    assert later[:len(earlier)] == earlier and marked(earlier)[-1] == len(earlier) - 1
