"""Replaying a long recording as bench/long.py does, for the tests of long tool loops."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ctxwise import ContextManager, Policy
from ctxwise.formats import load
from ctxwise.replay import metrics


def drive(path: Path, budget: int, provider: str = "openai", **policy: Any) -> tuple[list, list, list, list]:
    """Replay the recording at ``path`` under the default preset at ``budget`` tokens (``policy``
    overrides its fields): ``(histories, payloads as sent, outputs, events)``, one entry per model
    call (``events[i]`` is the list of call ``i``'s compaction events)."""
    conv = load(str(path))
    conv = conv[0] if isinstance(conv, list) else conv
    pol = Policy.preset("default", budget=budget, unit="tokens", provider=provider, **policy)
    histories, payloads, outputs, events = [], [], [], []
    with ContextManager("memory://", pol) as cm:
        s = cm.session("u", "s")
        for new, history, m in metrics.model_calls(conv.messages):
            if new:
                s.append(new)
            p = s.prepare()
            events.append(list(p.events))
            histories.append(history)
            payloads.append(metrics.as_sent(list(p.messages), provider))
            outputs.append(m)
            s.append([m])
    return histories, payloads, outputs, events
