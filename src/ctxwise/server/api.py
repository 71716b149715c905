"""The ``/v1`` JSON API over the engine. Every route needs an API key; the key's tenant scopes
every user id (``<tenant>:<user_id>`` in the store), so another tenant's session, tool result or
memory entry is 404 with the text of one that never existed.

Sessions are ``(user_id, session_id)``, as in the library; the session routes take the user as
the ``user_id`` query parameter::

    POST   /v1/sessions/{session_id}/messages?user_id=U   append (opens the session, or creates it)
    POST   /v1/sessions/{session_id}/prepare?user_id=U    compact, check, render: payload, sizes, events
                                                          (body: tools, expected_version, now)
    GET    /v1/sessions/{session_id}/transcript?user_id=U the record a person sees
    GET    /v1/sessions/{session_id}/context?user_id=U    the context the model reads now
    GET    /v1/sessions/{session_id}/events?user_id=U     every compaction event
    GET    /v1/sessions/{session_id}/tool-results/{tool_use_id}?user_id=U   a cleared result's original
    DELETE /v1/sessions/{session_id}/messages/last?user_id=U   retract the last appended message
    GET    /v1/sessions?user_id=U&limit=50&offset=0      the tenant's sessions, newest first
    GET/POST/DELETE /v1/users/{user_id}/memory[/{entry_id}]    long-term user memory

Writes take an optional ``expected_version`` (the ``version`` a previous response returned):
when the session moved on since, the call is 409 and changes nothing, so a client that does not
know whether a request went through (a timeout, a server that died) can retry it safely.
A process keeps the sessions it opened between requests and checks each against the store on
every use (:mod:`.sessions`): any process may serve any request, none serves a stale session.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Annotated, Any, Awaitable, Callable, Literal, TypeVar

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from fastapi.security import APIKeyHeader, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field

from .. import MemoryEntryNotFound, Message, Prepared, Session, ToolResultNotFound, find_original
from .core import ID_PATTERN, Guarded, Server, timing
from .workers import APPEND, PREPARE

T = TypeVar("T")

SAME_THREAD = frozenset({"append", "prepare"})
"""Routes that check the key against the database on their own worker thread, right before the
work (one thread hop per request instead of two: under load each hop waits for the process's
one running thread), through their :class:`~ctxwise.server.core.Guarded` call. A missing or
malformed key is still 401 before the body is read; a well-formed key that is unknown or
revoked is 401 after it (a body that is not valid is then 422 first: it says nothing about any
tenant)."""

MAX_INT = 2**63 - 1
"""The largest offset or version a request may name: both databases bind a signed 64-bit
integer, so a larger one is 422 here, never a database error."""

UserId = Query(..., min_length=1, max_length=190, pattern=ID_PATTERN, description="The session's user.")


class AppendRequest(BaseModel):
    """What arrived since the last model call, in the shape ``format`` names."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["openai", "anthropic", "canonical"] = Field(
        description="`openai`: chat messages (`{role, content, tool_calls?, reasoning_content?}`, tool results as "
                    "`{role: tool, tool_call_id, content}`); `anthropic`: Messages API messages (content blocks), "
                    "with `system` beside them; `canonical`: ctxwise Message dicts `{id, role, blocks, metadata}`.")
    messages: list[dict[str, Any]] = Field(description="The messages, oldest first.")
    system: str | list[dict[str, Any]] | None = Field(
        default=None, description="Anthropic only: the system prompt (first append of a session).")
    expected_version: int | None = Field(
        default=None, ge=0, le=MAX_INT, description="Refuse (409) unless the session is at this version.")


class AppendResponse(BaseModel):
    user_id: str
    session_id: str
    version: int = Field(description="The session's version after the append.")
    context_messages: int = Field(description="Messages in the context now.")


class PrepareRequest(BaseModel):
    """Optional: the tool schemas sent with the call (counted inside the budget), the version
    the caller expects, and ``now``, the time of the request (a 422 for a value that is neither
    epoch seconds nor an ISO 8601 date-time; nothing is stored then)."""

    model_config = ConfigDict(extra="forbid")

    tools: list[dict[str, Any]] | None = Field(default=None, description="Tool schemas, in the provider's shape.")
    expected_version: int | None = Field(default=None, ge=0, le=MAX_INT)
    now: Annotated[float, Field(allow_inf_nan=False)] | datetime | None = Field(
        default=None,
        description="When this request is made: epoch seconds, or an ISO 8601 date-time (UTC when it names no "
                    "zone). As the library's `prepare(now=)`: with the previous call's time it tells how long the "
                    "prompt cache went unused; past the price model's lifetime an edit re-bills nothing. Left out: "
                    "the newest `metadata.timestamp` of the messages.",
        examples=[1796558400.0, "2026-12-06T23:00:00Z"])


class PrepareResponse(BaseModel):
    payload: Any = Field(description="The provider's JSON, byte for byte what the library's prepare() returns.")
    provider: str
    size: int = Field(description="Context size after compaction, in `unit` (tool schemas included).")
    size_before: int = Field(description="Context size before compaction, in `unit`.")
    chars: int = Field(description="Context size by the chars rule.")
    unit: str
    events: list[dict[str, Any]] = Field(description="The compaction events this call fired.")
    version: int
    latency_ms: float
    beta: list[dict[str, Any]] = Field(
        default_factory=list,
        description="What the payload needs from Anthropic's beta Messages API, one entry per beta feature "
                    "(`feature` `mcp-client` for mcp_tool_use / mcp_tool_result blocks, `compact` for a compaction "
                    "block; `headers`: the anthropic-beta names for it; `block_types`, `message_ids`, `detail`): "
                    "send it with client.beta.messages and one of those headers. Empty when the standard API takes it.")


class MemoryAdd(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=4000)
    kind: Literal["preference", "profile"] = "preference"


@dataclass
class _StoredSession:
    """The recall lookup's view of one stored session of one user (``owner``: the user id as
    the store keys it, with the tenant's prefix; ``user_id``: as the caller names it), read
    straight from the store (:func:`ctxwise.find_original`)."""

    store: Any
    owner: str
    session_id: str
    user_id: str

    def original(self, tool_use_id: str | None = None, *, message_id: str | None = None) -> Message | None:
        found: Message | None = self.store.original(self.owner, self.session_id, tool_use_id, message_id=message_id)
        return found


def _iso(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def _dump(message: Message) -> dict[str, Any]:
    return message.model_dump(mode="json")


Authenticated = Callable[..., Awaitable[str | None]]
"""The ``/v1`` router's key check, a FastAPI dependency (:func:`make_router`)."""


def make_router(server: Server) -> tuple[APIRouter, Authenticated]:
    """The ``/v1`` routes over ``server``'s store and policy, and the key check every one of
    them depends on (a dependency of the router itself, so a route added here gets it;
    :func:`.app.require_key_check` verifies it). The check is :meth:`Server.authenticate`: on
    FastAPI's thread pool before the route, or for :data:`SAME_THREAD` routes (only the key's
    form here) on the route's worker thread, through its :class:`~ctxwise.server.core.Guarded` call."""
    bearer = HTTPBearer(auto_error=False, description="An API key from `ctxwise keys create`.")
    header = APIKeyHeader(name="X-API-Key", auto_error=False)

    async def authenticated(request: Request, _b: Any = Depends(bearer), _h: Any = Depends(header)) -> str | None:
        route = request.scope.get("route")
        if getattr(route, "name", None) in SAME_THREAD:
            server.key_of(request)  # 401 for a missing or malformed key before the body is read
            return None  # the key is checked against the database by the route's Guarded call
        tenant: str = await run_in_threadpool(server.authenticate, request)
        return tenant

    router = APIRouter(prefix="/v1", dependencies=[Depends(authenticated)])

    async def tenant_of(tenant: str | None = Depends(authenticated)) -> str:
        if tenant is None:  # a SAME_THREAD route asking for the tenant: its Guarded call has it
            raise RuntimeError("this route's key is checked by its Guarded call, which passes the tenant")
        return tenant

    _hot_routes(router, server)
    _session_routes(router, server, tenant_of)
    _memory_routes(router, server, tenant_of)
    return router, authenticated


Sid = Path(..., min_length=1, max_length=190, pattern=ID_PATTERN)


def _hot_routes(router: APIRouter, server: Server) -> None:
    """Append and prepare: their work runs on :attr:`Server.workers` behind a
    :class:`~ctxwise.server.core.Guarded` key check, the same call for the hot path
    (``server.hot_calls``)."""

    def append_now(tenant: str, body: AppendRequest, request: Request, session_id: str, user_id: str) -> JSONResponse:
        def op(s: Session, _checked: int | None) -> int:
            t0 = time.perf_counter()
            version: int
            if body.format == "openai":
                version = s.append_openai(body.messages)
            elif body.format == "anthropic":
                version = s.append_anthropic({"system": body.system, "messages": body.messages}
                                             if body.system is not None else body.messages)
            else:
                version = s.append(body.messages)
            timing(request, "append", t0)
            return version

        # expected_version > 0 names a session that exists: never create one to refuse the call.
        # An empty batch writes nothing, so the store's version check cannot stand in for a read.
        s, version = server.sessions.run(request, tenant, user_id, session_id, op, create=not body.expected_version,
                                         expected=body.expected_version, optimistic=bool(body.messages))
        # built here, as prepare's: no response-model validation and encoding pass (AppendResponse
        # documents the shape at /docs)
        return JSONResponse({"user_id": user_id, "session_id": session_id, "version": version,
                             "context_messages": len(s.messages)})

    def prepare_now(tenant: str, body: PrepareRequest, request: Request, session_id: str, user_id: str) -> JSONResponse:
        def op(s: Session, checked: int | None) -> Prepared:
            t0 = time.perf_counter()
            # this request's freshness read is the library's version check: not made twice
            p = s.prepare(checked_version=checked, now=body.now)
            timing(request, "prepare", t0)
            return p

        s, p = server.sessions.run(request, tenant, user_id, session_id, op, tools=body.tools,
                                   expected=body.expected_version)
        # a JSONResponse as is: the payload is sent as the library returned it, with no second
        # pass of FastAPI's encoder over it (the response model documents the shape at /docs)
        return JSONResponse({"payload": p.payload, "provider": s.policy.provider, "size": p.size,
                             "size_before": p.size_before, "chars": p.chars, "unit": p.unit,
                             "events": [e.model_dump(mode="json") for e in p.events], "version": s.version,
                             "latency_ms": round(p.latency_ms, 3), "beta": [asdict(b) for b in p.beta]})

    guarded_append = Guarded(server, append_now)
    guarded_prepare = Guarded(server, prepare_now, with_session=True)  # the key and the session in one read
    server.hot_calls = {"messages": (AppendRequest, guarded_append, APPEND),
                        "prepare": (PrepareRequest, guarded_prepare, PREPARE)}

    @router.post("/sessions/{session_id}/messages", response_model=AppendResponse, tags=["sessions"],
                 summary="Append what arrived since the last model call (creates the session).")
    async def append(body: AppendRequest, request: Request, session_id: str = Sid,
                     user_id: str = UserId) -> JSONResponse:
        response: JSONResponse = await server.workers.run(guarded_append, body, request, session_id, user_id,
                                                          priority=APPEND)
        return response

    @router.post("/sessions/{session_id}/prepare", response_model=PrepareResponse, tags=["sessions"],
                 summary="Compact if needed, check, and render the provider payload.")
    async def prepare(request: Request, body: PrepareRequest | None = None, session_id: str = Sid,
                      user_id: str = UserId) -> JSONResponse:
        response: JSONResponse = await server.workers.run(guarded_prepare, body or PrepareRequest(), request,
                                                          session_id, user_id, priority=PREPARE)
        return response


def _session_routes(router: APIRouter, server: Server, tenant_of: Callable[..., Awaitable[str]]) -> None:
    """The session routes besides append and prepare: reads, the recall lookup, pop, the list."""
    store = server.manager.store
    Tenant = Depends(tenant_of)

    def with_session(request: Request, tenant: str, user_id: str, session_id: str,
                     op: Callable[[Session, int | None], T], *, expected: int | None = None) -> tuple[Session, T]:
        """``op(session, checked)`` on the session, from the process's cache when current
        (:mod:`.sessions`; ``checked``: the stored version this request has just read, or None)."""
        done: tuple[Session, T] = server.sessions.run(request, tenant, user_id, session_id, op, expected=expected)
        return done

    @router.get("/sessions/{session_id}/transcript", tags=["sessions"],
                summary="The transcript: one row per user message and per final reply (never compacted).")
    def transcript(session_id: str = Sid, user_id: str = UserId, tenant: str = Tenant) -> dict[str, Any]:
        rows = store.transcript(server.store_user(tenant, user_id), session_id)
        return {"user_id": user_id, "session_id": session_id,
                "rows": [{k: _iso(v) for k, v in asdict(r).items()} for r in rows]}

    @router.get("/sessions/{session_id}/context", tags=["sessions"],
                summary="The context the model reads now (canonical messages), its size and version.")
    def context(request: Request, session_id: str = Sid, user_id: str = UserId, tenant: str = Tenant) -> dict[str, Any]:
        s, messages = with_session(request, tenant, user_id, session_id, lambda s, _c: [_dump(m) for m in s.messages])
        return {"user_id": user_id, "session_id": session_id, "version": s.version, "provider": s.policy.provider,
                "size": s.size, "unit": s.policy.unit, "messages": messages}

    @router.get("/sessions/{session_id}/events", tags=["sessions"], summary="Every compaction event, oldest first.")
    def events(session_id: str = Sid, user_id: str = UserId, tenant: str = Tenant) -> dict[str, Any]:
        return {"user_id": user_id, "session_id": session_id,
                "events": store.events(server.store_user(tenant, user_id), session_id)}

    # ":path": a call id may hold "/" (the store takes any id); URL-encoded as %2F it arrives
    # decoded, and a plain segment would not match it
    @router.get("/sessions/{session_id}/tool-results/{tool_use_id:path}", tags=["sessions"],
                summary="The original message holding a tool result (before clearing).")
    def tool_result(session_id: str = Sid,
                    tool_use_id: str = Path(..., min_length=1, max_length=255, pattern=ID_PATTERN),
                    user_id: str = UserId,
                    message_id: str | None = Query(None, min_length=1, max_length=255, pattern=ID_PATTERN),
                    tenant: str = Tenant) -> dict[str, Any]:
        # the same lookup as the recall tool: the placeholder's whole key ("call_0, message_id
        # m12", URL-encoded) or the id with ?message_id=, so a reused call id gives its own body
        stored = _StoredSession(store, server.store_user(tenant, user_id), session_id, user_id)
        try:
            call_id, found = find_original(stored, tool_use_id, message_id)
        except ToolResultNotFound:
            raise ToolResultNotFound(f"no tool result {tool_use_id!r} in session {session_id!r}") from None
        return {"user_id": user_id, "session_id": session_id, "tool_use_id": call_id,
                "message_id": found.id, "message": _dump(found)}

    @router.delete("/sessions/{session_id}/messages/last", tags=["sessions"],
                   summary="Retract the last appended message (kept in the store, out of the context).")
    def pop(request: Request, session_id: str = Sid, user_id: str = UserId,
            expected_version: int | None = Query(None, ge=0, le=MAX_INT), tenant: str = Tenant) -> dict[str, Any]:
        s, popped = with_session(request, tenant, user_id, session_id, lambda s, _c: s.pop(), expected=expected_version)
        return {"user_id": user_id, "session_id": session_id, "version": s.version,
                "message": _dump(popped) if popped is not None else None}

    @router.get("/sessions", tags=["sessions"], summary="The tenant's sessions, most recently updated first.")
    def sessions(user_id: str | None = Query(None, min_length=1, max_length=190, pattern=ID_PATTERN),
                 limit: int = Query(50, ge=1, le=500), offset: int = Query(0, ge=0, le=MAX_INT),
                 tenant: str = Tenant) -> dict[str, Any]:
        if user_id is not None:
            found = store.list_sessions(server.store_user(tenant, user_id), limit=limit, offset=offset)
        else:
            found = store.list_sessions(None, limit=limit, offset=offset,
                                        user_prefix=server.store_user(tenant, ""))
        return {"limit": limit, "offset": offset, "sessions": [
            {"user_id": server.api_user(tenant, i.user_id), "session_id": i.session_id, "provider": i.provider,
             "version": i.version, "created_at": _iso(i.created_at), "updated_at": _iso(i.updated_at)} for i in found]}


def _entry(e: Any) -> dict[str, Any]:
    return {"id": e.id, "text": e.text, "kind": e.kind, "status": e.status, "supersedes_id": e.supersedes_id,
            "source_session_id": e.source_session_id, "created_at": _iso(e.created_at)}


def _memory_routes(router: APIRouter, server: Server, tenant_of: Callable[..., Awaitable[str]]) -> None:
    """Long-term user memory: list, add, retract one, retract all."""
    store = server.manager.store
    Tenant = Depends(tenant_of)
    MemUser = Path(..., min_length=1, max_length=190, pattern=ID_PATTERN)

    @router.get("/users/{user_id}/memory", tags=["memory"], summary="The user's long-term memory entries.")
    def memory_list(user_id: str = MemUser, include_inactive: bool = Query(False),
                    tenant: str = Tenant) -> dict[str, Any]:
        found = store.list_memory(server.store_user(tenant, user_id), include_inactive=include_inactive)
        return {"user_id": user_id, "entries": [_entry(e) for e in found]}

    @router.post("/users/{user_id}/memory", tags=["memory"], status_code=201, summary="Add one entry as given.")
    def memory_add(body: MemoryAdd, user_id: str = MemUser, tenant: str = Tenant) -> dict[str, Any]:
        e = store.add_memory(server.store_user(tenant, user_id), body.text.strip(), body.kind)
        return {"user_id": user_id, "entry": _entry(e)}

    @router.delete("/users/{user_id}/memory/{entry_id}", tags=["memory"], summary="Retract one entry.")
    def memory_forget(user_id: str = MemUser, entry_id: str = Path(..., max_length=32),
                      tenant: str = Tenant) -> dict[str, Any]:
        if not store.retract_memory(server.store_user(tenant, user_id), entry_id):
            raise MemoryEntryNotFound(f"user {user_id!r} has no active memory entry {entry_id!r}")
        return {"user_id": user_id, "retracted": entry_id}

    @router.delete("/users/{user_id}/memory", tags=["memory"], summary="Retract every entry of the user.")
    def memory_clear(user_id: str = MemUser, tenant: str = Tenant) -> dict[str, Any]:
        n = store.clear_memory(server.store_user(tenant, user_id))
        return {"user_id": user_id, "retracted": n}
