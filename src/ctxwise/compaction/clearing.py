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
from dataclasses import dataclass, field
from typing import Any, Callable

from ..changes import Replace
from ..messages import Block, Marker, Message, TextBlock, ToolResultBlock, ToolUseBlock, fold_on
from ..policy import Policy
from ..units import ToolCycle, tool_cycles
from .context import Budgeting, StageResult, current_turn_start, in_flight_start
from ..resources import COLD, WORKING, reuse_ranks
from .placeholder import placeholder_text, recall_key, render_input, reused_ids  # noqa: F401  (render_input: re-exported)
from .cost import cold_cache, cut_cost, invalidated_reasoning, invalidated_reasoning_items
from .stage import StageInput


def _clear_message(m: Message, uses: dict[str, ToolUseBlock], policy: Policy, force: bool,
                   reused: set[str] = set()) -> Message | None:  # noqa: B006 (read only)
    """The cleared copy of tool message ``m``, or None when no result in it qualifies.
    ``reused``: call ids answered more than once in the context (their placeholders name the
    message id too, see :func:`~ctxwise.compaction.placeholder.recall_key`). Kept in ``m``'s
    memo for the same policy, calls (by identity), ``force`` and reuse of its ids: a stored
    message is cleared to the same object at every call (whose size is then counted once)."""
    ids = [r.tool_use_id for r in m.tool_results]
    key = (force, tuple(i in reused for i in ids))
    calls = tuple(uses.get(i) for i in ids)
    slots: list[tuple[Any, Policy, tuple[Any, ...], Message | None]] = m.memo().setdefault(_CLEARED, [])
    for k, pol, used, found in slots:
        if k == key and len(used) == len(calls) and all(a is b for a, b in zip(used, calls)) \
                and (pol is policy or pol == policy):
            return found
    found = _cleared_copy(m, uses, policy, force, reused)
    if len(slots) >= 4:  # bounded: a message meets few policies (the call's, a lowered one)
        del slots[0]
    slots.append((key, policy, calls, found))
    return found


_CLEARED = "ctxwise/cleared-copy"


def _cleared_copy(m: Message, uses: dict[str, ToolUseBlock], policy: Policy, force: bool,
                  reused: set[str]) -> Message | None:
    """:func:`_clear_message`, computed."""
    blocks: list[Block] = []
    cleared: list[str] = []
    chars = 0
    done_before = set(Marker.read(m).cleared or ())
    for blk in m.blocks:
        if (isinstance(blk, ToolResultBlock) and blk.tool_use_id not in done_before
                and _eligible(blk, uses, policy, force)):
            use = uses.get(blk.tool_use_id)
            text = _placeholder(m, blk, use.input if use else {}, policy,
                                recall_key(blk.tool_use_id, m.id, blk.tool_use_id in reused))
            if len(text) < len(blk.text) or (not blk.text and any(not isinstance(o, TextBlock) for o in blk.output)):
                blocks.append(blk.model_copy(update={"output": [TextBlock(text=text)]}))
                cleared.append(blk.tool_use_id)
                chars += len(blk.text)
                continue
        blocks.append(blk)
    if not cleared:
        return None
    done = list(Marker.read(m).cleared or ())
    return m.model_copy(
        update={"blocks": blocks, "metadata": Marker.with_(m, cleared=done + cleared, cleared_chars=chars)}
    )


def _placeholder(m: Message, blk: ToolResultBlock, tool_input: dict[str, Any], policy: Policy, key: str) -> str:
    """:func:`placeholder_text` of ``blk`` (a result of ``m``), kept in ``m``'s memo for the
    same policy and call input: a stored message is cleared the same way at every call."""
    memo: dict[tuple[str, str], tuple[Policy, dict[str, Any], str]] = m.memo().setdefault(_PLACEHOLDERS, {})
    hit = memo.get((blk.tool_use_id, key))
    if hit is not None and hit[0] == policy and hit[1] == tool_input:
        return hit[2]
    text = placeholder_text(policy, blk, tool_input, key)
    memo[(blk.tool_use_id, key)] = (policy, tool_input, text)
    return text


_PLACEHOLDERS = "ctxwise/placeholders"


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
    """Clear the large values of the ``tool_use`` inputs of assistant message ``m`` (an
    ``Edit``'s ``old_string`` / ``new_string``, a ``Write``'s ``content``): each string longer
    than ``max(min_clear_chars, 200)`` characters becomes a note of its length; the other
    arguments (the file path, flags) stay, so the call still says what it did to what."""
    limit = max(policy.min_clear_chars, 200)
    blocks: list[Block] = []
    changed: list[str] = []
    for blk in m.blocks:
        if isinstance(blk, ToolUseBlock) and len(json.dumps(blk.input, ensure_ascii=False)) > limit:
            new = {k: (f"[cleared to save context, {len(v)} characters]" if isinstance(v, str) and len(v) > limit
                       else v if isinstance(v, (str, int, float, bool)) or v is None or len(json.dumps(v, ensure_ascii=False)) <= limit
                       else f"[cleared to save context, {len(json.dumps(v, ensure_ascii=False))} characters]")
                   for k, v in blk.input.items()}
            if new != blk.input:
                blocks.append(blk.model_copy(update={"input": new}))
                changed.append(blk.id)
                continue
        blocks.append(blk)
    if not changed:
        return None
    done = list(Marker.read(m).cleared_inputs or ())
    return m.model_copy(update={"blocks": blocks, "metadata": Marker.with_(m, cleared_inputs=done + changed)})


def clear_tool_results(
    messages: list[Message], b: Budgeting, size: int, *, last_resort: bool = False, over_hard: bool = False
) -> StageResult:
    """Clear eligible tool results oldest first, in one batch.

    Optional clearing (the context is above ``clear_at`` but under the hard limit) fires only
    when it is worth a prompt-cache break:

    * a costlier stage would fire on this call (a summary is due, see
      :func:`~ctxwise.compaction.summarizing.summary_due`): the break happens anyway, and a
      clearing that brings the context under ``summarize_at`` keeps whole turns a summary
      would fold; or
    * edits are made at the watermark (``edit_when="watermark"``, Ragent's rule); or
    * the prompt cache is cold (:func:`ctxwise.compaction.cost.cold_cache`): the batch
      re-bills nothing (unless it invalidates bound reasoning), whatever its size.

    Else the batch must save at least ``clear_min_batch`` of the budget (small batches
    are held back: each re-bills the prompt cache from its first edited message on). When it
    fires it clears down to ``clear_target``, or everything clearing can remove when that
    target lies below what it cannot touch (the system prompt, pinned blocks, the current
    turn, the protected cycles): the target is reached on every clearing, so it does not
    re-fire for the same pressure on the next call. With ``edit_when="pays"`` nothing is
    edited while the context fits and the cache is warm (:mod:`ctxwise.compaction.cost`).

    With ``over_hard=True`` (used by the pipeline above the hard limit, before whole turns
    are dropped) the old turns' recent cycles that ``keep_recent_cycles`` protects are
    cleared too, down to the hard limit, each cycle it starts whole: a placeholder keeps the
    call and the way back to its result, a dropped turn keeps nothing (case B10). With
    ``last_resort=True`` (when nothing else makes it fit) it also clears completed cycles of the current turn,
    except the in-flight one, regardless of ``keep_recent_cycles`` and ``min_clear_chars``:
    all of them, not just down to the hard limit (the batch starts at the oldest either way,
    so clearing them all re-bills no more and leaves the most room for the calls ahead; at
    3,000 tokens on ``bench/compare.py``'s data: cost 1.212 -> 1.194 x F(B), recall 0.903 ->
    0.902). Sizes are in the policy unit, overhead included.
    """
    p = b.policy
    t0 = time.perf_counter()
    hard = b.level(p.hard_limit)
    if _skipped(messages, b, size, last_resort, over_hard):
        return StageResult(messages)
    optional = not (last_resort or over_hard)
    # Inside a turn the last resort frees room for shrink_calls calls (the low watermark) in
    # one batch; the latest views of the files being worked on go only above that watermark.
    low = low_watermark(messages, b, hard)
    target = b.level(p.clear_target) if optional else low if last_resort else hard
    cycles = [c for c in tool_cycles(messages) if c.complete]
    batch = _Batch(list(messages), size, len(messages))
    batch.clear_cycles(cycles, _protected_from(messages, cycles, p, last_resort, over_hard), target, b, last_resort,
                       working_target=max(target, min(low, hard)), finish_cycles=over_hard)
    if optional and batch.now > hard:
        # Above the hard limit the old turns' protected cycles go too, in the same batch
        # (as the pipeline's over_hard pass would, after the summary had decided on a
        # context that was about to change: one batch, one decision).
        batch.take(clear_tool_results(batch.out, b, batch.now, over_hard=True))
    if not batch.affected:
        return StageResult(messages)
    why = _why(messages, b, size, batch) if optional else ""
    if why is None:
        return StageResult(messages)
    ev = b.event(
        "clearing",
        (f"last resort: size {size} > hard_limit {hard}" if last_resort
                 else b.trigger(size, "hard_limit", p.hard_limit) if over_hard
                 else f"{b.trigger(size, 'clear_at', p.clear_at)}; {why}"),
        size,
        batch.now,
        batch.affected,
        t0,
        detail=_detail(messages, batch, b, last_resort, over_hard, target),
    )
    out = batch.out
    return StageResult(messages, [ev], [Replace(out[i].id, out[i], "cleared") for i in sorted(set(batch.edited))])


def _detail(messages: list[Message], batch: "_Batch", b: Budgeting, last_resort: bool, over_hard: bool,
            target: int) -> dict[str, Any]:
    """The ``clearing`` event's detail: ``cleared`` (messages edited), ``last_resort``,
    ``over_hard``, ``target`` (as reached: clear_target, or all that could be cleared when
    that lies lower) and, when the edit invalidates bound reasoning after it,
    ``reasoning_invalidated``: ``{"items": reasoning blocks / items, "size": their size in the
    policy unit}`` (:func:`~ctxwise.compaction.cost.invalidated_reasoning_items`: the
    provider drops them (Responses all_turns) or ctxwise leaves them out (Anthropic); the
    model re-does that reasoning)."""
    detail: dict[str, Any] = {"cleared": len(batch.affected), "last_resort": last_resort, "over_hard": over_hard,
                              "target": max(target, batch.now)}
    items, lost = invalidated_reasoning_items(messages, batch.first, b.size_of)
    if items:
        detail["reasoning_invalidated"] = {"items": items, "size": lost}
    return detail


def _protected_from(messages: list[Message], cycles: list[ToolCycle], p: Policy, last_resort: bool, over_hard: bool) -> int:
    """The index from which no cycle is cleared: the in-flight cycle (last resort), else also
    the current turn (``protect_current_turn``) and the ``keep_recent_cycles`` newest cycles
    (not above the hard limit)."""
    limit = in_flight_start(messages)
    if last_resort:
        return limit
    if p.protect_current_turn:
        limit = min(limit, current_turn_start(messages))
    keep = cycles[-p.keep_recent_cycles :] if p.keep_recent_cycles and not over_hard else []
    return min([limit] + [c.start for c in keep])


@dataclass
class _Batch:
    """One clearing batch as it grows: the edited list, its size (policy unit), the ids
    edited in order, their indices, and the first index edited."""

    out: list[Message]
    now: int
    first: int
    affected: list[str] = field(default_factory=list)
    edited: list[int] = field(default_factory=list)

    def edit(self, i: int, new: Message | None, b: Budgeting) -> bool:
        """Put ``new`` at ``i`` when it saves (edit only when it saves); whether it did."""
        if new is None or b.size_of(new) >= b.size_of(self.out[i]):
            return False
        self.now += b.size_of(new) - b.size_of(self.out[i])
        self.out[i] = new
        self.affected.append(new.id)
        self.edited.append(i)
        self.first = min(self.first, i)
        return True

    def clear_cycles(self, cycles: list[ToolCycle], protected_from: int, target: int, b: Budgeting, last_resort: bool,
                     working_target: int | None = None, finish_cycles: bool = False) -> None:
        """Clear the results (and, with ``clear_tool_inputs``, the inputs) of the cycles before
        ``protected_from`` until the size is at ``target``, in order of expected re-use
        (:func:`~ctxwise.resources.reuse_ranks`: superseded views and repeated runs
        first, the latest views of the files being worked on last), oldest first within a rank;
        those last only down to ``working_target`` (default ``target``). With ``finish_cycles``
        (the pass above the hard limit) a cycle the batch has started is cleared whole past the
        target: its other results (not the working files' views) after the batch's first edit
        re-bill nothing more, and a batch stopped just under the hard limit makes the next call
        cut the prompt cache again."""
        p = b.policy
        open_ = [c for c in cycles if c.end <= protected_from]
        if not open_ or self.now <= target:
            return
        ranks = reuse_ranks(self.out, p.tool_rules)
        order = sorted(((max((ranks.get(r.tool_use_id, COLD) for r in self.out[i].tool_results), default=COLD), i, c)
                        for c in open_ for i in range(c.start + 1, c.end)), key=lambda x: (x[0], x[1]))
        floor = {rank: target if rank < WORKING or working_target is None else working_target for rank, _, _ in order}
        self._clear_results(order, floor, b, last_resort, finish_cycles)
        if p.clear_tool_inputs or last_resort:
            # then the large inputs (edits' old and new text, written files), by the same ranks
            calls = sorted(((max((ranks.get(u.id, COLD) for u in self.out[c.start].tool_uses), default=COLD), c.start)
                            for c in open_), key=lambda x: x)
            for _, i in calls:
                if self.now <= target:
                    break
                self.edit(i, _clear_inputs(self.out[i], p), b)

    def _clear_results(self, order: list[tuple[int, int, ToolCycle]], floor: dict[int, int], b: Budgeting,
                       last_resort: bool, finish_cycles: bool) -> None:
        """Clear the tool messages ``order`` lists (``(rank, index, cycle)``) while the size is
        above ``floor[rank]``; with ``finish_cycles``, also the rest of a cycle already edited
        (ranks under ``WORKING``, after the batch's first edit)."""
        reused = reused_ids(self.out)
        started: set[int] = set()
        for rank, i, c in order:
            finishing = c.start in started and rank < WORKING and i > self.first
            if self.now <= floor[rank] and not finishing:
                continue
            uses = {u.id: u for u in self.out[c.start].tool_uses}
            if self.edit(i, _clear_message(self.out[i], uses, b.policy, last_resort, reused), b) and finish_cycles:
                started.add(c.start)

    def take(self, more: StageResult) -> None:
        """Add what a further clearing of :attr:`out` edited to this batch."""
        if not more.changed:
            return
        self.out, self.now = more.messages, more.events[-1].size_after
        done = set(self.affected)
        for k, m in enumerate(self.out):
            if m.id in more.events[-1].affected_ids and m.id not in done:
                self.affected.append(m.id)
                self.edited.append(k)
                self.first = min(self.first, k)


def _why(messages: list[Message], b: Budgeting, size: int, batch: _Batch) -> str | None:
    """Why an optional batch fires (the event's trigger), or None when it is held back."""
    from .summarizing import summary_due

    p = b.policy
    hard = b.level(p.hard_limit)
    saved = size - batch.now
    invalid = invalidated_reasoning(messages, batch.first, b.size_of)
    if size > hard:
        return "the hard limit is crossed"  # something must go: a placeholder loses least
    cold = cold_cache(p, b.idle)
    if cold and saved > 0 and not invalid:
        return cold  # nothing is served from the cache this call: the batch costs nothing
    if saved < b.level(p.clear_min_batch):
        # Too little for a batch worth breaking the prompt cache for: wait until more
        # results are eligible, or let the costlier stage do its larger cut.
        return None
    if summary_due(messages, b, size):
        return "a summary is due"
    if p.edit_when == "watermark":
        return "edit_when is watermark"
    return None  # under the hard limit with a warm cache: nothing must go, every edit re-bills


def _skipped(messages: list[Message], b: Budgeting, size: int, last_resort: bool, over_hard: bool) -> bool:
    """Whether :func:`clear_tool_results` edits nothing without building a batch: the last
    resort and the pass above the hard limit under that limit, the optional clearing under
    ``clear_at`` or when no batch could fire (:func:`edit_held_back`)."""
    p = b.policy
    hard = b.level(p.hard_limit)
    if (over_hard or last_resort) and size <= hard:
        return True
    if last_resort:
        return False
    return size <= b.level(p.clear_at) or (not over_hard and size <= hard and edit_held_back(messages, b, size))


def edit_held_back(messages: list[Message], b: Budgeting, size: int) -> bool:
    """Whether every optional edit of ``messages`` at ``size`` (policy unit, under the hard
    limit) is held back, whatever it would remove (:func:`_why` for a clearing batch,
    :func:`~ctxwise.compaction.thinking.pruning_pays` for pruned thinking): the cache is warm,
    no summary is due and edits are not made at the watermark. Decided without building the
    edit (an ordinary call above ``clear_at`` then ranks, clears and prunes nothing)."""
    from .summarizing import summary_due

    p = b.policy
    return not (p.edit_when == "watermark" or cold_cache(p, b.idle) or summary_due(messages, b, size))


def low_watermark(messages: list[Message], b: Budgeting, hard: int) -> int:
    """Where a clearing inside a turn stops (policy unit): ``shrink_calls`` calls of room
    under ``hard`` at the rate the context has grown so far (:func:`growth_so_far`), so the
    prompt-cache break it makes buys that many calls; 0 (everything) when ``shrink_calls`` is
    0. Never above the hard limit."""
    calls = b.policy.shrink_calls
    if not calls:
        return 0
    grown, made = growth_so_far(messages, b, hard)
    return max(0, hard - calls * grown // max(1, made))


def growth_so_far(messages: list[Message], b: Budgeting, hard: int) -> tuple[int, int]:
    """``(grown, calls)``: how much the context has grown over how many model calls, for the
    rate :func:`low_watermark` leaves room for (policy unit).

    Each call's step is its assistant message and the inputs that follow it, counted from
    the first user input after the pinned head. A step larger than a quarter of the hard
    limit (one huge tool result) is an event, not a rate, and is left out with its call (else
    one 5,000-token result at 12,000 tokens makes every later cut inside the turn clear
    everything). After a summary or trim the steps are what is left, so the rate errs low."""
    if not messages:
        return 0, 1
    quarter = hard // 4
    key = ("growth", b.counter, b.policy.count_system, b.count_reasoning, b.opaque_passback, quarter)
    phase, lead, total, n, cur = fold_on(messages, "clearing/growth", key, (0, 0, 0, 0, -1),
                                         lambda st, _, m: _growth_step(st, m, b.size_of, quarter))
    if cur < 0:
        return lead, 1
    if cur <= quarter:
        total, n = total + cur, n + 1
    return total, max(1, n)


_Growth = tuple[int, int, int, int, int]
""":func:`growth_so_far`'s fold state ``(phase, lead, kept total, kept steps, open step)``:
phase 0 in the pinned head, 1 before the first user input after it, 2 counting; ``open
step`` -1 before the first assistant message counted."""


def _growth_step(st: _Growth, m: Message, size_of: Callable[[Message], int], quarter: int) -> _Growth:
    """One message of :func:`growth_so_far`'s left fold (a step over ``quarter`` is left out
    once it is closed by the next assistant message)."""
    phase, lead, total, n, cur = st
    if phase < 2:
        if phase == 0 and (m.role == "system" or m.kind in ("facts", "user_memory")):
            return st
        return (2 if m.role == "user" else 1), lead, total, n, cur
    if m.role == "assistant":
        if cur >= 0 and cur <= quarter:
            total, n = total + cur, n + 1
        return phase, 0, total, n, lead + size_of(m)
    if cur >= 0:
        return phase, lead, total, n, cur + size_of(m)
    return phase, lead + size_of(m), total, n, cur


class ClearingStage:
    """Tool-result clearing as a pipeline stage (:func:`clear_tool_results`).

    In ``"watermark"`` mode over the hard limit, with ``edit_when="pays"``, the stage steps
    aside when summarizing (old turns, or the current loop's completed cycles) is the cheaper
    cut (fewer re-billed tokens per unit of room, :func:`~ctxwise.compaction.cost.cut_cost`):
    the summarizing stage that follows makes it, and clearing runs again on what it leaves.

    ``mode``: ``"watermark"`` (above ``clear_at``, down to ``clear_target``), ``"over_hard"``
    (above the hard limit, the recent cycles of old turns too) or ``"last_resort"`` (the
    completed cycles of the current turn too)."""

    def __init__(self, mode: str = "watermark") -> None:
        if mode not in ("watermark", "over_hard", "last_resort"):
            raise ValueError(f"ClearingStage mode must be watermark, over_hard or last_resort, not {mode!r}")
        self.mode = mode
        self.name = "clearing" if mode == "watermark" else f"clearing_{mode}"

    def run(self, inp: StageInput) -> StageResult:
        res = clear_tool_results(inp.messages, inp.budgeting, inp.size,
                                 over_hard=self.mode == "over_hard", last_resort=self.mode == "last_resort")
        if self.mode == "watermark" and res.changes and inp.size > inp.hard and _summary_cheaper(inp, res):
            return StageResult(inp.messages)  # the summarizing stage, next, makes the cheaper cut
        return res


def _rebilled(before: list[Message], res: StageResult, b: Budgeting) -> int:
    """The suffix a clearing re-bills: the size, after the edit, from its first edited message on."""
    new = {ch.message_id: ch.current for ch in res.changes if isinstance(ch, Replace)}
    first = next(i for i, m in enumerate(before) if m.id in new)
    return sum(b.size_of(new.get(m.id, m)) for m in before[first:])


def _summary_cheaper(inp: StageInput, res: StageResult) -> bool:
    """Over the hard limit, whether summarizing the old turns, or the current loop's own
    completed cycles (the cut :func:`~ctxwise.compaction.summarizing.plan_summary` would make),
    is a cheaper cut than
    clearing ``res`` under :func:`~ctxwise.compaction.cost.cut_cost`: fewer re-billed tokens
    per unit of room bought. Clearing edits results in place deep in the history, so it
    re-bills nearly everything after the oldest one, and often leaves the context just under
    the limit; a summary re-bills itself and what follows its cut. The summary's size is
    estimated at its target (``summary_target``, or the material when smaller), before any
    summarizer call. Only with ``edit_when="pays"`` (the cost-aware mode), and never for a
    range whose summary already failed."""
    from ..summarizers.base import SUMMARY_HEADER
    from .summarizing import plan_summary, summary_id

    b, p = inp.budgeting, inp.budgeting.policy
    if p.edit_when != "pays" or not p.summarize:
        return False
    plan = plan_summary(inp.messages, b, inp.size)
    if plan is None or summary_id(plan.replaced(inp.messages)) in inp.skip_summaries:
        return False
    lo = plan.start - len(plan.segments) if plan.roll else plan.start
    material = sum(plan.sizes[lo:plan.cut])
    header = b.size_of(Message(id="summary-estimate", role="user", blocks=[TextBlock(text=SUMMARY_HEADER)]))
    summary = min(max(b.level(p.summary_target), 1), material) + header
    s_after = inp.size - material + summary
    s_cost = cut_cost(summary + sum(plan.sizes[plan.cut:]), s_after, inp.hard)
    c_cost = cut_cost(_rebilled(inp.messages, res, b), res.events[-1].size_after, inp.hard)
    return s_cost < c_cost
