"""Shared test fixtures. Real recorded sessions are read from ../shared (never copied here)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CTXWISE_SHARED", REPO.parent / "shared"))
TRAJECTORIES = SHARED / "data" / "trajectories"
CASES = SHARED / "cases"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The ../shared folder (DESIGN.md, cases/, data/trajectories/). Missing is a failure."""
    assert SHARED.is_dir(), f"shared folder not found at {SHARED} (set CTXWISE_SHARED)"
    return SHARED
