"""Replies appended with their usage: an OpenAI chat dict carrying ``metadata.usage``, a whole
``ChatCompletion``, and OpenAI Responses ``Response`` objects (``Session.append_responses``);
Responses batches that never collide on message ids. Real SDK objects (``model_validate`` on
the documented shapes), the ``estimate`` tokenizer."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai.types.chat import ChatCompletion
from openai.types.responses import Response
from pydantic import TypeAdapter

from ctxwise import ContextManager, Policy
from ctxwise.errors import FormatError, PayloadInvalid
from ctxwise.formats import from_responses
from ctxwise.providers import check_wire

_N = [0]


def sess(provider: str) -> Any:
    _N[0] += 1
    pol = Policy(budget=60000, unit="tokens", tokenizer="estimate", reserve_output=1000, provider=provider)
    return ContextManager("memory://", pol).session("u", f"s{_N[0]}")


def usage_events(s: Any) -> list[dict[str, Any]]:
    return [e for e in s.events() if e["stage"] == "cache_usage"]


CHAT_USAGE = {"prompt_tokens": 20, "completion_tokens": 1, "total_tokens": 21,
              "prompt_tokens_details": {"cached_tokens": 16}}


def test_chat_dict_metadata_usage_is_recorded_as_usage() -> None:
    """Source: openai/types/completion_usage.py (``prompt_tokens_details.cached_tokens``); the
    usage a framework keeps in the message's ``metadata`` is recorded as a top-level one is."""
    s = sess("openai")
    s.append_openai([{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}])
    s.prepare()
    s.append_openai([{"role": "assistant", "content": "x", "metadata": {"usage": CHAT_USAGE, "run": "r1"}}])
    stored = s.messages[-1].metadata
    assert stored["usage"] == CHAT_USAGE and stored["metadata"] == {"run": "r1"}
    events = usage_events(s)
    assert len(events) == 1 and events[0]["detail"]["reported"]["cached_tokens"] == 16
    s.append_openai([{"role": "user", "content": "more"}])
    assert "prompt_tokens" not in json.dumps(s.prepare().payload)  # not sent back


@pytest.mark.parametrize("message, rule", [
    ({"role": "assistant", "content": "x", "metadata": {"usage": {"tokens": 5}}}, "no provider usage"),
    ({"role": "assistant", "content": "x", "usage": CHAT_USAGE, "metadata": {"usage": CHAT_USAGE}}, "both"),
])
def test_chat_dict_metadata_usage_refused_when_unreadable(message: dict[str, Any], rule: str) -> None:
    s = sess("openai")
    s.append_openai([{"role": "user", "content": "hi"}])
    version = s.version
    with pytest.raises(FormatError, match=rf"message 1.*{rule}|{rule}.*message 1") as e:
        s.append_openai([{"role": "user", "content": "again"}, message])
    assert "message 1" in str(e.value)
    assert s.version == version and len(s.messages) == 1


def completion(n: int = 1) -> ChatCompletion:
    return ChatCompletion.model_validate({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-5.6",
        "choices": [{"index": k, "finish_reason": "stop", "message": {"role": "assistant", "content": f"hello {k}"}}
                    for k in range(n)],
        "usage": {**CHAT_USAGE, "prompt_tokens_details": {"cached_tokens": 16, "cache_write_tokens": 4}}})


def test_chat_completion_appended_whole_records_its_usage() -> None:
    """Source: openai/types/chat/chat_completion.py (``choices[].message``, ``usage``)."""
    s = sess("openai")
    s.append_openai([{"role": "user", "content": "hi"}])
    s.prepare()
    s.append_openai(completion())
    assert s.messages[-1].role == "assistant" and s.messages[-1].blocks[0].text == "hello 0"
    events = usage_events(s)
    assert len(events) == 1
    assert events[0]["detail"]["reported"] == {**events[0]["detail"]["reported"], "cached_tokens": 16,
                                               "cache_write_tokens": 4, "input_tokens": 20}
    version = s.version
    with pytest.raises(FormatError, match="2 choices"):
        s.append_openai(completion(2))
    assert s.version == version


def response(output: list[dict[str, Any]], cached: int = 64) -> Response:
    return Response.model_validate({
        "id": "resp_1", "object": "response", "created_at": 1, "model": "gpt-5.6", "status": "completed",
        "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "output": output,
        "usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 36},
                  "output_tokens": 20, "output_tokens_details": {"reasoning_tokens": 12}, "total_tokens": 120},
        "prompt_cache_diagnostics": {"type": "cache_hit"}})


CALL = [{"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "look it up"}],
         "encrypted_content": "ENC1"},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get", "arguments": "{\"a\": 1}",
         "status": "completed"}]
ANSWER = [{"type": "message", "id": "msg_2", "role": "assistant", "status": "completed",
           "content": [{"type": "output_text", "text": "It is 42.", "annotations": []}]}]


def test_append_responses_reads_a_response_and_records_its_usage() -> None:
    """Source: openai/types/responses/response.py (``output``, ``usage``,
    ``prompt_cache_diagnostics``), response_usage.py (``cached_tokens``, ``cache_write_tokens``,
    ``reasoning_tokens``). The reply's items become one assistant message, sent back as they
    came (reasoning with its id and encrypted_content)."""
    from openai.types.responses import ResponseCreateParams

    s = sess("openai_responses")
    s.append_responses([{"role": "system", "content": "s"}, {"role": "user", "content": "what is it?"}])
    s.prepare()
    s.append_responses(response(CALL))
    reply = s.messages[-1]
    assert reply.role == "assistant" and [b.type for b in reply.blocks] == ["thinking", "tool_use"]
    assert reply.metadata["usage"]["output_tokens_details"]["reasoning_tokens"] == 12
    assert reply.metadata["cache_diagnostics"] == {"type": "cache_hit"}
    events = usage_events(s)
    assert len(events) == 1
    assert (events[0]["detail"]["reported"]["cached_tokens"], events[0]["detail"]["reported"]["cache_write_tokens"],
            events[0]["detail"]["reported"]["api"]) == (64, 36, "openai_responses")
    # the result comes in the next batch, then the final answer
    s.append_responses({"type": "function_call_output", "call_id": "call_1", "output": "42"})
    p = s.prepare()
    assert check_wire(p.payload, "openai_responses") == []
    TypeAdapter(ResponseCreateParams).validate_python({"model": "m", "input": p.payload})
    sent = {i.get("id"): i for i in p.payload if i.get("id")}
    assert sent["rs_1"]["encrypted_content"] == "ENC1" and sent["fc_1"]["call_id"] == "call_1"
    assert "usage" not in json.dumps(p.payload)
    s.append_responses(response(ANSWER, cached=80))
    assert len(usage_events(s)) == 2 and s.messages[-1].blocks[0].text == "It is 42."
    ids = [m.id for m in s.messages]
    assert len(set(ids)) == len(ids) == 5


def test_append_responses_refuses_what_it_cannot_read() -> None:
    s = sess("openai_responses")
    s.append_responses({"role": "user", "content": "q"})
    version = s.version
    with pytest.raises(FormatError, match="item 1.*Response"):
        s.append_responses([{"role": "user", "content": "q2"}, response(ANSWER)])
    with pytest.raises(FormatError, match="call_9"):
        s.append_responses([{"type": "function_call_output", "call_id": "call_9", "output": "x"}])
    s.append_responses(response(CALL))
    version = s.version
    with pytest.raises(FormatError, match="waiting for their results"):
        s.append_responses(response(ANSWER))  # the call's result was never appended
    assert s.version == version


def test_responses_batches_of_one_session_do_not_collide() -> None:
    """Two batches read with :func:`from_responses`: numbered from ``start`` they append; the
    default numbering of a second batch repeats the first's ids and is refused cleanly."""
    first = from_responses([{"role": "user", "content": "a"}, *CALL,
                            {"type": "function_call_output", "call_id": "call_1", "output": "1"}])
    second_items = [*ANSWER, {"role": "user", "content": "b"}]
    s = sess("openai_responses")
    s.append(first)
    version = s.version
    with pytest.raises(PayloadInvalid, match="duplicate-message-id"):
        s.append(from_responses(second_items))
    assert s.version == version
    second = from_responses(second_items, start=len(first))
    assert [m.id for m in second] == ["m0003", "m0004"]
    s.append(second)
    assert [m.id for m in s.messages] == ["m0000", "m0001", "m0002", "m0003", "m0004"]
    with pytest.raises(ValueError, match="start"):
        from_responses(second_items, start=-1)
