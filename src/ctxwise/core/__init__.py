"""The engine's functional core: a frozen :class:`SessionView` of one session and pure
``plan_*`` functions that compute, from a view and a request, a :class:`Plan`: the new view,
the one store write that commits it, the events to emit and the value to return.

Nothing here calls the store, the clock excepted (event times) and the summarizer passed in
as a dependency; :class:`ctxwise.Session` is the shell that commits a plan and swaps its view.
"""

from __future__ import annotations

from .amend import plan_amend, plan_amend_omitted
from .append import plan_append, plan_append_numbered, plan_close_pending
from .clear import plan_clear, plan_migrate
from .plan import AmendWrite, AppendWrite, ApplyWrite, ClearWrite, Plan, PolicyWrite, PopWrite, Write
from .pop import plan_pop, plan_pop_omitted
from .prepare import Prepared, plan_prepare
from .view import Deps, SessionView, dump, state_of, view_from_state

__all__ = ["AmendWrite", "AppendWrite", "ApplyWrite", "ClearWrite", "Deps", "Plan", "PolicyWrite", "PopWrite", "Prepared",
           "SessionView", "Write", "dump", "plan_amend", "plan_amend_omitted", "plan_append", "plan_append_numbered", "plan_clear",
           "plan_close_pending", "plan_migrate", "plan_pop", "plan_pop_omitted", "plan_prepare", "state_of", "view_from_state"]
