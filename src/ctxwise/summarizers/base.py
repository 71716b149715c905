"""The Summarizer protocol and the helpers every summarizer shares."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

from ..errors import SummarizerError as SummarizerError  # re-exported: it lives in ctxwise.errors
from ..messages import Message, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock

SUMMARY_HEADER = (
    "[Summary of the earlier conversation, written by ctxwise. It is background for the "
    "assistant, not a new instruction from the user.]"
)


@dataclass
class SummaryResult:
    """``text`` is the summary body (without header); ``usage`` the model's token usage
    (``{"prompt_tokens", "completion_tokens"}``) or None for offline summarizers."""

    text: str
    usage: dict[str, Any] | None = None
    detail: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Summarizer(Protocol):
    """Writes the summary that stands where a range of old turns stood.

    ``material`` is the list of messages being replaced (whole turns, never a split tool
    cycle); ``previous`` the text of the summary being rolled into this one (or None);
    ``target_chars`` the size to aim for, in characters; ``facts`` pinned user facts to quote
    verbatim. Returns a :class:`SummaryResult`; raises :class:`SummarizerError` on failure.
    """

    name: str

    def summarize(
        self,
        material: Sequence[Message],
        previous: str | None,
        target_chars: int,
        *,
        facts: Sequence[str] = (),
    ) -> SummaryResult: ...


@runtime_checkable
class ToolRulesSummarizer(Protocol):
    """A :class:`Summarizer` that also reads ``Policy.tool_rules`` (tool name to the argument
    naming its resource, :mod:`ctxwise.resources`), so the files and commands a tool loop's
    summary lists come from the same keys clearing uses: it sets ``reads_tool_rules`` and its
    ``summarize`` takes ``tool_rules=`` (a mapping, or None for the default keys). The
    summarizing stage passes the session policy's rules to such a summarizer when it has any;
    any other summarizer is called as :class:`Summarizer` says."""

    name: str
    reads_tool_rules: bool

    def summarize(
        self,
        material: Sequence[Message],
        previous: str | None,
        target_chars: int,
        *,
        facts: Sequence[str] = (),
        tool_rules: Mapping[str, str] | None = None,
    ) -> SummaryResult: ...


def without_reasoning(m: Message) -> Message:
    """``m`` without its thinking blocks (``m`` itself when it has none): what a summary request
    sends of a message, since a sub-range of a conversation is not the prefix any reasoning
    block was produced on."""
    if not any(isinstance(b, ThinkingBlock) for b in m.blocks):
        return m
    return m.model_copy(update={"blocks": [b for b in m.blocks if not isinstance(b, ThinkingBlock)]})


def render_transcript(material: Sequence[Message], *, result_chars: int = 600) -> str:
    """The material as plain text, one line per block, for a model to read.

    Speakers are labelled (``USER:``, ``ASSISTANT:``, ``TOOL name:``); tool results are cut
    to ``result_chars`` characters; thinking is omitted.
    """
    lines: list[str] = []
    for m in material:
        for b in m.blocks:
            if isinstance(b, TextBlock) and b.text.strip():
                who = "SUMMARY SO FAR" if m.kind == "summary" else m.role.upper()
                lines.append(f"{who}: {b.text.strip()}")
            elif isinstance(b, ToolUseBlock):
                lines.append(f"ASSISTANT called {b.name}({json.dumps(b.input, ensure_ascii=False)})")
            elif isinstance(b, ToolResultBlock):
                body = b.text.strip()
                if len(body) > result_chars:
                    body = body[:result_chars] + f"... [{len(b.text) - result_chars} more characters]"
                lines.append(f"TOOL {b.name or ''} ({b.state}): {body}")
            elif isinstance(b, ThinkingBlock):
                continue
    return "\n".join(lines)
