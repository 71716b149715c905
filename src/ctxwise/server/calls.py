"""The context size per model call of a stored session, rebuilt from the store for the chart.

The store keeps every message (original and current body, state), the transcript and the
compaction events, but no row per ``prepare()``: a call that fires no stage writes nothing
(ARCHITECTURE.md, decision 7). So the inspector rebuilds what each call sent:

* a **model call** is an assistant message appended after the first user input (the recorded
  output of the call); call ``k`` read every message stored before it, plus a last bar for
  the call still to come when messages wait after the last reply;
* the **events** are grouped into the ``prepare()`` that fired them (a chain where one event's
  ``size_after`` is the next one's ``size_before``) and each group goes to the earliest call it
  can belong to: after every message it names (a summary after its own row), in the user turn
  whose transcript row precedes the event's time;
* at each call the visible messages are counted with the session's own counter (the stored
  policy's unit and tokenizer), edits applied as their events say (cleared results and pruned
  thinking count their current body, summarized and trimmed messages are gone, a summary
  counts from its call on). What the messages do not hold (tool schemas, pinned blocks, the
  counter's reply priming) is the median gap between the rebuilt size and the exact
  ``size_after`` of the calls that fired events, added to every bar; a call that fired events
  shows their exact sizes.

Sizes are in the policy unit. The result feeds :func:`ctxwise.replay.report.chart`, one bar
per call, so the inspector draws exactly what ``ctxwise replay --report`` draws.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable

from .. import ContextRow, Message, Policy, SessionState, TranscriptRow, get_counter
from ..providers import convert
from ..replay.breakdown import CATEGORIES, message_breakdown
from ..replay.runner import RoundRecord
from ..tokens import Counter
from ..units import is_user_input

APPEND_STAGES = ("normalized", "interrupted", "amended", "cache_usage")
"""Events written at append (or by ``Session.amend``), not by a ``prepare()``: they belong to no
call's edits (the inspector's timeline puts a ``cache_usage`` event on the call whose output it names)."""
OVERHEAD_STAGES = ("summarizing", "trimming", "facts_evicted")
"""Stages after which the pinned facts block (not a stored row) may change size."""


@dataclass
class CallView:
    """One model call as rebuilt: ``number`` (1-based), ``message_id`` of its recorded output
    (None for the call still to come), the sizes, and the events its ``prepare()`` fired.

    ``exact`` is True when ``size_before`` / ``size`` come from the events themselves."""

    number: int
    message_id: str | None
    seq: int
    turn: int
    size_before: int = 0
    size: int = 0
    full: int = 0
    exact: bool = False
    categories: dict[str, int] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)


def _when(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return None


def _groups(events: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Events of one ``prepare()`` together, in order (append-time events left out)."""
    out: list[list[dict[str, Any]]] = []
    for e in events:
        if e.get("stage") in APPEND_STAGES:
            continue
        if out and out[-1][-1].get("size_after") == e.get("size_before"):
            out[-1].append(e)
        else:
            out.append([e])
    return out


class _Rows:
    """The session's rows in seq order and the edits applied to them so far: which results
    and thinking are ``edited`` (cleared or pruned: their current body counts), which rows
    are ``hidden`` (summarized or trimmed away) and which summaries are in the context."""

    def __init__(self, rows: list[ContextRow], counter: Counter) -> None:
        self.rows = rows
        self.counter = counter
        self.summary_rows = {r.message_id for r in rows if r.current.kind is not None}
        self.index = {r.message_id: i for i, r in enumerate(rows)}
        self.seqs = [r.seq for r in rows]
        self.edited: set[str] = set()
        self.hidden: set[str] = set()
        self.summaries: set[str] = set()

    @staticmethod
    def body(r: ContextRow, edited: bool) -> Message:
        """The body the model read: the current one once edited, else the original."""
        return r.current if edited or r.original is None else r.original

    def categories(self, i: int) -> dict[str, int]:
        """Row ``i``'s size by category as the model read it under the edits so far (empty
        when it was not sent)."""
        r = self.rows[i]
        if r.message_id in self.hidden or (r.message_id in self.summary_rows and r.message_id not in self.summaries):
            return {}
        return message_breakdown(self.body(r, r.message_id in self.edited), self.counter)

    def apply(self, group: list[dict[str, Any]],
              on_change: Callable[[int, dict[str, int], dict[str, int]], None]) -> None:
        """Apply one prepare()'s edits; ``on_change(i, old, new)`` for every row they touch."""
        touched = sorted({self.index[i] for e in group for i in [*(e.get("affected_ids") or []), e.get("summary_id")]
                          if i in self.index})
        old = {i: self.categories(i) for i in touched}
        for e in group:
            ids = e.get("affected_ids") or []
            if e.get("stage") in ("thinking", "clearing"):
                self.edited.update(ids)
            elif e.get("stage") in ("summarizing", "trimming"):
                self.hidden.update(i for i in ids if i != e.get("summary_id"))
            if e.get("summary_id"):
                self.summaries.add(e["summary_id"])
        for i in touched:
            on_change(i, old[i], self.categories(i))

    def reset(self) -> None:
        """Forget every edit (back to the rows as appended)."""
        for done in (self.edited, self.hidden, self.summaries):
            done.clear()


class _PrefixSums:
    """Sums over a prefix of ``n`` values that change one at a time (a Fenwick tree: O(log n)
    per update and per sum)."""

    def __init__(self, n: int) -> None:
        self.tree = [0] * (n + 1)

    def add(self, i: int, delta: int) -> None:
        """Add ``delta`` to value ``i`` (0-based)."""
        i += 1
        while i < len(self.tree):
            self.tree[i] += delta
            i += i & -i

    def total(self, upto: int) -> int:
        """The sum of values ``0 .. upto - 1``."""
        i, total = upto, 0
        while i > 0:
            total += self.tree[i]
            i -= i & -i
        return total


def _turn_of(turn_starts: list[int], seq: int) -> int:
    """The 1-based user turn a row of ``seq`` is in (0 before the first user input)."""
    return sum(1 for s in turn_starts if s <= seq)


def _call_views(rows: list[ContextRow], turn_starts: list[int]) -> list[CallView]:
    """One :class:`CallView` per assistant message after the first user input, plus the call
    still to come when messages wait after the last reply; numbered from 1."""
    calls = [CallView(number=0, message_id=r.message_id, seq=r.seq, turn=_turn_of(turn_starts, r.seq)) for r in rows
             if r.current.kind is None and r.current.role == "assistant" and r.seq > turn_starts[0]]
    last_seq = max(r.seq for r in rows if r.current.kind is None)
    if not calls or last_seq > calls[-1].seq:  # messages wait for the next call
        calls.append(CallView(number=0, message_id=None, seq=last_seq + 1, turn=_turn_of(turn_starts, last_seq)))
    for i, c in enumerate(calls):
        c.number = i + 1
    return calls


def _candidates(group: list[dict[str, Any]], calls: list[CallView], pointer: int, seq_of: dict[str, int],
                turn_times: list[tuple[int, datetime | None]]) -> list[int]:
    """The calls one prepare() may belong to: from ``pointer`` on, after every message it
    names, in the user turn whose transcript row precedes its time (the first 8 of them when
    none is in that turn; the last call when none qualifies)."""
    needed = [seq_of[i] for e in group for i in (e.get("affected_ids") or []) if i in seq_of]
    needed += [seq_of[e["summary_id"]] for e in group if e.get("summary_id") in seq_of]
    floor = max(needed, default=0)
    at = _when(group[0].get("at"))
    turn = max((t for t, when in turn_times if when is not None and at is not None and when <= at), default=None)
    feasible = [k for k in range(pointer, len(calls)) if calls[k].seq > floor]
    in_turn = [k for k in feasible if turn is None or calls[k].turn == turn]
    return in_turn or feasible[:8] or [len(calls) - 1]


def _assign(groups: list[list[dict[str, Any]]], calls: list[CallView], rs: _Rows,
            turn_times: list[tuple[int, datetime | None]], priming: int) -> tuple[list[int], list[int]]:
    """Which call each prepare() belongs to, and the gap it measured: ``(owner, gap_before)``,
    one entry per group.

    Of the :func:`_candidates`, a group goes to the call whose rebuilt size (plus the last
    measured gap) is nearest the size the event measured. Sizes before a call are prefix sums
    over the rows in seq order. Leaves ``rs`` with every group's edits applied."""
    seq_of = {r.message_id: r.seq for r in rs.rows}
    sums = _PrefixSums(len(rs.rows))
    for i in range(len(rs.rows)):
        sums.add(i, sum(rs.categories(i).values()))
    owner: list[int] = []
    gap_before: list[int] = []
    pointer, gap, unsure = 0, priming, False
    for group in groups:
        candidates = _candidates(group, calls, pointer, seq_of, turn_times)
        measured = {k: sums.total(bisect_left(rs.seqs, calls[k].seq)) for k in candidates}
        if unsure:  # a summary or trim changed what the rows do not hold (the facts block): no gap yet,
            pick = next((k for k in candidates if k > pointer), candidates[0])  # and a later prepare()
        else:
            pick = min(candidates, key=lambda k: (abs(measured[k] + gap - group[0]["size_before"]), k))
        unsure = any(e.get("stage") in OVERHEAD_STAGES for e in group)
        gap = group[0]["size_before"] - measured[pick]
        owner.append(pick)
        gap_before.append(gap)
        calls[pick].events.extend(group)
        rs.apply(group, lambda i, old, new: sums.add(i, sum(new.values()) - sum(old.values())))
        pointer = pick
    return owner, gap_before


def _next_gaps(n_calls: int, owner: list[int], gap_before: list[int], priming: int) -> list[int]:
    """``next_gap[k]``: the gap the first prepare() at call ``k`` or later measured (the last
    one measured, or the counter's priming, after the last)."""
    first_gap: dict[int, int] = {}
    for o, g in zip(owner, gap_before):
        first_gap.setdefault(o, g)
    next_gap = [0] * (n_calls + 1)
    current = gap_before[-1] if gap_before else priming
    for k in range(n_calls, -1, -1):
        current = first_gap.get(k, current)
        next_gap[k] = current
    return next_gap


def _size_calls(calls: list[CallView], rs: _Rows, at_call: dict[int, list[list[dict[str, Any]]]],
                next_gap: list[int], base: int) -> None:
    """Set every call's sizes and categories, replaying the edits from the rows as appended;
    what the rows do not hold is the gap the next prepare() measured."""
    running = dict.fromkeys(CATEGORIES, 0)
    after_gap: int | None = None
    included = 0  # rows[:included] are before the current call
    full = 0

    def change(i: int, old: dict[str, int], new: dict[str, int]) -> None:
        if i < included:
            for cat, n in old.items():
                running[cat] -= n
            for cat, n in new.items():
                running[cat] += n

    for k, c in enumerate(calls):
        upto = bisect_left(rs.seqs, c.seq)
        while included < upto:
            for cat, n in rs.categories(included).items():
                running[cat] += n
            if rs.rows[included].message_id not in rs.summary_rows:
                full += sum(message_breakdown(rs.body(rs.rows[included], False), rs.counter).values())
            included += 1
        size_before = sum(running.values())
        for group in at_call.get(k, []):
            rs.apply(group, change)
        c.categories = dict(running)
        c.exact = k in at_call
        if c.exact:  # the events measured this call: their sizes, not a rebuilt estimate
            c.size_before = int(at_call[k][0][0]["size_before"])
            last = at_call[k][-1][-1]
            c.size = int((last.get("detail") or {}).get("size_sent", last["size_after"]))
            # what the rows do not hold changes only on a call that fired events (the facts
            # block after a summary or trim): from here on it is what this call sent beyond them
            after_gap = c.size - sum(running.values())
        else:
            gap = next_gap[k] if after_gap is None else after_gap
            c.size_before = size_before + gap
            c.size = sum(running.values()) + gap
        c.full = base + full


def _conversion_gap(rows: list[ContextRow], calls: list[CallView], counter: Counter, policy: Policy) -> int:
    """What the render-time conversions (:func:`ctxwise.providers.convert`: the lead user turn,
    a folded system message, image notes, renamed call ids) add to the first call's context,
    by ``counter``: ``Prepared.size`` counts what is sent, so a session where no event
    measured the gap still draws the size sent. 0 when nothing is converted."""
    if not calls:
        return 0
    msgs = [_Rows.body(r, False) for r in rows if r.seq < calls[0].seq]
    done = convert(msgs, policy.profile)
    if not done.conversions:
        return 0
    return sum(counter.count_message(m) for m in done.messages) - sum(counter.count_message(m) for m in msgs)


def session_calls(state: SessionState, events: list[dict[str, Any]],
                  transcript: list[TranscriptRow]) -> list[CallView]:
    """Every model call of the session with its rebuilt sizes (see the module docstring).

    ``state`` must be loaded with ``include_hidden=True``. Returns an empty list when no user
    input was stored yet.
    """
    policy = Policy.from_stored(state.policy, state.provider)
    counter = get_counter(policy.tokenizer if policy.unit == "tokens" else "chars")
    rows = sorted((r for r in state.rows if r.state != "popped"), key=lambda r: r.seq)
    # turns: the user-input rows, with the transcript time of each
    user_rows = [r for r in rows if r.current.kind is None and is_user_input(_Rows.body(r, False))]
    if not user_rows:
        return []
    asked_at: dict[str, Any] = {}
    for t in transcript:
        if t.role == "user" and t.message_ids:
            asked_at[t.message_ids[0]] = t.created_at
    turn_starts = [r.seq for r in user_rows]
    calls = _call_views(rows, turn_starts)
    first = rows[0].current
    priming = counter.count([first]) - counter.count_message(first)  # the counter's per-request tokens
    rs = _Rows(rows, counter)
    turn_times = [(_turn_of(turn_starts, r.seq), _when(asked_at.get(r.message_id))) for r in user_rows]
    groups = _groups(events)
    owner, gap_before = _assign(groups, calls, rs, turn_times, priming)
    conv = _conversion_gap(rows, calls, counter, policy)  # counted where no event measured the gap
    next_gap = _next_gaps(len(calls), owner, gap_before, priming + conv)
    rs.reset()
    at_call: dict[int, list[list[dict[str, Any]]]] = {}
    for o, group in zip(owner, groups):
        at_call.setdefault(o, []).append(group)
    _size_calls(calls, rs, at_call, next_gap, gap_before[0] if gap_before else priming + conv)
    return calls


def chart_records(calls: list[CallView]) -> list[RoundRecord]:
    """The calls as the replay chart's bars: one :class:`RoundRecord` per call (``round`` is
    the call number)."""
    return [RoundRecord(round=c.number, user_text="", calls=1, size_before=c.size_before, size=c.size,
                        full=c.full, events=c.events, categories=c.categories) for c in calls]
