"""The plan that empties the context: :func:`plan_clear`."""

from __future__ import annotations

from dataclasses import replace

from .plan import ClearWrite, Plan
from .view import Deps, SessionView, dump, now, state_of, with_sizes


def plan_clear(view: SessionView, deps: Deps) -> Plan[None]:
    """Reset the context to empty in one ``SessionStore.clear``: the fact book starts empty,
    no user input is lost any more, failed summaries are forgotten; ids stay taken."""
    event = {"stage": "cleared", "trigger": "clear()", "at": now(), "affected_ids": [m.id for m in view.messages],
             "size_before": view.size + deps.overhead, "size_after": deps.overhead, "unit": view.policy.unit}
    new = replace(view, facts=view.facts.reset(), lossy=False, failed_summaries=frozenset())
    state = state_of(new, deps.size_key)
    new = replace(new, messages=(), sizes=with_sizes({}), size=0, saved_state=dump(state))
    return Plan(new, ClearWrite((event,), state), None)
