"""The durable record of one compaction action, and what of it is logged.

The engine logs each event as one JSON line on the ``ctxwise`` logger at INFO
(:meth:`CompactionEvent.log_record`): the stage, trigger, sizes, ids and counts only, never
what a user or a tool wrote (an evicted fact, a normalized reply's original text, a summarizer's
error quoting the model). The whole event, user text included, goes to the
:data:`CONTENT_LOGGER` logger at DEBUG only when the environment variable
:data:`CONTENT_SWITCH` is ``1`` (read at each event).
"""

from __future__ import annotations

import json
import logging
import os
from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

CONTENT_LOGGER = "ctxwise.content"
"""The logger that receives whole events (user text included), at DEBUG, when switched on."""
CONTENT_SWITCH = "CTXWISE_LOG_CONTENT"
"""The environment variable that switches content logging on (``1``); off by default."""
SAFE_TEXT_KEYS = frozenset({"summarizer", "summary", "key", "rule", "rules", "id", "ids", "kind", "reason_code",
                            "api", "miss_reason", "prices", "parent"})
"""Keys of ``detail`` whose string values are names or ids ctxwise wrote, logged as they are;
every other string in ``detail`` is logged as its length only."""

_content_log = logging.getLogger(CONTENT_LOGGER)

Stage = Literal[
    "thinking", "clearing", "summarizing", "trimming", "summarizer_failed", "facts_evicted", "budget_exceeded",
    "normalized", "interrupted", "rendered", "cache_usage", "loop_closed", "branched",
]
"""``normalized``: a reply was made sendable at append (:mod:`ctxwise.normalize`);
``rendered``: the payload of a call needed render-time conversions (emitted, not stored;
:mod:`ctxwise.providers.convert`);
``interrupted``: :meth:`Session.close_pending` answered unanswered tool calls;
``cache_usage``: a reply's provider-reported cache tokens beside the cost model's prediction
for the call (:meth:`Session.record_usage`);
``loop_closed``: an open tool loop whose bound reasoning froze it was closed by a ctxwise note
(:mod:`ctxwise.compaction.loop_close`);
``branched``: the session continues another one whose framework record was changed under it
(:meth:`Session.record_branch`; ``detail["parent"]`` names that session)."""


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
        """The event as one flat JSON-able dict for the INFO log line: every field, with
        ``detail`` reduced to numbers, booleans, ids and names (:data:`SAFE_TEXT_KEYS`); any
        other string becomes ``"<N chars>"``. When :data:`CONTENT_SWITCH` is ``1``, the whole
        event is also logged at DEBUG on :data:`CONTENT_LOGGER`."""
        full = {"event": "ctxwise.compaction", **self.model_dump(mode="json")}
        if os.environ.get(CONTENT_SWITCH) == "1" and _content_log.isEnabledFor(logging.DEBUG):
            _content_log.debug(json.dumps(full, ensure_ascii=False))
        return {**full, "detail": _redacted(full["detail"], "")}


def _redacted(value: Any, key: str) -> Any:
    """``value`` (a part of ``detail`` under ``key``) without user text: numbers, booleans and
    None as they are, strings under :data:`SAFE_TEXT_KEYS` as they are, other strings as their
    length. Events nest a few levels at most; the walk is bounded by that."""
    if isinstance(value, dict):
        return {k: _redacted(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v, key) for v in value]
    if isinstance(value, str) and key not in SAFE_TEXT_KEYS:
        return f"<{len(value)} chars>"
    return value
