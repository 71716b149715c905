"""Append and prepare, the two calls an agent makes on every model call, answered without
FastAPI's per-request machinery.

A server process runs Python one thread at a time, so under load every millisecond of CPU a
request costs is waiting for the others. Profiled under ``bench/service.py`` (py-spy, samples
of the thread holding the GIL), the event loop's share of a server's CPU was about 40 %, most
of it FastAPI and Starlette per request: seven nested middleware and routing layers, dependency
solving (the two key headers, the path and query parameters, the body), and the response
model's validation and encoding. :class:`HotPath` answers ``POST
/v1/sessions/{session_id}/messages`` and ``.../prepare`` itself when the request is the
ordinary case:

* the session id and the ``user_id`` query parameter (given once) pass the routes' own rules;
* the request carries a well-formed API key (:meth:`~ctxwise.server.app.Server.key_of`);
* ``Content-Type: application/json`` and a ``Content-Length`` within the server's body limit;
* the body parses (``json.loads``, as Starlette's ``Request.json``) and validates as the
  route's request model (``AppendRequest`` / ``PrepareRequest``, the same pydantic models).

Anything else (another method or path, a missing or malformed key, a body that does not
validate, another content type, a chunked or empty body, a ``root_path``, FastAPI's
OpenTelemetry tracing switched on) goes to the FastAPI app unchanged, the body read so far
handed on, so every refusal is exactly the routes' answer. An accepted call runs through the
routes' own :class:`~ctxwise.server.core.Guarded` calls (:mod:`.api`: the one key check
against the database, then the session cache and the library) on the same worker threads and priorities; an exception becomes the response the app's
exception handlers give (:func:`~ctxwise.server.app.error_for`); the response carries the same
``Server-Timing`` header. Nothing is cached here.
"""

from __future__ import annotations

import json
import re
from typing import Any, Awaitable, Callable
from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from .api import AppendRequest, PrepareRequest
from .core import ID_PATTERN, Guarded, Server, ServerTiming, Unauthorized, error_for, replaying


ASGI = Callable[[Scope, Receive, Send], Awaitable[None]]

_PATH = re.compile(r"^/v1/sessions/([^/]+)/(messages|prepare)$")

ROUTES = (("POST", "/v1/sessions/{session_id}/messages"), ("POST", "/v1/sessions/{session_id}/prepare"))
"""The routes the hot path answers (FastAPI has the same ones: anything else goes there)."""


class HotPath:
    """``await hot(scope, receive, send, app)``: answer an ordinary append or prepare (see the
    module docstring), else hand the request to ``app`` (the FastAPI app's own ``__call__``).
    ``server`` is the app's :class:`~ctxwise.server.core.Server` after :func:`.api.make_router`
    set its ``hot_calls``; ``telemetry`` returns True when FastAPI's tracing is on.

    Raises :class:`RuntimeError` when a call of ``server.hot_calls`` is not a
    :class:`~ctxwise.server.core.Guarded` one (a call the key check does not stand in front of)."""

    def __init__(self, server: Server, telemetry: Callable[[], bool] | None = None) -> None:
        self.server = server
        self.calls: dict[str, tuple[type[AppendRequest] | type[PrepareRequest], Guarded[Any], int]] = server.hot_calls
        if sorted(self.calls) != ["messages", "prepare"] or not all(
                isinstance(fn, Guarded) and fn.server is server for _m, fn, _p in self.calls.values()):
            raise RuntimeError("the hot path answers only calls behind the server's key check (Guarded)")
        self.id_ok = re.compile(ID_PATTERN).match
        self.telemetry = telemetry or (lambda: False)
        self.answered = 0
        """Requests answered here (the rest went to FastAPI): an operator's and a test's view."""

    def _id(self, value: str) -> bool:
        return 1 <= len(value) <= 190 and self.id_ok(value) is not None

    async def __call__(self, scope: Scope, receive: Receive, send: Send, app: ASGI) -> None:
        m = _PATH.match(scope["path"]) if scope["type"] == "http" and scope["method"] == "POST" else None
        if m is None or scope.get("root_path") or not self._id(m.group(1)):
            await app(scope, receive, send)
            return
        session_id, which = m.group(1), m.group(2)
        users = [v for k, v in parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True)
                 if k == "user_id"]
        length = ctype = None
        for name, value in scope["headers"]:
            if name == b"content-length":
                length = value
            elif name == b"content-type":
                ctype = value
        request = Request(scope, receive)
        if (len(users) != 1 or not self._id(users[0]) or ctype is None
                or ctype.split(b";")[0].strip().lower() != b"application/json"
                or length is None or not length.isdigit() or not 0 < int(length) <= self.server.max_body_bytes
                or not self._key_ok(request) or self.telemetry()):
            await app(scope, receive, send)
            return

        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        replay = replaying(body, receive)

        model, fn, priority = self.calls[which]
        try:
            parsed = model.model_validate(json.loads(body))
        except Exception:  # noqa: BLE001 - not JSON, or not valid: the routes say what is wrong, in their words
            await app(scope, replay, send)
            return
        request = Request(scope, replay)
        self.answered += 1

        async def answer(scope: Scope, receive: Receive, send: Send) -> None:
            try:
                response = await self.server.workers.run(fn, parsed, request, session_id, users[0],
                                                         priority=priority)
            except Exception as exc:  # noqa: BLE001 - answered as the app's exception handlers answer
                response = error_for(request, exc)
            await response(scope, receive, send)

        await ServerTiming(answer)(scope, replay, send)

    def _key_ok(self, request: Request) -> bool:
        try:
            self.server.key_of(request)
        except Unauthorized:
            return False
        return True
