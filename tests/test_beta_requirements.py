"""``Prepared.beta``: what an Anthropic payload needs from the beta Messages API, said at
prepare() time (issue 25 leftover).

Fault kind covered: a session holding MCP connector blocks (``mcp_tool_use`` /
``mcp_tool_result``) or a server-side ``compaction`` block renders a payload the standard
``client.messages.create`` refuses; only the README said so, and nothing a program could read
told the app to send it with ``client.beta.messages.create(..., betas=[...])``.
Source: ``anthropic`` 2.17, ``anthropic/types/content_block_param.py`` (standard) against
``anthropic/types/beta/beta_content_block_param.py`` (beta), ``anthropic_beta_param.py``.
"""

from __future__ import annotations

import typing

import pytest
from anthropic.types.anthropic_beta_param import AnthropicBetaParam
from anthropic.types.beta.beta_content_block_param import BetaContentBlockParam
from anthropic.types.content_block_param import ContentBlockParam
from pydantic import TypeAdapter, ValidationError

from ctxwise import ContextManager, Message, Policy, ProviderBlock
from ctxwise.formats.anthropic import PROVIDER_KINDS
from ctxwise.messages import text_message
from ctxwise.providers.beta import BETA_FEATURES, beta_requirements

MCP_USE = {"type": "mcp_tool_use", "id": "mcptoolu_01", "name": "lookup", "server_name": "crm", "input": {"q": "A1"}}
MCP_RESULT = {"type": "mcp_tool_result", "tool_use_id": "mcptoolu_01", "is_error": False,
              "content": [{"type": "text", "text": "order A1 shipped"}]}
SEARCH_USE = {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": {"query": "A1"}}
SEARCH_RESULT = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01",
                 "content": [{"type": "web_search_result", "url": "https://e.x/a1", "title": "A1",
                              "encrypted_content": "enc", "page_age": None}]}
COMPACTION = {"type": "compaction", "content": "The user asked for order A1.", "signature": "sig-1",
              "encrypted_content": "opaque-1"}


def prepared(blocks: list[dict]) -> object:
    with ContextManager("memory://", Policy(provider="anthropic")) as cm:
        s = cm.session("u", "beta")
        s.append_anthropic({"system": "Be brief.", "messages": [
            {"role": "user", "content": "Where is order A1?"},
            {"role": "assistant", "content": [*blocks, {"type": "text", "text": "It shipped."}]},
            {"role": "user", "content": "Thanks."}]})
        return s.prepare()


def _types(union: object) -> set[str]:
    """The ``type`` literals of a block-param union (nested unions and Annotated read through)."""
    out: set[str] = set()
    for t in typing.get_args(union):
        if typing.get_origin(t) is typing.Annotated:  # the response models (BetaContentBlock)
            continue
        if typing.get_origin(t) is typing.Union:
            out |= _types(t)
            continue
        hint = typing.get_type_hints(t).get("type") if isinstance(t, type) else None
        out |= {a for a in typing.get_args(hint) if isinstance(a, str)}
    return out


def test_mcp_blocks_make_prepare_say_the_payload_needs_the_beta_api():
    p = prepared([MCP_USE, MCP_RESULT])
    assert len(p.beta) == 1
    need = p.beta[0]
    assert need.feature == "mcp-client" and need.block_types == ("mcp_tool_use", "mcp_tool_result")
    assert need.message_ids == (p.messages[2].id,) and "mcptoolu_01" in str(p.messages[2].blocks[0].raw)
    assert "client.beta.messages.create" in need.detail and "mcp-client-2026-09-15" in need.detail
    # and it is true: the standard block type refuses the MCP blocks as sent, the beta one takes them
    sent = p.payload["messages"][1]["content"][:2]
    for block in sent:
        with pytest.raises(ValidationError):
            TypeAdapter(ContentBlockParam).validate_python(block)
        TypeAdapter(BetaContentBlockParam).validate_python(block)


def test_server_tools_need_no_beta():
    """Web search blocks are in the standard request types: nothing to say."""
    p = prepared([SEARCH_USE, SEARCH_RESULT])
    assert p.beta == []
    for block in p.payload["messages"][1]["content"]:
        TypeAdapter(ContentBlockParam).validate_python(block)


def test_a_compaction_block_needs_the_compact_beta():
    msgs = [text_message("s", "system", "Be brief."),
            Message(id="cmp", role="user", blocks=[ProviderBlock(provider="anthropic", kind="compaction", raw=COMPACTION)]),
            text_message("u", "user", "Go on.")]
    [need] = beta_requirements(msgs, "anthropic")
    assert (need.feature, need.block_types, need.message_ids) == ("compact", ("compaction",), ("cmp",))
    assert beta_requirements(msgs, "openai") == []  # not an Anthropic wire: no Anthropic beta


def test_the_beta_only_blocks_are_exactly_the_sdks():
    """Every block type ctxwise stores for Anthropic that the beta union has and the standard
    one has not is in BETA_FEATURES, and nothing else; every header named is one the SDK knows."""
    beta_only = _types(BetaContentBlockParam) - _types(ContentBlockParam)
    assert {"mcp_tool_use", "mcp_tool_result", "compaction"} <= beta_only
    listed = {k for kinds, _ in BETA_FEATURES.values() for k in kinds}
    assert listed == beta_only & set(PROVIDER_KINDS)
    known = set(typing.get_args(typing.get_args(AnthropicBetaParam)[1]))
    assert {h for _, headers in BETA_FEATURES.values() for h in headers} <= known


def test_each_call_says_it_anew_as_the_session_grows():
    """The first call holds no MCP block (nothing to say); after an MCP turn is appended the
    next call names it; a list that drops it (another provider's view) does not."""
    with ContextManager("memory://", Policy(provider="anthropic")) as cm:
        s = cm.session("u", "grow")
        s.append_anthropic({"system": "Be brief.", "messages": [{"role": "user", "content": "Where is A1?"}]})
        assert s.prepare().beta == []
        s.append_anthropic({"messages": [{"role": "assistant", "content": [MCP_USE, MCP_RESULT]},
                                         {"role": "user", "content": "And A2?"}]})
        p = s.prepare()
        assert [n.feature for n in p.beta] == ["mcp-client"]
        assert beta_requirements([m for m in p.messages if m.id not in p.beta[0].message_ids], "anthropic") == []
