"""Defects a fresh-user check of issue 25 found (reproductions from that check, run on real
sessions, real SDK types and the ``estimate`` tokenizer)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sdkcheck import memory_session, sdk_ok
from ctxwise import ContextManager, Policy
from ctxwise.errors import PayloadInvalid
from ctxwise.formats import from_responses
from ctxwise.providers import check_wire

URL_CITATION = {"type": "url_citation", "url": "https://a", "title": "A", "start_index": 0, "end_index": 5}
CHAR_LOCATION = {"type": "char_location", "cited_text": "Sky is blue.", "document_index": 0,
                 "document_title": None, "start_char_index": 0, "end_char_index": 12}
def sess(provider: str, **kw: Any) -> Any:
    return memory_session(provider, reserve_output=1000, **kw)


def _responses_items() -> list[dict[str, Any]]:
    return [{"role": "user", "content": "q"},
            {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
             "content": [{"type": "output_text", "text": "It says X.", "annotations": [URL_CITATION]}]}]


@pytest.mark.parametrize("provider", ["anthropic", "openai", "openai_responses"])
def test_responses_annotations_sent_where_they_have_a_form(provider: str) -> None:
    s = sess(provider)
    s.append(from_responses(_responses_items()))
    for k in range(2):  # the session keeps working turn after turn
        s.append([{"id": f"u{k}", "role": "user", "blocks": [{"type": "text", "text": f"next {k}"}]}])
        p = s.prepare()
        assert check_wire(p.payload, provider) == []
        sdk_ok(provider, p.payload)
    text = json.dumps(p.payload)
    assert "It says X." in text
    if provider == "anthropic":
        assert "url_citation" not in text and "citations" not in text
        assert [(c.rule, c.index) for c in p.conversions] == [("block-not-sendable", 1)]
        assert "url_citation" in p.conversions[0].detail
    elif provider == "openai_responses":
        assert "url_citation" in text  # its own kind: kept verbatim
        assert p.conversions == []
    else:  # Chat Completions: no citations on a request message
        assert "url_citation" not in text
        assert [(c.rule, c.index) for c in p.conversions] == [("block-not-sendable", 1)]
    # the stored message keeps what the application sent
    assert s.messages[1].blocks[0].citations == [URL_CITATION]


def test_anthropic_citations_left_out_on_responses() -> None:
    ant = [{"role": "user", "content": [
               {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="},
                "citations": {"enabled": True}}, {"type": "text", "text": "color?"}]},
           {"role": "assistant", "content": [{"type": "text", "text": "Blue.", "citations": [CHAR_LOCATION]}]},
           {"role": "user", "content": "thanks"}]
    s = sess("openai_responses")
    s.append_anthropic({"system": "s", "messages": ant})
    p = s.prepare()
    assert check_wire(p.payload, "openai_responses") == []
    sdk_ok("openai_responses", p.payload)
    assert "char_location" not in json.dumps(p.payload) and "Blue." in json.dumps(p.payload)
    assert any(c.rule == "block-not-sendable" and "char_location" in c.detail for c in p.conversions)
    # on Anthropic the same citation is its own kind: sent as read
    s2 = sess("anthropic")
    s2.append_anthropic({"system": "s", "messages": ant})
    p2 = s2.prepare()
    assert "char_location" in json.dumps(p2.payload) and p2.conversions == []


@pytest.mark.parametrize("provider", ["anthropic", "openai_responses"])
def test_chat_annotations_do_not_break_other_targets(provider: str) -> None:
    chat = [{"role": "user", "content": "q"},
            {"role": "assistant", "content": "It says X.",
             "annotations": [{"type": "url_citation", "url_citation": {"url": "https://a", "title": "A",
                                                                       "start_index": 0, "end_index": 5}}]},
            {"role": "user", "content": "ok"}]
    s = sess(provider)
    s.append_openai(chat)
    p = s.prepare()
    assert check_wire(p.payload, provider) == []
    sdk_ok(provider, p.payload)


def test_wire_schema_message_is_readable() -> None:
    from ctxwise.providers.wire import schema_violations
    payload = {"messages": [{"role": "user", "content": "q"},
                            {"role": "assistant", "content": [{"type": "text", "text": "x",
                                                                "citations": [{"type": "char_location"}]}]}]}
    found = schema_violations(payload, "anthropic")
    assert found and all(v.index == 1 and v.rule == "wire-schema" for v in found)
    msg = str(PayloadInvalid("anthropic", found))
    assert msg.startswith(f"{len(found)} anthropic rule violation(s): message 1: [wire-schema]")
    assert "union[" not in msg and "ImageBlockParam" not in msg
    assert "cited_text" in msg


TEXT_DOC = [{"role": "user", "content": [
    {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "Sky is blue."}},
    {"type": "text", "text": "color?"}]}]


def test_unsendable_block_refused_at_append_not_at_every_prepare() -> None:
    s = sess("openai_responses")
    s.append([{"id": "u0", "role": "user", "blocks": [{"type": "text", "text": "hi"}]}])
    before = len(s.messages)
    with pytest.raises(PayloadInvalid) as e:
        s.append_anthropic({"messages": TEXT_DOC})
    v = e.value.violations
    assert [(x.index, x.rule) for x in v] == [(1, "block-not-sendable")]
    assert str(e.value).startswith("1 openai_responses rule violation(s): message 1")
    assert len(s.messages) == before  # nothing stored
    s.append([{"id": "u1", "role": "user", "blocks": [{"type": "text", "text": "again"}]}])
    s.prepare()  # the session still prepares
    # the same block is fine where the wire has a form for it
    a = sess("anthropic")
    a.append_anthropic({"messages": TEXT_DOC})
    assert "Sky is blue." in json.dumps(a.prepare().payload)


def test_foreign_provider_block_refused_at_append() -> None:
    msgs = [{"role": "user", "content": "search"},
            {"role": "assistant", "content": [
                {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "x"}},
                {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
                {"type": "text", "text": "found"}]}]
    s = sess("openai")
    with pytest.raises(PayloadInvalid) as e:
        s.append_anthropic({"messages": msgs})
    assert {(x.index, x.rule) for x in e.value.violations} == {(1, "foreign-provider-block")}
    assert len(s.messages) == 0
    a = sess("anthropic")
    a.append_anthropic({"messages": msgs})
    assert check_wire(a.prepare().payload, "anthropic") == []


def _cache_usage_events(s: Any) -> list[dict[str, Any]]:
    return [e for e in s.events() if e["stage"] == "cache_usage"]


def test_anthropic_sdk_reply_usage_is_recorded() -> None:
    """Source: anthropic/types/usage.py (``cache_creation_input_tokens``)."""
    import anthropic.types as at
    s = sess("anthropic")
    s.append_anthropic({"system": "s", "messages": [{"role": "user", "content": "hi"}]})
    s.prepare()
    reply = at.Message(id="msg_01", type="message", role="assistant", model="claude-opus-5",
                       content=[at.TextBlock(type="text", text="hello")], stop_reason="end_turn", stop_sequence=None,
                       usage=at.Usage(input_tokens=10, output_tokens=2, cache_read_input_tokens=0,
                                      cache_creation_input_tokens=300))
    s.append_anthropic(reply)
    assert s.messages[-1].metadata["usage"]["cache_creation_input_tokens"] == 300
    events = _cache_usage_events(s)
    assert len(events) == 1
    assert events[0]["detail"]["reported"]["cache_write_tokens"] == 300
    s.append_anthropic([{"role": "user", "content": "more"}])
    assert "cache_creation_input_tokens" not in json.dumps(s.prepare().payload)  # not sent back


def test_openai_chat_reply_usage_is_recorded() -> None:
    """Source: openai/types/completion_usage.py (``prompt_tokens_details.cached_tokens``)."""
    s = sess("openai")
    s.append_openai([{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}])
    s.prepare()
    u = {"prompt_tokens": 20, "prompt_tokens_details": {"cached_tokens": 16}, "completion_tokens": 1}
    s.append_openai([{"role": "assistant", "content": "x", "usage": u}])
    assert s.messages[-1].metadata["usage"] == u
    events = _cache_usage_events(s)
    assert len(events) == 1 and events[0]["detail"]["reported"]["cached_tokens"] == 16
    s.append_openai([{"role": "user", "content": "more"}])  # no usage: nothing more recorded
    assert len(_cache_usage_events(s)) == 1


def test_responses_clearing_reports_the_reasoning_it_invalidates() -> None:
    """Source: https://platform.openai.com/docs/guides/reasoning (all_turns: reasoning items
    after a changed prefix are dropped by the API). A last-resort clearing inside one tool
    loop edits the first result: every later reasoning item is invalidated."""
    from ctxwise.compaction.cost import invalidated_reasoning, invalidated_reasoning_items

    s = sess("openai_responses", budget=6000, price_model="openai_gpt56", bound_reasoning="on")
    hist: list[dict[str, Any]] = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]

    def add(items: list[dict[str, Any]]) -> None:
        n = len(from_responses(hist))
        hist.extend(items)
        s.append(from_responses(hist)[n:])

    s.append(from_responses(hist))
    s.prepare()
    before = None
    for i in range(30):
        add([{"type": "reasoning", "id": f"rs_{i}", "summary": [{"type": "summary_text", "text": f"think {i} " * 20}],
              "encrypted_content": f"ENC{i}"},
             {"type": "function_call", "call_id": f"call_{i}", "name": "Read",
              "arguments": json.dumps({"path": f"/f{i % 5}.py"}), "id": f"fc_{i}"}])
        add([{"type": "function_call_output", "call_id": f"call_{i}", "output": f"def g{i}(): return {i}\n" * 80}])
        before = list(s.messages)
        p = s.prepare()
        if any(e.stage == "clearing" for e in p.events):
            break
    else:
        pytest.fail("no clearing in 30 calls")
    ev = next(e for e in p.events if e.stage == "clearing")
    first = min(k for k, m in enumerate(before) if m.id in ev.affected_ids)
    got = ev.detail["reasoning_invalidated"]
    later = [m for m in before[first + 1:] if m.role == "assistant" and m.thinking]
    assert got["items"] == len(later) > 0
    assert got["size"] > 0
    # the cost model (clearing's re-billed suffix, compaction.cost.invalidated_reasoning)
    # counts the same reasoning
    def size_of(m: Any) -> int:
        return len(m.model_dump_json())

    blocks, size = invalidated_reasoning_items(before, first, size_of)
    assert blocks == got["items"] and size == invalidated_reasoning(before, first, size_of) > 0


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf"), -5, True, "yesterday"])
def test_prepare_now_refuses_a_time_that_is_not_one(bad: object) -> None:
    from datetime import datetime, timezone

    from ctxwise.errors import FormatError
    s = sess("anthropic")
    s.append_anthropic({"system": "s", "messages": [{"role": "user", "content": "hi"}]})
    version = s.version
    with pytest.raises(FormatError, match=r"prepare\(now=\.\.\.\)"):
        s.prepare(now=bad)  # type: ignore[arg-type]
    assert s.version == version and s.events() == []
    with pytest.raises(FormatError, match="1970"):
        s.prepare(now=datetime(1969, 12, 31, tzinfo=timezone.utc))
    assert s.prepare(now=0).payload and s.prepare(now=1_780_000_000.5).payload


def test_unsigned_thinking_left_out_on_anthropic_is_reported() -> None:
    """Source: anthropic/types/thinking_block_param.py (``signature: Required[str]``)."""
    msgs = [{"role": "user", "content": "a"},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "t"}, {"type": "text", "text": "b"}]},
            {"role": "user", "content": "c"}]
    s = sess("anthropic")
    s.append_anthropic({"system": "s", "messages": msgs})
    p = s.prepare()
    assert p.payload["messages"][1]["content"] == [{"type": "text", "text": "b"}]
    assert [(c.rule, c.index) for c in p.conversions] == [("block-not-sendable", 2)]
    assert "without a signature" in p.conversions[0].detail
    # a signed block is sent and not reported
    signed = [dict(m) for m in msgs]
    signed[1] = {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "sig"},
                                                 {"type": "text", "text": "b"}]}
    s2 = sess("anthropic")
    s2.append_anthropic({"system": "s", "messages": signed})
    p2 = s2.prepare()
    assert p2.conversions == [] and p2.payload["messages"][1]["content"][0]["signature"] == "sig"


def test_thinking_without_reasoning_item_id_left_out_on_responses_is_reported() -> None:
    """Source: openai/types/responses/response_reasoning_item_param.py (``id: Required[str]``):
    reasoning not read from a Responses item (here Anthropic thinking) has no id to send, is
    left out, reported as a conversion and not counted (the stored message is not changed; the
    size counts what is sent)."""
    msgs = [{"role": "user", "content": "a"},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "long reasoning " * 40,
                                               "signature": "sig"}, {"type": "text", "text": "b"}]},
            {"role": "user", "content": "c"}]
    s = sess("openai_responses")
    s.append_anthropic({"system": "s", "messages": msgs})
    p = s.prepare()
    assert "long reasoning" not in json.dumps(p.payload) and check_wire(p.payload, "openai_responses") == []
    assert [(c.rule, c.index, c.message_id) for c in p.conversions] == [("block-not-sendable", 2, s.messages[2].id)]
    assert "without a reasoning item id" in p.conversions[0].detail
    no_thinking = sess("openai_responses")
    no_thinking.append_anthropic({"system": "s", "messages": [msgs[0], {"role": "assistant", "content": "b"}, msgs[2]]})
    assert p.size == no_thinking.prepare().size  # counted as it is sent
    # a reasoning item read from Responses keeps its id: sent, not reported
    r = sess("openai_responses")
    r.append(from_responses([{"role": "user", "content": "a"},
                             {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "t"}],
                              "encrypted_content": "enc"},
                             {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
                              "content": [{"type": "output_text", "text": "b", "annotations": []}]},
                             {"role": "user", "content": "c"}]))
    p2 = r.prepare()
    assert p2.conversions == [] and any(i.get("id") == "rs_1" for i in p2.payload)
