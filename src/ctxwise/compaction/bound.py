"""Reasoning bound to its prefix: leave out the reasoning an edit invalidated, as an event.

On a profile that binds reasoning (:func:`ctxwise.providers.bound_profile`), an edit at
position ``j`` (a cleared result, a summary, a trim, pruned thinking, a moved facts block)
invalidates the bound reasoning of every later message. The planner keeps the current turn's
bound reasoning valid (the pipeline's ``frozen`` ids: no edit may touch its prefix); what an
edit invalidated in completed turns is dropped here, deliberately, where the provider allows
it (:func:`ctxwise.providers.binding.may_drop_bound`), so nothing sent ever needs Anthropic's
``drop_block``. Each drop is one ``thinking`` event whose detail gives the blocks and their
size (``detail["bound_reasoning"] == "prefix_changed"``).
"""

from __future__ import annotations

import time

from ..changes import Replace
from ..messages import Marker, Message, ThinkingBlock
from ..providers.binding import invalidated, may_drop_bound
from ..providers.profiles import ProviderProfile
from .context import Budgeting, StageResult


def drop_invalidated_reasoning(ctx: list[Message], sent: list[Message], b: Budgeting, size: int,
                               profile: ProviderProfile) -> StageResult:
    """Drop every reasoning block of the messages of ``ctx`` whose bound reasoning follows a
    changed prefix in ``sent`` (the payload: ``ctx`` with its pinned blocks) and may be left
    out. ``size`` is the request's size in the policy unit. Returns one ``Replace`` (state
    ``pruned``) per message and one ``thinking`` event, or ``ctx`` unchanged when nothing is
    invalidated. A message of the current turn is never touched (the planner keeps its
    prefix); one whose reasoning cannot be dropped stays, for the final check to refuse."""
    if not profile.binds_reasoning:
        return StageResult(ctx)
    t0 = time.perf_counter()
    in_ctx = {m.id for m in ctx}
    drop = [sent[i] for i in invalidated(sent) if sent[i].id in in_ctx and may_drop_bound(sent, i, profile)]
    if not drop:
        return StageResult(ctx)
    changes: list[Replace] = []
    now = size
    blocks = 0
    for m in drop:
        n = sum(1 for x in m.blocks if isinstance(x, ThinkingBlock))
        new = m.model_copy(update={"blocks": [x for x in m.blocks if not isinstance(x, ThinkingBlock)],
                                   "metadata": Marker.with_(m, pruned_thinking=n)})
        now += b.size_of(new) - b.size_of(m)
        blocks += n
        changes.append(Replace(m.id, new, "pruned"))
    ev = b.event("thinking", f"reasoning bound to its prefix ({profile.name}): an earlier edit changed the prefix "
                 f"{len(drop)} message(s) were produced on", size, now, [m.id for m in drop], t0,
                 detail={"bound_reasoning": "prefix_changed", "dropped_blocks": blocks, "dropped_size": size - now})
    return StageResult(ctx, [ev], list(changes))
