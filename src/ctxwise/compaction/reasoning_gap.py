"""Reasoning switched on mid-session: fold the earlier tool-using turns the provider now refuses.

DeepSeek thinking mode wants every assistant message of a tool-using span (user input to user
input) to carry its ``reasoning_content`` in every later request (source:
api-docs.deepseek.com/guides/thinking_mode; "Missing reasoning_content field in the assistant
message at message index N"). A session that ran without thinking and then turns it on holds
earlier tool-using turns whose replies have no reasoning: nothing can make them valid again
(reasoning cannot be invented). Before this stage such a session was accepted at append and
then every ``prepare()`` raised ``reasoning-content-missing``.

This stage runs before the others (and before the payload is validated): in thinking mode it
replaces the completed turns up to the last such span by one summary segment standing where
they stood (the ordinary summarizing machinery, so the text survives and the transcript keeps
them whole), with a ``summarizing`` event whose trigger names the cause. When the summarizer
fails, the turns are hidden instead (a ``trimming`` event): the payload must be valid. The
current turn is never touched: a reply with reasoning after a reply without it inside one turn
is refused at append (``Session.append``), as the provider would refuse the turn.
"""

from __future__ import annotations

import time

from ..changes import Hide
from ..messages import Message
from ..summarizers.base import Summarizer
from ..units import turns
from .context import Budgeting, StageResult, current_turn_start, task_end
from .stage import StageInput
from .summarizing import summarize_range


def fold_turns_without_reasoning(
    messages: list[Message],
    b: Budgeting,
    size: int,
    summarizer: Summarizer,
    *,
    facts: tuple[str, ...] | list[str] = (),
    thinking: bool | None = None,
) -> StageResult:
    """Summarize (else hide) the completed turns up to the last tool-using span whose replies
    lack reasoning, when the provider wants reasoning passed back in tool spans
    (``reasoning_passback == "tool_spans"``) and the session thinks (``thinking``, else any
    thinking block in ``messages``). ``size`` in the policy unit. Returns the list unchanged
    with no event when nothing is to be folded."""
    from ..providers.profiles import get_profile
    from ..providers.reasoning import check_deepseek_reasoning

    profile = get_profile(b.policy.provider)
    if profile.reasoning_passback != "tool_spans":
        return StageResult(messages)
    thinks = thinking if thinking is not None else any(m.thinking for m in messages)
    if not thinks:
        return StageResult(messages)
    current = current_turn_start(messages)
    bad = [v.index for v in check_deepseek_reasoning(messages[:current], profile, thinking=True)]
    if not bad:
        return StageResult(messages)
    t0 = time.perf_counter()
    last = max(bad)
    cut = next(t.end for t in turns(messages[:current]) if t.start <= last < t.end)
    start = task_end(messages)
    first_segment = start
    while start < len(messages) and messages[start].kind == "summary":
        start += 1
    segments = messages[first_segment:start]
    trigger = (f"reasoning switched on: {len(bad)} earlier assistant message(s) of tool-using turns have no "
               f"reasoning_content, which {b.policy.provider} thinking mode refuses (first: message {bad[0]})")
    # The summary need not be smaller than the turns it stands for: it makes the context valid
    # (the later stages bring it under the budget when it is over).
    res = summarize_range(messages, b, size, summarizer, start, cut, segments, False, facts=facts,
                          trigger=trigger, t0=t0, require_progress=False)
    if res.changes:
        return res
    ids = [m.id for m in messages[start:cut]]
    now = size - sum(b.size_of(m) for m in messages[start:cut])
    ev = b.event("trimming", trigger + "; the summary failed, so they are left out", size, now, ids, t0,
                 detail={"dropped_messages": len(ids), "reasoning_gap": True})
    return StageResult(messages, [*res.events, ev], [Hide(ids, "trimmed")])


class ReasoningGapStage:
    """Runs :func:`fold_turns_without_reasoning` (see the module doc). The pipeline runs it
    first, before the context is validated."""

    name = "reasoning_gap"

    def run(self, inp: StageInput) -> StageResult:
        return fold_turns_without_reasoning(inp.messages, inp.budgeting, inp.size, inp.summarizer,
                                            facts=tuple(inp.facts), thinking=inp.thinking)
