"""What an Anthropic payload needs from the beta Messages API, said at ``prepare()`` time.

A few Anthropic blocks exist only in the beta request types: the standard
``client.messages.create(...)`` (``anthropic.types.MessageParam``, whose content is
``anthropic/types/content_block_param.py``) refuses them, and only
``client.beta.messages.create(..., betas=[...])`` (``anthropic.types.beta.BetaMessageParam``,
``anthropic/types/beta/beta_content_block_param.py``) takes them. Of the blocks ctxwise stores,
those are (SDK ``anthropic`` 2.17):

* ``mcp_tool_use`` / ``mcp_tool_result``: the MCP connector
  (``beta/beta_mcp_tool_use_block_param.py``, ``beta/beta_request_mcp_tool_result_block_param.py``),
  beta header ``mcp-client-*`` (``anthropic/types/anthropic_beta_param.py`` lists
  ``mcp-client-2025-04-04``, ``mcp-client-2025-11-20``, ``mcp-client-2026-09-15``: the one the
  app's ``mcp_servers`` are written for);
* ``compaction``: server-side compaction's signed summary
  (``beta/beta_compaction_block_param.py``), beta header ``compact-*``
  (``compact-2026-01-12``, ``compact-2026-09-04``).

The other beta-only block types (``advisor_tool_result``, ``fallback``, ``mcp_tool_listing``,
``tool_addition``, ``tool_removal``) are refused at append, so no payload holds them. ctxwise
sets no header and picks no client: :func:`beta_requirements` says what the payload needs
(``Prepared.beta``), the app sends it that way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..messages import Message, ProviderBlock, fold_on
from .profiles import ProviderProfile, get_profile

__all__ = ["BETA_FEATURES", "BetaRequirement", "beta_requirements"]


@dataclass(frozen=True)
class BetaRequirement:
    """One beta feature an Anthropic payload needs: ``feature`` (``"mcp-client"``,
    ``"compact"``), ``headers`` (the ``anthropic-beta`` names the SDK knows for it, oldest
    first; send the one your request's other parameters are written for), ``block_types`` (the
    beta-only block types found), ``message_ids`` (the canonical messages holding them, in
    order) and ``detail`` (the same in words). Send the payload with
    ``client.beta.messages.create(**payload, betas=[<one of headers>], ...)``."""

    feature: str
    headers: tuple[str, ...]
    block_types: tuple[str, ...]
    message_ids: tuple[str, ...]
    detail: str


BETA_FEATURES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "mcp-client": (("mcp_tool_use", "mcp_tool_result"),
                   ("mcp-client-2025-04-04", "mcp-client-2025-11-20", "mcp-client-2026-09-15")),
    "compact": (("compaction",), ("compact-2026-01-12", "compact-2026-09-04")),
}
"""Beta feature -> (the Anthropic block types only it makes sendable, its ``anthropic-beta``
header names in SDK 2.17 ``anthropic/types/anthropic_beta_param.py``)."""

_FEATURE_OF = {kind: feature for feature, (kinds, _) in BETA_FEATURES.items() for kind in kinds}
_Found = tuple[tuple[str, str], ...]
"""``(block type, message id)`` of every beta-only block found, in list order."""


def _step(found: _Found, _: int, m: Message) -> _Found:
    """One message of :func:`beta_requirements`' fold: ``found`` plus the beta-only Anthropic
    block types ``m`` holds."""
    kinds = [b.kind for b in m.blocks if isinstance(b, ProviderBlock) and b.provider == "anthropic"
             and b.kind in _FEATURE_OF]
    return found + tuple((k, m.id) for k in dict.fromkeys(kinds)) if kinds else found


def beta_requirements(messages: Sequence[Message], provider: str | ProviderProfile) -> list[BetaRequirement]:
    """The beta features the payload rendered from ``messages`` for ``provider`` needs, one
    :class:`BetaRequirement` per feature in :data:`BETA_FEATURES` order; ``[]`` when the
    standard Messages API takes it, and for every provider whose wire is not Anthropic's.
    Raises :class:`~ctxwise.errors.PolicyError` for an unknown provider. Pure (a list that
    extends the previous call's costs its new messages, :func:`ctxwise.messages.fold_on`)."""
    if get_profile(provider).wire != "anthropic":
        return []
    found: dict[str, tuple[dict[str, None], dict[str, None]]] = {}
    none: _Found = ()
    for kind, mid in fold_on(messages, "providers/beta", None, none, _step):  # resumed from the last list
        kinds, ids = found.setdefault(_FEATURE_OF[kind], ({}, {}))
        kinds[kind] = None
        ids[mid] = None
    out = []
    for feature, (_, headers) in BETA_FEATURES.items():
        if feature not in found:
            continue
        types, held = tuple(found[feature][0]), tuple(found[feature][1])
        many = len(types) > 1 or len(held) > 1
        out.append(BetaRequirement(
            feature, headers, types, held,
            f"{' / '.join(types)} block{'s' if many else ''} in message{'s' if len(held) > 1 else ''} "
            f"{', '.join(held)}: only the beta Messages API takes {'them' if many else 'it'}; send this payload "
            f"with client.beta.messages.create(..., betas=[{headers[-1]!r} or the {feature}-* version your "
            f"request is written for])"))
    return out
