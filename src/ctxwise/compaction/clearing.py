"""Stage 2, tool-result clearing in place (the first seed's 50 % stage).

A cleared ``tool_result`` keeps its message, position, message id, ``tool_use_id``, name and
state; only its output becomes one placeholder text, and the matching ``tool_use`` is not
touched, so the model still sees that it called the tool and with what. The original body
stays in the store, reachable by ``tool_use_id`` (the default placeholder says so).

Never cleared: the current turn (unless as the last resort, see :func:`clear_tool_results`),
an unfinished cycle, the last ``keep_recent_cycles`` cycles, tools outside
``clearable_tools`` or inside ``keep_tools``, error results unless ``clear_errors`` (a failed
"order not found" stops the model repeating the call), and bodies no longer than their
placeholder or shorter than ``min_clear_chars``.

A placeholder (:mod:`ctxwise.compaction.placeholder`) is a pure function of (body, name,
input, id): it keeps the body's key values inline and names the id the recall tool fetches the
original by; byte-stable once written, so the cleared prefix stays identical across calls
(prompt caches stay warm).
"""

from __future__ import annotations

import json
import time
from typing import Any

from ..changes import Replace
from ..messages import Block, Message, TextBlock, ToolResultBlock, ToolUseBlock
from ..policy import Policy
from ..units import tool_cycles
from .context import Budgeting, StageResult, current_turn_start, in_flight_start, mark, with_mark
from .placeholder import placeholder_text, render_input  # noqa: F401  (render_input: re-exported)
from .stage import StageInput


def _clear_message(m: Message, uses: dict[str, ToolUseBlock], policy: Policy, force: bool) -> Message | None:
    """The cleared copy of tool message ``m``, or None when no result in it qualifies."""
    blocks: list[Block] = []
    cleared: list[str] = []
    chars = 0
    done_before = set(mark(m).get("cleared", []))
    for blk in m.blocks:
        if (isinstance(blk, ToolResultBlock) and blk.tool_use_id not in done_before
                and _eligible(blk, uses, policy, force)):
            use = uses.get(blk.tool_use_id)
            text = placeholder_text(policy, blk, use.input if use else {})
            if len(text) < len(blk.text) or (not blk.text and any(not isinstance(o, TextBlock) for o in blk.output)):
                blocks.append(blk.model_copy(update={"output": [TextBlock(text=text)]}))
                cleared.append(blk.tool_use_id)
                chars += len(blk.text)
                continue
        blocks.append(blk)
    if not cleared:
        return None
    done = list(mark(m).get("cleared", []))
    return m.model_copy(
        update={"blocks": blocks, "metadata": with_mark(m, cleared=done + cleared, cleared_chars=chars)}
    )


def _eligible(blk: ToolResultBlock, uses: dict[str, ToolUseBlock], policy: Policy, force: bool) -> bool:
    if blk.tool_use_id in uses and not policy.clearable(blk.name or uses[blk.tool_use_id].name):
        return False
    if blk.tool_use_id not in uses and not policy.clearable(blk.name):
        return False
    if blk.state == "error" and not policy.clear_errors:
        return False
    n = len(blk.text)
    if n < policy.min_clear_chars and not force:
        return False
    return n > 0 or bool(blk.output)


def _clear_inputs(m: Message, policy: Policy) -> Message | None:
    """Replace large ``tool_use`` inputs of assistant message ``m`` (``clear_tool_inputs``)."""
    blocks: list[Block] = []
    changed: list[str] = []
    for blk in m.blocks:
        if isinstance(blk, ToolUseBlock) and len(json.dumps(blk.input, ensure_ascii=False)) > max(policy.min_clear_chars, 200):
            n = len(json.dumps(blk.input, ensure_ascii=False))
            blocks.append(blk.model_copy(update={"input": {"ctxwise_cleared": f"[tool input cleared to save context, {n} characters]"}}))
            changed.append(blk.id)
        else:
            blocks.append(blk)
    if not changed:
        return None
    return m.model_copy(update={"blocks": blocks, "metadata": with_mark(m, cleared_inputs=changed)})


def clear_tool_results(
    messages: list[Message], b: Budgeting, size: int, *, last_resort: bool = False, over_hard: bool = False
) -> StageResult:
    """Clear eligible tool results oldest first, in one batch, down to ``clear_target``.

    Fires only above ``clear_at``, and below ``summarize_at`` only when the batch saves at
    least ``clear_min_batch`` of the budget (each batch re-bills the prompt cache from the
    first edited message on, so small batches are held back). With ``over_hard=True`` (used by the pipeline above the
    hard limit, before whole turns are dropped) the old turns' recent cycles that
    ``keep_recent_cycles`` protects are cleared too, down to the hard limit: a placeholder
    keeps the call and the way back to its result, a dropped turn keeps nothing (case B10).
    With ``last_resort=True`` (used only when nothing else makes the call fit) it also clears
    completed cycles of the current turn, except the in-flight one, regardless of
    ``keep_recent_cycles`` and ``min_clear_chars``, down to the hard limit.
    """
    p = b.policy
    t0 = time.perf_counter()
    hard = b.level(p.hard_limit)
    if (over_hard or last_resort) and size <= hard:
        return StageResult(messages)
    if size <= b.level(p.clear_at) and not last_resort:
        return StageResult(messages)
    target = hard if (last_resort or over_hard) else b.level(p.clear_target)
    cycles = [c for c in tool_cycles(messages) if c.complete]
    limit = in_flight_start(messages)
    if last_resort:
        protected_from = limit
    else:
        if p.protect_current_turn:
            limit = min(limit, current_turn_start(messages))
        keep = cycles[-p.keep_recent_cycles :] if p.keep_recent_cycles and not over_hard else []
        protected_from = min([limit] + [c.start for c in keep])
    out = list(messages)
    now = size
    affected: list[str] = []
    edited: list[int] = []
    for c in cycles:
        if c.end > protected_from or now <= target:
            continue
        uses = {u.id: u for u in out[c.start].tool_uses}
        for i in range(c.start + 1, c.end):
            new = _clear_message(out[i], uses, p, last_resort)
            if new is not None and b.size_of(new) < b.size_of(out[i]):  # edit only when it saves
                now += b.size_of(new) - b.size_of(out[i])
                out[i] = new
                affected.append(new.id)
                edited.append(i)
        if p.clear_tool_inputs and now > target:
            new = _clear_inputs(out[c.start], p)
            if new is not None and b.size_of(new) < b.size_of(out[c.start]):
                now += b.size_of(new) - b.size_of(out[c.start])
                out[c.start] = new
                affected.append(new.id)
                edited.append(c.start)
    if not affected:
        return StageResult(messages)
    if (not (last_resort or over_hard) and size - now < b.level(p.clear_min_batch)
            and size <= b.level(p.summarize_at)):
        # Too little to clear for a batch worth breaking the prompt cache for: wait until
        # more results are eligible (the context may sit between clear_at and summarize_at).
        return StageResult(messages)
    ev = b.event(
        "clearing",
        (f"last resort: size {size} > hard_limit {hard}" if last_resort
                 else b.trigger(size, "hard_limit", p.hard_limit) if over_hard
                 else b.trigger(size, "clear_at", p.clear_at)),
        size,
        now,
        affected,
        t0,
        detail={"cleared": len(affected), "last_resort": last_resort, "over_hard": over_hard},
    )
    return StageResult(messages, [ev], [Replace(out[i].id, out[i], "cleared") for i in sorted(set(edited))])


class ClearingStage:
    """Tool-result clearing as a pipeline stage (:func:`clear_tool_results`).

    ``mode``: ``"watermark"`` (above ``clear_at``, down to ``clear_target``), ``"over_hard"``
    (above the hard limit, the recent cycles of old turns too) or ``"last_resort"`` (the
    completed cycles of the current turn too)."""

    def __init__(self, mode: str = "watermark") -> None:
        if mode not in ("watermark", "over_hard", "last_resort"):
            raise ValueError(f"ClearingStage mode must be watermark, over_hard or last_resort, not {mode!r}")
        self.mode = mode
        self.name = "clearing" if mode == "watermark" else f"clearing_{mode}"

    def run(self, inp: StageInput) -> StageResult:
        return clear_tool_results(inp.messages, inp.budgeting, inp.size,
                                  over_hard=self.mode == "over_hard", last_resort=self.mode == "last_resort")
