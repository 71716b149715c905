"""Plans that update the newest message's metadata in place: :func:`plan_amend`,
:func:`plan_amend_omitted`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

from ..errors import FormatError
from ..messages import Marker, Message
from ..nesting import check_message
from .plan import AmendWrite, Plan
from .view import Deps, SessionView, dump, now, state_of, with_sizes


def amendment(old: Message, new: Message) -> tuple[dict[str, Any], list[Any] | None]:
    """What an amend's ``update`` changed: ``(top-level metadata keys set, the new beside
    items or None)``. Raises FormatError for any other change (content, a removed key, a
    ctxwise marker other than ``beside``)."""
    if (new.id, new.role, new.name, new.blocks) != (old.id, old.role, old.name, old.blocks):
        raise FormatError(f"amend of message {old.id!r}", "only its metadata may change (its id, role, name and "
                          "blocks are what the transcript and the provider read); nothing was stored",
                          hint="append a new message instead, or pop() it first")
    gone = [k for k in old.metadata if k not in new.metadata and k != Marker.KEY]
    mine = {k: v for k, v in (new.metadata.get(Marker.KEY) or {}).items() if k != "beside"}
    if gone or mine != {k: v for k, v in (old.metadata.get(Marker.KEY) or {}).items() if k != "beside"}:
        raise FormatError(f"amend of message {old.id!r}", f"metadata keys may be set, not removed ({gone}), and "
                          "of ctxwise's markers only 'beside'; nothing was stored",
                          hint="set the keys to new values; ctxwise's own markers are its to write")
    metadata = {k: v for k, v in new.metadata.items() if k != Marker.KEY and old.metadata.get(k) != v}
    return metadata, (new.beside if new.beside != old.beside else None)


def _keys(metadata: dict[str, Any], beside: list[Any] | None) -> list[str]:
    return sorted([*metadata, *(["beside"] if beside is not None else [])])


def plan_amend(view: SessionView, deps: Deps, update: Callable[[Message], Message]) -> Plan[None]:
    """Set the metadata ``update`` gives the context's last message, in one
    ``SessionStore.amend``. The result is None: the store returns the amended message.
    Requires a non-empty context; raises what :func:`amendment` raises."""
    last = view.messages[-1]
    new_msg = update(last)
    metadata, beside = amendment(last, new_msg)
    check_message(new_msg, len(view.messages) - 1)
    size = deps.sz(new_msg)
    total = view.size + deps.overhead
    old = view.sizes.get(last.id, 0)
    event: dict[str, Any] = {
        "stage": "amended", "trigger": "amend()", "at": now(), "affected_ids": [last.id],
        "size_before": total, "size_after": total - old + size, "unit": view.policy.unit,
        "detail": {"keys": _keys(metadata, beside)}}
    state = state_of(view, deps.size_key)
    new = replace(view, messages=view.messages[:-1] + (new_msg,), sizes=with_sizes(view.sizes, add={last.id: size}),
                  size=view.size + size - old, saved_state=dump(state))
    return Plan(new, AmendWrite(metadata, beside, last.id, size, (event,), state), None,
                index_base=len(view.messages) - 1)


def plan_amend_omitted(view: SessionView, deps: Deps, newest: Message,
                       update: Callable[[Message], Message]) -> Plan[None]:
    """:func:`plan_amend` of ``newest``, the newest stored message, a reply left out of the
    context: the record changes, the context does not."""
    new_msg = update(newest)
    metadata, beside = amendment(newest, new_msg)
    check_message(new_msg, len(view.messages))
    total = view.size + deps.overhead
    event = {"stage": "amended", "trigger": "amend()", "at": now(), "affected_ids": [newest.id],
             "size_before": total, "size_after": total, "unit": view.policy.unit,
             "detail": {"keys": _keys(metadata, beside), "omitted_reply": True}}
    state = state_of(view, deps.size_key)
    return Plan(replace(view, saved_state=dump(state)), AmendWrite(metadata, beside, newest.id, None, (event,), state),
                None, index_base=len(view.messages))
