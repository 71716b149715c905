"""Compaction: small pure stages over a context, and the pipeline that runs them."""

from .clearing import clear_tool_results, placeholder_text, render_input
from .context import Budgeting, StageResult, pinned_indices
from .events import CompactionEvent
from .pipeline import PipelineResult, compact
from .summarizing import summarize_old_turns
from .thinking import prune_thinking
from .trimming import trim_old_turns

__all__ = [
    "Budgeting", "CompactionEvent", "PipelineResult", "StageResult", "clear_tool_results", "compact",
    "pinned_indices", "placeholder_text", "prune_thinking", "render_input", "summarize_old_turns", "trim_old_turns",
]
