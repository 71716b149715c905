"""One proxied call against the store, synchronous (the routes run it on a worker thread).

:func:`begin`: find the session the call continues (:class:`~ctxwise.proxy.heads.HeadStore`,
the longest stored prefix of the client's history, per tenant), append only the new suffix,
``prepare()``, and return the managed payload. :func:`finish`: append the reply once it is
complete. A call whose history does not extend its session's newest head (the client
compacted or edited its own history, or retried with a changed message) opens a new session,
a branch: the whole history the client sent is appended there, and the branch records where it
came from (``branched_from`` on its rows of the heads table, :meth:`HeadStore.branches`; the
``X-Ctxwise-Branched-From`` response header; one INFO log line). The session it left is kept
as it was. It is never refused for that.
"""
from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

from .. import Message, Prepared, Session, SessionNotFound, ToolResultBlock, ToolUseBlock
from ..formats import from_responses
from ..server.core import Server
from .heads import HeadStore
from .wire import Route, heads, history, reply_items

log = logging.getLogger("ctxwise.proxy")
T = TypeVar("T")

DEFAULT_USER = "proxy"
"""The user id of a proxied session whose client sent no ``X-Ctxwise-User``."""


@dataclass
class Call:
    """One call being proxied: the ``route``, the ``tenant``, the client's ``name``
    (``X-Ctxwise-Session``) and ``user`` (``X-Ctxwise-User``), the request ``body``; filled by
    :func:`begin`: the history ``items``, their ``chain`` of heads, the session used, how many
    items it held before (``start``), the branch's origin, and the managed ``payload``."""

    route: Route
    tenant: str
    name: str | None
    user: str | None
    body: dict[str, Any]
    items: list[dict[str, Any]] = field(default_factory=list)
    chain: list[str] = field(default_factory=list)
    user_id: str = ""
    session_id: str = ""
    start: int = 0
    branched_from: str | None = None
    prepared: Prepared | None = None
    request: Any = None
    """The starlette Request of the call (the session cache records its timings there)."""


def append_items(s: Session, route: Route, items: list[dict[str, Any]]) -> None:
    """Append wire messages of ``route``'s kind to ``s`` (nothing for none). Raises what the session's append raises
    (:class:`~ctxwise.FormatError`, :class:`~ctxwise.PayloadInvalid`)."""
    if not items:
        return
    if route.kind == "chat":
        s.append_openai(items)
        return
    if route.kind in ("messages", "count_tokens"):
        if items[0].get("role") == "system":
            s.append_anthropic({"system": items[0]["content"], "messages": items[1:]})
        else:
            s.append_anthropic(items)
        return
    names = {b.id: b.name for m in s.messages for b in m.blocks if isinstance(b, ToolUseBlock)}
    out: list[Message] = []
    for k, m in enumerate(from_responses(items, strict=False)):
        for b in m.blocks:
            if isinstance(b, ToolUseBlock):
                names[b.id] = b.name
        blocks = [b.model_copy(update={"name": names[b.tool_use_id]})
                  if isinstance(b, ToolResultBlock) and b.name is None and b.tool_use_id in names else b
                  for b in m.blocks]
        # ids by the session's version: the same messages appended the same way get the same ids
        out.append(m.model_copy(update={"id": f"px-{s.version:06d}-{k:04d}", "blocks": blocks}))
    s.append(out)


def _new_id(name: str | None, taken: int) -> str:
    if name is None:
        return f"px-{uuid.uuid4().hex[:16]}"
    return name if taken == 0 else f"{name}~{uuid.uuid4().hex[:8]}"


def begin(server: Server, store: HeadStore, call: Call) -> Call:
    """Map ``call`` to its session, append the new suffix, prepare; returns ``call`` filled.
    Raises :class:`~ctxwise.proxy.wire.WireError` for a body of another shape and the library's
    errors for messages it refuses (nothing stored then)."""
    route = call.route
    call.items = history(route.kind, call.body)
    call.chain = heads(route.kind, call.body, call.items)
    found = store.lookup(call.tenant, call.name, call.chain)
    if found is not None and found.continues:
        call.user_id, call.session_id, call.start = found.user_id, found.session_id, found.count
    else:
        call.user_id = call.user or (found.user_id if found is not None else DEFAULT_USER)
        taken = store.named(call.tenant, call.name) if call.name is not None else 0
        call.session_id = _new_id(call.name, taken)
        if call.name is not None and taken == 0 and _exists(server, call):
            call.session_id = _new_id(call.name, 1)  # a session of that name made outside the proxy
        if found is not None:
            call.branched_from = found.session_id
            log.info("proxy: history rewritten (shares %d of %d messages with %s): new session %s",
                     found.count, found.latest, found.session_id, call.session_id)
    suffix = call.items[call.start:]

    def op(s: Session, _checked: int | None) -> Prepared:
        append_items(s, route, suffix)
        return s.prepare()

    if call.start == 0:
        policy = server.policy.model_copy(update={"provider": route.provider})
        s = server.manager.session(server.store_user(call.tenant, call.user_id), call.session_id, policy=policy,
                                   create=True)
        call.prepared = op(s, None)
    else:
        call.prepared = _run(server, call, op)
    store.record(call.tenant, call.name or "", call.user_id, call.session_id, call.chain, call.start,
                 call.branched_from)
    return call


def recall_round(server: Server, call: Call, reply: dict[str, Any]) -> None:
    """Append a reply that called only the recall tool and the answers to its calls, then prepare
    again: ``call.prepared`` is the next payload (:mod:`.recall`). The heads are not touched: the
    client never sees this round."""
    from .recall import results

    def op(s: Session, _checked: int | None) -> Prepared:
        append_items(s, call.route, reply_items(call.route.kind, reply))
        append_items(s, call.route, results(call.route.kind, s, reply))
        return s.prepare()

    call.prepared = _run(server, call, op)


def _run(server: Server, call: Call, op: Callable[[Session, int | None], T]) -> T:
    """``op`` on the call's session: from the process's session cache when it is current
    (:class:`ctxwise.server.sessions.SessionCache`, appends checked by the store's version), else
    read from the store."""
    if call.request is not None and server.sessions is not None:
        return server.sessions.run(call.request, call.tenant, call.user_id, call.session_id, op, optimistic=True)[1]  # type: ignore[no-any-return]
    return op(server.open(call.tenant, call.user_id, call.session_id), None)


def _exists(server: Server, call: Call) -> bool:
    try:
        server.open(call.tenant, call.user_id, call.session_id)
    except SessionNotFound:
        return False
    return True


def finish(server: Server, store: HeadStore, call: Call, reply: dict[str, Any]) -> None:
    """Append the complete ``reply`` (the upstream's JSON, or one assembled from its stream) to
    the call's session and store its head. Raises what the append raises: the caller logs it;
    the session then holds the call without the reply, and the client's next call, which
    carries the reply, appends it as part of its suffix."""
    items = reply_items(call.route.kind, reply)
    chain = heads(call.route.kind, call.body, items, start=call.chain[-1] if call.chain else None)
    _run(server, call, lambda s, _checked: append_items(s, call.route, items))
    store.record(call.tenant, call.name or "", call.user_id, call.session_id, [*call.chain, *chain], len(call.chain),
                 call.branched_from)
