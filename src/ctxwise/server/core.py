"""What every part of the server shares: the :class:`Server`, its one key check, the errors as
responses, and the request timing. The modules above it (:mod:`.api`, :mod:`.hot`,
:mod:`.sessions`, :mod:`.app`) import it; it imports none of them.

**Authentication by construction.** :meth:`Server.authenticate` is the one key check of the
``/v1`` API: the form of the key (``Authorization: Bearer`` or ``X-API-Key``), then one read of
the keys table (revoked and unknown keys refused; for a prepare, the same statement also reads
the session's freshness). Every ``/v1`` route reaches it in one of two ways:

* FastAPI's routes through the router's own dependency (:func:`.api.make_router`): a route
  added to the router gets it without asking, and :func:`.app.create_app` refuses to build
  an app with a ``/v1`` route that lacks it;
* append and prepare, whose key check runs on the route's worker thread right before the work
  (one thread hop instead of two), through :class:`Guarded`: the route's work takes the
  tenant as its first argument and is only ever reached through a :class:`Guarded` wrapper,
  which the FastAPI route and the hot path (:mod:`.hot`) both call; the hot path refuses a
  call that is not one.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Callable, Generic, TypeVar

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import ContextManager, CtxwiseError, Policy, Session, SessionNotFound
from .errors import ctxwise_error_response, error_response, log, unexpected_error_response
from .keys import KEY_FORM, KEY_LOOKUP, TENANT_SEP, KeyStore, lookup_params, tenant_in

T = TypeVar("T")

DEFAULT_MAX_BODY = 16 * 2**20
"""16 MiB: a batch with a large tool result fits; a runaway client does not."""

ID_PATTERN = r"^[^\x00-\x1f\x7f]+$"
"""A user, session or tool_use id: 1-190 characters, no control characters (the store holds
255 with the tenant prefix)."""


class Unauthorized(Exception):
    """No API key, or one that is malformed, unknown or revoked (401, one text for all)."""


@dataclass
class Server:
    """What the routes share in one process: the store URL, the policy for new sessions, the
    :class:`~ctxwise.ContextManager` (a connection pool, no session state) and the keys.

    The inspector (``ui``) gets this object too."""

    store_url: str
    policy: Policy
    manager: ContextManager
    keys: KeyStore
    max_body_bytes: int = DEFAULT_MAX_BODY
    allowed_hosts: tuple[str, ...] = ()
    """Host names (no port) the inspector's local mode answers to besides the loopback names."""
    opener: ContextManager | None = None
    """The same store and summarizer, built without a policy: it opens an existing session with
    the policy the session was created with (set by :func:`.app.create_app`)."""
    hot_calls: Any = None
    """The append and prepare routes' models and :class:`Guarded` calls, for the hot path (set by
    :func:`.api.make_router`)."""
    sessions: Any = None
    """The process's :class:`~ctxwise.server.sessions.SessionCache` (set by :func:`.app.create_app`)."""
    workers: Any = None
    """The threads appends and prepares run on, prepares first (:class:`~ctxwise.server.workers.Workers`,
    set by :func:`.app.create_app`)."""

    def open(self, tenant: str, user_id: str, session_id: str, *, create: bool = False,
             tools: list[dict[str, Any]] | None = None) -> Session:
        """The session ``(user_id, session_id)`` of ``tenant``, read from the store now.

        An existing session keeps the policy it was created with (a server started with
        another policy file still serves it); a missing one is created with :attr:`policy`
        when ``create``, else :class:`~ctxwise.SessionNotFound`."""
        user = self.store_user(tenant, user_id)
        opener = self.opener or self.manager
        try:
            return opener.session(user, session_id, tools=tools, create=False)
        except SessionNotFound:
            if not create:
                raise
        return self.manager.session(user, session_id, tools=tools, create=True)

    @staticmethod
    def key_of(request: Request) -> str:
        """The request's API key (``Authorization: Bearer <key>`` or ``X-API-Key: <key>``),
        well-formed, not yet checked against the database; :class:`Unauthorized` otherwise."""
        key = request.headers.get("x-api-key")
        auth = request.headers.get("authorization", "")
        if auth[:7].lower() == "bearer ":
            bearer = auth[7:].strip()
            if key is not None and key != bearer:
                raise Unauthorized()  # two different keys: neither is trusted
            key = bearer
        if not key or not KEY_FORM.match(key):
            raise Unauthorized()
        return key

    def authenticate(self, request: Request, user_id: str | None = None, session_id: str | None = None) -> str:
        """The tenant of the request's API key, checked against the database: the one key check
        of every ``/v1`` route (see the module docstring). Raises :class:`Unauthorized` for a
        missing, malformed, unknown or revoked key. Keeps the tenant on
        ``request.state.tenant`` (error texts are scrubbed of its prefix) and records ``auth``
        in the request's ``Server-Timing``.

        With ``user_id`` and ``session_id`` (a prepare), when the store has ``freshness_with``
        and the process keeps sessions: the session's freshness read is made in the same
        statement and kept on ``request.state.freshness`` for the session cache
        (:meth:`.sessions.SessionCache.run`), which then makes no read of its own."""
        key = self.key_of(request)
        with_ = getattr(self.manager.store, "freshness_with", None)
        t0 = time.perf_counter()
        if user_id is None or session_id is None or with_ is None or not getattr(self.sessions, "size", 0):
            tenant = self.keys.tenant_of(key)
            timing(request, "auth", t0)
            if tenant is None:
                raise Unauthorized()
        else:
            found = with_(KEY_LOOKUP, user_id, session_id, lookup_params(key))
            timing(request, "auth", t0)
            row = None if found is None else SimpleNamespace(tenant=found[0][1], key_hash=found[0][2],
                                                             revoked_at=found[0][3])
            tenant = tenant_in(key, row)
            if tenant is None or found is None:
                raise Unauthorized()
            request.state.freshness = (self.store_user(tenant, user_id), session_id, found[1])
        request.state.tenant = tenant
        return tenant

    @staticmethod
    def store_user(tenant: str, user_id: str) -> str:
        """The user id as the store holds it: ``<tenant>:<user_id>`` (tenant scoping: every
        store call is scoped by user id)."""
        return f"{tenant}{TENANT_SEP}{user_id}"

    @staticmethod
    def api_user(tenant: str, stored: str) -> str:
        """The inverse of :meth:`store_user`."""
        return stored.removeprefix(f"{tenant}{TENANT_SEP}")

    def close(self) -> None:
        """Stop the worker threads, close the store's and the keys' connection pools."""
        if self.workers is not None:
            self.workers.close()
        self.manager.close()
        self.keys.close()


class Guarded(Generic[T]):
    """``guarded(body, request, session_id, user_id)``: :meth:`Server.authenticate`, then
    ``work(tenant, body, request, session_id, user_id)``. The only way append and prepare reach
    their work, from FastAPI's route and from the hot path alike. ``with_session``: the key check
    also reads the session's freshness (a prepare). Raises :class:`Unauthorized` before any
    work for a key the database refuses, else what ``work`` raises."""

    def __init__(self, server: Server, work: Callable[[str, Any, Request, str, str], T], *,
                 with_session: bool = False) -> None:
        self.server = server
        self.work = work
        self.with_session = with_session

    def __call__(self, body: Any, request: Request, session_id: str, user_id: str) -> T:
        if self.with_session:
            tenant = self.server.authenticate(request, user_id, session_id)
        else:
            tenant = self.server.authenticate(request)
        return self.work(tenant, body, request, session_id, user_id)


def timing(request: Request, name: str, since: float) -> None:
    """Record ``name`` as taking from ``since`` (a ``time.perf_counter()``) until now; the
    response carries every recorded step in its ``Server-Timing`` header (ms)."""
    request.scope.setdefault("ctxwise_timing", []).append((name, (time.perf_counter() - since) * 1000))


class ServerTiming:
    """ASGI middleware: ``Server-Timing: auth;dur=0.61, open;dur=0.4, prepare;dur=4.8, total;dur=6.2,
    cache;desc="hit"`` on every response (the key check, getting the session: the freshness read
    and, when the process had no current copy, reading it from the store; the library call; the
    whole request in the app, body and response encoding included; whether the session was
    served from the process's cache: ``hit``, ``miss`` or ``stale``), so an operator (and
    bench/service.py) sees where a request's time went."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        t0 = time.perf_counter()

        async def send_with_timing(message: Message) -> None:
            steps = scope.get("ctxwise_timing")
            if message["type"] == "http.response.start" and steps:
                steps = [*steps, ("total", (time.perf_counter() - t0) * 1000)]
                value = ", ".join([*(f"{name};dur={ms:.2f}" for name, ms in steps),
                                   *(f'{name};desc="{desc}"' for name, desc in scope.get("ctxwise_timing_desc", {}).items())])
                message = {**message, "headers": [*message.get("headers", []), (b"server-timing", value.encode())]}
            await send(message)

        await self.app(scope, receive, send_with_timing)


def replaying(body: bytes, receive: Receive) -> Receive:
    """An ASGI ``receive`` that hands on ``body`` (already read, whole) as one request message,
    then whatever ``receive`` gives (a disconnect): for handing a request whose body was read
    to the next app."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def error_for(request: Request, exc: Exception) -> JSONResponse:
    """The response for an exception a route raised (the app's exception handlers, also used
    by the hot path, :mod:`.hot`): a ctxwise error with its status and text (the caller's
    tenant prefix scrubbed), 401 for :class:`Unauthorized`, 503 for an error of the database
    driver, else 500 with no detail; both with a trace id, logged (:mod:`.errors`)."""
    if isinstance(exc, CtxwiseError):
        tenant = getattr(request.state, "tenant", None)
        return ctxwise_error_response(exc, scrub=f"{tenant}{TENANT_SEP}" if tenant else None)
    if isinstance(exc, Unauthorized):
        return error_response(401, "Unauthorized", "missing, unknown or revoked API key",
                              "send 'Authorization: Bearer <key>' with a key from `ctxwise keys create`",
                              headers={"WWW-Authenticate": "Bearer"})
    return unexpected_error_response(request.method, request.url.path, exc)  # logged with its trace id


def dumps(value: Any) -> str:
    """JSON as the responses send it (UTF-8, no NaN)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
