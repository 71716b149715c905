"""Anthropic's own compaction as a summarizer: the signed ``compaction`` block it returns is
the summary, kept verbatim where the summary stands and sent back as it came.

Wire (anthropic 2.17 ``resources/beta/messages/messages.py`` ``create(compaction=...)``,
``types/beta/beta_compaction_config_param.py``, ``beta_compaction_block.py``; docs
platform.claude.com/docs/en/build-with-claude/compaction, "Compaction on demand"): a
``POST /v1/messages`` with ``compaction: {"type": "summarize", "instructions"?}`` and the beta
header ``compact-2026-09-04`` is a compaction request: the conversation in ``messages`` is
summarized and the response holds only the resulting ``compaction`` block (``stop_reason``
``"compaction"``), which later requests send back unchanged in place of the messages it
summarizes. A block whose ``content`` is null is a failed compaction (a no-op for the server):
it raises :class:`~ctxwise.errors.SummarizerError`, so the stages fall back.

The material is sent as ctxwise renders it for Anthropic (reasoning left out: a sub-range of
the conversation is not the prefix any thinking block was produced on), after a user note
giving the summary so far when one is rolled in. The block's readable ``content`` is the
summary text; the whole block rides in :attr:`SummaryResult.detail` under ``"native"``, and
on a session whose provider is ``anthropic`` the summary message carries it as a
:class:`~ctxwise.messages.ProviderBlock` (counted by its JSON text, rendered verbatim).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Sequence

from .._optional import require
from ..errors import SummarizerError
from ..messages import Message
from .base import SummaryResult, without_reasoning

if TYPE_CHECKING:
    import httpx

BETA = "compact-2026-09-04"
"""The beta header of the ``compaction`` parameter (anthropic 2.17 ``types/anthropic_beta_param.py``)."""


def compaction_messages(material: Sequence[Message], previous: str | None) -> list[dict[str, Any]]:
    """The ``messages`` of the compaction request: ``material`` rendered for Anthropic without
    reasoning, after a user note with ``previous`` (the summary so far) when given; a leading
    user note when the material starts with an assistant message (Anthropic wants a user
    message first)."""
    from ..providers import render

    rendered = render([without_reasoning(m) for m in material], "anthropic")
    msgs: list[dict[str, Any]] = list(rendered["messages"]) if isinstance(rendered, dict) else []
    head = []
    if previous:
        head.append(f"Summary of the conversation before the part below:\n{previous}")
    if not msgs or msgs[0].get("role") != "user":
        head.append("The conversation to summarize follows.")
    if head:
        msgs.insert(0, {"role": "user", "content": [{"type": "text", "text": "\n\n".join(head)}]})
    return msgs


class AnthropicNativeSummarizer:
    """Summaries written by Anthropic's server-side compaction (see the module doc).

    ``base_url``/``api_key`` default to ``ANTHROPIC_BASE_URL``/``ANTHROPIC_API_KEY``;
    ``instructions`` replace the server's summarization prompt (None: the server's own);
    ``timeout_s`` bounds each attempt and ``max_retries`` the attempts after the first (the
    SDK's own); ``max_tokens`` is the request's output cap. Pass ``http_client`` (an
    ``httpx.Client``) to route requests. Raises :class:`~ctxwise.errors.MissingExtra` without
    the ``anthropic`` package."""

    name = "anthropic_native"
    provider = "anthropic"
    """The session provider whose wire takes the returned block back verbatim."""

    def __init__(self, model: str = "claude-sonnet-5-5", *, base_url: str | None = None, api_key: str | None = None,
                 instructions: str | None = None, timeout_s: float = 60.0, max_retries: int = 1,
                 max_tokens: int = 4096, http_client: httpx.Client | None = None) -> None:
        anthropic = require("anthropic", "anthropic", "the Anthropic compaction summarizer")
        self.model = model
        self.instructions = instructions
        self.max_tokens = max_tokens
        self._client = anthropic.Anthropic(
            base_url=base_url or os.environ.get("ANTHROPIC_BASE_URL"),
            api_key=api_key or os.environ.get("ANTHROPIC_API_KEY") or "not-set",
            timeout=timeout_s, max_retries=max_retries, http_client=http_client)

    def summarize(self, material: Sequence[Message], previous: str | None, target_chars: int, *,
                  facts: Sequence[str] = ()) -> SummaryResult:
        """One compaction request over ``material``; the block's text as the summary and the
        whole block in ``detail["native"]`` (``{"provider", "kind", "raw"}``). ``target_chars``
        and ``facts`` go into the instructions only when ``instructions`` was given (the
        server's own prompt is used as it is otherwise). Raises SummarizerError for a failed
        request, a stop reason other than ``compaction``, or a block without content."""
        anthropic = require("anthropic", "anthropic", "the Anthropic compaction summarizer")
        config: dict[str, Any] = {"type": "summarize"}
        if self.instructions:
            extra = "\n".join(f"- {f}" for f in facts)
            config["instructions"] = (f"{self.instructions}\nAt most {target_chars} characters."
                                      + (f"\nQuote these user facts verbatim:\n{extra}" if extra else ""))
        try:
            resp = self._client.beta.messages.create(model=self.model, max_tokens=self.max_tokens,
                                                     messages=compaction_messages(material, previous),
                                                     compaction=config,
                                                     betas=[BETA])
        except anthropic.AnthropicError as e:
            raise SummarizerError(f"compaction request failed: {type(e).__name__}: {e}") from None
        if resp.stop_reason != "compaction":
            raise SummarizerError(f"compaction did not finish (stop_reason={resp.stop_reason!r})")
        blocks = [b for b in resp.content if getattr(b, "type", None) == "compaction"]
        if len(blocks) != 1 or not getattr(blocks[0], "content", None):
            raise SummarizerError("compaction returned no summary (no compaction block, or its content is null)")
        raw = blocks[0].model_dump(mode="json", exclude_none=True)
        usage = resp.usage.model_dump(mode="json", exclude_none=True) if resp.usage else None
        return SummaryResult(text=str(raw["content"]).strip(), usage=usage,
                             detail={"native": {"provider": "anthropic", "kind": "compaction", "raw": raw}})
