"""Plans over the whole session: :func:`plan_clear`, :func:`plan_migrate`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..policy import Policy

from .plan import ClearWrite, Plan, PolicyWrite
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


def plan_migrate(view: SessionView, deps: Deps, given: Policy, diff: dict[str, tuple[Any, Any]]) -> Plan[None]:
    """Store ``given`` as the session's policy in one ``SessionStore.set_policy``, recorded as a
    ``policy_migrated`` event naming each field of ``diff`` (``{field: (stored, given)}``).
    ``view`` and ``deps`` are already built with ``given``."""
    event = {"stage": "policy_migrated", "trigger": "migrate_policy=True", "at": now(),
             "detail": {k: {"stored": a, "given": b} for k, (a, b) in diff.items()}}
    state = state_of(view, deps.size_key)
    write = PolicyWrite(given.provider, given.model_dump(mode="json"), (event,),
                        {m.id: view.sizes[m.id] for m in view.messages}, state)
    return Plan(replace(view, saved_state=dump(state)), write, None)
