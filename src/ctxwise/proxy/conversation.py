"""One proxied call against the store, synchronous (the routes run it on a worker thread).

:func:`begin`: find the session the call continues (:class:`~ctxwise.proxy.heads.HeadStore`,
the longest stored prefix of the client's history, per tenant), append only the new suffix,
``prepare()``, and return the managed payload. :func:`finish`: append the reply, after the
client has it (:mod:`.replies`: with the session's next call, or alone when none comes). A
call whose history does not extend its session's newest head (the client compacted or
edited its own history, or retried with a changed message) opens a new session,
a branch: the whole history the client sent is appended there, and the branch records where it
came from: a ``branched`` event in the new session (trigger :data:`BRANCH_TRIGGER`, detail
``{"parent", "messages"}``, :meth:`ctxwise.Session.record_branch`), ``branched_from`` on its rows
of the heads table (:meth:`HeadStore.branches`), the ``X-Ctxwise-Branched-From`` response
header and one INFO log line. The session it left is kept
as it was. It is never refused for that.

Not rewrites: a system prompt that changed (the stored one is replaced,
:func:`replace_system`); a retry (:func:`_retry`): an exact repeat of the session's newest call
sent with ``X-Ctxwise-Session``, after ``previous_response_id``, or as an SDK's retry
(``x-stainless-retry-count`` of 1 or more, :data:`RETRY_HEADER`), on every route: the reply
that call got is popped (a ``popped`` event, :func:`_regenerates`), or, when the session holds
none (the call failed, or is still in flight), a ``retried`` event is stored, so a late reply
of the earlier attempt is refused by the store's version check; the session stays linear.
Without those, a history that is exactly a prefix another session holds, or that repeats a
call still in flight (in this process, or one another process stored while this call was
being mapped), is another conversation (a new session, no branch link), and a prefix several
sessions hold maps to the one whose waiting reply the call carries
(:meth:`~ctxwise.proxy.replies.Replies.carried`).

Concurrent calls: a call's messages and heads are stored in one transaction under the
session's write lock, and only if the session's newest head is still the one the call was
mapped on (:meth:`~ctxwise.proxy.heads.HeadStore.commit`): of two calls mapped on the same
session at once, in one process or two sharing the database, one is stored and the other is
mapped again (it then sees the first one's messages); never both appended. After
:data:`ATTEMPTS` mappings that each lost such a race the call raises SessionConflict (the route
answers 409, which the SDKs retry).
"""
from __future__ import annotations

import json
import logging
import time
import uuid
import weakref
from dataclasses import dataclass, field
from contextlib import contextmanager
from typing import Any, Callable, Iterator, TypeVar

from datetime import datetime, timezone

from .. import Message, Policy, Prepared, Replace, Session, SessionConflict, SessionNotFound, ToolResultBlock, ToolUseBlock
from ..compaction import Budgeting
from ..formats import from_anthropic, from_openai, from_responses
from ..server.core import Server
from .heads import Found, HeadStore, heads_rows
from .replies import Pending, Replies
from .wire import Route, WireError, heads, history, is_system, leading_system, reply_items, response_head

log = logging.getLogger("ctxwise.proxy")
T = TypeVar("T")

BRANCH_TRIGGER = "history_rewritten"
"""The ``trigger`` of the ``branched`` event a proxied branch records (:meth:`ctxwise.Session.record_branch`)."""

DEFAULT_BUDGET_TOKENS = 100_000
"""The budget of a proxied session, in tokens, when the server's policy sets none (no
``CTXWISE_BUDGET``, no ``budget`` in the ``--config`` file, no preset that sets one): the
library's own default (100,000 characters) would refuse requests every current model takes.
ctxwise keeps no table of model context windows, so one default serves every model; it fits
inside the window of every current OpenAI and Anthropic chat model (128,000 tokens and more).
With ``CTXWISE_UNIT=chars`` set and no budget: :data:`DEFAULT_BUDGET_CHARS`."""

DEFAULT_BUDGET_CHARS = 400_000
"""The budget of a proxied session, in characters, when the unit is set to ``chars`` and the budget is not."""

BUDGET_SETTING = "CTXWISE_BUDGET (and CTXWISE_UNIT), or budget in the ctxwise serve --config file"
"""Where a proxied session's budget is set (named by the error a request over it gets)."""

DEFAULT_USER = "proxy"
"""The user id of a proxied session whose client sent no ``X-Ctxwise-User``."""

RETRY_HEADER = "x-stainless-retry-count"
"""The header the official SDKs (``openai``, ``anthropic``; ``_base_client``'s retry loop) send
with every request: how many times this request was sent before without an answer (a
timeout, a 408 / 409 / 429 / 5xx, a broken connection). Neither sends an idempotency key
(``_idempotency_header`` is None in both), so this count is what tells a retry."""

RETRY_TRIGGER = "client_retry"
"""The ``trigger`` of the ``retried`` event a proxied call stores when it repeats the session's
newest call and the session holds no reply to pop."""

FLIGHT_S = 600.0
"""Seconds a proxied call counts as upstream, for other processes, unless it says it ended
(:meth:`~ctxwise.proxy.heads.HeadStore.in_flight`): the proxy's upstream timeout (``Proxy``'s
``timeout``, 600 s); a process killed mid-call stops counting after it."""

ATTEMPTS = 4
"""How many times :func:`begin` maps a call that keeps losing a race with other calls of the
same session (SessionConflict: :meth:`~ctxwise.proxy.heads.HeadStore.commit`, the store's version check) before it raises;
it waits :data:`BACKOFF` seconds times 4 to the power of the lost attempt's number before the
next (the other write may still hold the session's lock: PostgreSQL refuses at once)."""

BACKOFF = 0.01
"""Seconds :func:`begin` waits after its first lost race (0.01, 0.04, 0.16: 0.21 s at most)."""


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
    version: int = 0
    """The session's version after the call's append and prepare (its reply is stored on it)."""
    request: Any = None
    """The starlette Request of the call (the session cache records its timings there)."""
    retried: bool = False
    """The call repeats the session's previous call exactly (:func:`_regenerates`): the reply
    it got is popped and the call continues the session."""
    retry: int = 0
    """The SDK's retry count of the request (:data:`RETRY_HEADER`; 0 for a first attempt or a
    client that sends none)."""
    repeated: bool = False
    """The call repeats the session's newest call, which has no reply stored: a ``retried``
    event is stored (:data:`RETRY_TRIGGER`)."""
    newest: int = 0
    """The count of the session's newest head when the call was mapped (the compare-and-set
    of :meth:`~ctxwise.proxy.heads.HeadStore.commit`)."""
    forget_above: int | None = None
    """Heads of the session above this count are deleted with the call's write (a popped reply's)."""
    by_response: bool = False
    """The call sent ``previous_response_id``: its items before the new input are placeholders."""
    landed: bool = False
    """The call's end without a reply is recorded (:meth:`~ctxwise.proxy.heads.HeadStore.landed`)."""


def append_items(s: Session, route: Route, items: list[dict[str, Any]],
                 then: list[dict[str, Any]] | None = None) -> None:
    """Append wire messages of ``route``'s kind to ``s`` (nothing for none), and ``then`` after
    them in the same write (a Responses item's id is ``px-<session version>-<place in the
    write>``: the same messages appended in the same writes get the same ids). Raises what the
    session's append raises (:class:`~ctxwise.FormatError`, :class:`~ctxwise.PayloadInvalid`)."""
    then = then or []
    if not items and not then:
        return
    if route.kind == "chat":
        s.append_openai([*items, *then])
        return
    if route.kind in ("messages", "count_tokens"):
        both = [*items, *then]
        if both[0].get("role") == "system":
            s.append_anthropic({"system": both[0]["content"], "messages": both[1:]})
        else:
            s.append_anthropic(both)
        return
    names = {b.id: b.name for m in s.messages for b in m.blocks if isinstance(b, ToolUseBlock)}
    s.append(_from_responses([*items, *then], s.version, names))


def _from_responses(items: list[dict[str, Any]], version: int, names: dict[str, str]) -> list[Message]:
    """Responses input items as messages with ids by ``version`` (the same messages appended
    the same way get the same ids); a tool result takes its call's name from ``names``
    (updated with the calls read here)."""
    out: list[Message] = []
    for k, m in enumerate(from_responses(items, strict=False) if items else []):
        for b in m.blocks:
            if isinstance(b, ToolUseBlock):
                names[b.id] = b.name
        blocks = [b.model_copy(update={"name": names[b.tool_use_id]})
                  if isinstance(b, ToolResultBlock) and b.name is None and b.tool_use_id in names else b
                  for b in m.blocks]
        out.append(m.model_copy(update={"id": f"px-{version:06d}-{k:04d}", "blocks": blocks}))
    return out


def _new_id(name: str | None, taken: int) -> str:
    if name is None:
        return f"px-{uuid.uuid4().hex[:16]}"
    return name if taken == 0 else f"{name}~{uuid.uuid4().hex[:8]}"


def begin(server: Server, store: HeadStore, call: Call, replies: Replies | None = None) -> Call:
    """Map ``call`` to its session, append the new suffix, prepare; returns ``call`` filled.
    A reply of the session still waiting in ``replies`` (:mod:`.replies`) that the call carries
    is appended with the suffix, in one write; one it does not carry (the client retried or
    edited that turn) is stored first, and the call maps as a branch. Raises
    :class:`~ctxwise.proxy.wire.WireError` for a body of another shape and the library's errors
    for messages it refuses (nothing of the call stored then; a taken reply is stored alone).
    The call's heads are written in its append's transaction when the store allows it
    (:meth:`ctxwise.SqlStore.alongside`, with the check of :meth:`HeadStore.commit`), else right
    after it; the ``prepare()`` takes the version that append committed instead of reading it
    again. A call that another call of its session overtook (SessionConflict, nothing of it
    stored) is mapped again, :data:`ATTEMPTS` times at most; then SessionConflict is raised."""
    for attempt in range(ATTEMPTS):
        try:
            return _begin(server, store, call, replies, raced=attempt > 0)
        except SessionConflict:
            if attempt == ATTEMPTS - 1:
                raise
            log.info("proxy: another call of session %s was stored first: the call is mapped again", call.session_id)
            time.sleep(BACKOFF * 4 ** attempt)
            call.user_id, call.session_id, call.start, call.branched_from = "", "", 0, None
            call.retried = call.repeated = False
            call.newest, call.forget_above, call.prepared = 0, None, None
    raise AssertionError("unreachable")


def _begin(server: Server, store: HeadStore, call: Call, replies: Replies | None, raced: bool) -> Call:
    """One mapping of :func:`begin`; ``raced``: an earlier one lost a race with another call
    of the session (an exact repeat of that session's newest call is then another conversation,
    as one still in flight)."""
    route = call.route
    _history(store, call, replies)
    found, pending = _map(server, store, call, replies, raced)
    if replies is not None:  # the route counts it down when the upstream's answer is over
        replies.flying((call.tenant, call.user_id, call.session_id), 1)
    suffix = call.items[call.start:]
    first: list[dict[str, Any]] = []
    if pending is not None:
        first, suffix = pending.items, suffix[len(pending.items):]

    op = _call_op(call, first, suffix)
    rows = heads_rows(call.tenant, call.name or "", call.user_id, call.session_id, call.chain, call.start,
                      call.branched_from, pending.extra if pending is not None else None, ends=len(call.chain))
    key = (call.tenant, call.user_id, call.session_id)
    try:
        reopen = len(call.chain) if call.retried or call.repeated else None
        with _alongside(server, store, call, lambda conn: store.commit(conn, key, call.newest, rows, call.forget_above,
                                                                        reopen)) as rider:
            if call.start == 0:
                policy = session_policy(server.policy, route.provider)
                s = server.manager.session(server.store_user(call.tenant, call.user_id), call.session_id,
                                           policy=policy, create=True)
                call.prepared = op(s, None)
                if call.request is not None and server.sessions is not None:
                    server.sessions.keep(call.tenant, call.user_id, call.session_id, s)
            else:
                call.prepared = _run(server, call, op, expected=pending.version if pending is not None else None)
    except BaseException:
        if replies is not None:
            replies.flying((call.tenant, call.user_id, call.session_id), -1)
        if pending is not None and replies is not None:
            replies.put_back(pending)
        raise
    if rider is None or not rider.done:
        if call.forget_above is not None:
            store.forget(call.tenant, call.user_id, call.session_id, call.forget_above)
        store.write(rows)
    return call


def _history(store: HeadStore, call: Call, replies: Replies | None) -> None:
    """Set ``call.items`` and ``call.chain`` from the request (:func:`_after_response` for a
    ``previous_response_id`` call). Raises WireError for a request with no message to answer."""
    kind = call.route.kind
    previous = call.body.get("previous_response_id") if kind == "responses" else None
    if previous is not None:
        _after_response(store, call, replies, previous)
        return
    call.items = history(kind, call.body)
    if not any(not is_system(kind, m) for m in call.items):
        field = "input" if kind == "responses" else "messages"
        raise WireError(f"{field}: no message to answer (the request needs at least one user message)")
    call.chain = heads(kind, call.body, call.items)


def _call_op(call: Call, first: list[dict[str, Any]], suffix: list[dict[str, Any]]
             ) -> Callable[[Session, int | None], Prepared]:
    """The session work of a mapped call: pop the reply it retries (or record the retry),
    replace a changed system prompt, append ``first`` (a carried reply) and ``suffix``, record
    a branch, prepare."""
    route = call.route

    def op(s: Session, checked: int | None) -> Prepared:
        before = s.version
        if call.retried and s.messages and s.messages[-1].role == "assistant":
            s.pop()
        elif call.retried or call.repeated:
            record_retry(s, call.retry)
        if call.start:
            replace_system(s, route, call.items[:min(call.start, leading_system(route.kind, call.items))])
        append_items(s, route, first, suffix)
        if call.branched_from is not None:
            s.record_branch(call.branched_from, BRANCH_TRIGGER)
        prepared = s.prepare(checked_version=_confirmed(s, before, checked))
        call.version = s.version
        return prepared

    return op


def record_retry(s: Session, attempt: int) -> int:
    """Store one ``retried`` event in ``s`` (trigger :data:`RETRY_TRIGGER`, detail ``{"retry":
    attempt}``, the SDK's retry count): the client sent the session's newest call again and the
    session holds no reply of it to pop. The write moves the session's version, so a reply of
    the earlier attempt that arrives later (its version check) is refused. Returns the new
    version; raises SessionConflict (another writer got in first)."""
    size = s.size
    event = {"stage": "retried", "trigger": RETRY_TRIGGER, "at": datetime.now(timezone.utc).isoformat(),
             "affected_ids": [], "size_before": size, "size_after": size, "unit": s.policy.unit,
             "detail": {"retry": attempt}}
    s.version = s.manager.store.apply(s.user_id, s.session_id, [], [event], expected_version=s.version)
    return s.version


def session_policy(policy: Policy, provider: str) -> Policy:
    """The policy a new proxied session of ``provider`` gets: the server's ``policy`` with that
    provider, and, when the policy sets no budget (``budget`` not among its set fields),
    :data:`DEFAULT_BUDGET_TOKENS` tokens (:data:`DEFAULT_BUDGET_CHARS` when the unit is set to
    characters)."""
    update: dict[str, Any] = {"provider": provider}
    if "budget" not in policy.model_fields_set:
        chars = "unit" in policy.model_fields_set and policy.unit == "chars"
        update.update(budget=DEFAULT_BUDGET_CHARS if chars else DEFAULT_BUDGET_TOKENS,
                      unit="chars" if chars else "tokens")
    return policy.model_copy(update=update)


_UNCHANGED: "weakref.WeakKeyDictionary[Session, tuple[str, tuple[Message, ...]]]" = weakref.WeakKeyDictionary()
"""Per session object: the leading system items last found unchanged (as JSON, keys sorted),
and the stored messages they matched (:func:`replace_system`)."""

SYSTEM_TRIGGER = "system_prompt_changed"
"""The ``trigger`` of the ``system_replaced`` event a proxied call records when its client's
system prompt differs from the stored one."""


def _system_messages(route: Route, items: list[dict[str, Any]]) -> list[Message]:
    """The client's leading system prompts ``items`` (wire dicts) as messages."""
    if route.kind == "chat":
        return list(from_openai(items))
    if route.kind in ("messages", "count_tokens"):
        return list(from_anthropic({"system": items[0]["content"], "messages": []})) if items else []
    return list(from_responses(items, strict=False)) if items else []


def _same(a: Message, b: Message) -> bool:
    """Whether two system prompts read the same (texts and blocks; marks such as cache_control aside)."""
    return [x.model_dump(exclude={"extra"}) for x in a.blocks] == [x.model_dump(exclude={"extra"}) for x in b.blocks]


def replace_system(s: Session, route: Route, items: list[dict[str, Any]]) -> int:
    """Make the session's leading system prompts the client's ``items`` (its leading system
    messages, wire dicts): a stored prompt whose text differs is replaced in place (the store
    keeps the old one as its original, :class:`ctxwise.Replace`), with one ``system_replaced``
    event (trigger :data:`SYSTEM_TRIGGER`, ``affected_ids``, sizes before and after) in the
    same write. An agent that puts the time or its working state in its system prompt keeps
    one session, and the context holds the prompt the client sent last. Returns how many were
    replaced (0: nothing written, no store round trip). Raises what ``SqlStore.apply`` raises
    (SessionConflict).

    The items a session object was last found to hold unchanged are kept with the stored
    messages they were compared with: the same items against the same message objects (a
    client re-sends its system prompt with every call) are not converted and compared again."""
    stored = s.messages
    lead = tuple(stored[:len(items)])
    seen = _UNCHANGED.get(s)
    sent = json.dumps(items, sort_keys=True)
    if seen is not None and len(seen[1]) == len(lead) and all(a is b for a, b in zip(seen[1], lead)) \
            and seen[0] == sent:
        return 0
    new = _system_messages(route, items)
    changes: list[Replace] = []
    for i, m in enumerate(new):
        if i >= len(stored) or stored[i].role != "system":
            break
        if not _same(stored[i], m):
            changes.append(Replace(stored[i].id, stored[i].model_copy(update={"blocks": m.blocks})))
    if not changes:
        _UNCHANGED[s] = (sent, lead)
        return 0
    sizer = Budgeting(s.policy, s.counter)
    sizes = {c.message_id: sizer.size_of(c.current) for c in changes}
    old = {m.id: sizer.size_of(m) for m in stored if m.id in sizes}
    before = s.size
    after = before + sum(sizes.values()) - sum(old.values())
    event = {"stage": "system_replaced", "trigger": SYSTEM_TRIGGER, "at": datetime.now(timezone.utc).isoformat(),
             "affected_ids": [c.message_id for c in changes], "size_before": before, "size_after": after,
             "unit": s.policy.unit, "detail": {"replaced": len(changes)}}
    s.manager.store.apply(s.user_id, s.session_id, list(changes), [event], expected_version=s.version, sizes=sizes)
    s.reload()
    return len(changes)


@contextmanager
def _alongside(server: Server, store: HeadStore, call: Call, fn: Callable[[Any], None]) -> Iterator[Any]:
    """``fn(connection)`` (the heads writes) run in the transaction of the call's session write
    when the store and the heads table share one engine (:meth:`ctxwise.SqlStore.alongside`);
    yields its rider (``done`` once stored), or None when they cannot share it."""
    sql = server.manager.store
    joinable = callable(getattr(sql, "alongside", None)) and getattr(sql, "engine", None) is store.engine
    if not joinable:
        yield None
        return
    with sql.alongside(server.store_user(call.tenant, call.user_id), call.session_id, fn) as rider:
        yield rider


class UnmanagedResponse(Exception):
    """A Responses call whose ``previous_response_id`` is not the newest reply of a session this
    tenant holds (a response made elsewhere, or an earlier one: the client forked): the route
    passes it on unmanaged, the history at the provider (never raised to a user)."""


def _after_response(store: HeadStore, call: Call, replies: Replies | None, previous: Any) -> None:
    """Set the history of a Responses call that sends only its new input after
    ``previous_response_id``: the session holding that reply as its newest, the new items after
    it (``call.items`` and ``call.chain`` are padded with placeholders up to its count), or
    holding that reply and then exactly this call's input (a retry: :func:`_map` decides). A
    reply still held is stored first. Raises :class:`~ctxwise.proxy.wire.WireError` (not a
    string) and :class:`UnmanagedResponse`."""
    if not isinstance(previous, str) or not previous:
        raise WireError("previous_response_id: expected a response id string")
    key = response_head(previous)
    held = replies.take_head(call.tenant, key) if replies is not None else None
    if held is not None and replies is not None:
        replies.put_back(held)
    found = store.lookup(call.tenant, call.name, [key])
    if found is None:
        raise UnmanagedResponse(f"previous_response_id {previous!r}: not the newest reply of a session of this tenant")
    new = history(call.route.kind, call.body)
    call.items = [{}] * found.count + new
    call.chain = [""] * (found.count - 1) + [key] + heads(call.route.kind, call.body, new, start=key)
    call.by_response = True
    if not found.continues:
        again = store.lookup(call.tenant, call.name, call.chain)
        if again is None or again.count != len(call.chain) or again.session_id != found.session_id \
                or again.user_id != found.user_id or store.newest_call(call.tenant, again.user_id,
                                                                       again.session_id) != again.count:
            raise UnmanagedResponse(f"previous_response_id {previous!r}: not the newest reply of a session of this "
                                    f"tenant")


def _map(server: Server, store: HeadStore, call: Call, replies: Replies | None,
         raced: bool = False) -> tuple[Found | None, Pending | None]:
    """Set the call's session (``user_id``, ``session_id``, ``start``, ``branched_from``,
    ``newest``, and ``retried`` / ``repeated`` for a retry) and take the session's waiting reply
    when the call carries it (:func:`begin`). Raises :class:`UnmanagedResponse` for a
    ``previous_response_id`` call that would start a session (its history is not all here)."""
    found, pending = _found(store, call, replies)
    exact = found is not None and pending is None and len(call.chain) == found.count
    if found is not None and found.continues and not (exact and not _retry(call) and _flying(store, call, found,
                                                                                           replies, raced)):
        call.user_id, call.session_id, call.start = found.user_id, found.session_id, found.count
        call.newest, call.repeated = found.latest, exact
        if exact:
            log.info("proxy: call repeated in session %s, which holds no reply of it", call.session_id)
        return found, pending
    if found is not None and exact and _retry(call) and _regenerates(store, call, found):
        call.user_id, call.session_id, call.start, call.retried = found.user_id, found.session_id, found.count, True
        call.newest, call.forget_above = found.latest, found.count
        log.info("proxy: call repeated in session %s: its previous reply is popped", call.session_id)
        return found, None
    if call.by_response:
        raise UnmanagedResponse("previous_response_id: the call repeats or forks a turn of its session")
    return _new_session(server, store, call, found)


def _flying(store: HeadStore, call: Call, found: Found, replies: Replies | None, raced: bool) -> bool:
    """Whether the newest call of ``found``'s session, which the call repeats, is still
    upstream: in this process (:meth:`Replies.flying`), stored by another process while the
    call was mapped (``raced``), or upstream in another process (its heads row,
    :meth:`~ctxwise.proxy.heads.HeadStore.in_flight`)."""
    key = (call.tenant, found.user_id, found.session_id)
    return raced or (replies is not None and replies.flying(key, 0) > 0) or \
        store.in_flight(call.tenant, found.user_id, found.session_id, found.count, FLIGHT_S)


def _found(store: HeadStore, call: Call, replies: Replies | None) -> tuple[Found | None, Pending | None]:
    """The session holding the call's longest prefix, and its waiting reply when the call
    carries it (one it does not carry is stored now, and the call looked up again)."""
    for _ in range(3):
        found = _carried(store.lookup(call.tenant, call.name, call.chain), call, replies)
        pending = replies.take((call.tenant, found.user_id, found.session_id)) \
            if replies is not None and found is not None and found.continues else None
        if pending is None or _carries(call, found, pending):
            return found, pending
        replies.put_back(pending)  # type: ignore[union-attr]  # stored now: the call is a rewrite of that turn
    return found, None


def _new_session(server: Server, store: HeadStore, call: Call, found: Found | None) -> tuple[Found | None, None]:
    """Set a new session for the call (:func:`_map`): a branch of ``found``'s session, or
    another conversation when the whole history is a prefix that session holds."""
    call.user_id = call.user or (found.user_id if found is not None else DEFAULT_USER)
    taken = store.named(call.tenant, call.name) if call.name is not None else 0
    call.session_id = _new_id(call.name, taken)
    if call.name is not None and taken == 0 and _exists(server, call):
        call.session_id = _new_id(call.name, 1)  # a session of that name made outside the proxy
    if found is not None and call.name is None and len(call.chain) == found.count:
        # the whole history is a prefix another conversation holds (parallel conversations that
        # start the same way): another conversation, not a rewrite of that one
        return None, None
    if found is not None:
        call.branched_from = found.session_id
        log.info("proxy: history rewritten (shares %d of %d messages with %s): new session %s",
                 found.count, found.latest, found.session_id, call.session_id)
    return found, None


def _carried(found: Found | None, call: Call, replies: Replies | None) -> Found | None:
    """``found``, or the session of a reply still waiting in ``replies`` that the call's history
    carries when that is a longer prefix: several sessions may hold the same prefix (parallel
    conversations that start the same way), and the reply the call carries says which one it
    continues before the reply is stored."""
    p = replies.carried(call.tenant, call.name, call.chain) if replies is not None else None
    if p is None:
        return found
    n = len(p.call.chain)
    if found is not None and found.count >= n + len(p.chain):
        return found
    return Found(n, p.call.user_id, p.call.session_id, p.call.name or "", n)


def _retry(call: Call) -> bool:
    """Whether an exact repeat of a session's newest call is that call again (not another
    conversation starting the same way): the client named the session (``X-Ctxwise-Session``),
    continued a response by its id, or its SDK says the request is a retry (:data:`RETRY_HEADER`)."""
    return call.name is not None or call.by_response or call.retry > 0


def _regenerates(store: HeadStore, call: Call, found: Found) -> bool:
    """Whether ``call`` repeats the newest call of ``found``'s session exactly (a regenerate,
    an SDK retry after the reply was made): its whole history is the one that call sent (its
    ``ends_call`` head), and the session holds only that call's reply beyond it, a reply no
    call continued (of any length: a Responses reply is several items). For heads stored
    before revision 0007 (no ``ends_call``): a one-message reply (Chat, Messages)."""
    if len(call.chain) != found.count or found.latest <= found.count:
        return False
    newest = store.newest_call(call.tenant, found.user_id, found.session_id)
    if newest is None:
        return call.route.kind in ("chat", "messages") and found.latest == found.count + 1
    return newest == found.count


def _carries(call: Call, found: Found | None, pending: Pending) -> bool:
    """Whether the call's history continues ``found``'s session with the waiting reply."""
    assert found is not None
    return call.chain[found.count:found.count + len(pending.chain)] == pending.chain


def _confirmed(s: Session, before: int, checked: int | None) -> int | None:
    """The stored version of ``s`` as this call knows it without a read: the one its own write
    just committed (the store accepts a write only on the version the object held, so at that
    moment the object was the stored session), else the one the session cache read (``checked``);
    None (``prepare()`` reads it) when neither."""
    return s.version if s.version != before else checked


def recall_round(server: Server, call: Call, reply: dict[str, Any]) -> None:
    """Append a reply that called only the recall tool and the answers to its calls, then prepare
    again: ``call.prepared`` is the next payload (:mod:`.recall`). The heads are not touched: the
    client never sees this round."""
    from .recall import results

    def op(s: Session, checked: int | None) -> Prepared:
        before = s.version
        append_items(s, call.route, reply_items(call.route.kind, reply))
        append_items(s, call.route, results(call.route.kind, s, reply))
        prepared = s.prepare(checked_version=_confirmed(s, before, checked))
        call.version = s.version
        return prepared

    call.prepared = _run(server, call, op)


def _run(server: Server, call: Call, op: Callable[[Session, int | None], T], expected: int | None = None) -> T:
    """``op`` on the call's session: from the process's session cache when it is current
    (:class:`ctxwise.server.sessions.SessionCache`, appends checked by the store's version), else
    read from the store. ``expected``: SessionConflict unless the session is at that version."""
    if call.request is not None and server.sessions is not None:
        ran = server.sessions.run(call.request, call.tenant, call.user_id, call.session_id, op,
                                  optimistic=True, expected=expected)
        return ran[1]  # type: ignore[no-any-return]
    s = server.open(call.tenant, call.user_id, call.session_id)
    if expected is not None and s.version != expected:
        raise SessionConflict(f"session {call.session_id!r} is at version {s.version}, not {expected}")
    return op(s, None)


def _exists(server: Server, call: Call) -> bool:
    """Whether the store holds the call's session (one indexed read of its version)."""
    try:
        server.manager.store.version(server.store_user(call.tenant, call.user_id), call.session_id)
    except SessionNotFound:
        return False
    return True


def pending(call: Call, reply: dict[str, Any]) -> Pending:
    """The complete ``reply`` (the upstream's JSON, or one assembled from its stream) of ``call``,
    to be stored by :func:`finish` (:mod:`.replies`). Raises :class:`~ctxwise.proxy.wire.WireError`
    for a reply without its message."""
    items = reply_items(call.route.kind, reply)
    chain = heads(call.route.kind, call.body, items, start=call.chain[-1] if call.chain else None)
    rid = reply.get("id") if call.route.kind == "responses" else None
    extra = [(response_head(rid), len(call.chain) + len(chain))] if isinstance(rid, str) and rid else []
    return Pending(call, items, chain, call.version, extra)


def finish(server: Server, store: HeadStore, p: Pending) -> None:
    """Append the reply ``p`` to its call's session, on the version the call left, and store its
    heads. Raises what the append raises (the caller logs it): SessionConflict when another
    process served the session's next call meanwhile (that call carried the reply and stored it);
    the session then holds the call without the reply, and the client's next call, which
    carries the reply, appends it as part of its suffix. The heads are written in the append's
    transaction when the store allows it (:meth:`ctxwise.SqlStore.alongside`)."""
    call = p.call
    rows = heads_rows(call.tenant, call.name or "", call.user_id, call.session_id, [*call.chain, *p.chain],
                      len(call.chain), call.branched_from, p.extra)
    with _alongside(server, store, call, lambda conn: store.write(rows, conn)) as rider:
        _run(server, call, lambda s, _checked: append_items(s, call.route, p.items), expected=p.version)
    if rider is None or not rider.done:
        store.write(rows)
