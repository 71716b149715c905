"""ctxwise errors as JSON responses: the library's own text, a status code, never a traceback.

Every error response has one shape::

    {"error": {"type": "PayloadInvalid", "message": "1 openai rule violation(s): message 3: [tool-result-orphan] ...",
               "hint": "fix the messages named by index ...",
               "violations": [{"index": 3, "rule": "tool-result-orphan", "message": "..."}]}}

``violations`` only for :class:`~ctxwise.PayloadInvalid`, ``report`` (the sizes) only for
:class:`~ctxwise.ContextBudgetExceeded`. Status codes: 404 for what the caller's tenant does
not have (a session, a tool result, a memory entry: another tenant's is 404 too, with the same
text as one that never existed), 409 for a version conflict (reload and retry), 422 for input
the library refuses, 503 when the store is unavailable or busy, 500 for anything else.

A 500 (and a 503 for an error of the database driver) carries a ``trace_id`` (32 hex
characters) in its body, its message and its ``X-Trace-Id`` header; the ``ctxwise.server``
logger has a record with the same id, the method and path, and (for a 500) the traceback, at
ERROR (:func:`unexpected_error_response`), once (:class:`Unhandled`). :func:`log_to_stderr`
gives that logger a handler when the process has none (``ctxwise serve``).
"""

from __future__ import annotations

import logging
import sys
import uuid
from typing import Any, Callable

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fastapi.responses import JSONResponse

from .. import (
    ContextBudgetExceeded,
    CtxwiseError,
    FormatError,
    MemoryBusy,
    MemoryEntryNotFound,
    MessageNotStorable,
    NotStorable,
    PayloadInvalid,
    PolicyError,
    PolicyMismatch,
    SessionConflict,
    SessionNotFound,
    StoreSchemaError,
    StoreUnavailable,
    ToolResultNotFound,
)

log = logging.getLogger("ctxwise.server")

STATUS: list[tuple[type[BaseException], int]] = [
    (SessionNotFound, 404), (ToolResultNotFound, 404), (MemoryEntryNotFound, 404),
    (SessionConflict, 409), (PolicyMismatch, 409),
    (PayloadInvalid, 422), (FormatError, 422), (MessageNotStorable, 422), (NotStorable, 422),
    (ContextBudgetExceeded, 422), (PolicyError, 422),
    (MemoryBusy, 503), (StoreUnavailable, 503), (StoreSchemaError, 503),
]
"""The status code of each ctxwise error (first match); any other CtxwiseError is 400."""


def status_of(exc: BaseException) -> int:
    for cls, code in STATUS:
        if isinstance(exc, cls):
            return code
    return 400 if isinstance(exc, CtxwiseError) else 500


def error_body(kind: str, message: str, hint: str | None = None, **extra: Any) -> dict[str, Any]:
    """The one error shape: ``{"error": {"type", "message", "hint"?, ...}}``."""
    body: dict[str, Any] = {"type": kind, "message": message}
    if hint:
        body["hint"] = hint
    body.update({k: v for k, v in extra.items() if v is not None})
    return {"error": body}


def error_response(status: int, kind: str, message: str, hint: str | None = None,
                   headers: dict[str, str] | None = None, **extra: Any) -> JSONResponse:
    return JSONResponse(error_body(kind, message, hint, **extra), status_code=status, headers=headers)


def ctxwise_error_response(exc: CtxwiseError, scrub: str | None = None) -> JSONResponse:
    """``exc`` as JSON with its status; ``scrub`` (the caller's tenant prefix, ``acme:``) is
    removed from the text, so a stored user id reads as the caller wrote it."""

    def clean(text: str) -> str:
        return text.replace(scrub, "") if scrub else text

    extra: dict[str, Any] = {}
    if isinstance(exc, PayloadInvalid):
        extra["violations"] = [{"index": v.index, "rule": v.rule, "message": clean(v.message),
                                "provider_error": v.provider_error, "where": clean(v.where)} for v in exc.violations]
    if isinstance(exc, ContextBudgetExceeded) and getattr(exc, "report", None) is not None:
        r = exc.report
        extra["report"] = {"budget": r.budget, "pinned": r.pinned, "total": r.total, "unit": r.unit,
                           "parts": r.parts, "fits_at": r.fits_at, "culprit": r.culprit}
    for attr in ("index", "rule"):
        value = getattr(exc, attr, None)
        if isinstance(value, (int, str)) and not isinstance(value, bool):
            extra[attr] = value
    headers = {"Retry-After": "1"} if status_of(exc) in (409, 503) else None
    hint = HTTP_HINTS.get(type(exc).__name__, exc.hint)
    return error_response(status_of(exc), type(exc).__name__, clean(str(exc)), clean(hint), headers=headers, **extra)


HTTP_HINTS = {
    "SessionConflict": "another writer changed this session since it was read: read it again and retry the request "
                       "(with expected_version: the version you read)",
    "SessionNotFound": "check user_id and session_id (sessions are scoped by user and by the key's tenant); "
                       "POST .../messages creates a session",
}
"""Hints that name HTTP calls where the library's name Python ones."""


def unexpected_error_response(method: str, path: str, exc: BaseException) -> JSONResponse:
    """The answer to an exception no handler knows: 503 ``StoreUnavailable`` (retry) for an
    error of the database driver (SQLAlchemy, psycopg, sqlite3), else 500 ``InternalError``;
    either way with a new trace id in the body (``trace_id``, and in the message) and the
    ``X-Trace-Id`` header, logged under the same id on ``ctxwise.server`` with ``method`` and
    ``path``: a 500 at ERROR with its traceback, a 503 at WARNING with the error's type only (a
    driver's text may quote the statement's parameters: user text)."""
    trace = uuid.uuid4().hex
    headers = {"X-Trace-Id": trace}
    if type(exc).__module__.split(".")[0] in ("sqlalchemy", "psycopg", "sqlite3"):
        log.warning("store error (trace id %s) on %s %s: %s", trace, method, path, type(exc).__name__)
        return error_response(503, "StoreUnavailable", f"the store did not answer; retry (trace id {trace})",
                              "retry later; the server's log has the details under this trace id",
                              headers={**headers, "Retry-After": "1"}, trace_id=trace)
    log.error("internal error (trace id %s) on %s %s", trace, method, path, exc_info=exc)
    return error_response(500, "InternalError", f"internal error (trace id {trace}); the server's log has the details",
                          "report it with the trace id", headers=headers, trace_id=trace)


def log_to_stderr() -> None:
    """Give the ``ctxwise.server`` logger a handler writing WARNING and above to stderr
    (``LEVEL:    ctxwise.server: message``, as uvicorn's lines), unless a handler already
    receives its records (the application configured logging): then nothing changes."""
    if log.hasHandlers():
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s:    %(name)s: %(message)s"))
    handler.setLevel(logging.WARNING)
    log.addHandler(handler)


class Unhandled:
    """ASGI middleware: an exception that reaches it before the response started is answered
    with ``answer(request, exc)`` (the app's :func:`~ctxwise.server.app.error_for`: logged once,
    with its trace id), and the connection stays open for the client's next request. Without
    it Starlette answers and re-raises, and uvicorn logs the error a second time (no trace id)
    and closes the connection (a client reusing it gets a reset)."""

    def __init__(self, app: ASGIApp, answer: Callable[[Request, Exception], Any]) -> None:
        self.app = app
        self.answer = answer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except Exception as exc:
            if started:
                raise
            await self.answer(Request(scope, receive), exc)(scope, receive, send)
