"""Where recorded sessions come from: files, directories and the built-in sessions.

:func:`collect` turns the command line's paths into conversations. A path that cannot be read
(missing, unknown format, broken) becomes one :class:`SourceError` and the others still load.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import CtxwiseError

SUFFIXES = (".json", ".jsonl")
"""Files a directory walk picks up (READMEs and licences are skipped)."""


def builtin(name: str) -> Path:
    """The path of a built-in session file: ``sample`` (for ``inspect``) or ``demo``
    (for ``replay``)."""
    return Path(str(resources.files("ctxwise") / "data" / f"{name}_session.json"))


@dataclass(frozen=True)
class SourceError:
    """A path (or a conversation in it) that could not be used, and why, in one line.

    ``place`` names it (a path, or ``file.json · task 18``); ``message`` is the line printed.
    A conversation that could not run also has its ``source`` file, the ``error`` raised (its
    class name, e.g. ``ContextBudgetExceeded``) and the ``reason`` in plain words."""

    place: str
    message: str
    source: str = ""
    error: str = ""
    reason: str = ""

    def as_dict(self) -> dict[str, str]:
        """JSON-able: ``place``, ``message``, ``source``, ``error`` and ``reason``."""
        return {"place": self.place, "message": str(self), "source": self.source or self.place,
                "error": self.error, "reason": self.reason or self.message}

    def __str__(self) -> str:
        return self.message if self.message.startswith(self.place) else f"{self.place}: {self.message}"


def conversation_label(conv: Any) -> str:
    """A short name for a conversation: tau2's ``task <id>``, otherwise its id (a long uuid
    cut to 8 characters)."""
    sim = conv.metadata.get("simulation") if isinstance(getattr(conv, "metadata", None), dict) else None
    if isinstance(sim, dict) and sim.get("task_id") is not None:
        return f"task {sim['task_id']}"
    cid = str(conv.id)
    return cid[:8] if len(cid) > 24 else cid


def expand(paths: Iterable[str | Path]) -> tuple[list[Path], list[SourceError]]:
    """Files named by ``paths``: files as given, directories walked (sorted, ``.json`` and
    ``.jsonl`` only). Missing paths become errors."""
    files: list[Path] = []
    errors: list[SourceError] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix.lower() in SUFFIXES)
            if not found:
                errors.append(SourceError(str(p), "no .json or .jsonl files in this directory"))
            files.extend(found)
        elif p.exists():
            files.append(p)
        else:
            errors.append(SourceError(str(p), "no such file or directory"))
    return files, errors


def load_file(path: Path) -> list[Any]:
    """The conversations in ``path`` (``ctxwise.formats.load``). Raises CtxwiseError / OSError."""
    from ..formats import load

    return load(path)


def collect(paths: Iterable[str | Path]) -> tuple[list[Any], list[SourceError]]:
    """Every conversation in ``paths`` (in order) and the errors of the paths that failed."""
    files, errors = expand(paths)
    conversations: list[Any] = []
    for f in files:
        try:
            conversations.extend(load_file(f))
        except CtxwiseError as e:
            errors.append(SourceError(str(f), str(e)))
        except OSError as e:
            errors.append(SourceError(str(f), f"cannot read ({e.strerror or e})"))
    return conversations, errors
