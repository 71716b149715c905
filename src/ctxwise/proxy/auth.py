"""Tenant keys for the proxy routes and the 401 bodies in each provider's own shape.

The ctxwise tenant key travels in the ``X-Ctxwise-Key`` header, or as a path segment
``/k/<key>/v1/...`` for clients that can only set a base URL. The provider's key
(``Authorization`` / ``x-api-key``) is never read here.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

Family = Literal["openai", "anthropic"]

KEY_HEADER = "x-ctxwise-key"
"""Header carrying the ctxwise tenant key (compared case-insensitively)."""

KEY_SEGMENT = "k"
"""Path prefix ``/k/<key>/`` carrying the tenant key for clients that cannot set headers."""


def split_key_path(path: str) -> tuple[str | None, str]:
    """``"/k/ctxw_abc/v1/messages"`` -> ``("ctxw_abc", "/v1/messages")``; a path without the
    segment -> ``(None, path)``. Raises ValueError for ``/k/`` with an empty key or no route after it."""
    parts = path.split("/", 3)
    if len(parts) < 3 or parts[0] != "" or parts[1] != KEY_SEGMENT:
        return None, path
    key = parts[2]
    if not key or len(parts) < 4 or not parts[3]:
        raise ValueError(f"path {path!r}: a key segment must look like /{KEY_SEGMENT}/<key>/v1/...")
    return key, "/" + parts[3]


def tenant_key(headers: Mapping[str, str], path: str) -> str | None:
    """The tenant key of a proxied request: the ``X-Ctxwise-Key`` header, else the path segment,
    else None. Raises ValueError if both are present and differ (ambiguous tenant)."""
    header = next((v for k, v in headers.items() if k.lower() == KEY_HEADER), None)
    from_path, _ = split_key_path(path)
    if header is not None and from_path is not None and header != from_path:
        raise ValueError("X-Ctxwise-Key header and /k/<key>/ path segment name different keys")
    return header if header is not None else from_path


def unauthorized_body(family: Family, message: str) -> dict[str, Any]:
    """The JSON body of a 401 as the provider itself sends it.

    openai: ``{"error": {"message", "type": "invalid_request_error", "param": None,
    "code": "invalid_api_key"}}`` (source: ``openai/types/shared/error_object.py``);
    anthropic: ``{"type": "error", "error": {"type": "authentication_error", "message"}}``
    (source: ``anthropic/types/shared/error_response.py``,
    ``anthropic/types/shared/authentication_error_object.py``). Raises ValueError for another family."""
    if family == "openai":
        return {"error": {"message": message, "type": "invalid_request_error", "param": None,
                          "code": "invalid_api_key"}}
    if family == "anthropic":
        return {"type": "error", "error": {"type": "authentication_error", "message": message}}
    raise ValueError(f"unknown provider family {family!r}: expected 'openai' or 'anthropic'")
