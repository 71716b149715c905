"""Tenant keys for the proxy routes and the 401 bodies in each provider's own shape.

The ctxwise tenant key travels in the ``X-Ctxwise-Key`` header, or as a path segment
``/k/<key>/v1/...`` for clients that can only set a base URL. The provider's key
(``Authorization`` / ``x-api-key``) is never read here.
"""
from __future__ import annotations

import copy
import logging
import re
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


_KEY_IN_PATH = re.compile(r"/k/[^/\s'\"?#]+")


def mask_keys(text: str) -> str:
    """``text`` with every ``/k/<key>`` path segment shown as ``/k/***``."""
    return _KEY_IN_PATH.sub("/k/***", text)


class KeyMask(logging.Filter):
    """A logging filter that masks the ``/k/<key>`` segment (:func:`mask_keys`) in a record's
    message and arguments (uvicorn's access log formats its arguments itself; its trace log
    prints whole ASGI scopes). Installed on uvicorn's handlers by :func:`uvicorn_log_config`."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and "/k/" in record.msg:
            record.msg = mask_keys(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(_masked(a) for a in record.args)
        elif isinstance(record.args, Mapping):
            record.args = {k: _masked(v) for k, v in record.args.items()}
        return True


def _masked(value: Any) -> Any:
    if isinstance(value, (int, float)) or value is None:
        return value
    text = value if isinstance(value, str) else str(value)
    if "/k/" not in text:
        return value
    return mask_keys(text)


def uvicorn_log_config() -> dict[str, Any]:
    """uvicorn's default logging configuration (``uvicorn.config.LOGGING_CONFIG``) with
    :class:`KeyMask` on every handler: no log line of ``ctxwise serve`` shows a tenant key
    sent in the path, at any ``--log-level`` (trace included)."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config.setdefault("filters", {})["ctxwise_keys"] = {"()": "ctxwise.proxy.auth.KeyMask"}
    for handler in config.get("handlers", {}).values():
        handler["filters"] = [*handler.get("filters", []), "ctxwise_keys"]
    return config
