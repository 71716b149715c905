"""The package's own source files as modules, for the tests that read its code (layers, import
cycles, the contract)."""

from __future__ import annotations

from pathlib import Path

import ctxwise

SRC = Path(ctxwise.__file__).resolve().parent
"""``src/ctxwise``."""


def module_name(path: Path) -> str:
    """``ctxwise.formats.tau2`` for ``src/ctxwise/formats/tau2.py`` (a package is its ``__init__``)."""
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)
