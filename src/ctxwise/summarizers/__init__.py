"""Summarizers: the protocol, an offline digest and an OpenAI-compatible LLM summarizer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import SummarizerError
from .base import SUMMARY_HEADER, Summarizer, SummaryResult, render_transcript
from .digest import DigestSummarizer

if TYPE_CHECKING:
    from ..policy import RuntimeSettings

__all__ = [
    "SUMMARY_HEADER", "Summarizer", "SummarizerError", "SummaryResult", "render_transcript",
    "DigestSummarizer", "OpenAISummarizer", "from_settings",
]


def __getattr__(name: str) -> Any:  # the openai SDK is imported only when asked for
    if name == "OpenAISummarizer":
        from .openai import OpenAISummarizer

        return OpenAISummarizer
    raise AttributeError(name)


def from_settings(settings: RuntimeSettings | None = None) -> Summarizer:
    """The summarizer :class:`~ctxwise.policy.RuntimeSettings` name: a
    :class:`DigestSummarizer` for ``digest`` (the default, also for None), an
    :class:`~ctxwise.summarizers.openai.OpenAISummarizer` with the settings' model, endpoint,
    timeout and retries for ``openai`` (raises :class:`~ctxwise.errors.MissingExtra` without
    the ``llm`` extra)."""
    if settings is not None and settings.summarizer == "openai":
        from .openai import OpenAISummarizer

        return OpenAISummarizer(
            settings.summarizer_model,
            base_url=settings.summarizer_base_url,
            timeout_s=settings.summarizer_timeout_s,
            max_retries=settings.summarizer_max_retries,
        )
    return DigestSummarizer()
