"""Plans that take the newest message back: :func:`plan_pop`, :func:`plan_pop_omitted`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping, Sequence

from ..messages import Message
from ..providers.append import Thinking, check_append, coerce
from .plan import Plan, PopWrite
from .view import Deps, SessionView, dump, now, state_of, with_sizes


def plan_pop(view: SessionView, deps: Deps, then: Sequence[Message | Mapping[str, Any]] = ()) -> Plan[None]:
    """Retract the context's last message, and append ``then`` in its place in the same
    ``SessionStore.pop`` (checked as an append joining the context without it). The result is
    None: the store returns the popped message. Requires a non-empty context. Raises
    PayloadInvalid naming the place and the rule when ``then`` breaks the message rules."""
    last = view.messages[-1]
    kept = view.messages[:-1]
    repl = coerce(list(then), len(kept), view.provider)
    seen = view.thinking_seen
    if repl:  # checked where it will stand: after the context without `last`
        seen = check_append(kept, view.ids, repl, None, view.provider, Thinking(seen, view.thinking_declared))
    sizes = [deps.sz(m) for m in repl]
    total = view.size + deps.overhead
    event: dict[str, Any] = {
        "stage": "popped", "trigger": "pop()", "at": now(), "affected_ids": [last.id],
        "size_before": total, "size_after": total - view.sizes.get(last.id, 0) + sum(sizes), "unit": view.policy.unit}
    if repl:
        event["detail"] = {"replaced_by": [m.id for m in repl]}
    new = replace(view, facts=view.facts.forget(last.id).observe(repl, view.policy), thinking_seen=seen)
    state = state_of(new, deps.size_key)
    added = dict(zip((m.id for m in repl), sizes))
    new = replace(new, messages=kept + tuple(repl), ids=view.ids | set(added), saved_state=dump(state),
                  sizes=with_sizes(view.sizes, drop=[last.id], add=added),
                  size=view.size - view.sizes.get(last.id, 0) + sum(sizes))
    write = PopWrite((event,), state, last.id, tuple(repl), tuple(sizes))
    return Plan(new, write, None, index_base=len(kept))


def plan_pop_omitted(view: SessionView, deps: Deps) -> Plan[None]:
    """Pop the newest stored message when it is a reply left out of the context (an empty or
    refusal-only reply, see ctxwise.normalize): it leaves the transcript, the context is
    unchanged."""
    total = view.size + deps.overhead
    event = {"stage": "popped", "trigger": "pop()", "at": now(), "affected_ids": [],
             "size_before": total, "size_after": total, "unit": view.policy.unit, "detail": {"omitted_reply": True}}
    state = state_of(view, deps.size_key)
    return Plan(replace(view, saved_state=dump(state)), PopWrite((event,), state, None), None)
