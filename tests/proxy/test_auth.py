"""Tenant key extraction and the provider-shaped 401 bodies, validated with the SDKs' own types."""
from __future__ import annotations

import pytest
from anthropic.types.shared.error_response import ErrorResponse as AnthropicErrorResponse
from openai.types.shared.error_object import ErrorObject as OpenAIErrorObject

from ctxwise.proxy.auth import split_key_path, tenant_key, unauthorized_body


def test_key_segment_is_split_off_the_route() -> None:
    assert split_key_path("/k/ctxw_abc/v1/messages") == ("ctxw_abc", "/v1/messages")
    assert split_key_path("/v1/chat/completions") == (None, "/v1/chat/completions")
    assert split_key_path("/kk/x/v1/messages") == (None, "/kk/x/v1/messages")


@pytest.mark.parametrize("path", ["/k//v1/messages", "/k/ctxw_abc", "/k/ctxw_abc/"])
def test_malformed_key_segment_is_an_error(path: str) -> None:
    with pytest.raises(ValueError, match="key segment"):
        split_key_path(path)


def test_header_wins_and_conflict_is_refused() -> None:
    assert tenant_key({"X-Ctxwise-Key": "a"}, "/v1/messages") == "a"
    assert tenant_key({}, "/k/b/v1/messages") == "b"
    assert tenant_key({"x-ctxwise-key": "b"}, "/k/b/v1/messages") == "b"
    assert tenant_key({"Authorization": "Bearer sk-provider"}, "/v1/responses") is None
    with pytest.raises(ValueError, match="different keys"):
        tenant_key({"X-Ctxwise-Key": "a"}, "/k/b/v1/messages")


def test_401_bodies_parse_as_the_providers_error_types() -> None:
    anthropic = AnthropicErrorResponse.model_validate(unauthorized_body("anthropic", "bad key"))
    assert anthropic.error.type == "authentication_error" and anthropic.error.message == "bad key"
    openai = OpenAIErrorObject.model_validate(unauthorized_body("openai", "bad key")["error"])
    assert openai.code == "invalid_api_key" and openai.message == "bad key"
    with pytest.raises(ValueError, match="unknown provider family"):
        unauthorized_body("gemini", "x")  # type: ignore[arg-type]
