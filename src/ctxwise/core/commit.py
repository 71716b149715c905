"""The one place a plan's :data:`~ctxwise.core.plan.Write` becomes a store call."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..messages import Message
from .plan import AmendWrite, AppendWrite, ApplyWrite, PolicyWrite, PopWrite, Write

if TYPE_CHECKING:
    from ..store.protocols import SessionStore


def commit(store: "SessionStore", user_id: str, session_id: str, expected_version: int,
           w: Write) -> tuple[int, Message | None]:
    """Make ``w`` with one call of ``store`` under ``expected_version``. Returns ``(the new
    version, the message the store returned for a pop or amend, else None)``; raises what the
    store raises (SessionConflict, MessageNotStorable, NotNewestMessage, ...), having
    written nothing then."""
    u, s, v = user_id, session_id, expected_version
    if isinstance(w, AppendWrite):
        return store.append(u, s, list(w.messages), expected_version=v, sizes=list(w.sizes), state=w.state), None
    if isinstance(w, ApplyWrite):
        return store.apply(u, s, list(w.changes), list(w.events), expected_version=v, sizes=dict(w.sizes),
                           state=w.state), None
    if isinstance(w, PopWrite):
        more: dict[str, Any] = {"message_id": w.message_id} if w.message_id is not None else {}
        if w.then_append:
            more.update(then_append=list(w.then_append), sizes=list(w.sizes))
        return store.pop(u, s, expected_version=v, events=list(w.events), state=w.state, **more)
    if isinstance(w, AmendWrite):
        return store.amend(u, s, expected_version=v, metadata=w.metadata, beside=w.beside, message_id=w.message_id,
                           size=w.size, events=list(w.events), state=w.state)
    if isinstance(w, PolicyWrite):
        return store.set_policy(u, s, provider=w.provider, policy=w.policy, expected_version=v, events=list(w.events),
                                sizes=dict(w.sizes), state=w.state), None
    return store.clear(u, s, expected_version=v, events=list(w.events), state=w.state), None
