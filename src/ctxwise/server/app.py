"""The ASGI app: ``create_app(store_url, policy=...) -> FastAPI``.

    create_app(store_url: str = "sqlite:///ctxwise.db",
               policy: Policy | Mapping[str, Any] | None = None,
               *, summarizer: Summarizer | None = None,
               max_body_bytes: int = 16 * 2**20, session_cache: int = 1024) -> fastapi.FastAPI

``store_url`` is the SQLAlchemy URL of the ctxwise database (SQLite file or
``postgresql+psycopg://``); it is upgraded to the newest schema when the app is built, which
also creates the API keys table. ``policy`` is the policy new sessions get (default: the
``default`` preset; a reopened session keeps its stored one). ``max_body_bytes`` caps a
request body (413 above it); ``session_cache`` is how many open sessions a process keeps
between requests (:mod:`.sessions`, 0: none). :func:`create_app_from_env` builds the same app from the
environment the CLI reads (``CTXWISE_DB``, ``CTXWISE_CONFIG`` a policy TOML file, else
``CTXWISE_PRESET`` / ``CTXWISE_BUDGET`` / ... as ``Policy.from_env``; ``CTXWISE_SERVER_MAX_BODY``,
``CTXWISE_SERVER_SESSION_CACHE``);
``ctxwise serve`` runs it under uvicorn, one or more worker processes.

Routes: ``GET /healthz`` (the process is up), ``GET /readyz`` (the database answers),
``/v1/...`` (:mod:`.api`, every call needs an API key), OpenAPI at ``/docs`` and
``/openapi.json``, and ``/ui`` when :mod:`ctxwise.server.ui` exists: the app includes
``ui.make_router(server)`` (a :class:`fastapi.APIRouter` whose paths carry their own ``/ui``
prefix), ``server`` being the :class:`Server` below, also at ``app.state.server``.

Several processes may serve one database: a process keeps the sessions it opened, but never
serves one that another process could have made stale: every request checks the cached session
against the store (its version, one indexed read; an append relies on the store's own version
check of the write) and reopens it when another process wrote it (:mod:`.sessions`); a write
carries the version it read, and the loser of a race gets 409; keys are checked against the
database on every request.
"""

from __future__ import annotations

import json
import os
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, AsyncIterator, Iterable, Mapping

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import ContextManager, CtxwiseError, Policy, Session, SessionNotFound, Summarizer, __version__
from .errors import Unhandled, ctxwise_error_response, error_response, log, log_to_stderr, unexpected_error_response
from .keys import KEY_FORM, KEY_LOOKUP, TENANT_SEP, KeyStore, lookup_params, tenant_in
from .sessions import DEFAULT_SIZE as DEFAULT_CACHE
from .sessions import SessionCache
from .workers import Workers

DEFAULT_MAX_BODY = 16 * 2**20
"""16 MiB: a batch with a large tool result fits; a runaway client does not."""

DEFAULT_THREADS = 8
"""Worker threads per process for the API's routes (a route runs on one, its key check
included; appends and prepares on :class:`~ctxwise.server.workers.Workers`, which starts a
waiting prepare before the waiting appends, the other routes on anyio's pool of the same
size). A process runs Python one thread at a time, so more threads only add switching, and
each holds a database connection: 8 keep a request's waits on the database overlapped while
staying near the connection pool (5 kept, 10 more opened and closed on demand: anyio's 40
threads made PostgreSQL fork a backend for most requests under load)."""


DEFAULT_APPEND_THREADS = 4
"""Of the worker threads, how many may run appends at once; the others are left for prepares
(:class:`~ctxwise.server.workers.Workers`). Every running thread competes for the process's
interpreter lock with the event loop: under bench/service.py's load (64-session runs on a
shared 2-core machine), with all 8 threads on appends a prepare waited for the lock at each of
its steps (37-41 ms in the server for 2 ms of work); with appends capped at 4 it took 10-14 ms.
The appends wait longer in the queue instead (client p50 1.5-2.2x the in-process one in those
runs, 1.3-1.8x uncapped); throughput was the same within the noise."""


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
    opener: ContextManager | None = None
    """The same store and summarizer, built without a policy: it opens an existing session with
    the policy the session was created with (set by :func:`create_app`)."""
    hot_calls: Any = None
    """The append and prepare routes' models and functions, for the hot path (set by
    :func:`.api.make_router`)."""
    sessions: Any = None
    """The process's :class:`~ctxwise.server.sessions.SessionCache` (set by :func:`create_app`)."""
    workers: Any = None
    """The threads appends and prepares run on, prepares first (:class:`~ctxwise.server.workers.Workers`,
    set by :func:`create_app`)."""
    allowed_hosts: tuple[str, ...] = ()
    """Host names the inspector's local mode answers to besides localhost, 127.0.0.1 and [::1]
    (lowercase, no port; :mod:`.ui`)."""

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

    def authenticate(self, request: Request) -> str:
        """The tenant of the request's API key (see :meth:`key_of`); :class:`Unauthorized`
        otherwise. Also kept on ``request.state.tenant`` so error texts can be scrubbed of the
        tenant prefix."""
        key = self.key_of(request)
        t0 = time.perf_counter()
        tenant = self.keys.tenant_of(key)
        timing(request, "auth", t0)
        if tenant is None:
            raise Unauthorized()
        request.state.tenant = tenant
        return tenant

    def authenticate_with(self, request: Request, user_id: str, session_id: str) -> str:
        """:meth:`authenticate`, with the freshness read of the session ``(user_id,
        session_id)`` of the key's tenant made in the same statement (one round trip for both;
        when the store has ``freshness_with`` and the process keeps sessions): the read is kept
        on the request for the session cache (:meth:`.sessions.SessionCache.run`), which then
        makes no read of its own before using the session. Recorded as ``auth``."""
        store = self.manager.store
        with_ = getattr(store, "freshness_with", None)
        if with_ is None or self.sessions is None or not self.sessions.size:
            return self.authenticate(request)
        key = self.key_of(request)
        t0 = time.perf_counter()
        found = with_(KEY_LOOKUP, user_id, session_id, lookup_params(key))
        timing(request, "auth", t0)
        row = None if found is None else SimpleNamespace(tenant=found[0][1], key_hash=found[0][2],
                                                         revoked_at=found[0][3])
        tenant = tenant_in(key, row)
        if tenant is None or found is None:
            raise Unauthorized()
        request.state.tenant = tenant
        request.state.freshness = (self.store_user(tenant, user_id), session_id, found[1])
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
        if self.workers is not None:
            self.workers.close()
        self.manager.close()
        self.keys.close()


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


class BodyLimit:
    """ASGI middleware: a request body over ``max_bytes`` is answered 413 with one line,
    before the app reads it (by ``Content-Length``, and by counting a chunked body)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            await self._too_large(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._too_large(scope, receive, send, more=message.get("more_body", False))
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        from .hot import replaying

        await self.app(scope, replaying(b"".join(chunks), receive), send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send, more: bool = True) -> None:
        # Read the rest of the body (discarding it) before answering: closing a connection with
        # unread data makes the kernel reset it, and the client would never see the 413.
        drained = 0
        while more and drained < 16 * self.max_bytes:
            message = await receive()
            if message["type"] != "http.request":
                break
            drained += len(message.get("body", b""))
            more = message.get("more_body", False)
        response = error_response(413, "RequestTooLarge",
                                  f"the request body is larger than this server accepts ({self.max_bytes:,} bytes)",
                                  "send less per request (append in smaller batches), or raise CTXWISE_SERVER_MAX_BODY",
                                  headers={"Connection": "close"})
        await response(scope, receive, send)


class App(FastAPI):
    """The FastAPI app, with :class:`~ctxwise.server.hot.HotPath` in front of it when ``hot`` is
    set: ordinary appends and prepares are answered there, everything else by FastAPI."""

    hot: Any = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.hot is not None and scope["type"] == "http":
            await self.hot(scope, receive, send, super().__call__)
            return
        await super().__call__(scope, receive, send)


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


def _one_line(exc: RequestValidationError) -> str:
    """A validation error as one line: the non-JSON body, or the first field and what is wrong."""
    errors = exc.errors()
    if not errors:
        return "the request is not valid"
    e = errors[0]
    if e.get("type") == "json_invalid":
        ctx = e.get("ctx") or {}
        return f"the body is not JSON ({ctx.get('error', 'invalid JSON')})"
    loc = ".".join(str(p) for p in e.get("loc", ()) if p != "body") or "body"
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{loc}: {e.get('msg', 'invalid')}{more}"


def create_app(store_url: str = "sqlite:///ctxwise.db", policy: Policy | Mapping[str, Any] | None = None, *,
               summarizer: Summarizer | None = None, max_body_bytes: int = DEFAULT_MAX_BODY,
               session_cache: int = DEFAULT_CACHE, threads: int | None = DEFAULT_THREADS,
               append_threads: int | None = DEFAULT_APPEND_THREADS, hot: bool = True,
               allowed_hosts: Iterable[str] = ()) -> FastAPI:
    """The ctxwise service over the database at ``store_url`` (see the module docstring).
    ``session_cache``: how many open sessions the process keeps between requests, each checked
    against the store on every use (:mod:`ctxwise.server.sessions`; 0: open every request).
    ``threads``: worker threads for the routes (:data:`DEFAULT_THREADS`; None: anyio's 40).
    ``append_threads``: how many of them may run appends at once (:data:`DEFAULT_APPEND_THREADS`,
    at most ``threads``; None: all), the rest kept for prepares.
    ``hot``: answer ordinary appends and prepares in :class:`~ctxwise.server.hot.HotPath`,
    ahead of FastAPI's routing (same answers, less CPU per request); False: every request
    through FastAPI. ``allowed_hosts``: host names (a port is ignored) the inspector's local
    mode answers to besides localhost, 127.0.0.1 and [::1] (:mod:`ctxwise.server.ui`).

    Raises :class:`~ctxwise.StoreUnavailable` / :class:`~ctxwise.StoreSchemaError` when the
    database cannot be opened or migrated, :class:`~ctxwise.PolicyError` for a bad policy."""
    from .ui import host_names

    hosts = host_names(allowed_hosts)
    manager = ContextManager(store_url, policy, summarizer=summarizer)  # opens and migrates the store
    opener = ContextManager(store=manager.store, summarizer=manager.summarizer)
    server = Server(store_url=store_url, policy=manager.policy, manager=manager, keys=KeyStore(store_url),
                    max_body_bytes=max_body_bytes, opener=opener, allowed_hosts=hosts)
    server.sessions = SessionCache(server, session_cache)
    server.workers = Workers(threads or DEFAULT_THREADS, append_threads)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        if threads:
            import anyio.to_thread

            anyio.to_thread.current_default_thread_limiter().total_tokens = threads

        try:
            yield
        finally:
            server.close()

    app = App(title="ctxwise", version=__version__, lifespan=lifespan,
                  summary="Context management for tool-using LLM agents: sessions, payloads, transcripts, events.",
                  description="Every /v1 call needs an API key (`Authorization: Bearer ctxw_...`); create one with "
                              "`ctxwise keys create --tenant NAME`. Errors are `{\"error\": {\"type\", \"message\", "
                              "\"hint\", ...}}` with the library's text.")
    app.state.server = server

    @app.exception_handler(CtxwiseError)
    async def _ctxwise(request: Request, exc: CtxwiseError) -> JSONResponse:
        return error_for(request, exc)

    @app.exception_handler(Unauthorized)
    async def _unauthorized(request: Request, exc: Unauthorized) -> JSONResponse:
        return error_for(request, exc)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = (exc.errors() or [{}])[0]
        ctype = request.headers.get("content-type", "")
        if tuple(first.get("loc", ())) == ("body",) and "json" not in ctype.lower():
            return error_response(422, "RequestInvalid",
                                  f"the body is not JSON (Content-Type {ctype.split(';')[0] or 'missing'})",
                                  "send JSON with 'Content-Type: application/json'")
        return error_response(422, "RequestInvalid", _one_line(exc), "see the request schema at /docs")

    @app.exception_handler(StarletteHTTPException)
    async def _http(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        text = exc.detail if isinstance(exc.detail, str) else "request refused"
        return error_response(exc.status_code, "HTTPError", text, headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> JSONResponse:
        return error_for(request, exc)

    @app.get("/healthz", tags=["health"], summary="Liveness: the process answers.")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"], summary="Readiness: the database answers.")
    def readyz() -> JSONResponse:
        try:
            server.keys.ping()
        except Exception as e:  # a database that is down: 503, one line, no URL
            log.warning("readiness check failed: %s", type(e).__name__)
            return error_response(503, "NotReady", "the database does not answer")
        return JSONResponse({"status": "ready"})

    from .api import make_router

    app.include_router(make_router(server))
    if hot:
        from .hot import HotPath

        # FastAPI's OpenTelemetry middleware: when it has a provider to report to, the hot path steps aside
        telemetry = getattr(getattr(app, "_native_telemetry", None), "enabled", None)
        app.hot = HotPath(server, telemetry if callable(telemetry) else None)
    _mount_ui(app, server)
    app.add_middleware(ServerTiming)
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    app.add_middleware(Unhandled, answer=error_for)  # a 500 logged once; the connection stays open
    return app


def _mount_ui(app: FastAPI, server: Server) -> None:
    """Include the inspector's router when ``ctxwise.server.ui`` exists."""
    import importlib
    import importlib.util

    if importlib.util.find_spec("ctxwise.server.ui") is None:
        return
    ui = importlib.import_module("ctxwise.server.ui")

    make_router = getattr(ui, "make_router", None)
    if make_router is not None:
        app.include_router(make_router(server))


def create_app_from_env(environ: Mapping[str, str] | None = None) -> FastAPI:
    """:func:`create_app` configured like the CLI: ``CTXWISE_DB`` (default
    ``sqlite:///ctxwise.db``), the policy from the TOML file ``CTXWISE_CONFIG`` when set, else
    from ``CTXWISE_*`` settings (:meth:`~ctxwise.Policy.from_env`), ``CTXWISE_SERVER_MAX_BODY``
    (bytes), ``CTXWISE_SERVER_SESSION_CACHE`` (open sessions kept per process, default 1024;
    0 turns the cache off), ``CTXWISE_SERVER_THREADS`` (worker threads, default 8),
    ``CTXWISE_SERVER_APPEND_THREADS`` (how many of them may run appends at once, default 4),
    ``CTXWISE_SERVER_ALLOWED_HOSTS`` (comma-separated host names for the inspector's local mode).
    The factory ``ctxwise serve`` hands to uvicorn (``--factory``); the ``ctxwise.server`` log
    goes to stderr unless logging is configured (:func:`.errors.log_to_stderr`)."""
    env = dict(os.environ if environ is None else environ)
    log_to_stderr()  # a served process's 500s reach its log
    url = env.get("CTXWISE_DB") or "sqlite:///ctxwise.db"
    config = env.get("CTXWISE_CONFIG")
    policy = Policy.from_toml(config, default_preset=env.get("CTXWISE_PRESET", "default")) if config \
        else Policy.from_env(env)
    return create_app(url, policy, max_body_bytes=_env_int(env, "CTXWISE_SERVER_MAX_BODY", DEFAULT_MAX_BODY, 1),
                      session_cache=_env_int(env, "CTXWISE_SERVER_SESSION_CACHE", DEFAULT_CACHE, 0),
                      threads=_env_int(env, "CTXWISE_SERVER_THREADS", DEFAULT_THREADS, 1),
                      append_threads=_env_int(env, "CTXWISE_SERVER_APPEND_THREADS", DEFAULT_APPEND_THREADS, 1),
                      allowed_hosts=env.get("CTXWISE_SERVER_ALLOWED_HOSTS", "").split(","))



def _env_int(env: Mapping[str, str], name: str, default: int, least: int) -> int:
    """The integer setting ``name`` of ``env`` (``default`` when unset or empty). Raises
    :class:`~ctxwise.errors.PolicyError` naming the variable when it is not an integer of at
    least ``least``."""
    from ..errors import PolicyError

    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = least - 1
    if value < least:
        raise PolicyError(f"{name}={raw!r}: must be an integer >= {least}")
    return value


def dumps(value: Any) -> str:
    """JSON as the responses send it (UTF-8, no NaN)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


__all__ = ["create_app", "create_app_from_env", "Server", "DEFAULT_MAX_BODY"]
