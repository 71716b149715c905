"""OpenAI's own compaction as a summarizer: the items ``POST /responses/compact`` returns (the
user messages, then one encrypted ``compaction`` item) stand where the summary stands, sent
back verbatim on the Responses wire.

Wire (openai 3.63 ``resources/responses/responses.py`` ``compact()``,
``types/responses/response_compact_params.py``, ``compacted_response.py``,
``response_compaction_item.py``; docs developers.openai.com/api/reference/resources/responses/methods/compact):
the request takes ``model`` and ``input`` (Responses input items); the response is a
``response.compaction`` object whose ``output`` is "a list of all user messages, followed by a
single compaction item" (``{"type": "compaction", "id", "encrypted_content"}``); later
requests send those items back as input in place of the items they stand for. The compaction
item is opaque (encrypted): its summary cannot be read, so the summary text ctxwise keeps
beside it (:attr:`SummaryResult.text`) only names it; on a session whose provider is
``openai_responses`` the summary message carries the returned items as
:class:`~ctxwise.messages.ProviderBlock` objects (counted by their JSON text, rendered as the
items themselves). Any failure raises :class:`~ctxwise.errors.SummarizerError`.
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


def compaction_input(material: Sequence[Message], previous: str | None) -> list[dict[str, Any]]:
    """The ``input`` of the compact request: ``material`` rendered for the Responses API
    without reasoning, after a user message with ``previous`` (the summary so far) when given."""
    from ..providers import render

    items = render([without_reasoning(m) for m in material], "openai_responses")
    out: list[dict[str, Any]] = list(items) if isinstance(items, list) else []
    if previous:
        out.insert(0, {"role": "user", "content": f"Summary of the conversation before the part below:\n{previous}"})
    return out


class OpenAINativeSummarizer:
    """Summaries written by OpenAI's ``/responses/compact`` (see the module doc).

    ``base_url``/``api_key`` default to ``OPENAI_BASE_URL``/``OPENAI_API_KEY``; ``timeout_s``
    bounds each attempt and ``max_retries`` the attempts after the first (the SDK's own). Pass
    ``http_client`` (an ``httpx.Client``) to route requests. Raises
    :class:`~ctxwise.errors.MissingExtra` without the ``llm`` extra."""

    name = "openai_native"
    provider = "openai_responses"
    """The session provider whose wire takes the returned items back verbatim."""

    def __init__(self, model: str = "gpt-5.6-sol", *, base_url: str | None = None, api_key: str | None = None,
                 timeout_s: float = 60.0, max_retries: int = 1, http_client: httpx.Client | None = None) -> None:
        openai = require("openai", "llm", "the OpenAI compaction summarizer")
        self.model = model
        self._client = openai.OpenAI(base_url=base_url or os.environ.get("OPENAI_BASE_URL"),
                                     api_key=api_key or os.environ.get("OPENAI_API_KEY") or "not-set",
                                     timeout=timeout_s, max_retries=max_retries, http_client=http_client)

    def summarize(self, material: Sequence[Message], previous: str | None, target_chars: int, *,
                  facts: Sequence[str] = ()) -> SummaryResult:
        """One compact request over ``material``. Returns a text naming the compaction item and
        ``detail["native"]`` (``{"provider", "kind", "raw", "items"}``: the compaction item and
        every returned item in order). ``target_chars`` and ``facts`` are not sent (the
        endpoint takes no summary prompt). Raises SummarizerError for a failed request or an
        output without exactly one compaction item last."""
        openai = require("openai", "llm", "the OpenAI compaction summarizer")
        try:
            resp = self._client.responses.compact(model=self.model, input=compaction_input(material, previous))
        except openai.OpenAIError as e:
            raise SummarizerError(f"compaction request failed: {type(e).__name__}: {e}") from None
        items = [o.model_dump(mode="json", exclude_none=True) for o in resp.output]
        kinds = [i.get("type") for i in items]
        if not items or kinds.count("compaction") != 1 or kinds[-1] != "compaction" \
                or not items[-1].get("encrypted_content"):
            raise SummarizerError(f"compaction returned no compaction item last (output types {kinds})")
        item = items[-1]
        usage = resp.usage.model_dump(mode="json", exclude_none=True) if resp.usage else None
        text = (f"[The earlier conversation is held by OpenAI compaction item {item.get('id', '?')} "
                f"(encrypted), with {len(items) - 1} user message(s) kept verbatim.]")
        return SummaryResult(text=text, usage=usage, detail={"native": {"provider": "openai_responses",
                                                                        "kind": "compaction", "raw": item,
                                                                        "items": items}})
