"""A whole ``ctxwise replay`` run: many conversations, each with compaction on and off.

:func:`run` loads the paths, replays every conversation through a
:class:`~ctxwise.engine.ContextManager` (stored under user ``replay``) and, unless told not to,
again with ``enabled=false`` (user ``replay-off``) for the side-by-side numbers. Each recording
can be replayed as the provider it was recorded with (``per_recording``: one manager per
provider, all on one store). A conversation that cannot run (its system prompt alone exceeds
the budget, say) is reported with the reason and the others still run.
"""

from __future__ import annotations

import secrets
import time
from collections import Counter as Tally
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import ContextBudgetExceeded, ContextManager, CtxwiseError, Policy, RuntimeSettings, get_counter
from .defaults import recording_provider
from .records import Measures, SessionResult
from .runner import replay_conversation
from .sources import SourceError, builtin, collect, conversation_label

DEMO_POLICY: dict[str, Any] = {"unit": "tokens", "budget": 4000, "provider": "deepseek"}
"""Policy overrides for the built-in demo when no budget or unit is given: small enough that
every layer has work on its 14 rounds (thinking pruning, clearing, summarizing; 27 of its 32
calls would not fit sent whole). The provider is DeepSeek in thinking mode, as in the seeds'
system: its reasoning is sent back, so it counts."""

Progress = Callable[[int, int, str], None]
"""``progress(done, total, name)``: called before each conversation and once at the end."""


@dataclass
class RunResult:
    """Everything one run produced: the policy, the process settings, per-session results,
    errors and totals."""

    policy: Policy
    paths: list[str]
    sessions: list[SessionResult] = field(default_factory=list)
    errors: list[SourceError] = field(default_factory=list)
    cache_ratio: float = 0.1
    db: str = ""
    run_id: str = ""
    runtime: RuntimeSettings = field(default_factory=RuntimeSettings)

    def totals(self) -> tuple[Measures, Measures | None]:
        """Measures summed over sessions, with compaction on and off (None when not run)."""
        on, off = Measures(), Measures()
        have_off = False
        for s in self.sessions:
            on.add(s.measures)
            if s.baseline is not None:
                off.add(s.baseline)
                have_off = True
        return on, (off if have_off else None)

    def providers(self) -> dict[str, int]:
        """How many sessions were replayed as each provider, most first."""
        return dict(Tally(s.provider or self.policy.provider for s in self.sessions).most_common())

    @property
    def failed(self) -> bool:
        """True when some path or session could not be replayed."""
        return bool(self.errors)

    def as_dict(self) -> dict[str, Any]:
        """The whole run as one JSON-able document; ``errors`` lists what could not run, each
        with its ``reason``."""
        on, off = self.totals()
        return {
            "run_id": self.run_id,
            "db": self.db,
            "paths": self.paths,
            "policy": self.policy.model_dump(mode="json"),
            "cache_ratio": self.cache_ratio,
            "summary": {"sessions": len(self.sessions), "failed": len(self.errors), "providers": self.providers(),
                        "ctxwise": on.as_dict(), "off": off.as_dict() if off else None},
            "sessions": [s.as_dict() for s in self.sessions],
            "errors": [e.as_dict() for e in self.errors],
        }


def session_name(conv: Any, many_in_file: bool) -> str:
    """A readable name: the file name, plus the conversation id when the file holds several."""
    src = Path(str(getattr(conv, "source", "") or "session")).name
    return f"{src} · {conversation_label(conv)}" if many_in_file else src


def why_not(conv: Any, policy: Policy, error: Exception) -> str:
    """Why ``conv`` could not be replayed under ``policy``, in plain words: for a
    :class:`~ctxwise.ContextBudgetExceeded`, whether the system prompt alone is over the budget
    or what must be sent whole is; otherwise the error's own message."""
    if not isinstance(error, ContextBudgetExceeded):
        return str(error) if isinstance(error, CtxwiseError) else f"internal error {type(error).__name__}: {error}"
    unit, budget = policy.unit, policy.effective_budget
    system = sum(get_counter(policy.counter_name).count_message(m) for m in conv.messages if m.role == "system")
    if policy.count_system and system > budget:
        return f"its system prompt alone is {system:,} {unit}, over the budget of {budget:,} {unit}"
    return (f"what must be sent whole (system prompt, the current input, the tool calls in flight) is "
            f"{error.report.pinned:,} {unit}, over the budget of {budget:,} {unit}")


class _Managers:
    """One :class:`~ctxwise.ContextManager` per provider, with compaction on and (for the
    baseline) off, all on the store of the first."""

    def __init__(self, db: str, policy: Policy, runtime: RuntimeSettings, baseline: bool) -> None:
        first = ContextManager(db, policy, runtime=runtime)
        self.policy, self.runtime, self.baseline, self.first = policy, runtime, baseline, first
        self.on: dict[str, ContextManager] = {policy.provider: first}
        self.off: dict[str, ContextManager] = {}

    def pair(self, provider: str) -> tuple[ContextManager, ContextManager | None]:
        """The managers for ``provider``: compaction on, and off (None without a baseline)."""
        on = self.on.get(provider)
        if on is None:
            on = self.on[provider] = ContextManager(self.first.store, self.policy.with_(provider=provider),
                                                    runtime=self.runtime)
        if not self.baseline:
            return on, None
        off = self.off.get(provider)
        if off is None:
            off = self.off[provider] = ContextManager(self.first.store, on.policy.with_(enabled=False))
        return on, off

    def close(self) -> None:
        """Release the store (the other managers share it)."""
        self.first.close()


def _replay_one(managers: _Managers, conv: Any, key: str, name: str, cache_ratio: float,
                provider: tuple[str, str]) -> SessionResult:
    """Replay ``conv`` as ``provider`` (``(name, why)``) with compaction on, then off."""
    on, off = managers.pair(provider[0])
    # every recorded conversation is another customer: its own user id, so long-term memory
    # from one recording never leaks into the next
    user = f"recorded-user/{key}"
    source, shape = str(conv.source), str(conv.format)
    r = replay_conversation(on, f"replay/{user}", key, conv.messages, name=name, source=source, format=shape,
                            cache_ratio=cache_ratio)
    r.provider_reason = provider[1]
    if off is not None:
        r.baseline = replay_conversation(off, f"replay-off/{user}", key, conv.messages, name=name, source=source,
                                         format=shape, cache_ratio=cache_ratio).measures
    return r


def run(
    paths: Sequence[str],
    policy: Policy,
    *,
    db: str = "sqlite:///ctxwise.db",
    cache_ratio: float = 0.1,
    limit: int | None = None,
    baseline: bool = True,
    progress: Progress | None = None,
    loaded: tuple[list[Any], list[SourceError]] | None = None,
    runtime: RuntimeSettings | None = None,
    per_recording: bool = False,
    provider_reason: str = "the policy's provider",
) -> RunResult:
    """Replay every conversation in ``paths`` (the built-in demo when empty) under ``policy``.

    ``per_recording``: each conversation is replayed and priced as the provider it was recorded
    with (:func:`~ctxwise.replay.defaults.recording_provider`); otherwise all as
    ``policy.provider``, for ``provider_reason``. ``progress(done, total, name)`` is called
    before each conversation and at the end. Raises only for problems of the whole run (the
    store cannot be opened); a conversation that cannot run lands in ``RunResult.errors`` with
    its reason. ``loaded`` is ``collect(paths)`` when the caller has read them already.
    ``runtime``: the process settings (which summarizer; default the offline digest).
    """
    shown = [str(p) for p in paths] or [str(builtin("demo"))]
    result = RunResult(policy=policy, paths=shown, cache_ratio=cache_ratio, db=db,
                       run_id=time.strftime("%Y%m%dT%H%M%S") + "-" + secrets.token_hex(2),
                       runtime=runtime or RuntimeSettings())
    conversations, result.errors = loaded if loaded is not None else collect(shown)
    conversations = conversations[:limit] if limit is not None else conversations
    per_source = Tally(str(c.source) for c in conversations)
    managers = _Managers(db, policy, result.runtime, baseline)
    try:
        for i, conv in enumerate(conversations):
            name = session_name(conv, per_source[str(conv.source)] > 1)
            if progress:
                progress(i, len(conversations), name)
            provider = recording_provider(conv) if per_recording else (policy.provider, provider_reason)
            try:
                result.sessions.append(_replay_one(managers, conv, f"{result.run_id}/{i:04d}", name, cache_ratio,
                                                   provider))
            except Exception as e:  # a session that cannot run, or a bug: report it, keep going
                reason = why_not(conv, managers.pair(provider[0])[0].policy, e)
                result.errors.append(SourceError(name, f"{name}: {reason}", source=str(conv.source),
                                                 error=type(e).__name__, reason=reason))
        if progress:
            progress(len(conversations), len(conversations), "")
    finally:
        managers.close()
    return result
