"""Stage 4, hard trim: the last resort above ``hard_limit``.

Removes one contiguous run of whole units from the *oldest* end of the history, right after
the pinned head (system prompt, facts, user memory) and the summary, and never from the
middle. A unit is a tool cycle (call and results together; a parallel batch is one cycle), a
message outside any cycle, or a whole turn that may not be split (a DeepSeek tool-using span
with reasoning, case B11). The run stops before the first pinned item (the current user input,
the in-flight cycle), so no tool result is ever orphaned (cases B01, B04, B05).

The run is the shortest that makes the call fit, then extended to the next older-turn start so
the kept window begins on a user message (B01). Only when the next user message is the current
input itself is the newest old turn's tail (its final answer, which the current input most
likely refers to) kept without its question, if the provider accepts a window that starts
there (case B14: ``[4, 5, 6]``); otherwise the run goes up to the current input.
"""

from __future__ import annotations

import re
import time

from ..changes import Hide, Replace
from ..messages import Block, ImageBlock, Marker, Message, TextBlock, ThinkingBlock, ToolResultBlock
from ..units import ToolCycle, cycle_boundaries, is_user_input, tool_cycles
from .context import (
    Budgeting,
    StageResult,
    body_turns,
    anchored_indices,
    current_turn_start,
    in_flight_start,
    pinned_indices,
    splittable,
    task_end,
)
from .placeholder import recall_key, reused_ids
from .stage import StageInput


def trim_start(messages: list[Message]) -> int:
    """Where the trimmable history starts: after the pinned head, the anchored task
    (:func:`~ctxwise.compaction.context.task_end`) and any summary right after them."""
    i = task_end(messages)
    while i < len(messages) and messages[i].kind == "summary":
        i += 1
    return i


def _units(messages: list[Message], start: int, stop: int, provider: str) -> list[int]:
    """Cut points in ``[start, stop]`` between whole units, ascending (``start`` and ``stop``
    included): no cut inside a tool cycle, none inside a turn that may not be split."""
    ok = cycle_boundaries(messages)
    for t in body_turns(messages):
        if not splittable(messages, t, provider):
            ok.difference_update(range(t.start + 1, t.end))
    return sorted({start, stop} | {i for i in ok if start < i < stop})


def trim_old_turns(messages: list[Message], b: Budgeting, size: int) -> StageResult:
    """Drop the shortest run of whole units from the oldest end (see the module doc) that
    brings the size to or under the hard limit (``trim_target`` when set: lower, so the next
    calls do not trim again), or the whole unpinned history before the current input when
    none does. Returns one ``trimming`` event (none when nothing could be
    dropped) and one ``Hide`` (state ``trimmed``)."""
    from ..providers import check, get_profile

    p = b.policy
    hard = b.level(p.hard_limit)
    if size <= hard:
        return StageResult(messages)
    t0 = time.perf_counter()
    start = trim_start(messages)
    if current_turn_start(messages) < start:
        return StageResult(messages)  # the current input is the anchored task: all after it is its own turn
    pinned = [i for i in pinned_indices(messages) if i >= start]
    stop = min(pinned) if pinned else len(messages)
    if stop <= start:
        return StageResult(messages)
    cuts = _units(messages, start, stop, p.provider)
    sizes = [b.size_of(m) for m in messages[start:stop]]
    target = hard if p.trim_target is None else min(hard, b.level(p.trim_target))
    now, cut = size, stop
    for c in cuts[1:]:
        now_c = size - sum(sizes[: c - start])
        if now_c <= target:
            cut = c
            break
    if cut < stop and not is_user_input(messages[cut]):
        nxt = next((i for i in range(cut, stop) if is_user_input(messages[i]) and i in cuts), None)
        if nxt is not None:
            cut = nxt  # the kept window starts on a user message (B01)
        else:
            # Only the newest old turn's tail is left before the current input: keep it
            # without its question when the provider accepts a window starting there (B14).
            kept = messages[:start] + messages[cut:]
            if get_profile(p.provider).first_message_user or check(kept, p.provider, reference=messages):
                cut = stop
    now = size - sum(sizes[: cut - start])
    drop = set(range(start, cut))
    return _without(messages, drop, b, b.trigger(size, "hard_limit", p.hard_limit), size, now, t0)


def trim_current_turn_cycles(messages: list[Message], b: Budgeting, size: int) -> StageResult:
    """Last resort inside one long turn (case B06): drop the oldest *completed* tool cycles
    after the current user input, whole (call and results together), never the in-flight
    cycle, until the size is at or under the hard limit. Returns a ``trimming`` event."""
    p = b.policy
    hard = b.level(p.hard_limit)
    if size <= hard:
        return StageResult(messages)
    t0 = time.perf_counter()
    # the current turn runs from the user's latest own instruction, whatever harness notices
    # (format errors, interruptions) came after it
    begin = task_end(messages)
    start = min([current_turn_start(messages)] + [i for i in anchored_indices(messages) if i >= begin])
    flight = in_flight_start(messages)
    target = hard if p.trim_target is None else min(hard, b.level(p.trim_target))
    cycles = [c for c in tool_cycles(messages) if c.start > start and c.end <= flight and c.complete]
    anchored = _thinking_anchor(messages, cycles, p.provider, start)
    drop: set[int] = set()
    now, first = size, 0  # first: the oldest cycle still kept
    for i, c in enumerate(cycles):
        if now <= target:
            break
        if anchored and i == first and not _starts_thinking(messages, _first_reply(messages, c.end)):
            continue  # it holds the turn's thinking and the reply after it has none: keep it first
        drop.update(range(c.start, c.end))
        now -= sum(b.size_of(messages[j]) for j in range(c.start, c.end))
        first += i == first
    return _without(messages, drop, b, f"last resort: size {size} > hard_limit {hard} within the current turn",
                    size, now, t0, current_turn=True)


def _first_reply(messages: list[Message], start: int) -> int:
    """Index of the first assistant message at or after ``start``, or -1."""
    return next((i for i in range(start, len(messages)) if messages[i].role == "assistant"), -1)


def _starts_thinking(messages: list[Message], i: int) -> bool:
    return i >= 0 and bool(messages[i].blocks) and isinstance(messages[i].blocks[0], ThinkingBlock)


def _thinking_anchor(messages: list[Message], cycles: list[ToolCycle], provider: str, turn_start: int) -> bool:
    """Whether the current turn's first reply opens the oldest completed cycle and starts with
    thinking, on a provider that wants it first. Anthropic runs a tool loop as one assistant
    turn whose thinking sits at its start (without interleaved thinking the later replies carry
    none), so the trim must leave a first reply that starts with thinking: it keeps that cycle
    and drops the ones after it when the next reply has no thinking of its own."""
    from ..providers.profiles import get_profile

    return (bool(cycles) and get_profile(provider).thinking_first_in_open_tool_turn
            and _first_reply(messages, turn_start + 1) == cycles[0].start
            and _starts_thinking(messages, cycles[0].start))


def _without(messages: list[Message], drop: set[int], b: Budgeting, trigger: str, size: int, now: int,
             t0: float, **detail: object) -> StageResult:
    """``messages`` less the ``drop`` positions, with their ``trimming`` event (none if empty)."""
    if not drop:
        return StageResult(messages)
    ids = [messages[i].id for i in sorted(drop)]
    ev = b.event("trimming", trigger, size, now, ids, t0, detail={"dropped_messages": len(drop), **detail})
    return StageResult(messages, [ev], [Hide(ids, "trimmed")])


TRUNCATION_NOTE = (
    "\n[ctxwise cut {omitted} of {total} characters from the middle of this tool result to fit the "
    "context budget; the full result: recall_tool_result(\"{id}\")]\n"
)
"""The note between the kept head and tail of a cut result: it names the recall call, as a
placeholder does (the recall tool returns an original of any size, in pages)."""
RECALLED_NOTE = (
    "\n[ctxwise cut {omitted} of {total} characters from the middle of this recalled page to fit the "
    "context budget{where}]\n"
)
"""The note between the kept head and tail of a cut ``recall_tool_result`` result. ``where`` is
:data:`RECALLED_FROM` when the page's own note says where it starts in the original (the cut
characters are then one recall away, from a later offset, so no call is sent back for the same
body); else :data:`RECALLED_AGAIN`."""
RECALLED_FROM = '; they start at character {offset} of the original: {name}("{key}", offset={offset})'
RECALLED_AGAIN = ("; recalling the same page again returns the same page, cut the same way while the context is "
                  "this full")
PAGE_NOTE_RX = re.compile(r'\[ctxwise: characters (\d+)\u2013\d+ of \d+ of this result; the next page: '
                          r'(\w+)\("(.*)", offset=\d+\)\]\s*$')
"""The note that ends a recalled page that is not the last (:data:`ctxwise.recall.PAGE_NOTE`):
the page's start in the original, the tool name and the recall key."""
HEAD_SHARE = 0.6
"""Of what a cut result keeps, the share at its head; the rest is its tail, where test runners,
compilers and build tools print their verdicts (the agents' own harnesses keep both)."""
RECALL_TOOL = "recall_tool_result"
""":data:`ctxwise.recall.RECALL_TOOL_NAME` (the compaction layer does not import the recall tool)."""
IMAGE_NOTE = (
    "[ctxwise left out {n} image(s) of this tool result to fit the context budget; the full "
    "result: recall_tool_result(\"{id}\")]"
)


def truncate_in_flight(messages: list[Message], b: Budgeting, size: int) -> StageResult:
    """The very last resort (``truncate_in_flight``): when even the in-flight cycle's fresh
    results do not fit next to the other pinned content, keep the head of each result's text
    and say how much was cut and where the full result is; images of a result that cannot keep
    them are replaced by a one-line note (an image has no head to keep). Pairing, ids, names
    and states stay; the system prompt and the user's input are never cut.

    Every result first gets a share of the room left proportional to its size; what is still
    over after that (counts are not linear in characters, an image goes whole) is taken from
    the results that can still shrink, largest first, so the call fits whenever cutting every
    result down to its note would. Returns a ``trimming`` event (detail ``truncated``) and one
    ``Replace`` (state ``cleared``) per cut result."""
    p = b.policy
    hard = b.level(p.hard_limit)
    if size <= hard or not p.truncate_in_flight:
        return StageResult(messages)
    t0 = time.perf_counter()
    start = in_flight_start(messages)
    idx = [i for i in range(start + 1, len(messages)) if messages[i].role == "tool"]
    fresh = sum(b.size_of(messages[i]) for i in idx)
    room = hard - (size - fresh)
    if not idx or room <= 0:
        return StageResult(messages)
    cut: dict[int, Message] = {}
    now = size

    def shrink(i: int, target: float) -> None:
        nonlocal now
        m = cut.get(i, messages[i])
        new = _cut_message(messages[i], b, target, reused)
        if new is not None and b.size_of(new) < b.size_of(m):
            now += b.size_of(new) - b.size_of(m)
            cut[i] = new

    reused = reused_ids(messages)
    for i in idx:
        shrink(i, room * b.size_of(messages[i]) / max(fresh, 1))
    for _ in range(3):
        if now <= hard:
            break
        for i in sorted(idx, key=lambda k: -b.size_of(cut.get(k, messages[k]))):
            if now <= hard:
                break
            shrink(i, b.size_of(cut.get(i, messages[i])) - (now - hard))
    if not cut:
        return StageResult(messages)
    affected = [messages[i].id for i in sorted(cut)]
    ev = b.event(
        "trimming",
        f"last resort: size {size} > hard_limit {hard} with only pinned content left",
        size,
        now,
        affected,
        t0,
        detail={"truncated": len(cut), "in_flight": True},
    )
    return StageResult(messages, [ev], [Replace(messages[i].id, cut[i], "cleared") for i in sorted(cut)])


def _cut_message(m: Message, b: Budgeting, share: float, reused: set[str] = set()) -> Message | None:  # noqa: B006
    """``m`` (an original tool message) cut so its size is at most ``share``: the head of each
    result text with a note; when that alone cannot reach ``share``, its images are replaced
    by a note too. None when ``m`` already fits or nothing can be cut."""
    if b.size_of(m) <= share:
        return None
    best: Message | None = None
    for drop_images in (False, True):
        ratio = share / max(b.size_of(m), 1)
        for _ in range(12):  # shrink until it fits (counts are not linear in characters)
            new = _cut_blocks(m, ratio, drop_images, reused)
            if best is None or b.size_of(new) < b.size_of(best):
                best = new
            if b.size_of(new) <= share or ratio <= 0:
                break
            # proportional at every size: a 2 MB result keeps its share, never nothing
            ratio = ratio * 0.7 if ratio > 1e-6 else 0.0
        if best is not None and b.size_of(best) <= share:
            break
    return best if best is not None and b.size_of(best) < b.size_of(m) else None


def _cut_blocks(m: Message, ratio: float, drop_images: bool, reused: set[str] = set()) -> Message:  # noqa: B006
    blocks: list[Block] = []
    for blk in m.blocks:
        if not isinstance(blk, ToolResultBlock):
            blocks.append(blk)
            continue
        images = [o for o in blk.output if isinstance(o, ImageBlock)]
        key = recall_key(blk.tool_use_id, m.id, blk.tool_use_id in reused)
        output: list[TextBlock | ImageBlock] = []
        if blk.text:
            output.append(TextBlock(text=head_and_tail(blk.text, ratio, key, blk.name == RECALL_TOOL)))
        if images and drop_images:
            output.append(TextBlock(text=IMAGE_NOTE.format(n=len(images), id=key)))
        elif images:
            output.extend(images)
        blocks.append(blk.model_copy(update={"output": output or list(blk.output)}))
    return m.model_copy(update={"blocks": blocks, "metadata": Marker.with_(m, truncated=True)})


def head_and_tail(text: str, ratio: float, key: str, recalled: bool = False) -> str:
    """``text`` cut to about ``ratio`` of its characters: its head (:data:`HEAD_SHARE` of what is
    kept) and its tail, with the note between them naming how much was cut and the recall call
    (:data:`TRUNCATION_NOTE`; :data:`RECALLED_NOTE` for a recalled page, which names none).
    The head ends and the tail starts at a line or word break when one is near (not mid-token). What is
    kept is proportional to the text at every size (the note's length is taken from it only
    while half of it is left)."""
    total = len(text)
    want = int(total * ratio)
    keep = max(want - len(TRUNCATION_NOTE) - 40, want // 2, 0)
    head = int(keep * HEAD_SHARE)
    tail = keep - head
    brk = max(text.rfind("\n", 0, head + 1), text.rfind(" ", 0, head + 1))
    head = brk if brk >= head * 0.9 and brk > 0 else head
    start = total - tail
    ends = [i for i in (text.find("\n", start, start + max(tail // 10, 1)),
                        text.find(" ", start, start + max(tail // 10, 1))) if i >= 0]
    start = min(ends) + 1 if tail and ends else start
    start = max(start, head)
    if not recalled:
        note = TRUNCATION_NOTE.format(omitted=start - head, total=total, id=key)
    else:
        found = PAGE_NOTE_RX.search(text[-1000:])
        where = (RECALLED_FROM.format(offset=int(found.group(1)) + head, name=found.group(2), key=found.group(3))
                 if found else RECALLED_AGAIN)
        note = RECALLED_NOTE.format(omitted=start - head, total=total, where=where)
    return text[:head] + note + text[start:]


class TrimOldTurnsStage:
    """Stage 4 of the default pipeline, the hard trim: :func:`trim_old_turns`."""

    name = "trimming"

    def run(self, inp: StageInput) -> StageResult:
        return trim_old_turns(inp.messages, inp.budgeting, inp.size)


class TrimCurrentTurnStage:
    """Last resort: :func:`trim_current_turn_cycles`."""

    name = "trimming_current_turn"

    def run(self, inp: StageInput) -> StageResult:
        return trim_current_turn_cycles(inp.messages, inp.budgeting, inp.size)


class TruncateInFlightStage:
    """The very last resort: :func:`truncate_in_flight`."""

    name = "truncate_in_flight"

    def run(self, inp: StageInput) -> StageResult:
        return truncate_in_flight(inp.messages, inp.budgeting, inp.size)
