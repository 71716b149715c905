"""Summarizers: the protocol, an offline digest, an OpenAI-compatible LLM summarizer, and the
providers' own compaction (Anthropic's ``compaction`` parameter, OpenAI's ``/responses/compact``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import SummarizerError
from .base import SUMMARY_HEADER, Summarizer, SummaryResult, render_transcript
from .digest import DigestSummarizer

if TYPE_CHECKING:
    from ..policy import RuntimeSettings

__all__ = [
    "SUMMARY_HEADER", "Summarizer", "SummarizerError", "SummaryResult", "render_transcript",
    "DigestSummarizer", "OpenAISummarizer", "AnthropicNativeSummarizer", "OpenAINativeSummarizer", "from_settings",
]


def __getattr__(name: str) -> Any:  # the SDKs are imported only when asked for
    if name == "OpenAISummarizer":
        from .openai import OpenAISummarizer

        return OpenAISummarizer
    if name == "AnthropicNativeSummarizer":
        from .anthropic_native import AnthropicNativeSummarizer

        return AnthropicNativeSummarizer
    if name == "OpenAINativeSummarizer":
        from .openai_native import OpenAINativeSummarizer

        return OpenAINativeSummarizer
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
