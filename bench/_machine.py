"""The machine a benchmark ran on, described the same way in every bench/results/*.md.

    from _machine import machine, now
    lines = [f"- date: {now()}", *machine(("tiktoken",))]
"""

from __future__ import annotations

import os
import platform
import subprocess
from collections.abc import Sequence
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def now() -> str:
    """The current time as the reports print it (UTC, to the minute)."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _sh(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=REPO).stdout.strip() or "?"
    except OSError:
        return "?"


def _memory() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                return f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    return "?"


def _version(package: str) -> str:
    try:
        return f"{package} {metadata.version(package)}"
    except metadata.PackageNotFoundError:
        return f"{package} (not installed)"


def machine(packages: Sequence[str] = ()) -> list[str]:
    """Markdown list lines: ``uname -a``; cores, memory, Python and the load average (taken
    now, so call it at the end of the run); the versions of ctxwise and ``packages``; the
    commit, and whether src/ had uncommitted changes."""
    try:
        load = f"{os.getloadavg()[0]:.1f}"
    except OSError:
        load = "?"
    names = ["ctxwise", *(p for p in packages if p != "ctxwise")]
    dirty = _sh(["git", "status", "--porcelain", "--", "src"]) not in ("", "?")
    return [
        f"- machine: `{_sh(['uname', '-a'])}`",
        f"- cores: {os.cpu_count()} (nproc {_sh(['nproc'])}), memory {_memory()}, Python {platform.python_version()}; "
        f"load average at the end {load} (the machine was shared with other work: timings are noisy)",
        f"- packages: {', '.join(_version(p) for p in names)}",
        f"- ctxwise source: commit {_sh(['git', 'rev-parse', '--short', 'HEAD'])}"
        + (" with uncommitted changes under src/ (other work in progress)" if dirty else ""),
    ]
