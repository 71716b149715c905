"""``ctxwise replay``: recorded sessions through the context manager, compaction on and off.

The options become a :class:`~ctxwise.replay.setup.ReplayRequest`; the policy, the process
settings and the recordings come from :func:`~ctxwise.replay.setup.plan_replay`, the run from
:func:`~ctxwise.replay.run.run` and what is printed from :func:`~ctxwise.replay.render.run_text`.
Exit codes: 0 every session ran; 1 some could not (each is one ``error:`` line, and ``--json``
lists it with its reason); 2 a usage mistake or nothing could run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..errors import CtxwiseError
from .console import DEFAULT_DB, err, fail, first_line, out, shown

if TYPE_CHECKING:
    from ..replay.run import Progress as ProgressFn
    from ..replay.run import RunResult
    from ..replay.setup import ReplayRequest, ReplaySetup


class SummarizerName(str, Enum):
    """The summarizers ``--summarizer`` takes."""

    digest = "digest"
    openai = "openai"


class UnitName(str, Enum):
    """The budget units ``--unit`` takes."""

    chars = "chars"
    tokens = "tokens"


@contextmanager
def progress_bar() -> Iterator[ProgressFn | None]:
    """A progress callback drawing a bar on stderr for runs of several sessions, when stderr is
    a terminal; None otherwise (a pipe, a file, a test: nothing is drawn). The bar is removed
    when the run ends."""
    if not err.is_terminal:
        yield None
        return
    bar = Progress(TextColumn("replaying"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TextColumn("{task.description}"), console=err, transient=True)
    task = bar.add_task("", total=None)

    def update(done: int, total: int, name: str) -> None:
        if total > 1 and not bar.live.is_started:
            bar.start()
        bar.update(task, completed=done, total=total, description=name)

    try:
        yield update
    finally:
        bar.stop()


def _announce(setup: ReplaySetup, json_out: bool) -> None:
    """Say which settings came from the recordings, and warn when the OpenAI summarizer has
    no key."""
    if setup.notes:
        (err if json_out else out).print("defaults from the recording (pass --provider / --budget to choose):\n  "
                                         + "\n  ".join(setup.notes), soft_wrap=True, highlight=False, markup=False)
    if setup.runtime.summarizer == "openai" and not os.environ.get("OPENAI_API_KEY"):
        err.print("[yellow]warning:[/] --summarizer openai: OPENAI_API_KEY is not set; summaries will fail "
                  "and the other stages will keep the context in budget (see the summarizer_failed events)",
                  soft_wrap=True, highlight=False)


def _writable(report: Path) -> None:
    """Fail with one line, before anything runs, when the report cannot be written."""
    try:
        with open(report, "a", encoding="utf-8"):
            pass
    except OSError as e:
        fail(f"{report}: cannot write the report ({e.strerror or e})")


def _run(req: ReplayRequest, setup: ReplaySetup, *, db: str, cache_ratio: float, baseline: bool) -> RunResult:
    """Run the replay; a store that cannot be used is one ``error:`` line."""
    from ..replay.run import run

    try:
        with progress_bar() as progress:
            return run(list(req.paths), setup.policy, db=db, cache_ratio=cache_ratio, limit=req.limit,
                       baseline=baseline, progress=progress, loaded=setup.loaded, runtime=setup.runtime,
                       per_recording=setup.per_recording, provider_reason=setup.provider_reason)
    except CtxwiseError as e:
        fail(e)
    except ImportError as e:  # a store URL naming a driver that is not installed (postgresql+asyncpg://)
        fail(f"{shown(db)}: cannot use the store ({first_line(e)})")
    except Exception as e:  # the store could not be opened, say
        if type(e).__module__.startswith("sqlalchemy"):
            fail(f"{shown(db)}: cannot use the store ({first_line(e)})")
        raise


def _show(result: RunResult, *, json_out: bool, report: Path | None) -> None:
    """Print the errors, write the report, print the tables or the JSON document; exit 2
    when nothing ran and 1 when something failed."""
    from ..replay.render import run_text

    for failure in result.errors:
        err.print("[red]error:[/] " + escape(str(failure)), soft_wrap=True, highlight=False)
    if result.errors and not result.sessions:
        if json_out:  # the document still lists what could not run
            out.print_json(json.dumps(result.as_dict(), ensure_ascii=False))
        raise typer.Exit(2)  # nothing could be replayed: no summary of zero sessions
    if report is not None:
        from ..replay.report import render_html

        try:
            report.write_text(render_html(result), encoding="utf-8")
        except OSError as e:
            fail(f"{report}: cannot write the report ({e.strerror or e})")
    if json_out:
        out.print_json(json.dumps(result.as_dict(), ensure_ascii=False))
    else:
        for part in run_text(result):
            out.print(part)
        if report is not None:
            out.print(f"report written to {report}", highlight=False, markup=False)
    if result.failed:
        raise typer.Exit(1)


def replay(
    paths: Annotated[Optional[list[Path]], typer.Argument(
        help="Recorded sessions: files or directories in any supported format. Default: the built-in demo.",
        show_default=False, metavar="PATH")] = None,
    preset: Annotated[str, typer.Option(help="Policy preset: default, lean or ragent.", metavar="NAME")] = "default",
    budget: Annotated[Optional[int], typer.Option(help="Context budget, in --unit.", min=1, metavar="N")] = None,
    unit: Annotated[Optional[UnitName], typer.Option(help="Budget unit.")] = None,
    tokenizer: Annotated[Optional[str], typer.Option(
        help="Tokenizer: o200k_base, cl100k_base, deepseek, qwen or estimate. Implies --unit tokens.",
        metavar="NAME")] = None,
    provider: Annotated[Optional[str], typer.Option(
        help="Replay every session as this provider (default: the one each recording names).",
        metavar="NAME")] = None,
    config: Annotated[Optional[Path], typer.Option(help="Policy TOML file (overrides --preset).", metavar="FILE")] = None,
    summarizer: Annotated[Optional[SummarizerName], typer.Option(help="Summarizer.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON document instead of tables.")] = False,
    report: Annotated[Optional[Path], typer.Option(help="Write a static HTML report here.", metavar="FILE")] = None,
    limit: Annotated[Optional[int], typer.Option(help="Replay at most N conversations.", min=1, metavar="N")] = None,
    db: Annotated[str, typer.Option(help="Store URL (SQLAlchemy): SQLite or PostgreSQL.", metavar="URL")] = DEFAULT_DB,
    cache_ratio: Annotated[float, typer.Option(help="Price of a cached prompt token relative to a fresh one.",
                                               min=0.0, max=1.0, metavar="RATIO")] = 0.1,
    baseline: Annotated[bool, typer.Option(help="Also replay with compaction off, for comparison.")] = True,
) -> None:
    """Replay recorded agent sessions through the context manager and show what it did.

    Before each recorded model call the session gets what arrived since the last call and is
    prepared under the policy; then the recorded output is appended. Prints a table per
    session (up to 3) with what fired and why, then the measures with compaction on and off
    side by side, what the calls cost under each price model, and when ctxwise pays.

    Each recording is replayed and priced as the provider it was recorded with (the model it
    names, else its reasoning) unless --provider names one. A session that cannot run (its
    system prompt alone over the budget, say) is reported with the reason and the others go
    on; --json lists it under errors.

    Example: ctxwise replay ../shared/data/trajectories --budget 3000
    """
    from ..replay.setup import ReplayRequest, plan_replay

    req = ReplayRequest(paths=tuple(str(p) for p in paths or []), preset=preset, budget=budget,
                        unit=unit.value if unit else None, tokenizer=tokenizer, provider=provider, config=config,
                        summarizer=summarizer.value if summarizer else None, limit=limit)
    try:
        setup = plan_replay(req)
    except CtxwiseError as e:
        fail(e)
    _announce(setup, json_out)
    if report is not None:
        _writable(report)
    result = _run(req, setup, db=db, cache_ratio=cache_ratio, baseline=baseline)
    _show(result, json_out=json_out, report=report)
