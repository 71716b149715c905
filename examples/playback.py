"""Recorded sessions as scripts for offline agent runs (used by the examples, tests and bench).

A recorded tau-bench / tau2-bench conversation (``../shared/data/trajectories``) becomes a
:class:`Recording`: the system prompt, what the assistant said before the first user message,
and one :class:`Turn` per user message with the assistant messages the model produced in that
turn, in order. A scripted model plays those back; :class:`RecordedResults` answers each tool
call with the result recorded for it (matched by tool name and arguments, in recorded order).
Nothing here calls a network.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxwise import Message
from ctxwise.formats import load

SHARED = Path(os.environ.get("CTXWISE_SHARED", Path(__file__).resolve().parents[2] / "shared"))
TRAJECTORIES = SHARED / "data" / "trajectories"
RETAIL = TRAJECTORIES / "tau2-bench" / "retail_gpt-4.1_1trial.json"


@dataclass
class Turn:
    """One user message and the assistant messages recorded after it (tool calls, then the answer)."""

    user: str
    assistant: list[Message]
    messages: list[Message] = field(default_factory=list)
    """The recorded messages the turn plays: the user message, the assistant messages and
    their tool results."""


@dataclass
class Recording:
    """A recorded session as a script: ``system`` prompt, ``opening`` (assistant messages before
    the first user message), ``turns``, and the recorded tool ``results``."""

    id: str
    system: str
    opening: list[Message]
    turns: list[Turn]
    results: "RecordedResults"
    tools: dict[str, list[str]] = field(default_factory=dict)
    """Tool name -> the argument names it was called with (a schema for the scripted tools)."""
    head: list[Message] = field(default_factory=list)
    """The recorded system message and opening."""

    def played(self) -> list[Message]:
        """The recorded messages a full playback goes through, in order (for scoring the calls
        against what was recorded)."""
        return [*self.head, *(m for t in self.turns for m in t.messages)]


class RecordedResults:
    """The recorded tool results, answered in recorded order per (tool name, arguments)."""

    def __init__(self) -> None:
        self._queue: dict[tuple[str, str], deque[tuple[str, bool]]] = defaultdict(deque)
        self.texts: list[str] = []
        """Every recorded result text, in recorded order."""

    @staticmethod
    def key(name: str, args: dict[str, Any]) -> tuple[str, str]:
        return name, json.dumps(args, sort_keys=True, ensure_ascii=False)

    def add(self, name: str, args: dict[str, Any], text: str, is_error: bool) -> None:
        self._queue[self.key(name, args)].append((text, is_error))
        self.texts.append(text)

    def answer(self, name: str, args: dict[str, Any]) -> tuple[str, bool]:
        """``(text, is_error)`` recorded for this call; an error text when none is left."""
        q = self._queue.get(self.key(name, args))
        if not q:
            return f"no recorded result for {name}({json.dumps(args)})", True
        return q.popleft()


def recording(conv: Any, prefix: str = "") -> Recording:
    """A loaded :class:`ctxwise.formats.Conversation` as a :class:`Recording`. Message ids get
    ``prefix`` so several recordings can share one thread. A turn keeps its assistant messages
    up to the first one without tool calls (the answer that ends an agent run)."""
    system, opening, turns, head = "", [], [], []
    results = RecordedResults()
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    tools: dict[str, list[str]] = {}
    for m in conv.messages:
        m = m.model_copy(update={"id": f"{prefix}{m.id}"})
        if m.role == "system":
            system = m.text
            head.append(m)
        elif m.role == "user" and not m.tool_results:
            turns.append(Turn(m.text, [], [m]))
        elif m.role == "assistant":
            for u in m.tool_uses:
                calls[u.id] = (u.name, u.input)
                names = tools.setdefault(u.name, [])
                names.extend(k for k in u.input if k not in names)
            if not turns:
                opening.append(m)
                head.append(m)
            elif not turns[-1].assistant or turns[-1].assistant[-1].tool_uses:
                turns[-1].assistant.append(m)
                turns[-1].messages.append(m)
        elif m.role == "tool" and turns and turns[-1].assistant and turns[-1].assistant[-1].tool_uses:
            asked = {u.id for u in turns[-1].assistant[-1].tool_uses}
            if all(r.tool_use_id in asked for r in m.tool_results):
                turns[-1].messages.append(m)
        for r in m.tool_results:
            if r.tool_use_id in calls:
                name, args = calls[r.tool_use_id]
                results.add(name, args, r.text, r.state == "error")
    turns = [t for t in turns if t.assistant and not t.assistant[-1].tool_uses]
    return Recording(conv.id, system, opening, turns, results, tools, head)


def recordings(path: Path = RETAIL, n: int = 1, *, longest: bool = True) -> list[Recording]:
    """``n`` recordings from ``path`` (the ones with the most user turns first when ``longest``)."""
    convs = load(path)
    recs = [recording(c, prefix=f"{c.id[:8]}-") for c in convs]
    if longest:
        recs.sort(key=lambda r: (-len(r.turns), r.id))
    return recs[:n]


def merged(recs: list[Recording]) -> Recording:
    """Several recordings as one long session of one user: the first one's system prompt and
    opening, every turn in order, all recorded results (asked in recorded order) and tools."""
    results = RecordedResults()
    tools: dict[str, list[str]] = {}
    for r in recs:
        for k, q in r.results._queue.items():
            results._queue[k].extend(q)
        results.texts.extend(r.results.texts)
        for name, params in r.tools.items():
            names = tools.setdefault(name, [])
            names.extend(p for p in params if p not in names)
    return Recording("+".join(r.id[:8] for r in recs), recs[0].system, recs[0].opening,
                     [t for r in recs for t in r.turns], results, tools, recs[0].head)
