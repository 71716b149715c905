"""Cutting an oversized reply head-and-tail, before any cut that would take its neighbours.

A coding agent's model sometimes writes one degenerate reply: a plan repeated until the output
limit, tens of thousands of tokens with no action in it (mini-swe-agent answers with a format
error and the loop goes on). Kept whole it is more than the budget; the only other cuts that
reach it are a summary or a hard trim of the span around it, which take the agent's working
files and the edits it made with them (the file it viewed just before, the text its next edit
copies). Cutting the reply itself to its head and its tail is one edit of one message and keeps
everything around it verbatim.

Rule: above the hard limit, every completed assistant message outside the pinned positions
whose size as sent is over :data:`OVERSIZED_SHARE` of the hard limit has the text of its text
blocks cut to :data:`KEEP_SHARE` of the hard limit (head and tail, the middle replaced by a note
saying how much was cut; :func:`~ctxwise.compaction.trimming.head_and_tail`'s proportions). Its
tool calls, their ids and inputs, stay whole (the results answering them stay paired), and a
message whose reasoning is sent back (its thinking is bound to the text around it) is left alone.
"""

from __future__ import annotations

import time

from ..changes import Replace
from ..messages import Block, Marker, Message, TextBlock, ThinkingBlock
from .context import Budgeting, StageResult, pinned_indices
from .stage import StageInput
from .trimming import HEAD_SHARE

OVERSIZED_SHARE = 0.5
"""A reply larger than this share of the hard limit is oversized: no reply of a working agent
is, a degenerate one (a plan repeated to the output limit) is."""
KEEP_SHARE = 0.125
"""An oversized reply keeps this share of the hard limit: its head and its tail."""
REPLY_NOTE = "\n[ctxwise cut {omitted} of {total} characters from the middle of this reply to fit the context budget]\n"
"""The note between the kept head and tail of a cut reply."""


def cut_reply_text(text: str, keep_chars: int) -> str:
    """``text`` cut to about ``keep_chars`` characters: its head (:data:`HEAD_SHARE` of what is
    kept) and its tail, at line or word breaks when one is near, with :data:`REPLY_NOTE` between
    them. ``text`` itself when it is no longer than ``keep_chars`` plus the note. Pure."""
    total = len(text)
    if keep_chars < 0 or total <= keep_chars + len(REPLY_NOTE) + 40:
        return text
    head = int(keep_chars * HEAD_SHARE)
    brk = max(text.rfind("\n", 0, head + 1), text.rfind(" ", 0, head + 1))
    head = brk if brk >= head * 0.9 and brk > 0 else head
    start = total - (keep_chars - head)
    nxt = [i for i in (text.find("\n", start, start + 200), text.find(" ", start, start + 200)) if i >= 0]
    start = max(min(nxt) + 1 if nxt else start, head)
    return text[:head] + REPLY_NOTE.format(omitted=start - head, total=total) + text[start:]


def _cut(m: Message, b: Budgeting, target: int) -> Message | None:
    """``m`` with its text blocks cut so its size is about ``target`` (policy unit); None when
    nothing can be cut."""
    texts = [blk for blk in m.blocks if isinstance(blk, TextBlock)]
    chars = sum(len(t.text) for t in texts)
    if not chars:
        return None
    other = b.size_of(m.model_copy(update={"blocks": [x for x in m.blocks if not isinstance(x, TextBlock)]}))
    ratio = max(target - other, 0) / max(b.size_of(m) - other, 1)
    for _ in range(8):  # counts are not linear in characters: shrink until it fits
        blocks: list[Block] = [TextBlock(text=cut_reply_text(x.text, int(len(x.text) * ratio)))
                               if isinstance(x, TextBlock) else x for x in m.blocks]
        new = m.model_copy(update={"blocks": blocks, "metadata": Marker.with_(m, truncated=True)})
        if b.size_of(new) <= target or ratio <= 0.01:
            break
        ratio *= 0.7
    return new if b.size_of(new) < b.size_of(m) else None


def cut_oversized_replies(messages: list[Message], b: Budgeting, size: int) -> StageResult:
    """Cut the oversized replies of ``messages`` (see the module doc) when ``size`` (policy
    unit, overhead included) is over the hard limit. Returns one ``trimming`` event (detail
    ``oversized``: how many replies) and one ``Replace`` (state ``cleared``) per cut reply;
    nothing when no reply is oversized or the context fits."""
    hard = b.level(b.policy.hard_limit)
    if size <= hard:
        return StageResult(messages)
    t0 = time.perf_counter()
    limit, target = int(hard * OVERSIZED_SHARE), int(hard * KEEP_SHARE)
    pinned = pinned_indices(messages)
    changes: list[Replace] = []
    now = size
    for i, m in enumerate(messages):
        if m.role != "assistant" or i in pinned or b.size_of(m) <= limit:
            continue
        if b.count_reasoning and any(isinstance(x, ThinkingBlock) for x in m.blocks):
            continue
        new = _cut(m, b, target)
        if new is not None:
            now += b.size_of(new) - b.size_of(m)
            changes.append(Replace(m.id, new, "cleared"))
    if not changes:
        return StageResult(messages)
    ev = b.event("trimming", f"{b.trigger(size, 'hard_limit', b.policy.hard_limit)}; "
                 f"{len(changes)} reply(ies) over {OVERSIZED_SHARE} of it", size, now,
                 [c.message_id for c in changes], t0, detail={"oversized": len(changes)})
    return StageResult(messages, [ev], list(changes))


class OversizedReplyStage:
    """Cut oversized replies head-and-tail above the hard limit: :func:`cut_oversized_replies`."""

    name = "oversized_replies"

    def run(self, inp: StageInput) -> StageResult:
        return cut_oversized_replies(inp.messages, inp.budgeting, inp.size)
