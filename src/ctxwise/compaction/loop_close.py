"""Closing an open tool loop whose reasoning is bound to its prefix, when it must shrink.

Rule (Anthropic preserved thinking, platform.claude.com/docs/en/build-with-claude/preserved-thinking
and its ``prefix-checks`` page): a thinking block sent back is valid only while ``system``,
``tools`` and every earlier message are what they were when it was produced; a tool loop is one
assistant turn, whose first assistant message must start with its thinking block while the loop
is open (build-with-claude/thinking-tool-workflows); thinking of a completed turn may be left
out (preserved thinking: "remove the thinking in the kept turns"). So an open loop cannot be
shrunk in place: any edit of its older cycles invalidates the thinking the open turn must keep.

The way ctxwise takes: when the frozen loop no longer fits, the stages run on it as on any
context (its older cycles cleared or summarized, down to :attr:`Policy.loop_keep_recent` of the
budget where they can), the loop's reasoning that now follows a changed prefix is dropped
(:func:`ctxwise.compaction.bound.drop_invalidated_reasoning`, one ``thinking`` event with its
tokens), and a ctxwise note, a user-role message (:data:`LOOP_CLOSE_TEXT`, marker kind
``loop_close``) is put right after the in-flight results. The loop is then a completed turn
(its reasoning may be left out); the model's next reply opens a new turn whose thinking is
bound to the new prefix, and that prefix stays unchanged until the next close. One close is
one prompt-cache break that buys the calls the freed room holds.
"""

from __future__ import annotations

import hashlib
import time

from ..changes import InsertSummary
from ..messages import Marker, Message, TextBlock
from ..policy import Policy
from .context import Budgeting
from .events import CompactionEvent

LOOP_CLOSE_TEXT = ("[ctxwise context note, not a new instruction] This tool loop outgrew the context budget: its "
                   "earlier steps above were cleared or summarized, and the reasoning of the loop so far was left "
                   "out. Continue the same task from the latest tool results.")
"""The text of the note that closes a loop: what happened, and that the task goes on."""


def close_note(after: Message) -> Message:
    """The note closing the loop whose last message is ``after``: one user-role message, id
    ``loop-close-<12 hex>`` derived from ``after.id`` (deterministic), marker kind ``loop_close``."""
    digest = hashlib.sha256(after.id.encode("utf-8")).hexdigest()[:12]
    return Message(id=f"loop-close-{digest}", role="user", blocks=[TextBlock(text=LOOP_CLOSE_TEXT)],
                   metadata=Marker.with_({}, kind="loop_close"))


def close_policy(policy: Policy, floor: int) -> Policy:
    """``policy`` with each watermark (``clear_at``, ``clear_target``, ``summarize_at``,
    ``hard_limit``, ``trim_target``) at most :attr:`Policy.loop_keep_recent` of the effective
    budget, or ``floor`` (policy unit: what no stage can reduce) when that is higher, and
    ``shrink_calls`` at most 1: the room between that share and the budget is what the next
    calls grow into, so clearing need not free more for them. ``policy`` itself when nothing
    is lowered."""
    budget = policy.effective_budget
    keep = max(policy.loop_keep_recent, floor / budget if budget else 1.0)
    if keep >= policy.hard_limit or budget <= 0:
        return policy
    low = {k: min(getattr(policy, k), keep) for k in ("clear_at", "clear_target", "summarize_at", "hard_limit")}
    return policy.with_(**low, trim_target=keep if policy.trim_target is None else min(policy.trim_target, keep),
                        shrink_calls=min(policy.shrink_calls, 1))


def close_loop(ctx: list[Message], b: Budgeting, size: int, frozen: int) -> tuple[list[Message], InsertSummary,
                                                                                 CompactionEvent]:
    """Close the open loop of ``ctx`` (the context the stages left, ending with the in-flight
    results): the note after its last message, the change that stores it, and one
    ``loop_closed`` event. ``size``: the context's size before the note (policy unit, overhead
    included); ``frozen``: how many messages the bound reasoning had frozen. Raises
    ``ValueError`` for an empty ``ctx``."""
    if not ctx:
        raise ValueError("close_loop needs a context that ends with the open loop")
    t0 = time.perf_counter()
    note = close_note(ctx[-1])
    now = size + b.size_of(note)
    ev = b.event("loop_closed", f"the open tool loop's bound reasoning froze {frozen} message(s) and the context "
                 f"is over the hard limit {b.level(b.policy.hard_limit)} {b.unit}", size, now, [note.id], t0,
                 detail={"bound_reasoning": "loop_closed", "frozen": frozen,
                         "loop_keep_recent": b.policy.loop_keep_recent})
    return [*ctx, note], InsertSummary(note, ctx[-1].id), ev
