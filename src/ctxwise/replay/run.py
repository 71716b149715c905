"""A whole ``ctxwise replay`` run: many conversations, each with compaction on and off.

:func:`run` loads the paths, replays every conversation through a
:class:`~ctxwise.engine.ContextManager` (stored under user ``replay``) and, unless told not to,
again with ``enabled=false`` (user ``replay-off``) for the side-by-side numbers. A conversation
that fails is reported as one line and the others still run.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import ContextManager, CtxwiseError, Policy, RuntimeSettings
from .runner import Measures, SessionResult, replay_conversation
from .sources import SourceError, builtin, collect, conversation_label

DEMO_POLICY: dict[str, Any] = {"unit": "tokens", "budget": 5000, "provider": "deepseek"}
"""Policy overrides for the built-in demo when no budget or unit is given: small enough that
thinking pruning, clearing and summarizing all fire on its 14 rounds. The provider is DeepSeek
in thinking mode, as in the seeds' system: its reasoning is sent back, so it counts."""


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

    @property
    def failed(self) -> bool:
        """True when some path or session could not be replayed."""
        return bool(self.errors)

    def as_dict(self) -> dict[str, Any]:
        """The whole run as one JSON-able document."""
        on, off = self.totals()
        return {
            "run_id": self.run_id,
            "db": self.db,
            "paths": self.paths,
            "policy": self.policy.model_dump(mode="json"),
            "cache_ratio": self.cache_ratio,
            "summary": {"sessions": len(self.sessions), "failed": len(self.errors),
                        "ctxwise": on.as_dict(), "off": off.as_dict() if off else None},
            "sessions": [s.as_dict() for s in self.sessions],
            "errors": [{"place": e.place, "message": str(e)} for e in self.errors],
        }


def session_name(conv: Any, many_in_file: bool) -> str:
    """A readable name: the file name, plus the conversation id when the file holds several."""
    src = Path(str(getattr(conv, "source", "") or "session")).name
    return f"{src} · {conversation_label(conv)}" if many_in_file else src


def run(
    paths: Sequence[str],
    policy: Policy,
    *,
    db: str = "sqlite:///ctxwise.db",
    cache_ratio: float = 0.1,
    limit: int | None = None,
    baseline: bool = True,
    progress: Callable[[int, int, str], None] | None = None,
    loaded: tuple[list[Any], list[SourceError]] | None = None,
    runtime: RuntimeSettings | None = None,
) -> RunResult:
    """Replay every conversation in ``paths`` (the built-in demo when empty) under ``policy``.

    ``progress(done, total, name)`` is called before and after each conversation. Raises only
    for problems of the whole run (the store cannot be opened); per-session failures land in
    ``RunResult.errors``. ``loaded`` is ``collect(paths)`` when the caller has read them already.
    ``runtime``: the process settings (which summarizer; default the offline digest).
    """
    shown = [str(p) for p in paths] or [str(builtin("demo"))]
    result = RunResult(policy=policy, paths=shown, cache_ratio=cache_ratio, db=db,
                       run_id=time.strftime("%Y%m%dT%H%M%S") + "-" + secrets.token_hex(2),
                       runtime=runtime or RuntimeSettings())
    conversations, result.errors = loaded if loaded is not None else collect(shown)
    if limit is not None:
        conversations = conversations[:limit]
    per_source: dict[str, int] = {}
    for c in conversations:
        per_source[str(c.source)] = per_source.get(str(c.source), 0) + 1
    on = ContextManager(db, policy, runtime=result.runtime)
    off = ContextManager(on.store, policy.with_(enabled=False)) if baseline else None
    total = len(conversations)
    try:
        for i, conv in enumerate(conversations):
            name = session_name(conv, per_source[str(conv.source)] > 1)
            if progress:
                progress(i, total, name)
            key = f"{result.run_id}/{i:04d}"
            # every recorded conversation is another customer: its own user id, so long-term
            # memory from one recording never leaks into the next
            user = f"recorded-user/{key}"
            try:
                r = replay_conversation(on, f"replay/{user}", key, conv.messages, name=name, source=str(conv.source),
                                        format=str(conv.format), cache_ratio=cache_ratio)
                if off is not None:
                    r.baseline = replay_conversation(off, f"replay-off/{user}", key, conv.messages, name=name,
                                                     source=str(conv.source), format=str(conv.format),
                                                     cache_ratio=cache_ratio).measures
                result.sessions.append(r)
            except CtxwiseError as e:
                result.errors.append(SourceError(name, f"{name}: {e}"))
            except Exception as e:  # a bug or an unexpected shape: report it, keep going
                result.errors.append(SourceError(name, f"{name}: internal error {type(e).__name__}: {e}"))
        if progress:
            progress(total, total, "")
    finally:
        on.close()
    return result
