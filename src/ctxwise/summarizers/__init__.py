"""Summarizers: the protocol, an offline digest and an OpenAI-compatible LLM summarizer."""

from .base import SUMMARY_HEADER, Summarizer, SummarizerError, SummaryResult, render_transcript
from .digest import DigestSummarizer

__all__ = [
    "SUMMARY_HEADER", "Summarizer", "SummarizerError", "SummaryResult", "render_transcript",
    "DigestSummarizer", "OpenAISummarizer", "from_policy",
]


def __getattr__(name: str):  # the openai SDK is imported only when asked for
    if name == "OpenAISummarizer":
        from .openai import OpenAISummarizer

        return OpenAISummarizer
    raise AttributeError(name)


def from_policy(policy) -> Summarizer:
    """The summarizer a :class:`~ctxwise.policy.Policy` names (``digest`` or ``openai``)."""
    if policy.summarizer == "openai":
        from .openai import OpenAISummarizer

        return OpenAISummarizer(
            policy.summarizer_model,
            base_url=policy.summarizer_base_url,
            timeout_s=policy.summarizer_timeout_s,
            max_retries=policy.summarizer_max_retries,
        )
    return DigestSummarizer()
