"""Issue 25 (fresh user, defects 1 and 2): a malformed provider block / item, or a media source
with no value, is refused at append (FormatError / PayloadInvalid naming the item, the block
type and the rule), nothing is stored, and the session's next ``prepare()`` still works. Stored,
such a block made every later ``prepare()`` raise PayloadInvalid (the session was bricked), or
was sent as an empty string the API refuses. Real SDK types (imported here, so in use), the
``estimate`` tokenizer, in-memory store."""

from __future__ import annotations

from typing import Any

import anthropic  # noqa: F401  (the SDK in use: its request types check the blocks)
import openai  # noqa: F401
import pytest

from ctxwise import ContextManager, Policy
from ctxwise.errors import FormatError, PayloadInvalid
from ctxwise.providers import check_wire

_N = [0]


def sess(provider: str) -> Any:
    _N[0] += 1
    pol = Policy(budget=60000, unit="tokens", tokenizer="estimate", reserve_output=1000, provider=provider)
    return ContextManager("memory://", pol).session("u", f"b{_N[0]}")


def refused_and_untouched(s: Any, append: Any, batch: Any, words: tuple[str, ...]) -> str:
    """Append ``batch``; assert it is refused with a message holding ``words``, that nothing
    was stored, and that ``prepare()`` still gives a valid payload. Returns the message."""
    before, version = list(s.messages), s.version
    with pytest.raises((FormatError, PayloadInvalid)) as e:
        append(batch)
    msg = str(e.value)
    for w in words:
        assert w in msg, (w, msg)
    assert list(s.messages) == before and s.version == version
    p = s.prepare()
    assert check_wire(p.payload, s.policy.provider) == []
    return msg


SRV = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}}
RESULT = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1",
          "content": [{"type": "web_search_result", "url": "https://e.x", "title": "t", "encrypted_content": "abc"}]}

ANTHROPIC_BAD = {
    "server_tool_use without input": ([{"type": "text", "text": "let me search"},
                                       {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search"}],
                                      ("item 0 of this append, block 1", "server_tool_use", "input", "Field required")),
    "server_tool_use with an unknown key": ([{**SRV, "bogus": 1}], ("block 0", "server_tool_use", "bogus")),
    "web_search_tool_result without its call": ([RESULT], ("provider-result-without-call", "srvtoolu_1")),
    "web_search_tool_result content not a list": ([SRV, {**RESULT, "content": "x"}],
                                                  ("block 1", "web_search_tool_result")),
    "mcp_tool_use without server_name": ([{"type": "mcp_tool_use", "id": "mcptoolu_1", "name": "f", "input": {}}],
                                         ("mcp_tool_use", "server_name")),
}


@pytest.mark.parametrize("name", list(ANTHROPIC_BAD))
def test_anthropic_malformed_provider_block_refused_at_append(name: str) -> None:
    """Sources: ``anthropic/types/beta/beta_server_tool_use_block_param.py`` (``input``
    Required), ``beta_web_search_tool_result_block_param.py``, ``beta_mcp_tool_use_block_param.py``;
    the pairing: "tool_use ids ... must have a corresponding server_tool_use block"."""
    content, words = ANTHROPIC_BAD[name]
    s = sess("anthropic")
    s.append_anthropic([{"role": "user", "content": "hi"}])
    refused_and_untouched(s, s.append_anthropic, [{"role": "assistant", "content": content}], words)


def test_anthropic_valid_server_tool_pair_still_appends() -> None:
    """The well-formed pair of the same blocks goes in and out verbatim."""
    s = sess("anthropic")
    s.append_anthropic([{"role": "user", "content": "hi"},
                        {"role": "assistant", "content": [SRV, RESULT, {"type": "text", "text": "found"}]},
                        {"role": "user", "content": "thanks"}])
    p = s.prepare()
    assert check_wire(p.payload, "anthropic") == []
    assert p.payload["messages"][1]["content"][:2] == [SRV, RESULT]


RESPONSES_BAD = {
    "compaction without encrypted_content": ({"type": "compaction", "id": "cmp_1"}, ("compaction", "encrypted_content")),
    "web_search_call without action": ({"type": "web_search_call", "id": "ws_1", "status": "completed"},
                                       ("web_search_call", "action")),
    "mcp_call without server_label": ({"type": "mcp_call", "id": "mcp_1", "name": "f", "arguments": "{}"},
                                      ("mcp_call", "server_label")),
    "configuration_update with an unknown key": ({"type": "configuration_update", "foo": 1},
                                                 ("configuration_update", "foo")),
}


@pytest.mark.parametrize("name", list(RESPONSES_BAD))
def test_responses_malformed_item_refused_at_append(name: str) -> None:
    """Source: the members of ``openai/types/responses/response_input_item_param.py``'s
    ``ResponseInputItemParam`` (``ResponseCompactionItemParamParam.encrypted_content``,
    ``ResponseFunctionWebSearchParam.action``, ``McpCall.server_label`` Required)."""
    item, words = RESPONSES_BAD[name]
    s = sess("openai_responses")
    s.append_responses([{"role": "user", "content": "hi"}])
    refused_and_untouched(s, s.append_responses, [item], ("item 0 of this append",) + words)


MISSING_SOURCES = {
    "image file source without file_id": {"type": "image", "source": {"type": "file"}},
    "image url source without url": {"type": "image", "source": {"type": "url", "url": ""}},
    "pdf base64 source without data": {"type": "document",
                                       "source": {"type": "base64", "media_type": "application/pdf"}},
    "document file source without file_id": {"type": "document", "source": {"type": "file", "file_id": None}},
}


@pytest.mark.parametrize("name", list(MISSING_SOURCES))
def test_anthropic_missing_media_source_refused(name: str) -> None:
    """Sources: ``anthropic/types/beta/beta_file_image_source_param.py`` (``file_id``),
    ``beta_url_image_source_param.py`` (``url``), ``beta_base64_pdf_source_param.py`` (``data``):
    each Required; an empty string was sent in their place."""
    s = sess("anthropic")
    s.append_anthropic([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}])
    refused_and_untouched(s, s.append_anthropic, [{"role": "user", "content": [MISSING_SOURCES[name]]}],
                          ("item 0 of this append", "source", "needs a non-empty string"))


def test_anthropic_text_citations_not_a_list_refused() -> None:
    """Source: ``anthropic/types/text_block_param.py`` (``citations: Optional[Iterable[...]]``);
    ``"yes"`` was accepted and the citations silently dropped."""
    s = sess("anthropic")
    s.append_anthropic([{"role": "user", "content": "hi"}])
    refused_and_untouched(s, s.append_anthropic,
                          [{"role": "assistant", "content": [{"type": "text", "text": "a", "citations": "yes"}]}],
                          ("item 0 of this append", "citations must be a list"))


def test_responses_input_image_without_url_or_file_refused() -> None:
    """Source: ``openai/types/responses/response_input_image_param.py`` (``image_url`` or
    ``file_id``); ``"image_url": ""`` was sent."""
    s = sess("openai_responses")
    s.append_responses([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}])
    refused_and_untouched(s, s.append_responses,
                          [{"role": "user", "content": [{"type": "input_image", "detail": "low"}]}],
                          ("item 0, part 0", "input_image needs a non-empty image_url or file_id"))


def test_canonical_append_of_a_malformed_provider_block_refused() -> None:
    """The same check on the canonical path: ``Session.append`` of a
    :class:`~ctxwise.messages.ProviderBlock` whose verbatim block breaks its request type."""
    from ctxwise import Message
    from ctxwise.messages import ProviderBlock, TextBlock

    s = sess("anthropic")
    s.append_anthropic([{"role": "user", "content": "hi"}])
    bad = ProviderBlock(provider="anthropic", kind="server_tool_use", call_id="srvtoolu_9",
                        raw={"type": "server_tool_use", "id": "srvtoolu_9", "name": "web_search"})
    msg = Message(id="a1", role="assistant", blocks=[TextBlock(text="x"), bad])
    refused_and_untouched(s, s.append, [msg], ("wire-schema", "block 1", "server_tool_use", "input"))


def test_payload_check_names_the_real_violation_not_union_noise() -> None:
    """A block list checked against a union (``str | list[block union]``): the errors of the
    members whose ``type`` does not match, and the string branch, are not reported; the
    missing ``input`` is, once per type checked."""
    payload = {"messages": [{"role": "user", "content": "hi"},
                            {"role": "assistant", "content": [{"type": "text", "text": "let me"},
                                                              {"type": "server_tool_use", "id": "srvtoolu_1",
                                                               "name": "web_search"}]},
                            {"role": "user", "content": "x"}]}
    found = check_wire(payload, "anthropic")
    assert found and all(v.rule == "wire-schema" and v.index == 1 for v in found)
    assert all("input: Field required" in v.message for v in found), [v.message for v in found]
    assert not any("content.str" in v.message or "TextBlockParam" in v.message for v in found)


def completion(n_choices: int = 1) -> Any:
    from openai.types.chat import ChatCompletion

    choice = {"finish_reason": "tool_calls", "message": {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_order", "arguments": "{}"}}]}}
    return ChatCompletion.model_validate({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
                                          "choices": [{**choice, "index": k} for k in range(n_choices)]})


def test_the_same_completion_appended_twice_is_named_a_duplicate() -> None:
    """The second append of one reply: the call id already waits for its result in the
    session; the error says so and names that message, and indices are the session's."""
    s = sess("openai")
    s.append_openai([{"role": "user", "content": "hi"}])
    s.append_openai(completion())
    msg = refused_and_untouched_later(s, completion())
    assert "duplicate-tool-call-id" in msg and "already stored, in message 1 ('msg-000002')" in msg
    assert "no result before message 2" in msg  # the session's place of the refused message


def refused_and_untouched_later(s: Any, cc: Any) -> str:
    before = list(s.messages)
    with pytest.raises(PayloadInvalid) as e:
        s.append_openai(cc)
    assert list(s.messages) == before
    return str(e.value)


def test_two_choice_completion_is_refused_in_words() -> None:
    s = sess("openai")
    s.append_openai([{"role": "user", "content": "hi"}])
    with pytest.raises(FormatError) as e:
        s.append_openai(completion(2))
    assert "with 2 choices is refused" in str(e.value) and "choices[k].message" in (e.value.hint or "")
    assert len(s.messages) == 1


@pytest.mark.parametrize("provider,method", [("anthropic", "append_anthropic"), ("openai_responses", "append_responses")])
@pytest.mark.parametrize("wrap", [False, True])
def test_completion_passed_to_another_append_points_to_append_openai(provider: str, method: str, wrap: bool) -> None:
    s = sess(provider)
    with pytest.raises(FormatError) as e:
        getattr(s, method)([completion()] if wrap else completion())
    assert f"an OpenAI ChatCompletion was passed to {method}()" in str(e.value)
    assert "append_openai" in (e.value.hint or "")
    assert s.messages == []


@pytest.mark.parametrize("provider,method,first", [
    ("openai", "append_openai", lambda p: p[0]),
    ("openai_responses", "append_responses", lambda p: p[0]),
])
def test_developer_role_is_sent_as_developer(provider: str, method: str, first: Any) -> None:
    """Sources: ``openai/types/chat/chat_completion_developer_message_param.py`` (role
    ``developer``), ``openai/types/responses/easy_input_message_param.py`` (role takes
    ``developer``): the target takes the role, so it is sent as given (it was sent as ``system``
    with no conversion reported), first and mid-conversation."""
    s = sess(provider)
    getattr(s, method)([{"role": "developer", "content": "Be terse."}, {"role": "user", "content": "hi"},
                        {"role": "assistant", "content": "ok"}, {"role": "developer", "content": "Now be brief."},
                        {"role": "user", "content": "more"}])
    p = s.prepare()
    assert check_wire(p.payload, provider) == []
    roles = [x.get("role") for x in p.payload]
    assert roles == ["developer", "user", "assistant", "developer", "user"], roles
    assert p.conversions == []


@pytest.mark.parametrize("provider", ["deepseek", "anthropic"])
def test_developer_role_elsewhere_is_reported(provider: str) -> None:
    """A target without the developer role gets a system message, and Prepared.conversions
    says so (rule ``developer-as-system``)."""
    s = sess(provider)
    s.append_openai([{"role": "developer", "content": "Be terse."}, {"role": "user", "content": "hi"}])
    p = s.prepare()
    assert [(c.rule, c.index) for c in p.conversions] == [("developer-as-system", 0)]


THINKING_REPLY = [{"role": "user", "content": "hi"},
                  {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "s"},
                                                    {"type": "redacted_thinking", "data": "r"},
                                                    {"type": "text", "text": "Hello"}]},
                  {"role": "user", "content": "more"}]


@pytest.mark.parametrize("provider,words", [("openai", ("1 signed thinking", "1 redacted_thinking")),
                                            ("deepseek", ("1 redacted_thinking",))])
def test_anthropic_thinking_left_out_on_chat_is_reported(provider: str, words: tuple[str, ...]) -> None:
    """Chat Completions has no form for redacted (encrypted) thinking, and OpenAI none for
    reasoning at all: what is left out is reported as ``block-not-sendable`` (as the Responses
    target reports it); DeepSeek gets the thinking text as ``reasoning_content``."""
    s = sess(provider)
    s.append_anthropic(THINKING_REPLY)
    p = s.prepare()
    convs = [c for c in p.conversions if c.rule == "block-not-sendable"]
    assert [c.index for c in convs] == [1]
    for w in words:
        assert w in convs[0].detail
    assert ("signed thinking" in convs[0].detail) == (provider == "openai")


def test_image_detail_left_out_for_anthropic_is_reported() -> None:
    """Source: ``anthropic/types/image_block_param.py`` (no ``detail``): an OpenAI image's
    ``detail: "high"`` is left out, and Prepared.conversions says so."""
    s = sess("anthropic")
    s.append_openai([{"role": "user", "content": [{"type": "text", "text": "see"}, {"type": "image_url", "image_url": {
        "url": "https://ex.com/a.png", "detail": "high"}}]}])
    p = s.prepare()
    assert check_wire(p.payload, "anthropic") == []
    assert [(c.rule, c.index) for c in p.conversions] == [("image-detail-dropped", 0)]
    assert "'high'" in p.conversions[0].detail


def test_reasoning_only_response_is_kept_in_the_record_and_named() -> None:
    """A Responses output of one encrypted reasoning item: stored (its encrypted content kept),
    left out of what is sent (a reasoning item needs an item after it), its note naming it."""
    s = sess("openai_responses")
    s.append_responses([{"role": "user", "content": "hi"}])
    s.append_responses([{"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA"}])
    s.append_responses([{"role": "user", "content": "more"}])
    p = s.prepare()
    assert check_wire(p.payload, "openai_responses") == []
    assert [x.get("type") for x in p.payload] == ["message", "message"]
    stored = s.original(message_id="msg-000002")
    assert stored is not None and stored.thinking and "gAAAA" in str(stored.model_dump())
    notes = stored.metadata["ctxwise"]["normalized"]
    assert notes[0]["rule"] == "empty_reply" and "1 reasoning block(s)" in notes[0]["reasoning"]


def test_gemini_message_level_signature_left_out_is_reported() -> None:
    """Gemini's OpenAI endpoint takes a thought signature on a tool call
    (``extra_content.google.thought_signature``); one on a text reply's message is left out,
    and Prepared.conversions says so."""
    s = sess("gemini")
    s.append_openai([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello", "extra_content": {
        "google": {"thought_signature": "SIG=="}}}, {"role": "user", "content": "more"}])
    p = s.prepare()
    assert "SIG==" not in str(p.payload)
    assert [(c.rule, c.index) for c in p.conversions] == [("thought-signature-dropped", 1)]
