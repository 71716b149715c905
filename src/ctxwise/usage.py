"""Provider-reported prompt-cache usage of one model call, read from either SDK's response.

A reply's usage says how many input tokens the provider served from its cache and wrote to
it, and, when the request asked for diagnostics, why the cache missed. :func:`reported_usage`
reads it from any of these, as SDK objects or their JSON dicts:

* Anthropic ``Message`` / ``Usage`` (anthropic 2.17 ``types/usage.py``): ``input_tokens`` (the
  uncached part only), ``cache_read_input_tokens``, ``cache_creation_input_tokens``; the
  message's ``diagnostics.cache_miss_reason`` (``types/diagnostics.py``,
  ``types/cache_miss_reason.py``: ``type`` and, for ``messages_changed`` and the like,
  ``cache_missed_input_tokens``).
* OpenAI Chat Completions ``ChatCompletion`` / ``CompletionUsage`` (openai 3.63
  ``types/completion_usage.py``): ``prompt_tokens`` (all input),
  ``prompt_tokens_details.cached_tokens`` and ``.cache_write_tokens``.
* OpenAI Responses ``Response`` / ``ResponseUsage`` (``types/responses/response_usage.py``):
  ``input_tokens`` (all input), ``input_tokens_details.cached_tokens`` and
  ``.cache_write_tokens``; the response's ``prompt_cache_diagnostics``
  (``types/responses/response.py``: ``type`` ``cache_miss`` with ``reason`` and
  ``cache_missed_tokens``, or ``cache_hit`` / ``unavailable`` / ...).

:class:`CacheUsage` holds the figures in one shape; :data:`USAGE_KEY` and
:data:`DIAGNOSTICS_KEY` are where a reply's ``Message.metadata`` keeps them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["DIAGNOSTICS_KEY", "USAGE_KEY", "CacheUsage", "reported_usage", "usage_problem"]

USAGE_KEY = "usage"
"""The ``Message.metadata`` key of a reply's provider usage (the recorded formats keep it there)."""
DIAGNOSTICS_KEY = "cache_diagnostics"
"""The ``Message.metadata`` key of a reply's cache-miss diagnostics (Anthropic ``diagnostics``,
OpenAI ``prompt_cache_diagnostics``)."""


@dataclass(frozen=True)
class CacheUsage:
    """One call's input as the provider billed it, in provider tokens: ``input_tokens`` all of
    it, ``cached_tokens`` served from the cache and ``cache_write_tokens`` written to it (each
    None when not reported: a usage with no token details, e.g. a gateway's); ``miss_reason`` why the cache missed and ``missed_tokens`` how many tokens
    it says the miss cost (None: no diagnostics); ``api`` the shape read (``anthropic``,
    ``openai_chat``, ``openai_responses``)."""

    api: str
    input_tokens: int
    cached_tokens: int | None
    cache_write_tokens: int | None = None
    miss_reason: str | None = None
    missed_tokens: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """The figures as a JSON-able dict."""
        return asdict(self)


def _get(obj: Any, key: str) -> Any:
    """``obj[key]`` for a mapping, ``obj.key`` otherwise; None when absent."""
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _diagnosis(response: Any) -> tuple[str | None, int | None]:
    """``(reason, tokens)`` of a response's cache-miss diagnostics, either SDK."""
    anthropic = _get(_get(response, "diagnostics"), "cache_miss_reason")
    if anthropic is not None:
        return _get(anthropic, "type"), _int(_get(anthropic, "cache_missed_input_tokens"))
    openai = _get(response, "prompt_cache_diagnostics")
    if openai is None:
        return None, None
    kind = _get(openai, "type")
    if kind == "cache_miss":
        return _get(openai, "reason"), _int(_get(openai, "cache_missed_tokens"))
    return kind, None


def reported_usage(response: Any, diagnostics: Any = None) -> CacheUsage | None:
    """The :class:`CacheUsage` of ``response``: a whole response (its ``usage`` and
    diagnostics are read) or a usage object alone, as an SDK object or a dict, in any of the
    shapes the module doc lists. ``diagnostics``: the response's diagnostics when kept apart
    (a ``Message.metadata[DIAGNOSTICS_KEY]``: Anthropic ``diagnostics`` or OpenAI
    ``prompt_cache_diagnostics``). None when no known usage shape is found (a provider that
    reports no cache figures)."""
    usage = _get(response, "usage")
    usage = response if usage is None else usage
    reason, missed = _diagnosis(response)
    if diagnostics is not None and reason is None:
        reason, missed = _diagnosis({"diagnostics": diagnostics} if _get(diagnostics, "cache_miss_reason") is not None
                                    else {"prompt_cache_diagnostics": diagnostics})
    read = _int(_get(usage, "cache_read_input_tokens"))
    written = _int(_get(usage, "cache_creation_input_tokens"))
    uncached = _int(_get(usage, "input_tokens"))
    if read is not None or written is not None:
        total = (uncached or 0) + (read or 0) + (written or 0)
        return CacheUsage("anthropic", total, read or 0, written, reason, missed)
    for api, total_key, details_key in (("openai_responses", "input_tokens", "input_tokens_details"),
                                        ("openai_chat", "prompt_tokens", "prompt_tokens_details")):
        all_in = _int(_get(usage, total_key))
        if all_in is None:
            continue
        details = _get(usage, details_key)
        return CacheUsage(api, all_in, _int(_get(details, "cached_tokens")),
                          _int(_get(details, "cache_write_tokens")), reason, missed)
    return None


_COUNTS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens",
           "prompt_tokens", "completion_tokens", "total_tokens")
_DETAILS = ("prompt_tokens_details", "input_tokens_details", "completion_tokens_details", "output_tokens_details")
_DETAIL_COUNTS = ("cached_tokens", "cache_write_tokens", "reasoning_tokens", "audio_tokens")


def _bad_count(counts: Mapping[str, Any], keys: Sequence[str], where: str) -> str | None:
    """Why one of ``counts``' ``keys`` is no token count (a non-negative integer or null), or None."""
    for k in keys:
        v = counts.get(k)
        if v is not None and (_int(v) is None or v < 0):
            return f"{where}.{k} must be a non-negative integer, got {v!r}"
    return None


def usage_problem(usage: Any) -> str | None:
    """Why ``usage`` (a reply's usage as a JSON dict) is not a provider usage ctxwise can store
    and read, or None when it is: not an object; a token count (``input_tokens``,
    ``prompt_tokens``, ``cache_read_input_tokens``, ... and the ``*_tokens_details`` counts
    ``cached_tokens``, ``cache_write_tokens``, ...) that is not a non-negative integer or null;
    a details value that is not an object; or none of the shapes :func:`reported_usage` reads
    (sources in the module docstring)."""
    if not isinstance(usage, Mapping):
        return f"usage must be an object (the SDK's usage), got {type(usage).__name__}"
    bad = _bad_count(usage, _COUNTS, "usage")
    if bad:
        return bad
    for d in _DETAILS:
        det = usage.get(d)
        if det is None:
            continue
        if not isinstance(det, Mapping):
            return f"usage.{d} must be an object, got {type(det).__name__}"
        bad = _bad_count(det, _DETAIL_COUNTS, f"usage.{d}")
        if bad:
            return bad
    if reported_usage(usage) is None:
        return ("usage is no provider usage ctxwise reads (OpenAI CompletionUsage prompt_tokens / Responses "
                "ResponseUsage input_tokens / Anthropic Usage)")
    return None
