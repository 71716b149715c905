"""The ASGI app: ``create_app(store_url, policy=...) -> FastAPI``.

    create_app(store_url: str = "sqlite:///ctxwise.db",
               policy: Policy | Mapping[str, Any] | None = None,
               *, summarizer: Summarizer | None = None,
               max_body_bytes: int = 16 * 2**20, session_cache: int = 1024,
               session_cache_bytes: int = 128 * 2**20, ...) -> fastapi.FastAPI

``store_url`` is the SQLAlchemy URL of the ctxwise database (SQLite file or
``postgresql+psycopg://``); it is upgraded to the newest schema when the app is built, which
also creates the API keys table. ``policy`` is the policy new sessions get (default: the
``default`` preset; a reopened session keeps its stored one). ``max_body_bytes`` caps a
request body (413 above it); ``session_cache`` is how many open sessions a process keeps
between requests (:mod:`.sessions`, 0: none) and ``session_cache_bytes`` the bytes their
contexts hold at most (one :class:`ctxwise.SessionPool`). :func:`create_app_from_env` builds the same app from the
environment the CLI reads (``CTXWISE_DB``, ``CTXWISE_CONFIG`` a policy TOML file, else
``CTXWISE_PRESET`` / ``CTXWISE_BUDGET`` / ... as ``Policy.from_env``; ``CTXWISE_SERVER_MAX_BODY``,
``CTXWISE_SERVER_SESSION_CACHE``, ``CTXWISE_SERVER_SESSION_CACHE_BYTES``);
``ctxwise serve`` runs it under uvicorn, one or more worker processes.

Routes: ``GET /healthz`` (the process is up), ``GET /readyz`` (the database answers),
``/v1/...`` (:mod:`.api`, every call needs an API key: one check,
:meth:`~ctxwise.server.core.Server.authenticate`, and an app whose ``/v1`` route lacks it is
never built, :func:`require_key_check`), OpenAPI at ``/docs`` and
``/openapi.json``, and ``/ui`` when :mod:`ctxwise.server.ui` exists: the app includes
``ui.make_router(server)`` (a :class:`fastapi.APIRouter` whose paths carry their own ``/ui``
prefix), ``server`` being the :class:`~ctxwise.server.core.Server`, also at ``app.state.server``.

Several processes may serve one database: a process keeps the sessions it opened, but never
serves one that another process could have made stale: every request checks the cached session
against the store (its version, one indexed read; an append relies on the store's own version
check of the write) and reopens it when another process wrote it (:mod:`.sessions`); a write
carries the version it read, and the loser of a race gets 409; keys are checked against the
database on every request.
"""

from __future__ import annotations

import os
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Iterable, Mapping

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from .. import ContextManager, CtxwiseError, Policy, RuntimeSettings, Summarizer, __version__
from .api import make_router
from .core import DEFAULT_MAX_BODY, Server, ServerTiming, Unauthorized, error_for, replaying
from .errors import Unhandled, error_response, log, log_to_stderr
from .hot import HotPath
from .keys import KeyStore
from .sessions import DEFAULT_BYTES as DEFAULT_CACHE_BYTES
from .sessions import DEFAULT_SIZE as DEFAULT_CACHE
from .sessions import SessionCache
from .workers import Workers

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
    proxy: Any = None
    """The provider-compatible routes (:mod:`ctxwise.proxy`), answered ahead of everything else."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.proxy is not None and self.proxy.handles(scope):
            await self.proxy(scope, receive, send)
            return
        if self.hot is not None and scope["type"] == "http":
            await self.hot(scope, receive, send, super().__call__)
            return
        await super().__call__(scope, receive, send)


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
               session_cache: int = DEFAULT_CACHE, session_cache_bytes: int = DEFAULT_CACHE_BYTES,
               threads: int | None = DEFAULT_THREADS, append_threads: int | None = DEFAULT_APPEND_THREADS,
               hot: bool = True, allowed_hosts: Iterable[str] = ()) -> FastAPI:
    """The ctxwise service over the database at ``store_url`` (see the module docstring).
    ``session_cache``: how many open sessions the process keeps between requests, each checked
    against the store on every use (:mod:`ctxwise.server.sessions`; 0: open every request).
    ``session_cache_bytes``: the bytes their contexts hold at most (:class:`ctxwise.SessionPool`;
    a session holding more than a quarter of it is not kept).
    ``threads``: worker threads for the routes (:data:`DEFAULT_THREADS`; None: anyio's 40).
    ``append_threads``: how many of them may run appends at once (:data:`DEFAULT_APPEND_THREADS`,
    at most ``threads``; None: all), the rest kept for prepares.
    ``hot``: answer ordinary appends and prepares in :class:`~ctxwise.server.hot.HotPath`,
    ahead of FastAPI's routing (same answers, less CPU per request); False: every request
    through FastAPI. ``allowed_hosts``: host names (a port is ignored) the inspector's local
    mode answers to besides localhost, 127.0.0.1 and [::1] (:mod:`ctxwise.server.ui`).

    Raises :class:`~ctxwise.StoreUnavailable` / :class:`~ctxwise.StoreSchemaError` when the
    database cannot be opened or migrated, :class:`~ctxwise.PolicyError` for a bad policy or
    cache bound."""
    from .ui import host_names

    hosts = host_names(allowed_hosts)
    manager = ContextManager(store_url, policy, summarizer=summarizer)  # opens and migrates the store
    opener = ContextManager(store=manager.store, summarizer=manager.summarizer)
    server = Server(store_url=store_url, policy=manager.policy, manager=manager, keys=KeyStore(store_url),
                    max_body_bytes=max_body_bytes, opener=opener, allowed_hosts=hosts)
    server.sessions = SessionCache(server, session_cache, session_cache_bytes)
    server.workers = Workers(threads or DEFAULT_THREADS, append_threads)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        if threads:
            import anyio.to_thread

            anyio.to_thread.current_default_thread_limiter().total_tokens = threads

        try:
            yield
        finally:
            await _close_proxy(_app)
            server.close()

    app = App(title="ctxwise", version=__version__, lifespan=lifespan,
                  summary="Context management for tool-using LLM agents: sessions, payloads, transcripts, events.",
                  description="Every /v1 call needs an API key (`Authorization: Bearer ctxw_...`); create one with "
                              "`ctxwise keys create --tenant NAME`. Errors are `{\"error\": {\"type\", \"message\", "
                              "\"hint\", ...}}` with the library's text.")
    app.state.server = server
    _handle_errors(app)

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

    router, authenticated = make_router(server)
    app.include_router(router)
    if hot:
        # FastAPI's OpenTelemetry middleware: when it has a provider to report to, the hot path steps aside
        telemetry = getattr(getattr(app, "_native_telemetry", None), "enabled", None)
        app.hot = HotPath(server, telemetry if callable(telemetry) else None)
    _mount_ui(app, server)
    _mount_proxy(app, server)
    require_key_check(app, authenticated)
    app.state.key_check = authenticated  # for require_key_check on an app extended later
    app.add_middleware(ServerTiming)
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    app.add_middleware(Unhandled, answer=error_for)  # a 500 logged once; the connection stays open
    return app


def _handle_errors(app: FastAPI) -> None:
    """The app's exception handlers: every error is one JSON shape (:func:`.core.error_for`)."""

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


API_PREFIX = "/v1"
"""Every route under it needs an API key (:func:`require_key_check`)."""


def all_routes(app: FastAPI) -> list[Any]:
    """Every route of ``app``, the routes of included routers flattened (FastAPI keeps an
    included router as one entry of ``app.routes``). Each has ``path`` and ``methods``; a
    FastAPI route also has its ``dependant`` (parameters and dependencies)."""
    out: list[Any] = []
    for route in app.routes:
        flatten = getattr(route, "effective_route_contexts", None)
        out.extend(flatten() if callable(flatten) else [route])
    return out


def require_key_check(app: FastAPI, authenticated: Any) -> None:
    """Raise :class:`RuntimeError` naming the route when a route under :data:`API_PREFIX`
    does not depend on ``authenticated`` (the ``/v1`` router's key check,
    :func:`.api.make_router`), or when there is no such route: an app where a route could skip
    the key check is never built."""
    checked = 0
    for route in all_routes(app):
        path = getattr(route, "path", "") or ""
        if not (path == API_PREFIX or path.startswith(API_PREFIX + "/")):
            continue
        dependant = getattr(route, "dependant", None)
        stack, found = list(dependant.dependencies if dependant is not None else []), False
        while stack and not found:
            dep = stack.pop()
            found = dep.call is authenticated
            stack.extend(dep.dependencies)
        if not found:
            raise RuntimeError(f"route {sorted(getattr(route, 'methods', None) or ())} {path} has no API key check: "
                               "add it to the /v1 router (ctxwise.server.api.make_router)")
        checked += 1
    if not checked:
        raise RuntimeError(f"no route under {API_PREFIX} found to check for the API key check")


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


async def _close_proxy(app: Any) -> None:
    """Close the drop-in endpoint's upstream client when :func:`_mount_proxy` mounted one."""
    proxy = getattr(app, "proxy", None)
    if proxy is not None:
        await proxy.aclose()


def _mount_proxy(app: FastAPI, server: Server) -> None:
    """Put the provider-compatible routes (:mod:`ctxwise.proxy.routes`, upstreams from the
    environment) in front of the app when that package exists."""
    import importlib
    import importlib.util

    if importlib.util.find_spec("ctxwise.proxy.routes") is None:
        return
    importlib.import_module("ctxwise.proxy.routes").mount(app, server)


def create_app_from_env(environ: Mapping[str, str] | None = None) -> FastAPI:
    """:func:`create_app` configured like the CLI: ``CTXWISE_DB`` (default
    ``sqlite:///ctxwise.db``), the policy from the TOML file ``CTXWISE_CONFIG`` when set, else
    from ``CTXWISE_*`` settings (:meth:`~ctxwise.Policy.from_env`), ``CTXWISE_SERVER_MAX_BODY``
    (bytes), ``CTXWISE_SERVER_SESSION_CACHE`` (open sessions kept per process, default 1024;
    0 turns the cache off), ``CTXWISE_SERVER_SESSION_CACHE_BYTES`` (the bytes their contexts
    hold at most, default 128 MiB), ``CTXWISE_SERVER_THREADS`` (worker threads, default 8),
    ``CTXWISE_SERVER_APPEND_THREADS`` (how many of them may run appends at once, default 4); the
    summarizer from the process settings in the same file or variables
    (:class:`~ctxwise.RuntimeSettings`: ``CTXWISE_SUMMARIZER``, ``CTXWISE_SUMMARIZER_MODEL``, ...). The
    factory ``ctxwise serve`` hands to uvicorn (``--factory``)."""
    env = dict(os.environ if environ is None else environ)
    log_to_stderr()  # a served process's 500s reach its log
    url = env.get("CTXWISE_DB") or "sqlite:///ctxwise.db"
    config = env.get("CTXWISE_CONFIG")
    policy = Policy.from_toml(config, default_preset=env.get("CTXWISE_PRESET", "default")) if config \
        else Policy.from_env(env)
    runtime = RuntimeSettings.from_toml(config) if config else RuntimeSettings.from_env(env)
    return create_app(url, policy, summarizer=runtime.make_summarizer(),
                      max_body_bytes=_env_int(env, "CTXWISE_SERVER_MAX_BODY", DEFAULT_MAX_BODY, 1),
                      session_cache=_env_int(env, "CTXWISE_SERVER_SESSION_CACHE", DEFAULT_CACHE, 0),
                      session_cache_bytes=_env_int(env, "CTXWISE_SERVER_SESSION_CACHE_BYTES", DEFAULT_CACHE_BYTES, 0),
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


__all__ = ["create_app", "create_app_from_env", "Server", "DEFAULT_MAX_BODY"]
