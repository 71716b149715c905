"""Shared test fixtures. Real recorded sessions are read from ../shared (never copied here)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CTXWISE_SHARED", REPO.parent / "shared"))
TRAJECTORIES = SHARED / "data" / "trajectories"
CASES = SHARED / "cases"

# Hypothesis profiles (HYPOTHESIS_PROFILE=...): "ci" is what `make test` runs (>= 1,000 examples
# per property test), "bench" the 10,000-example run of bench/properties.py, "dev" a quick look.
_HYP = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("ci", max_examples=1_000, **_HYP)
settings.register_profile("bench", max_examples=10_000, **_HYP)
settings.register_profile("dev", max_examples=100, **_HYP)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The ../shared folder (cases/, data/trajectories/). Missing is a failure."""
    assert SHARED.is_dir(), f"shared folder not found at {SHARED} (set CTXWISE_SHARED)"
    return SHARED


# -- store backends: SQLite file and PostgreSQL (scripts/with-postgres.sh) --------------------
#
# `store_url` runs a test on both backends. PostgreSQL comes from CTXWISE_TEST_PG_URL, which
# scripts/with-postgres.sh exports; each test gets its own schema (xdist-safe). Without the
# URL the PostgreSQL variants are deselected with a printed warning; under CI=true a missing
# URL is a usage error.

PG_URL_ENV = "CTXWISE_TEST_PG_URL"
_PG_MISSING = (
    "PostgreSQL tests DESELECTED: CTXWISE_TEST_PG_URL is not set "
    "(run through `bash scripts/with-postgres.sh ...` or `make test`)."
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "postgresql: the test runs against the PostgreSQL test server")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get(PG_URL_ENV):
        return
    pg = [it for it in items if it.get_closest_marker("postgresql") is not None]
    if not pg:
        return
    if os.environ.get("CI") == "true":
        raise pytest.UsageError(f"CI=true but {PG_URL_ENV} is not set: {len(pg)} PostgreSQL tests cannot run")
    config.hook.pytest_deselected(items=pg)
    items[:] = [it for it in items if it.get_closest_marker("postgresql") is None]


def pytest_report_header(config: pytest.Config) -> str:
    url = os.environ.get(PG_URL_ENV)
    return f"store backends: sqlite, postgresql ({url})" if url else f"WARNING: {_PG_MISSING}"


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # type: ignore[no-untyped-def]
    if not os.environ.get(PG_URL_ENV):
        terminalreporter.write_sep("!", _PG_MISSING, yellow=True)


@pytest.fixture
def pg_schema_url() -> "Iterator[str]":
    """A PostgreSQL URL whose search_path is a fresh schema, dropped after the test."""
    import uuid

    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url
    from sqlalchemy.schema import CreateSchema, DropSchema

    base = os.environ.get(PG_URL_ENV)
    if not base:
        pytest.fail(f"{PG_URL_ENV} is not set")
    schema = "t_" + uuid.uuid4().hex[:16]
    admin = create_engine(base)
    with admin.begin() as conn:
        conn.execute(CreateSchema(schema))
    url = make_url(base).update_query_dict({"options": f"-csearch_path={schema}"})
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.begin() as conn:
            conn.execute(DropSchema(schema, cascade=True))
        admin.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database URL: a SQLite file in tmp_path, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ctxwise.db'}"
    return request.getfixturevalue("pg_schema_url")


# -- the conformance suite: every SessionStore / MemoryStore implementation -------------------


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql), "memory"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path):
    """An empty store of each implementation: SqlStore on a SQLite file, SqlStore on a fresh
    PostgreSQL schema, InMemoryStore. Tests taking it form the conformance suite."""
    from ctxwise.store import InMemoryStore, SqlStore

    if request.param == "memory":
        store = InMemoryStore()
    elif request.param == "sqlite":
        store = SqlStore(f"sqlite:///{tmp_path / 'ctxwise.db'}")
    else:
        store = SqlStore(request.getfixturevalue("pg_schema_url"))
    yield store
    store.close()


# tests/suites holds the frameworks' own suites, run by tests/suites/runner.py one at a time (and
# by tests/suites/test_suites.py): the main run collects none of their files (the vendored
# AgentScope tests import what only that suite installs). Kept here, not in a tests/suites
# conftest.py: a second module named `conftest` would shadow this one for `from conftest import`.
collect_ignore_glob = ["suites/vendor/*", "suites/suite_*.py", "suites/ctxwise_*_plugin.py",
                       "suites/plugin_*.py", "suites/runner.py"]
