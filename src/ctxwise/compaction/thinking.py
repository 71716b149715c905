"""Stage 1, thinking pruning: drop reasoning the provider allows to drop.

Which blocks may go is the provider profile's rule (``ctxwise.providers.droppable_thinking``):
DeepSeek thinking mode wants the ``reasoning_content`` of every assistant message in a
user-to-user span that made tool calls sent back, so only spans without tool calls lose it;
Anthropic thinking blocks are never edited, only dropped whole from older turns; the open
tool turn keeps its own, and so does the latest assistant message of the request whichever
turn it belongs to (the previous turn's final answer when a new user message opens a turn):
"thinking or redacted_thinking blocks in the latest assistant message cannot be modified"
(https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking, "Preserving thinking
blocks"; extended thinking with tool use); OpenAI Responses reasoning items are never pruned alone (a reasoning
item travels with the item after it). A kept block is never touched. Fires above ``clear_at`` and prunes
oldest first down to ``clear_target`` (one batch, for prompt-cache stability), and only when
the context must shrink or the cache is cold (:func:`pruning_pays`, DESIGN.md decision 4).
"""

from __future__ import annotations

import time
from collections import defaultdict

from ..changes import Replace
from ..messages import Marker, Message, ThinkingBlock
from .context import Budgeting, StageResult
from .cost import cold_cache, invalidated_reasoning
from .stage import StageInput


def prune_thinking(messages: list[Message], b: Budgeting, size: int) -> StageResult:
    """Drop droppable thinking blocks, oldest message first, until the size is at or under
    ``clear_target``. Returns one ``Replace`` (state ``pruned``) per edited message and one
    ``thinking`` event (none when nothing was dropped). A message is never left without content."""
    from ..providers import droppable_thinking, get_profile
    from .clearing import edit_held_back

    t0 = time.perf_counter()
    target = b.level(b.policy.clear_target)
    if size <= b.level(b.policy.clear_at) or not b.count_reasoning:
        return StageResult(messages)  # below the watermark, or the provider takes no reasoning back
    if get_profile(b.policy.provider).reasoning_passback == "reasoning_items":
        # OpenAI Responses: a reasoning item travels with the item after it (case B14); it
        # goes only with its whole message, by the summarizing or trimming stages.
        return StageResult(messages)
    if size <= b.level(b.policy.hard_limit) and edit_held_back(messages, b, size):
        return StageResult(messages)  # no pruning could pay (pruning_pays): none is built
    by_msg: dict[int, set[int]] = defaultdict(set)
    for mi, bi in droppable_thinking(messages, b.policy.provider):
        by_msg[mi].add(bi)
    out = list(messages)
    now = size
    affected: list[str] = []
    changes: list[Replace] = []
    for mi in sorted(by_msg):
        if now <= target:
            break
        m = out[mi]
        new = _pruned(m, frozenset(by_msg[mi]))
        if new is None:
            continue
        now += b.size_of(new) - b.size_of(m)
        out[mi] = new
        affected.append(m.id)
        changes.append(Replace(m.id, new, "pruned"))
    if not affected:
        return StageResult(messages)
    first = min(i for i, m in enumerate(messages) if m.id in set(affected))
    why = pruning_pays(messages, b, size, now, first)
    if why is None:
        return StageResult(messages)
    ev = b.event(
        "thinking",
        b.trigger(size, "clear_at", b.policy.clear_at) + why,
        size,
        now,
        affected,
        t0,
    )
    return StageResult(messages, [ev], list(changes))


def pruning_pays(messages: list[Message], b: Budgeting, size: int, now: int, first: int) -> str | None:
    """Why a pruning that brings the context from ``size`` to ``now`` (policy unit, its first
    edited message at ``first``) fires, or None when it is held back (DESIGN.md decision 4: no
    edit unless the context must shrink or the edit pays).

    With ``edit_when="watermark"`` it fires above ``clear_at`` (``""``: the trigger says it).
    With ``"pays"`` it fires when the context is over the hard limit, when a summary is due on
    this call (the prefix breaks anyway), or when the prompt cache is cold
    (:func:`~ctxwise.compaction.cost.cold_cache`: it re-bills nothing) and it invalidates no
    bound reasoning (:func:`~ctxwise.compaction.cost.invalidated_reasoning`). A context under
    the hard limit with a warm cache is never pruned (see :mod:`ctxwise.compaction.cost`)."""
    from .summarizing import summary_due

    p = b.policy
    hard = b.level(p.hard_limit)
    if p.edit_when == "watermark":
        return ""
    if size > hard:
        return "; the hard limit is crossed"
    cold = cold_cache(p, b.idle)
    if cold and size > now and not invalidated_reasoning(messages, first, b.size_of):
        return f"; {cold}"
    if summary_due(messages, b, size):
        return "; a summary is due"
    return None


def _pruned(m: Message, drop: frozenset[int]) -> Message | None:
    """``m`` without its blocks at the indices ``drop`` (None when that leaves it empty or
    unchanged), kept in ``m``'s memo for the same indices: a stored message is pruned to the
    same object at every call (whose size is then counted once)."""
    memo = m.memo()
    slot = memo.get(_PRUNED)
    if slot is not None and slot[0] == drop:
        return slot[1]  # type: ignore[no-any-return]
    keep = [blk for k, blk in enumerate(m.blocks) if k not in drop]
    new = None
    if keep and len(keep) != len(m.blocks):
        dropped = sum(1 for blk in m.blocks if isinstance(blk, ThinkingBlock)) - sum(
            1 for blk in keep if isinstance(blk, ThinkingBlock)
        )
        new = m.model_copy(update={"blocks": keep, "metadata": Marker.with_(m, pruned_thinking=dropped)})
    memo[_PRUNED] = (drop, new)
    return new


_PRUNED = "ctxwise/pruned-thinking"


class ThinkingStage:
    """Stage 1 of the default pipeline: :func:`prune_thinking`."""

    name = "thinking"

    def run(self, inp: StageInput) -> StageResult:
        return prune_thinking(inp.messages, inp.budgeting, inp.size)
