"""The durable record of one compaction action."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Stage = Literal[
    "thinking", "clearing", "summarizing", "trimming", "summarizer_failed", "facts_evicted", "budget_exceeded",
    "normalized", "interrupted",
]
"""``normalized``: a reply was made sendable at append (:mod:`ctxwise.normalize`);
``interrupted``: :meth:`Session.close_pending` answered unanswered tool calls."""


class CompactionEvent(BaseModel):
    """One action of the pipeline (or one failure it recovered from).

    ``size_before`` / ``size_after`` are whole-context sizes in ``unit`` (the policy unit);
    ``trigger`` says which watermark fired and the measured size, e.g.
    ``"size 2412 > clear_at 2000 (0.5 x 4000 tokens)"``. ``affected_ids`` are the message ids
    edited, hidden or summarized; ``summary_id`` the id of a summary message written;
    ``usage`` the summarizer's token usage when a model was called. ``detail`` carries
    stage-specific numbers (e.g. ``{"rounds": [1, 4]}``).
    """

    model_config = ConfigDict(frozen=True)

    stage: Stage
    trigger: str
    unit: str
    size_before: int
    size_after: int
    affected_ids: list[str] = Field(default_factory=list)
    summary_id: str | None = None
    duration_ms: float = 0.0
    usage: dict[str, Any] | None = None
    detail: dict[str, Any] = Field(default_factory=dict)
    at: str = Field(default_factory=lambda: datetime.now(timezone.utc).isoformat())

    def log_record(self) -> dict[str, Any]:
        """The event as one flat JSON-able dict (the engine logs it as one JSON line)."""
        return {"event": "ctxwise.compaction", **self.model_dump(mode="json")}
