"""What a :class:`~ctxwise.errors.ContextBudgetExceeded` says: the context's sizes by part, the
message that takes the room, the budget that would fit, and a hint for that case.

Parts (policy unit): ``system`` (system prompts), ``tools`` (the request's fixed overhead:
tool schemas and framing, unless :attr:`Budgeting.parts` names some of it), ``user memory``
and ``pinned facts`` (the pinned blocks, from :attr:`Budgeting.parts`), ``summary``,
``history`` (what the stages may clear, summarize or trim), ``user input`` (the current user
input) and ``in-flight calls`` (the tool cycle whose results no model call has read yet).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from ..errors import BudgetReport, ContextBudgetExceeded
from ..messages import Message
from ..policy import Policy
from ..units import last_user_index
from .context import Budgeting, holds_provider_compaction, in_flight_start, pinned_indices

PARTS = ("system", "tools", "user memory", "pinned facts", "summary", "history", "user input", "in-flight calls")
"""The part names, in the order the report lists them."""

_BLOCK_PART = {"facts": "pinned facts", "user_memory": "user memory", "summary": "summary"}


def part_of(messages: Sequence[Message], i: int, current: int | None, flight: int) -> str:
    """The part message ``i`` of ``messages`` belongs to (``current``: the index of the current
    user input or None; ``flight``: where the in-flight cycle starts, ``len`` when none)."""
    m = messages[i]
    if m.role == "system":
        return "system"
    if m.kind in _BLOCK_PART:
        return _BLOCK_PART[m.kind]
    if i >= flight:
        return "in-flight calls"
    return "user input" if i == current else "history"


def context_parts(messages: Sequence[Message], b: Budgeting) -> dict[str, int]:
    """The size of ``messages`` plus ``b.overhead`` by part (see the module docstring), in
    :data:`PARTS` order, parts of size 0 left out; the values sum to ``b.size(messages)``."""
    sizes = dict.fromkeys(PARTS, 0)
    named = {k: v for k, v in b.parts.items() if k in sizes}
    for k, v in named.items():
        sizes[k] += v
    sizes["tools"] += b.overhead - sum(named.values())
    current, flight = last_user_index(list(messages)), in_flight_start(list(messages))
    for i, m in enumerate(messages):
        sizes[part_of(messages, i, current, flight)] += b.size_of(m)
    return {k: v for k, v in sizes.items() if v}


def fits_at(policy: Policy, pinned: int) -> int:
    """The smallest ``Policy.budget`` (``reserve_output`` kept) whose hard limit holds
    ``pinned`` (policy unit): ``Policy.level(hard_limit) >= pinned``."""
    budget = policy.reserve_output + max(1, math.ceil(pinned / policy.hard_limit))
    while int((budget - policy.reserve_output) * policy.hard_limit) < pinned:
        budget += 1
    while budget - 1 > policy.reserve_output and int((budget - 1 - policy.reserve_output) * policy.hard_limit) >= pinned:
        budget -= 1
    return budget


def budget_exceeded(messages: Sequence[Message], b: Budgeting, *, pinned: int, total: int,
                    reference: Sequence[Message], details: dict[str, Any],
                    hint: str | None = None) -> ContextBudgetExceeded:
    """The error for ``messages`` (the context as the stages left it) whose ``pinned`` size
    (policy unit, overhead included) is over the hard limit; ``total`` is its whole size.
    ``reference``: the context as the session holds it (indices in the report and hint are
    positions there). ``details`` go into the report (``hard_limit`` among them). ``hint``: a
    cause the stages know (e.g. reasoning frozen by its binding), put before the computed hint.

    ``fits_at`` is the budget at whose hard limit every pinned message fits as it stands (the
    in-flight results uncut): there the stages need to cut nothing pinned. A smaller budget
    may do when in-flight results can be cut; budget shares (``facts_share``,
    ``user_memory_share``) may let those blocks grow at a larger one."""
    p = b.policy
    hard = int(details["hard_limit"])
    whole = b.overhead + sum(b.size_of(messages[i]) for i in pinned_indices(list(messages)))
    report = BudgetReport(budget=p.effective_budget, pinned=pinned, total=total, unit=p.unit, details=details,
                          parts=context_parts(messages, b), fits_at=fits_at(p, max(pinned, whole)),
                          culprit=_culprit(messages, b, reference))
    computed = _hint(report, p, hard)
    return ContextBudgetExceeded(report, hint=f"{hint} {computed}" if hint and computed else hint or computed)


def _culprit(messages: Sequence[Message], b: Budgeting, reference: Sequence[Message]) -> dict[str, Any] | None:
    """The largest message no stage can shrink (by size in the policy unit) as the report
    names it: pinned, not a summary (a new one may replace it), not an in-flight result when
    ``truncate_in_flight`` cuts those."""
    current, flight = last_user_index(list(messages)), in_flight_start(list(messages))
    cut = b.policy.truncate_in_flight
    fixed = [i for i in sorted(pinned_indices(list(messages))) if messages[i].kind != "summary"
             and not (cut and i > flight and messages[i].role == "tool")]
    if not fixed:
        return None
    i = max(fixed, key=lambda k: b.size_of(messages[k]))
    m = messages[i]
    at = next((k for k, r in enumerate(reference) if r.id == m.id), None)
    return {"index": at, "id": m.id, "part": part_of(messages, i, current, flight), "role": m.role,
            "size": b.size_of(m), "compaction": holds_provider_compaction(m), "newest": at is not None and at == len(reference) - 1,
            "after": None if at is None else len(reference) - 1 - at}


def _hint(r: BudgetReport, p: Policy, hard: int) -> str:
    """What to do, for the case ``r`` shows: the part or message that takes the most room and
    how to get it out, and the budget that would fit."""
    raise_to = f"raise Policy.budget to {r.fits_at} {r.unit}"
    if p.reserve_output:
        raise_to += f" (reserve_output {p.reserve_output} included) or lower reserve_output"
    over = f"pinned content is {r.pinned - hard} {r.unit} over the hard limit {hard} {r.unit}"
    part, size = max(r.parts.items(), key=lambda kv: kv[1]) if r.parts else ("", 0)
    c = r.culprit
    if c is not None and c["index"] is not None and (c["part"] == part or c["size"] >= size):
        return f"{over}; {_message_hint(c, r.unit, p, raise_to)}"
    if part == "tools":
        return (f"{over}; the tool schemas and request framing take {size} {r.unit}: send fewer or shorter tool "
                f"definitions (tools_size), or {raise_to}")
    if part in ("user memory", "pinned facts"):
        share = "user_memory_share" if part == "user memory" else "facts_share"
        return f"{over}; the {part} block takes {size} {r.unit}: lower {share}, or {raise_to}"
    return f"{over}; the largest part is {part} ({size} {r.unit}): {raise_to}"


def _message_hint(c: dict[str, Any], unit: str, p: Policy, raise_to: str) -> str:
    """The hint when message ``c`` takes the most room."""
    where = f"message {c['index']} ({_what(c)}, id {c['id']!r}, {c['size']} {unit})"
    if c["part"] == "system":
        return f"{where} takes the most room: shorten it, or {raise_to}"
    if c["newest"]:
        out = f"{where} takes the most room; it is stored: call session.pop() to remove it (then append a shorter one)"
    else:
        out = (f"{where} takes the most room; it is stored, with {c['after']} message(s) after it: call "
               f"session.pop() {c['after'] + 1} times to remove it and them")
    if c["part"] == "in-flight calls" and c["role"] == "tool" and not p.truncate_in_flight:
        out += ", or set truncate_in_flight=True to cut in-flight results to fit"
    return f"{out}, or {raise_to}"


def _what(c: dict[str, Any]) -> str:
    if c.get("compaction"):
        return "the provider's compaction block, pinned: no stage folds or trims it"
    if c["part"] == "user input":
        return "the user's input"
    if c["part"] == "system":
        return "the system prompt"
    if c["part"] == "in-flight calls":
        return "a tool result in flight" if c["role"] == "tool" else "a tool call in flight"
    return f"in the {c['part']}"
