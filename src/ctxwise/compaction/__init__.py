"""Compaction: stages over a context (typed changes and events out) and the pipeline that runs them."""

from .clearing import ClearingStage, clear_tool_results
from .context import Budgeting, StageResult, opaque_view, pinned_indices, sent_view
from .events import CompactionEvent
from .pipeline import Pipeline, PipelineResult, compact
from .placeholder import placeholder_text, render_input
from .stage import Stage, StageInput
from .summarizing import SummarizingStage, summarize_old_turns
from .summary_fit import SummaryFitStage, fit_summary
from .thinking import ThinkingStage, prune_thinking
from .trimming import TrimCurrentTurnStage, TrimOldTurnsStage, TruncateInFlightStage, trim_old_turns

__all__ = [
    "Budgeting", "ClearingStage", "CompactionEvent", "Pipeline", "PipelineResult", "Stage", "StageInput",
    "StageResult", "SummarizingStage", "SummaryFitStage", "ThinkingStage", "TrimCurrentTurnStage", "TrimOldTurnsStage",
    "TruncateInFlightStage", "clear_tool_results", "compact", "fit_summary", "opaque_view", "pinned_indices", "placeholder_text",
    "prune_thinking", "render_input", "sent_view", "summarize_old_turns", "trim_old_turns",
]
