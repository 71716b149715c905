"""The provider-compatible routes of ``ctxwise serve``: an ASGI handler ahead of FastAPI.

``POST /v1/chat/completions``, ``/v1/responses``, ``/v1/messages`` and
``/v1/messages/count_tokens`` (also under ``/k/<tenant key>/``, :mod:`.auth`), each accepting
what the official SDK sends. A call: the ctxwise tenant key is checked (``X-Ctxwise-Key`` or the
path segment; a 401 in the provider's own shape otherwise); the session is found or made and
the new suffix appended (:mod:`.conversation`); the managed payload goes to the upstream of the
route's family (:class:`Upstreams`) with the client's other parameters and headers as sent,
the provider key (``Authorization`` / ``x-api-key``) included and never stored or logged; the
upstream's answer comes back as it is, status and body, a stream passed on chunk by chunk;
the reply, once complete, is held and appended after the client has it (:mod:`.replies`:
with the session's next call, in the same write, or ``reply_delay`` seconds later). A stream
the client leaves early leaves the session as it was before the reply (valid: the client's
next call carries what it has).

A Responses call that sends only its new input after ``previous_response_id`` continues the
session whose newest reply that is (:func:`~ctxwise.proxy.conversation.begin`): the upstream
gets the whole managed context, without ``previous_response_id``. Passed through unmanaged
(forwarded as sent, nothing stored): ``count_tokens``, and a ``previous_response_id`` that is
not the newest reply of a session of the tenant (made elsewhere, or an earlier one), and
every other path under ``/k/<key>/`` or sent with ``X-Ctxwise-Key`` (:meth:`Proxy.passthrough`).
"""

from __future__ import annotations

import json
import logging
import os
import time
import tomllib
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio.to_thread
import httpx
from starlette.requests import Request
from starlette.types import Message as AsgiMessage
from starlette.types import Receive, Scope, Send

from .. import ContextBudgetExceeded, CtxwiseError, PolicyError, SessionConflict
from ..server.core import Server
from . import recall, telemetry
from .auth import Family, split_key_path, tenant_key, unauthorized_body
from .conversation import (BUDGET_SETTING, RETRY_HEADER, Call, UnmanagedResponse, begin, finish, pending,
                           recall_round)
from .heads import HeadStore
from .replies import DEFAULT_DELAY, Pending, Replies
from .stream import Assembler
from .wire import ROUTES, Route, WireError, error_body, managed_body

log = logging.getLogger("ctxwise.proxy")

OPENAI_ENV = "CTXWISE_OPENAI_UPSTREAM"
ANTHROPIC_ENV = "CTXWISE_ANTHROPIC_UPSTREAM"

SESSION_HEADER = "x-ctxwise-session"
USER_HEADER = "x-ctxwise-user"

_HOP = frozenset({"host", "content-length", "connection", "keep-alive", "transfer-encoding", "te", "upgrade",
                  "accept-encoding", "proxy-authorization", "proxy-connection", "trailer"})
_HOP_OUT = frozenset({"content-length", "connection", "keep-alive", "transfer-encoding", "content-encoding",
                      "server", "date"})


@dataclass(frozen=True)
class Upstreams:
    """Where each family's calls go: the base URL as that provider's SDK takes it (OpenAI's with
    ``/v1``, ``https://api.openai.com/v1``; Anthropic's without, ``https://api.anthropic.com``)."""

    openai: str = "https://api.openai.com/v1"
    anthropic: str = "https://api.anthropic.com"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "Upstreams":
        """From ``CTXWISE_OPENAI_UPSTREAM`` / ``CTXWISE_ANTHROPIC_UPSTREAM`` (what ``ctxwise serve
        --openai-upstream`` / ``--anthropic-upstream`` set), else the ``[proxy]`` table of the
        settings file ``CTXWISE_CONFIG`` (:meth:`from_toml`), else the providers' own URLs.
        Raises ValueError for a variable that is not an http(s) URL, and
        :class:`~ctxwise.PolicyError` for a bad settings file."""
        env = os.environ if env is None else env
        config = (env.get("CTXWISE_CONFIG") or "").strip()
        base = cls.from_toml(config) if config else cls()
        out = {}
        for name, var in (("openai", OPENAI_ENV), ("anthropic", ANTHROPIC_ENV)):
            value = (env.get(var) or "").strip()
            if value:
                if not value.startswith(("http://", "https://")):
                    raise ValueError(f"{var}={value!r}: expected an http:// or https:// URL")
                out[name] = value.rstrip("/")
        return replace(base, **out)

    @classmethod
    def from_toml(cls, path: str | Path) -> "Upstreams":
        """The ``[proxy]`` table of the settings file at ``path`` (the policy TOML ``ctxwise serve
        --config`` reads): ``openai_upstream``, ``anthropic_upstream`` (http(s) URLs; either may
        be left out). A file without the table gives the providers' own URLs. Raises
        :class:`~ctxwise.PolicyError` naming the file and the key (unreadable file, bad TOML, an
        unknown key, a value that is not an http(s) URL)."""
        p = Path(path)
        try:
            data = tomllib.loads(p.read_text(encoding="utf-8"))
        except OSError as e:
            raise PolicyError(f"{p}: cannot read the settings file ({e.strerror})") from None
        except tomllib.TOMLDecodeError as e:
            raise PolicyError(f"{p}: not valid TOML ({e})") from None
        table = data.get("proxy", {})
        if not isinstance(table, dict):
            raise PolicyError(f"{p}: proxy: expected a table ([proxy])")
        out = {}
        for key, value in table.items():
            if key not in ("openai_upstream", "anthropic_upstream"):
                raise PolicyError(f"{p}: proxy.{key}: unknown setting (known: openai_upstream, anthropic_upstream)")
            if not isinstance(value, str) or not value.strip().startswith(("http://", "https://")):
                raise PolicyError(f"{p}: proxy.{key} = {value!r}: expected an http:// or https:// URL")
            out[key.removesuffix("_upstream")] = value.strip().rstrip("/")
        return cls(**out)

    def url(self, route: Route) -> str:
        """The upstream URL of ``route``."""
        return (self.openai if route.family == "openai" else self.anthropic) + route.upstream


class Proxy:
    """The ASGI handler of the proxied routes over ``server``'s store and keys
    (:meth:`handles` says whether a request is one of them)."""

    def __init__(self, server: Server, upstreams: Upstreams | None = None, *, timeout: float = 600.0,
                 reply_delay: float = DEFAULT_DELAY) -> None:
        self.server = server
        self.upstreams = upstreams or Upstreams.from_env()
        self.heads = HeadStore(server.store_url, engine=getattr(server.manager.store, "engine", None))
        self.timeout = timeout
        self.tracer: Any = telemetry.tracer()
        """The OpenTelemetry tracer of the call spans (:mod:`.telemetry`; None without the extra)."""
        self._transports: dict[tuple[str, str, int | None], httpx.AsyncHTTPTransport] = {}
        self._timeout = httpx.Timeout(timeout, connect=30.0).as_dict()
        self.replies = Replies(self._write, reply_delay)
        """Replies handed to clients and not yet stored (:mod:`.replies`; ``reply_delay`` seconds at most)."""

    def handles(self, scope: Scope) -> bool:
        """Whether ``scope`` is a request (or a WebSocket, which is refused) for the proxy: a
        proxied route (a trailing slash aside), anything under ``/k/<key>/`` (what is not a
        proxied route passes through to its family's upstream, :meth:`passthrough`), and a
        ``/v1/`` path outside ctxwise's own API (``/v1/sessions``, ``/v1/users``) sent with
        ``X-Ctxwise-Key``."""
        if scope["type"] not in ("http", "websocket"):
            return False
        path: str = scope["path"]
        if path.startswith("/k/") or _route(path) is not None:
            return True
        return path.startswith("/v1/") and not path.startswith(_OWN) and \
            any(k.lower() == b"x-ctxwise-key" for k, _ in scope.get("headers", []))

    def _transport(self, url: httpx.URL) -> httpx.AsyncHTTPTransport:
        """The connection pool of ``url``'s origin, through the proxy the environment names
        for it (``HTTPS_PROXY`` / ``HTTP_PROXY`` / ``ALL_PROXY``, unless ``NO_PROXY`` lists the
        host; read with :func:`urllib.request.getproxies`, as httpx reads them), made once.

        The upstream calls go to the transport itself, not through an ``httpx.AsyncClient``:
        no client-side cookie jar (a cookie one tenant's upstream answer sets is never sent
        with another tenant's call; the client's own ``Cookie`` header passes as sent), no
        redirects followed, no default headers added, and about a quarter less CPU per call."""
        key = (url.scheme, url.host, url.port)
        transport = self._transports.get(key)
        if transport is None:
            proxies = urllib.request.getproxies()
            proxy = None if urllib.request.proxy_bypass(url.host) else \
                proxies.get(url.scheme) or proxies.get("all")
            transport = self._transports[key] = httpx.AsyncHTTPTransport(proxy=proxy)
        return transport

    async def _send(self, route: Route, content: bytes, headers: dict[str, str]) -> httpx.Response:
        """POST ``content`` to ``route``'s upstream with ``headers`` (and the JSON content type);
        the response's body not read yet. Raises httpx.HTTPError."""
        return await self._request("POST", self.upstreams.url(route), content,
                                   {**headers, "content-type": "application/json"})

    async def _request(self, method: str, url: str, content: bytes | None, headers: dict[str, str]) -> httpx.Response:
        """``method`` ``url`` with ``content`` and ``headers`` as given, on :meth:`_transport`'s
        pool; the response's body not read yet. Raises httpx.HTTPError."""
        target = httpx.URL(url)
        request = httpx.Request(method, target, content=content, headers=headers, extensions={"timeout": self._timeout})
        return await self._transport(target).handle_async_request(request)

    async def aclose(self) -> None:
        """Store the waiting replies, close the upstream client and the heads store."""
        await anyio.to_thread.run_sync(self.replies.close)
        transports, self._transports = list(self._transports.values()), {}
        for transport in transports:
            await transport.aclose()
        self.heads.close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope["path"]
        try:
            rest = split_key_path(path)[1]
        except ValueError:
            rest = ""
        if path.startswith("/k/"):  # the server's logs show the path: not the key
            scope["path"] = "/k/***" + rest
            scope["raw_path"] = scope["path"].encode("utf-8")
        route = _route(rest)
        if route is None:
            await self.passthrough(scope, receive, send, path, rest)
            return
        if scope["type"] == "websocket":
            # Codex tries the Responses API over a WebSocket first, then falls back to HTTPS
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["method"] != "POST":
            await _json(send, 405, error_body(route.family, 405, f"{scope['method']} is not allowed here: use POST"))
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        raw = await _body(receive, self.server.max_body_bytes)
        if raw is None:
            await _json(send, 413, error_body(route.family, 413, "the request body is too large for this proxy"))
            return
        try:
            key = tenant_key(headers, path)
        except ValueError as e:
            await _json(send, 401, unauthorized_body(route.family, str(e)))
            return
        body = _object(raw)
        out = {k: v for k, v in headers.items() if k not in _HOP and not k.startswith("x-ctxwise-")}
        out["accept-encoding"] = "identity"
        managed = isinstance(body, dict) and route.kind != "count_tokens"
        if not managed:
            tenant = await anyio.to_thread.run_sync(self.server.keys.tenant_of, key) if key else None
            if tenant is None:
                await _json(send, 401, unauthorized_body(route.family, _NO_KEY))
            elif isinstance(body, str):
                await _json(send, 400, error_body(route.family, 400, f"the body is not a JSON object ({body})"))
            else:
                await self._forward(send, route, raw, out, None, body.get("stream") is True, receive)
            return
        assert isinstance(body, dict)
        try:
            name, user = (header_id(scope["headers"], h) for h in (SESSION_HEADER, USER_HEADER))
            recall_on = recall_flag(headers.get(recall.HEADER))
        except ValueError as e:
            await _json(send, 400, error_body(route.family, 400, f"ctxwise: {e}"))
            return
        call = Call(route, "", name, user, body, request=Request(scope), retry=retry_count(headers.get(RETRY_HEADER)))
        await self._managed(send, receive, call, key, headers, out, raw, recall_on)

    async def _managed(self, send: Send, receive: Receive, call: Call, key: str | None, headers: dict[str, str],
                       out: dict[str, str], raw: bytes, recall_on: bool = False) -> None:
        """A call ctxwise manages: the key check, mapping, append and prepare in one worker-thread
        hop; then the managed payload upstream and the answer back."""
        route, body = call.route, call.body
        t0 = time.perf_counter()
        try:
            found = await anyio.to_thread.run_sync(self._begin, call, key)
        except UnmanagedResponse as e:
            log.info("proxy: %s; passed on unmanaged", e)
            await self._forward(send, route, raw, out, None, body.get("stream") is True, receive)
            return
        except SessionConflict as e:
            # other calls of the session kept being stored first (nothing of this one is): the SDKs retry a 409
            await _json(send, 409, error_body(route.family, 409, f"ctxwise: {e}"))
            return
        except (WireError, CtxwiseError) as e:
            hint = f" (the budget is set by {BUDGET_SETTING})" if isinstance(e, ContextBudgetExceeded) else ""
            await _json(send, 400, error_body(route.family, 400, f"ctxwise: {e}{hint}"))
            return
        if found is None:
            await _json(send, 401, unauthorized_body(route.family, _NO_KEY))
            return
        call = found
        assert call.prepared is not None
        managed = _dumps(managed_body(route.kind, body, call.prepared.payload))
        extra = [(b"x-ctxwise-session", call.session_id.encode()), (b"x-ctxwise-user", call.user_id.encode())]
        if call.branched_from is not None:
            extra.append((b"x-ctxwise-branched-from", call.branched_from.encode()))
        took = (time.perf_counter() - t0) * 1000
        extra.append((b"server-timing", f"ctxwise;dur={took:.2f}, prepare;dur={call.prepared.latency_ms:.2f}".encode()))
        span = telemetry.start(self.tracer, call)
        status, reply = 500, None
        flying = (call.tenant, call.user_id, call.session_id)  # counted in flight by begin()
        try:
            if recall_on:
                status, reply = await self._recall_rounds(send, route, call, body, out, extra)
            else:
                status, reply = await self._forward(send, route, managed, out, call, body.get("stream") is True,
                                                    receive, extra)
        finally:
            self.replies.flying(flying, -1)
            telemetry.end(span, status, reply)
            if reply is None:
                await self._land(call)

    async def passthrough(self, scope: Scope, receive: Receive, send: Send, path: str, rest: str) -> None:
        """A path the proxy does not manage (``GET /v1/models``, ``/v1/embeddings``,
        ``/v1/completions``, ``/v1/messages/batches``, ...): forwarded to its family's upstream
        as sent (method, query, headers, body; nothing stored), the answer passed back as it
        comes. The family: Anthropic for ``/v1/messages...`` / ``/v1/complete`` or a request
        carrying ``anthropic-version`` / ``x-api-key``, else OpenAI. The ctxwise key is
        required as on the managed routes (a 401 in the family's shape)."""
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        family: Family = "anthropic" if rest.startswith(("/v1/messages", "/v1/complete")) or \
            "anthropic-version" in headers or "x-api-key" in headers else "openai"
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        if not rest:
            await _json(send, 404, error_body(family, 404, f"ctxwise: {_KEY_PATH}"))
            return
        try:
            key = tenant_key(headers, path)
        except ValueError as e:
            await _json(send, 401, unauthorized_body(family, str(e)))
            return
        raw = await _body(receive, self.server.max_body_bytes)
        if raw is None:
            await _json(send, 413, error_body(family, 413, "the request body is too large for this proxy"))
            return
        tenant = await anyio.to_thread.run_sync(self.server.keys.tenant_of, key) if key else None
        if tenant is None:
            await _json(send, 401, unauthorized_body(family, _NO_KEY))
            return
        base = self.upstreams.openai if family == "openai" else self.upstreams.anthropic
        url = base + (rest.removeprefix("/v1") if family == "openai" and rest.startswith("/v1/") else rest)
        query = scope.get("query_string", b"").decode("latin-1")
        out = {k: v for k, v in headers.items() if k not in _HOP and not k.startswith("x-ctxwise-")}
        out["accept-encoding"] = "identity"
        try:
            response = await self._request(scope["method"], url + (f"?{query}" if query else ""), raw or None, out)
        except httpx.HTTPError as e:
            await _json(send, 502, error_body(family, 502, f"ctxwise: the {family} upstream did not answer "
                                                           f"({type(e).__name__})"))
            return
        try:
            await send({"type": "http.response.start", "status": response.status_code,
                        "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in response.headers.items()
                                    if k.lower() not in _HOP_OUT]})
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        except (OSError, httpx.HTTPError) as e:
            log.info("proxy: the upstream answer broke off (%s)", type(e).__name__)
        finally:
            await response.aclose()

    def _begin(self, call: Call, key: str | None) -> Call | None:
        """On a worker thread: the tenant of ``key`` (None: unknown, the call is refused), then
        :func:`~ctxwise.proxy.conversation.begin`."""
        tenant = self.server.keys.tenant_of(key) if key else None
        if tenant is None:
            return None
        call.tenant = tenant
        return begin(self.server, self.heads, call, self.replies)

    async def _recall_rounds(self, send: Send, route: Route, call: Call, body: dict[str, Any],
                             headers: dict[str, str], extra: list[tuple[bytes, bytes]]
                             ) -> tuple[int, dict[str, Any] | None]:
        """With recall on: ask the upstream (the recall tool added) until its reply calls
        something else than the recall tool, answering recall calls in the session
        (:mod:`.recall`); that last answer goes to the client (a stream: once complete), its
        reply held for the store."""
        body = recall.with_tool(route.kind, body)
        stream = body.get("stream") is True
        for _ in range(recall.MAX_ROUNDS):
            assert call.prepared is not None
            managed = _dumps(managed_body(route.kind, body, call.prepared.payload))
            try:
                r, content, reply = await self._ask(route, managed, headers, stream)
            except httpx.HTTPError as e:
                await _json(send, 502, error_body(route.family, 502, f"ctxwise: the {route.family} upstream did "
                                                                     f"not answer ({type(e).__name__})"))
                return 502, None
            if reply is None or not recall.only_recall(route.kind, reply):
                break
            await anyio.to_thread.run_sync(recall_round, self.server, call, reply)
        if reply is not None:
            self._hold(call, reply)
        await send({"type": "http.response.start", "status": r.status_code,
                    "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in r.headers.items()
                                if k.lower() not in _HOP_OUT] + extra})
        await send({"type": "http.response.body", "body": content})
        return r.status_code, reply

    async def _ask(self, route: Route, content: bytes, headers: dict[str, str], stream: bool
                   ) -> tuple[httpx.Response, bytes, dict[str, Any] | None]:
        """One upstream call read whole: the response, its body as sent, and the reply (parsed,
        or assembled from the stream) when the call succeeded. Raises httpx.HTTPError."""
        r = await self._send(route, content, headers)
        try:
            data = await r.aread()
        finally:
            await r.aclose()
        if not 200 <= r.status_code < 300:
            return r, data, None
        if stream and r.headers.get("content-type", "").startswith("text/event-stream"):
            assembler = Assembler(route.kind)
            assembler.feed(data)
            return r, data, assembler.reply()
        try:
            reply = json.loads(data)
        except ValueError:
            return r, data, None
        return r, data, reply if isinstance(reply, dict) else None

    async def _forward(self, send: Send, route: Route, content: bytes, headers: dict[str, str], call: Call | None,
                       stream: bool, receive: Receive, extra: list[tuple[bytes, bytes]] | None = None
                       ) -> tuple[int, dict[str, Any] | None]:
        """Send ``content`` upstream and its answer to the client; returns the upstream status
        and, for a managed call that completed, the reply (parsed or assembled)."""
        try:
            response = await self._send(route, content, headers)
        except httpx.HTTPError as e:
            log.warning("proxy: upstream %s unreachable (%s)", route.family, type(e).__name__)
            await self._land(call)
            await _json(send, 502, error_body(route.family, 502, f"ctxwise: the {route.family} upstream did not "
                                                                 f"answer ({type(e).__name__})"))
            return 502, None
        try:
            start = {"type": "http.response.start", "status": response.status_code,
                     "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in response.headers.items()
                                 if k.lower() not in _HOP_OUT] + (extra or [])}
            ok = 200 <= response.status_code < 300 and call is not None
            is_sse = response.headers.get("content-type", "").startswith("text/event-stream")
            if stream and is_sse:
                return response.status_code, await self._stream(send, response, start, call if ok else None, receive)
            data = await response.aread()
        finally:
            await response.aclose()
        reply = None
        if ok and call is not None:
            try:
                reply = json.loads(data)
            except ValueError:
                log.warning("proxy: the upstream's 2xx answer is not JSON; the reply is not recorded")
            if isinstance(reply, dict):
                # held before the client has the reply, so its next call takes it
                self._hold(call, reply)
        if not isinstance(reply, dict):  # recorded before the client can retry
            await self._land(call)
        await send(start)
        await send({"type": "http.response.body", "body": data})
        return response.status_code, reply if isinstance(reply, dict) else None

    async def _stream(self, send: Send, response: httpx.Response, start: AsgiMessage, call: Call | None,
                      receive: Receive) -> dict[str, Any] | None:
        """Pass the SSE body on chunk by chunk while assembling the reply; the chunk that
        completes the reply is passed on once the reply is held (so the client's next call takes it). A
        client that leaves stops the stream: the reply it never saw is not recorded."""
        assembler = Assembler(call.route.kind) if call is not None else None
        state = {"recorded": False, "left": False}
        await send(start)
        async with anyio.create_task_group() as tg:
            async def watch() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                state["left"] = True
                tg.cancel_scope.cancel()

            tg.start_soon(watch)
            try:
                async for chunk in response.aiter_raw():
                    if assembler is not None and not state["recorded"]:
                        assembler.feed(chunk)
                        reply = assembler.reply()
                        if call is not None and reply is not None:
                            state["recorded"] = True
                            self._hold(call, reply)
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await send({"type": "http.response.body", "body": b""})
            except (OSError, httpx.HTTPError) as e:
                log.info("proxy: the upstream stream broke off (%s)", type(e).__name__)
            tg.cancel_scope.cancel()
        if assembler is not None and not state["recorded"]:
            log.info("proxy: %s; the reply is not recorded",
                     "the client left mid-stream" if state["left"] else "the stream ended before the reply completed")
        return assembler.reply() if assembler is not None and state["recorded"] else None

    async def _land(self, call: Call | None) -> None:
        """Record that a managed ``call`` ended without a reply (once; the heads row other
        processes read, :meth:`~ctxwise.proxy.heads.HeadStore.landed`), so its retry continues
        its session. A database error is logged: the row then counts as upstream until
        :data:`~ctxwise.proxy.conversation.FLIGHT_S` has passed."""
        if call is None or call.landed or not call.session_id:
            return
        call.landed = True
        try:
            await anyio.to_thread.run_sync(self.heads.landed, call.tenant, call.user_id, call.session_id,
                                           len(call.chain))
        except Exception as e:  # noqa: BLE001 - the client's answer does not depend on it
            log.warning("proxy: the end of a call of session %s could not be recorded (%s)", call.session_id,
                        type(e).__name__)

    def _hold(self, call: Call, reply: dict[str, Any]) -> None:
        """Hand the complete reply of ``call`` to :attr:`replies` (stored after the client has it)."""
        try:
            self.replies.add(pending(call, reply))
        except WireError as e:
            # not the client's error: the reply reached it; its next call carries the reply again
            log.warning("proxy: the reply could not be recorded in session %s (%s)", call.session_id, e)

    def _write(self, p: Pending) -> None:
        """Store one reply (:class:`~ctxwise.proxy.replies.Replies` calls it on its thread)."""
        try:
            finish(self.server, self.heads, p)
        except SessionConflict:
            log.info("proxy: session %s moved on before its reply was stored (the next call carried it, or "
                     "the call was retried): the reply is not stored", p.call.session_id)
        except (WireError, CtxwiseError) as e:
            log.warning("proxy: the reply could not be recorded in session %s (%s)", p.call.session_id,
                        type(e).__name__)


_ID_MAX = 190


def header_id(raw: list[tuple[bytes, bytes]], name: str) -> str | None:
    """The value of header ``name`` (lower case) among the ASGI ``raw`` headers, read as UTF-8,
    checked as a session or user id: 1-190 characters, no control characters, no ``/`` (the
    REST API's id rule, :data:`ctxwise.server.core.ID_PATTERN`, and a session id is a path
    segment of ``/v1/sessions/<id>``). None when absent. Raises ValueError naming the header
    and the rule."""
    value = next((v for k, v in raw if k.decode("latin-1").lower() == name), None)
    if value is None:
        return None
    title = "-".join(p.capitalize() for p in name.split("-"))
    try:
        text = value.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise ValueError(f"{title}: not UTF-8 text") from None
    if not 1 <= len(text) <= _ID_MAX or any(ord(c) < 32 or ord(c) == 127 for c in text) or "/" in text:
        raise ValueError(f"{title} {text[:40]!r}: an id is 1-{_ID_MAX} characters, without control characters "
                         f"or '/'")
    return text


def retry_count(value: str | None) -> int:
    """The SDK's retry count header (:data:`~ctxwise.proxy.conversation.RETRY_HEADER`) as a
    number: 0 when absent or not a whole number from 0 to 1000 (a client's own value, never an error)."""
    text = (value or "").strip()
    return int(text) if text.isdigit() and len(text) <= 4 and int(text) <= 1000 else 0


_FLAG = {"on": True, "true": True, "1": True, "yes": True, "off": False, "false": False, "0": False, "no": False}


def recall_flag(value: str | None) -> bool:
    """``X-Ctxwise-Recall`` as a switch: on / true / 1 / yes or off / false / 0 / no (any case;
    absent: off). Raises ValueError naming the header for another value."""
    if value is None or not value.strip():
        return False
    flag = _FLAG.get(value.strip().lower())
    if flag is None:
        raise ValueError(f"X-Ctxwise-Recall {value[:20]!r}: expected on or off (also true/false, 1/0, yes/no)")
    return flag


_OWN = ("/v1/sessions", "/v1/users")
"""ctxwise's own API under ``/v1`` (:mod:`ctxwise.server.api`): never passed through."""

_KEY_PATH = "a key segment must look like /k/<key>/v1/... (the base URL with the provider's path after it)"


def _route(path: str) -> Route | None:
    """The proxied route of ``path`` (a trailing slash aside), None for another path."""
    return ROUTES.get(path) or (ROUTES.get(path.rstrip("/")) if path.endswith("/") else None)


_NO_KEY = "missing, unknown or revoked ctxwise key: send it in X-Ctxwise-Key or as /k/<key>/ in the base URL"


def _object(raw: bytes) -> dict[str, Any] | str:
    """The body as a JSON object, or why it is not one."""
    try:
        body = json.loads(raw)
    except ValueError as e:
        return str(e)
    return body if isinstance(body, dict) else "not a JSON object"


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


async def _body(receive: Receive, limit: int) -> bytes | None:
    chunks, size, more = [], 0, True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        more = message.get("more_body", False)
    return b"".join(chunks)


async def _json(send: Send, status: int, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode("utf-8")
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data})


def mount(app: Any, server: Server, upstreams: Upstreams | None = None) -> Proxy:
    """Put a :class:`Proxy` over ``server`` in front of ``app`` (``app.proxy``, which
    :class:`ctxwise.server.app.App` consults first) and return it."""
    proxy = Proxy(server, upstreams)
    app.proxy = proxy
    return proxy


__all__ = ["Proxy", "Upstreams", "mount", "OPENAI_ENV", "ANTHROPIC_ENV"]
