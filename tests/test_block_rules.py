"""The rules on provider blocks: ``provider-result-without-call``, ``foreign-provider-block``,
``block-not-sendable``; and a web-search agent's session kept end to end."""

from __future__ import annotations

import anthropic  # noqa: F401  the SDK half of the wire check
import pytest

from ctxwise import (
    AudioBlock,
    ContextManager,
    DocumentBlock,
    ImageBlock,
    Message,
    Policy,
    ProviderBlock,
    RefusalBlock,
    SearchResultBlock,
    TextBlock,
)
from ctxwise.errors import PayloadInvalid
from ctxwise.providers import check, check_wire, render

USE = {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": {"query": "q"}}
RESULT = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01",
          "content": [{"type": "web_search_result", "url": "https://e.x", "title": "E", "encrypted_content": "Eq"}]}


def _pb(raw, provider="anthropic"):
    key = "id" if raw["type"].endswith("_use") else "tool_use_id"
    return ProviderBlock(provider=provider, kind=raw["type"], raw=raw, call_id=raw.get(key))


def _conv(*assistant_blocks, user_blocks=None):
    return [Message(id="u", role="user", blocks=user_blocks or [TextBlock(text="go")]),
            Message(id="a", role="assistant", blocks=list(assistant_blocks)),
            Message(id="u2", role="user", blocks=[TextBlock(text="ok")])]


def _rules(msgs, provider):
    return [(v.index, v.rule) for v in check(msgs, provider)]


def test_provider_result_without_call():
    """Source: docs build-with-claude/tool-use/web-search-tool (a web_search_tool_result
    answers the server_tool_use with its tool_use_id in the same turn)."""
    assert _rules(_conv(_pb(USE), _pb(RESULT), TextBlock(text="x")), "anthropic") == []
    assert _rules(_conv(_pb(RESULT), TextBlock(text="x")), "anthropic") == [(1, "provider-result-without-call")]
    wrong = {**RESULT, "tool_use_id": "srvtoolu_99"}
    found = check(_conv(_pb(USE), _pb(wrong)), "anthropic")
    assert [(v.index, v.rule) for v in found] == [(1, "provider-result-without-call")]
    assert "srvtoolu_99" in found[0].message


@pytest.mark.parametrize("provider", ["openai", "openai_responses", "deepseek"])
def test_foreign_provider_block(provider):
    """Source: anthropic/types/server_tool_use_block_param.py (an Anthropic-only block): sent to
    any OpenAI-family wire it is refused, naming the message and the rule."""
    found = check(_conv(_pb(USE), _pb(RESULT), TextBlock(text="x")), provider)
    assert {(v.index, v.rule) for v in found} == {(1, "foreign-provider-block")}
    assert "server_tool_use" in found[0].message


def test_block_not_sendable():
    """Sources: anthropic/types/message_content_param.py (no audio / refusal block);
    openai/types/chat/chat_completion_content_part_param.py (no search_result, images by URL
    only); openai/types/responses/response_input_content_param.py."""
    sr = SearchResultBlock(source="s", title="t", content=[TextBlock(text="b")])
    audio = AudioBlock(data="UklGRg==", format="wav")
    assert _rules(_conv(TextBlock(text="x"), user_blocks=[audio]), "anthropic") == [(0, "block-not-sendable")]
    assert _rules(_conv(RefusalBlock(text="no")), "anthropic") == []  # converted to text, see below
    assert _rules(_conv(TextBlock(text="x"), user_blocks=[RefusalBlock(text="no")]), "openai") == [
        (0, "block-not-sendable")]
    assert _rules(_conv(TextBlock(text="x"), user_blocks=[sr]), "openai") == [(0, "block-not-sendable")]
    assert _rules(_conv(TextBlock(text="x"), user_blocks=[sr]), "anthropic") == []
    assert _rules(_conv(TextBlock(text="x"), user_blocks=[ImageBlock(file_id="file_1")]), "openai") == [
        (0, "block-not-sendable")]
    text_doc = DocumentBlock(source_type="text", media_type="text/plain", data="d")
    assert _rules(_conv(TextBlock(text="x"), user_blocks=[text_doc]), "openai_responses") == [(0, "block-not-sendable")]
    assert _rules(_conv(TextBlock(text="x"), user_blocks=[audio]), "openai") == []
    assert _rules(_conv(RefusalBlock(text="no")), "openai") == []


def test_a_web_search_agent_session_keeps_its_server_tool_turns(tmp_path):
    """Source: anthropic/types/content_block_param.py. A Claude agent using web search appends
    its replies (server_tool_use + web_search_tool_result + cited text) and the next request
    sends them back exactly; before, append refused them."""
    cm = ContextManager(f"sqlite:///{tmp_path}/s.db", Policy.preset("default", provider="anthropic"))
    s = cm.session("u", "s")
    s.append_anthropic({"system": "Answer with sources.", "messages": [{"role": "user", "content": "news?"}]})
    cited = {"type": "text", "text": "Here.", "citations": [
        {"type": "web_search_result_location", "url": "https://e.x", "title": "E", "encrypted_index": "I",
         "cited_text": "c"}]}
    reply = [USE, RESULT, cited]
    s.append_anthropic([{"role": "assistant", "content": reply}])
    s.append_anthropic([{"role": "user", "content": "thanks"}])
    payload = s.prepare().payload
    assert payload["messages"][1] == {"role": "assistant", "content": reply}
    assert check_wire(payload, "anthropic") == []
    with pytest.raises(PayloadInvalid, match="foreign-provider-block"):
        from ctxwise.providers import validate
        validate(s.messages, "openai")
    assert render(s.messages, "anthropic") == payload
    cm.close()


def test_an_sdk_reply_with_server_tool_blocks_is_appended_and_sent_back(tmp_path):
    """Source: anthropic/types/message.py with server_tool_use_block.py,
    web_search_tool_result_block.py and text citations (the response models); the SDK object
    itself is appended, and the next request sends its blocks as the request types take them."""
    from anthropic.types import Message as SDKMessage

    reply = SDKMessage.model_validate({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x", "stop_reason": "end_turn",
        "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1},
        "content": [USE, {**RESULT, "content": [{**RESULT["content"][0], "page_age": None}]},
                    {"type": "text", "text": "Here", "citations": [
                        {"type": "web_search_result_location", "url": "https://e.x", "title": "E",
                         "encrypted_index": "I", "cited_text": "c"}]}]})
    cm = ContextManager(f"sqlite:///{tmp_path}/s.db", Policy.preset("default", provider="anthropic"))
    s = cm.session("u", "s")
    s.append_anthropic({"system": "x", "messages": [{"role": "user", "content": "news"}]})
    s.append_anthropic(reply)
    s.append_anthropic([{"role": "user", "content": "thanks"}])
    payload = s.prepare().payload
    assert [b["type"] for b in payload["messages"][1]["content"]] == ["server_tool_use", "web_search_tool_result", "text"]
    assert payload["messages"][1]["content"][1] == RESULT
    assert check_wire(payload, "anthropic") == []
    cm.close()


def test_files_holding_only_the_new_blocks_are_told_apart():
    """Sources: response_input_item_param.py (a ``compaction`` item), server_tool_use_block_param.py,
    chat_completion_content_part_param.File: ``ctxwise inspect`` / ``load`` detect the format
    of a file whose only tell is one of the new blocks."""
    from ctxwise.formats import detect

    assert detect([{"role": "user", "content": "x"}, {"type": "compaction", "encrypted_content": "e"}]) == "responses"
    assert detect([{"role": "user", "content": "x"}, {"role": "assistant", "content": [USE]}]) == "anthropic"
    assert detect([{"role": "user", "content": [{"type": "document", "source": {"type": "url", "url": "u"}}]}]) == "anthropic"
    assert detect([{"role": "user", "content": [{"type": "file", "file": {"file_id": "f"}}]}]) == "openai"


def test_an_assistant_refusal_is_sent_to_anthropic_as_text(tmp_path):
    """Source: anthropic/types/message_content_param.py has no refusal block. An OpenAI reply
    that only refuses (``refusal`` set, ``content`` null) stays in the session; on Anthropic its
    words are sent as assistant text and the conversion is reported, never a PayloadInvalid."""
    cm = ContextManager(f"sqlite:///{tmp_path}/s.db", Policy.preset("default", provider="anthropic"))
    s = cm.session("u", "s")
    s.append_openai([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hack it"}])
    s.append_openai([{"role": "assistant", "content": None, "refusal": "I can't help with that."}])
    s.append_openai([{"role": "user", "content": "ok, then the weather?"}])
    p = s.prepare()
    assert p.payload["messages"][1] == {"role": "assistant", "content": [{"type": "text",
                                                                          "text": "I can't help with that."}]}
    assert [c.rule for c in p.conversions] == ["block-not-sendable"]
    assert any(isinstance(b, RefusalBlock) for m in s.messages for b in m.blocks)  # stored as it came
    cm.close()
