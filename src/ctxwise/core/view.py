"""The frozen view of one session that every plan starts from, and the dependencies plans
compute with (counter, sizer, pipeline, summarizer: process objects, never persisted)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from types import MappingProxyType
from typing import Any, Mapping, Sequence

from ..compaction import Budgeting, Pipeline
from ..memory.session import Facts
from ..messages import Message
from ..normalize import omitted
from ..policy import Policy
from ..summarizers import Summarizer
from ..tokens import Counter


def _frozen(sizes: Mapping[str, int]) -> Mapping[str, int]:
    return MappingProxyType(dict(sizes))


@dataclass(frozen=True)
class SessionView:
    """One session as the engine knows it between two calls; never changed in place.

    ``messages``: the context in send order; ``sizes``: message id to size in the policy unit
    (every message of ``messages``, and hidden ones the store returned); ``ids``: every
    message id taken (popped and omitted ones included); ``size``: the sum of the sizes of
    ``messages`` (overhead excluded); ``next_id``: the last number of the session's own
    ``msg-NNNNNN`` ids; ``lossy``: user input left the context; ``failed_summaries``: keys of
    ranges whose summary failed; ``thinking_seen``: a message carried reasoning (None: not
    looked at yet); ``thinking_declared``: what the last ``prepare(thinking=...)`` said (never
    persisted); ``facts``: the fact books; ``version``: the stored version the view is at;
    ``saved_state``: the stored state dict as :func:`dump` writes it (None: unknown)."""

    policy: Policy
    version: int
    messages: tuple[Message, ...] = ()
    sizes: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    ids: frozenset[str] = frozenset()
    size: int = 0
    next_id: int = 0
    lossy: bool = False
    failed_summaries: frozenset[str] = frozenset()
    thinking_seen: bool | None = None
    thinking_declared: bool | None = None
    facts: Facts = field(default_factory=Facts.empty)
    saved_state: str | None = None

    @property
    def provider(self) -> str:
        """The provider the payload is built for."""
        return self.policy.provider


@dataclass(frozen=True)
class Deps:
    """What plans compute with besides the view: ``counter`` (the policy unit), ``sizer``
    (message sizes as the stages count them), ``overhead`` (tool schemas and reply priming, in
    the policy unit), ``size_key`` (what stored sizes were measured with), ``head`` (the
    user-memory block, read when the session opened), the compaction ``pipeline``, the
    ``summarizer``, ``chars`` (the ``chars`` counter) and ``session_id`` (for log lines)."""

    counter: Counter
    sizer: Budgeting
    overhead: int
    size_key: str
    head: tuple[Message, ...]
    pipeline: Pipeline
    summarizer: Summarizer
    chars: Counter
    session_id: str

    def sz(self, m: Message) -> int:
        """One message's size in the policy unit, as the stages count it."""
        return self.sizer.size_of(m)


def now() -> str:
    """The time of an event (UTC, ISO 8601)."""
    return datetime.now(timezone.utc).isoformat()


def dump(obj: Any) -> str:
    """``obj`` as canonical JSON (sorted keys, no spaces): how states are compared."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def state_of(view: SessionView, size_key: str) -> dict[str, Any]:
    """The engine's session state the store keeps with a write (restored on reopen)."""
    return {"v": 1, "next_id": view.next_id, "lossy": view.lossy,
            "failed_summaries": sorted(view.failed_summaries), "size_key": size_key,
            "facts": view.facts.state(), "thinking_seen": view.thinking_seen is True}


def changed_state(view: SessionView, size_key: str) -> tuple[dict[str, Any] | None, str]:
    """``(the state to store, or None when it equals the stored one; its dump)``."""
    st = state_of(view, size_key)
    dumped = dump(st)
    return (None if dumped == view.saved_state else st), dumped


def view_from_state(state: Any, policy: Policy, deps: Deps, facts: Facts) -> SessionView:
    """The view of a session stored with the engine's state (``state.state["v"] == 1``) or not
    stored yet: sizes as stored when measured the same way, else counted. ``state`` is a
    :class:`~ctxwise.store.SessionState`."""
    st = state.state or {}
    same = st.get("size_key") == deps.size_key
    sizes = {r.message_id: (r.size if same and r.size is not None else deps.sz(r.current)) for r in state.rows}
    return _view(state, policy, sizes, {r.message_id for r in state.rows}, facts,
                 next_id=int(st.get("next_id", 0)), lossy=bool(st.get("lossy", False)),
                 failed_summaries=frozenset(st.get("failed_summaries", [])),
                 thinking_seen=True if st.get("thinking_seen") else None, saved_state=dump(st))


def view_rebuilt(state: Any, full: Any, events: Sequence[dict[str, Any]], policy: Policy, deps: Deps,
                 facts: Facts) -> SessionView:
    """The view of a session stored before the engine kept its state, rebuilt once from its
    whole history (``full``: the state loaded with hidden rows; ``events``: its events)."""
    failed = {e["detail"]["key"] for e in events
              if e.get("stage") == "summarizer_failed" and isinstance(e.get("detail"), dict) and "key" in e["detail"]}
    return _view(state, policy, {r.message_id: deps.sz(r.current) for r in state.rows},
                 {r.message_id for r in full.rows}, facts,
                 next_id=sum(1 for r in full.rows if r.message_id.startswith("msg-")),
                 lossy=any(r.state in ("summarized", "trimmed") for r in full.rows),
                 failed_summaries=frozenset(failed), thinking_seen=None, saved_state=None)


def _view(state: Any, policy: Policy, sizes: dict[str, int], ids: set[str], facts: Facts, **flags: Any) -> SessionView:
    context = tuple(r.current for r in state.rows if omitted(r.current) is None)  # omitted replies: transcript only
    return SessionView(policy=policy, version=state.version, messages=context, sizes=_frozen(sizes),
                       ids=frozenset(ids), size=sum(sizes[m.id] for m in context), facts=facts, **flags)


def with_sizes(sizes: Mapping[str, int], drop: Sequence[str] = (), add: Mapping[str, int] | None = None) -> Mapping[str, int]:
    """``sizes`` without ``drop`` and with ``add`` (a new mapping)."""
    out = dict(sizes)
    for k in drop:
        out.pop(k, None)
    out.update(add or {})
    return _frozen(out)
