"""Plans that add messages: :func:`plan_append`, :func:`plan_append_numbered`,
:func:`plan_close_pending`."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Mapping, Sequence

from ..compaction import CompactionEvent
from ..errors import MessageNotStorable, PayloadInvalid, Violation
from ..messages import Marker, Message, TextBlock, ToolResultBlock
from ..normalize import normalize_batch, omitted
from ..providers.append import Thinking, check_append, coerce, pending_calls
from ..providers.binding import bound_digests
from .plan import AppendWrite, Plan
from .view import Deps, SessionView, changed_state, with_sizes

EMPTY_RESULT_MARKER = "(no output)"


def mark_empty_result(m: Message) -> Message:
    """A tool message whose result has no output gets a one-line marker instead.

    Providers reject empty non-final content (Anthropic: "all messages must have non-empty
    content except for the optional final assistant message"), and recorded sessions hold
    such results (tau-bench has 83). The marker, ``(no output)``, says what happened; the
    message's marker dict records ``empty_marked`` so nothing is hidden (cases README
    notation ``3*``).
    """
    if m.role != "tool" or not any(_blank_result(r) for r in m.tool_results):
        return m
    blocks = [
        b.model_copy(update={"output": [TextBlock(text=EMPTY_RESULT_MARKER)]}) if isinstance(b, ToolResultBlock) and _blank_result(b) else b
        for b in m.blocks
    ]
    return m.model_copy(update={"blocks": blocks, "metadata": Marker.with_(m, empty_marked=True)})


def _blank_result(r: ToolResultBlock) -> bool:
    return not r.output or all(isinstance(o, TextBlock) and not o.text.strip() for o in r.output)


def plan_append(view: SessionView, deps: Deps, items: Sequence[Message | Mapping[str, Any]],
                notes: dict[int, list[dict[str, Any]]] | None = None) -> Plan[int]:
    """Append ``items`` (Messages or canonical dicts) in one ``SessionStore.append``. The result
    is the version before the write (the shell returns the committed one). Raises
    PayloadInvalid naming the place in the session and the rule when the batch breaks the
    message rules; nothing is planned then."""
    base = len(view.messages)
    batch = [mark_empty_result(m) for m in coerce(list(items), base, view.provider)]
    if not batch:
        return Plan(view, None, view.version)
    batch, normalized = normalize_batch(batch, base, notes)
    visible = [m for m in batch if omitted(m) is None]  # omitted replies stay in the transcript only
    seen = check_append(view.messages, view.ids, visible, batch, view.provider,
                        Thinking(view.thinking_seen, view.thinking_declared))
    stamped = bind_reasoning(view, deps, visible)
    if stamped:
        batch = [stamped.get(m.id, m) for m in batch]
        visible = [stamped.get(m.id, m) for m in visible]
    sizes = [deps.sz(m) for m in batch]
    numbered = [int(m.id[4:]) for m in batch if m.id.startswith("msg-") and m.id[4:].isdigit()]
    new = replace(view, facts=view.facts.observe(visible, view.policy), next_id=max([view.next_id, *numbered]),
                  thinking_seen=True if any(m.thinking for m in visible) else seen)
    state, dumped = changed_state(new, deps.size_key)
    size_of = {m.id: n for m, n in zip(batch, sizes)}
    added = {m.id: size_of[m.id] for m in visible}
    new = replace(new, messages=view.messages + tuple(visible), ids=view.ids | {m.id for m in batch},
                  sizes=with_sizes(view.sizes, add=added), size=view.size + sum(added.values()), saved_state=dumped)
    records: tuple[CompactionEvent, ...] = ()
    if normalized:
        total = view.size + deps.overhead
        records = (CompactionEvent(
            stage="normalized", trigger="a reply the provider would refuse when sent back", unit=view.policy.unit,
            size_before=total, size_after=total, affected_ids=[n["id"] for n in normalized],
            detail={"messages": normalized}),)
    return Plan(new, AppendWrite(tuple(batch), tuple(sizes), state), view.version, records=records,
                logs=_warnings(visible, view, deps), index_base=base, remember=tuple(visible))


def bind_reasoning(view: SessionView, deps: Deps, visible: list[Message]) -> dict[str, Message]:
    """``{id: message}`` for each assistant message of ``visible`` with reasoning, its marker's
    ``bound_prefix`` set, when the policy's profile binds reasoning to its prefix (else ``{}``).

    What the model saw when it wrote the reply is the request that produced it: the context as
    the last ``prepare()`` left it, with its pinned blocks where it placed them (the view at
    append time: nothing is edited between a prepare and the reply's append), then the messages
    of this append before the reply (:func:`ctxwise.providers.binding.bound_digests`)."""
    from .prepare import with_pinned

    if not view.policy.profile.binds_reasoning or not any(m.role == "assistant" and m.thinking for m in visible):
        return {}
    block = view.facts.block(view.policy, deps.counter, view.lossy)[1]
    sent = with_pinned(list(view.messages), list(deps.head), block, view.policy.facts_mode)
    digests = bound_digests([*sent, *visible])
    return {m.id: m.model_copy(update={"metadata": Marker.with_(m, bound_prefix=digests[len(sent) + k])})
            for k, m in enumerate(visible) if m.role == "assistant" and m.thinking}


def _warnings(batch: list[Message], view: SessionView, deps: Deps) -> tuple[str, ...]:
    """A system prompt alone above ``clear_target``: clearing can never reach its target."""
    p = view.policy
    if p.clear_target <= 0 or p.edit_when != "watermark":
        return ()
    return tuple(json.dumps({
        "event": "ctxwise.policy_warning", "session": deps.session_id,
        "message": (f"the system prompt alone ({deps.sz(m)} {p.unit}) is above clear_target "
                    f"({p.level(p.clear_target)}): clearing can never reach its target, "
                    "so it will fire in small batches; raise the budget or lower clear_target's share")})
        for m in batch if m.role == "system" and deps.sz(m) > p.level(p.clear_target))


def plan_append_numbered(view: SessionView, deps: Deps, read: Sequence[Message], keep_id: Sequence[bool] | None,
                         notes: dict[int, list[dict[str, Any]]] | None = None) -> Plan[int]:
    """:func:`plan_append` of ``read`` with the session's own ids (``msg-000001``, ...) given to
    every message whose ``keep_id`` is not true."""
    n = view.next_id
    batch = []
    for k, m in enumerate(read):
        if not (keep_id and keep_id[k]):
            n += 1
            m = m.model_copy(update={"id": f"msg-{n:06d}"})
        batch.append(m)
    return plan_append(view, deps, batch, notes)


def plan_close_pending(view: SessionView, deps: Deps, reason: str) -> Plan[int]:
    """Answer every tool call still waiting for its result with an interruption result
    (state ``error``, text ``"interrupted: <reason>"``): one append, then one ``interrupted``
    event recorded. The result is the number of calls answered (0: nothing planned)."""
    pending = pending_calls(view.messages)
    if not pending:
        return Plan(view, None, 0)
    text = f"interrupted: {reason}" if reason else "interrupted"
    batch = [Message(id="pending", role="tool", blocks=[ToolResultBlock(
        tool_use_id=u.id, name=u.name, state="error", output=[TextBlock(text=text)])],
        metadata=Marker.with_({}, interrupted=True)) for u in pending]
    plan = plan_append_numbered(view, deps, batch, None)
    after = plan.view
    total = after.size + deps.overhead
    event = CompactionEvent(stage="interrupted", trigger=text, unit=view.policy.unit, size_before=total,
                            size_after=total, affected_ids=[m.id for m in after.messages[-len(batch):]],
                            detail={"tool_use_ids": [u.id for u in pending]})
    return replace(plan, result=len(pending), records=plan.records + (event,))


def refused(e: MessageNotStorable, base: int, provider: str) -> Exception:
    """The error an append raises when the store refused message ``e.index`` of a batch whose
    first message stands at ``base``: PayloadInvalid for an id already stored, else
    MessageNotStorable naming the place in the session."""
    if e.rule == "duplicate-message-id":
        return PayloadInvalid(provider, [Violation(base + e.index, e.rule, e.detail)])
    return e.at(base)

