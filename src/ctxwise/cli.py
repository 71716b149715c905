"""The ``ctxwise`` command line (typer + rich). Thin: the work is in :mod:`ctxwise.replay`.

    ctxwise inspect                      # the built-in sample session
    ctxwise inspect recordings/run.json  # any supported format
    ctxwise replay                       # the built-in demo, compaction on and off
    ctxwise replay ../shared/data/trajectories --unit tokens --budget 4000 --report out.html

User mistakes (a missing file, a bad format, an unknown option value) print one line naming
the place and the rule and exit with code 2. ``replay`` exits 1 when some sessions failed
and the others ran.
"""

from __future__ import annotations

import json
import os
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .errors import CtxwiseError, with_hint

if TYPE_CHECKING:
    from . import MemoryStore
    from .server.keys import KeyStore

app = typer.Typer(
    help="Keep the working context of tool-using LLM agents inside a budget.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
def _console(stderr: bool = False) -> Console:
    """A console; when output is not a terminal (a pipe, a file, a test) it is 120 wide so the
    tables are not squeezed into 80 columns."""
    c = Console(stderr=stderr)
    return c if c.is_terminal else Console(stderr=stderr, width=120)


out = _console()
err = _console(stderr=True)


def fail(message: str | BaseException, code: int = 2) -> NoReturn:
    """Print ``error: message`` on stderr as one line and exit with ``code``; a ctxwise error
    is printed with its hint: ``error: <message> (hint: <what to do>)``."""
    text = with_hint(message) if isinstance(message, BaseException) else message
    err.print("[red]error:[/] " + escape(text), soft_wrap=True, highlight=False)
    raise typer.Exit(code)


@app.command()
def inspect(
    path: Annotated[Optional[Path], typer.Argument(help="A recorded session file (any supported format). "
                                                        "Default: the built-in sample.")] = None,
) -> None:
    """Show each conversation's message count and size by category (chars and o200k tokens).

    Example: ctxwise inspect ../shared/data/trajectories/tau2-bench/retail_gpt-4.1_1trial.json
    """
    from .formats import load
    from .replay.inspect import inspect_rows
    from .replay.render import inspect_table
    from .replay.sources import builtin

    target = path or builtin("sample")
    try:
        if target.is_dir():
            fail(f"{target}: is a directory; inspect takes one file")
        conversations = load(target)
    except CtxwiseError as e:
        fail(e)
    except OSError as e:
        fail(f"{target}: cannot read ({e.strerror or e})")
    name = "built-in sample" if path is None else str(target)
    rows = inspect_rows(conversations)
    detail = f"{conversations[0].id}, {rows[0]['messages']} messages" if len(conversations) == 1 else \
        f"{len(conversations)} conversations"
    out.print(f"[bold]{name}[/]: {detail} ({conversations[0].format if conversations else 'empty'})", highlight=False)
    out.print(inspect_table(rows))


class SummarizerName(str, Enum):
    digest = "digest"
    openai = "openai"


class UnitName(str, Enum):
    chars = "chars"
    tokens = "tokens"


@app.command()
def replay(
    paths: Annotated[Optional[list[Path]], typer.Argument(
        help="Recorded sessions: files or directories in any supported format. Default: the built-in demo.",
        show_default=False)] = None,
    preset: Annotated[str, typer.Option(help="Policy preset: default, lean or ragent.")] = "default",
    budget: Annotated[Optional[int], typer.Option(help="Context budget, in --unit.", min=1)] = None,
    unit: Annotated[Optional[UnitName], typer.Option(help="Budget unit.")] = None,
    tokenizer: Annotated[Optional[str], typer.Option(help="Tokenizer (o200k_base, cl100k_base, deepseek, qwen, "
                                                          "estimate); implies --unit tokens.")] = None,
    provider: Annotated[Optional[str], typer.Option(help="Provider profile the payloads must satisfy.")] = None,
    config: Annotated[Optional[Path], typer.Option(help="Policy TOML file (overrides --preset).")] = None,
    summarizer: Annotated[Optional[SummarizerName], typer.Option(help="Summarizer.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON document instead of tables.")] = False,
    report: Annotated[Optional[Path], typer.Option(help="Write a static HTML report here.")] = None,
    limit: Annotated[Optional[int], typer.Option(help="Replay at most N conversations.", min=1)] = None,
    db: Annotated[str, typer.Option(help="Store URL (SQLAlchemy), e.g. postgresql+psycopg://...")] = "sqlite:///ctxwise.db",
    cache_ratio: Annotated[float, typer.Option(help="Price of a cached prompt token relative to a fresh one.",
                                               min=0.0, max=1.0)] = 0.1,
    baseline: Annotated[bool, typer.Option(help="Also replay with compaction off, for comparison.")] = True,
) -> None:
    """Replay recorded agent sessions through the context manager and show what it did.

    Before each recorded model call the session gets what arrived since the last call and is
    prepared under the policy; then the recorded output is appended. Prints a table per
    session (up to 3) and a summary with compaction on and off side by side.

    Example: ctxwise replay ../shared/data/trajectories/tau2-bench/retail_gpt-4.1_1trial.json --unit tokens --budget 4000
    """
    from . import Policy, RuntimeSettings
    from .replay import render
    from .replay.run import DEMO_POLICY, run

    if tokenizer is not None and unit is None:
        unit = UnitName.tokens  # a tokenizer only means something for a budget in tokens
    elif tokenizer is not None and unit is UnitName.chars:
        fail("--tokenizer counts tokens, but --unit chars was given (hint: drop one of them)")
    overrides = {k: v for k, v in {
        "budget": budget, "unit": unit.value if unit else None, "tokenizer": tokenizer,
        "provider": provider}.items() if v is not None}
    process = {"summarizer": summarizer.value} if summarizer else {}
    if not paths and config is None:
        # the built-in demo: its budget and provider, with any option given on top
        demo = dict(DEMO_POLICY)
        if unit is not None and budget is None:
            demo.pop("budget")  # a unit alone: the preset's budget in that unit
        overrides = {**demo, **overrides}
    if paths and config is None and unit is None and preset != "ragent":
        # recordings are measured in tokens, as the picked budget and the demo are: a --budget
        # given alone means tokens too (ragent counts characters, as the seeds' system does)
        overrides.setdefault("unit", "tokens")
    loaded = None
    notes: list[str] = []
    try:
        if paths and config is None and (budget is None or provider is None):
            # a recording with options left out: its provider, and a budget at which compaction acts
            from .replay.defaults import recording_defaults
            from .replay.sources import collect

            Policy.preset(preset, **overrides)  # the options given are checked before the files are read
            loaded = collect([str(p) for p in paths])
            picked = recording_defaults(loaded[0][:limit] if limit else loaded[0], provider=provider, budget=budget,
                                        unit=unit.value if unit else ("chars" if preset == "ragent" else "tokens"),
                                        tokenizer=tokenizer or "o200k_base")
            overrides = {**picked.overrides, **overrides}
            notes = picked.notes
        policy = (Policy.from_toml(config, default_preset=preset, **overrides) if config
                  else Policy.preset(preset, **overrides))
        runtime = RuntimeSettings.from_toml(config, **process) if config else RuntimeSettings(**process)
        if policy.unit == "tokens":
            from .tokens import get_counter

            get_counter(policy.tokenizer)
    except CtxwiseError as e:
        fail(e)

    if notes:
        (err if json_out else out).print("defaults from the recording (pass --provider / --budget to choose):\n  "
                                         + "\n  ".join(notes), soft_wrap=True, highlight=False, markup=False)
    if runtime.summarizer == "openai" and not os.environ.get("OPENAI_API_KEY"):
        err.print("[yellow]warning:[/] --summarizer openai: OPENAI_API_KEY is not set; summaries will fail "
                  "and the other stages will keep the context in budget (see the summarizer_failed events)",
                  soft_wrap=True, highlight=False)
    if report is not None:
        try:
            report.parent.mkdir(parents=True, exist_ok=True) if report.parent.exists() else None
            with open(report, "a", encoding="utf-8"):
                pass
        except OSError as e:
            fail(f"{report}: cannot write the report ({e.strerror or e})")

    progress = None
    bar: Progress | None = None
    many = paths is not None and (len(paths) > 1 or any(p.is_dir() for p in paths))
    if not json_out and (many or err.is_terminal):
        bar = Progress(TextColumn("replaying"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                       TextColumn("{task.description}"), console=err, transient=True)
    if bar is not None:
        task = bar.add_task("", total=None)

        def progress(done: int, total: int, name: str) -> None:
            bar.update(task, completed=done, total=total, description=name)

        bar.start()
    try:
        result = run([str(p) for p in paths or []], policy, db=db, cache_ratio=cache_ratio, limit=limit,
                     baseline=baseline, progress=progress, loaded=loaded, runtime=runtime)
    except CtxwiseError as e:
        fail(e)
    except Exception as e:  # the store could not be opened, say
        if type(e).__module__.startswith("sqlalchemy"):
            fail(f"{_shown(db)}: cannot use the store ({type(e).__name__}: {str(e).splitlines()[0]})")
        raise
    finally:
        if bar is not None:
            bar.stop()

    for source_error in result.errors:
        err.print(f"[red]error:[/] {source_error}", soft_wrap=True, highlight=False)
    if result.errors and not result.sessions:
        raise typer.Exit(2)  # nothing could be replayed: no summary of zero sessions
    if report is not None:
        from .replay.report import render_html

        try:
            report.write_text(render_html(result), encoding="utf-8")
        except OSError as e:
            fail(f"{report}: cannot write the report ({e.strerror or e})")
    if json_out:
        out.print_json(json.dumps(result.as_dict(), ensure_ascii=False))
    else:
        if len(result.sessions) <= render.TABLES_UP_TO:
            for s in result.sessions:
                out.print(render.session_table(s, policy.unit))
        on, off = result.totals()
        failed = f", {len(result.errors)} failed" if result.errors else ""
        title = (f"summary: {len(result.sessions)} session(s) replayed{failed}, policy {policy.name}, budget {policy.budget:,} "
                 f"{policy.unit}" + (f" ({policy.tokenizer})" if policy.unit == "tokens" else "")
                 + f", provider {policy.provider}")
        out.print(render.measures_table(on, off, sessions=len(result.sessions), unit=policy.unit, title=title))
        if report is not None:
            out.print(f"report written to {report}")
    if result.failed:
        raise typer.Exit(1)


memory_app = typer.Typer(help="Long-term user memory: list, add, forget, clear.", no_args_is_help=True)
app.add_typer(memory_app, name="memory")

UserOpt = Annotated[str, typer.Option("--user", "-u", help="The user_id whose memory to use.")]
DbOpt = Annotated[str, typer.Option(help="Store URL (SQLAlchemy), e.g. postgresql+psycopg://...")]


def _shown(db: str) -> str:
    """The store URL ``db`` as it may be printed: its password replaced by ``***``."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(db).render_as_string(hide_password=True)
    except ArgumentError:  # not a URL: what follows the last "@" (a password may precede it)
        return db.rsplit("@", 1)[-1]


def _store_error(db: str, e: CtxwiseError) -> str | CtxwiseError:
    """What the ``error:`` line says for a store error: a StoreUnavailable names the store
    itself (without its password); any other error gets the store's URL, password hidden."""
    from .errors import StoreUnavailable

    return e if isinstance(e, StoreUnavailable) else f"{_shown(db)}: {with_hint(e)}"


def _store(db: str, *, must_exist: bool = True) -> MemoryStore:
    """The store at ``db`` as a :class:`~ctxwise.MemoryStore`; one ``error:`` line when it
    cannot be opened."""
    from . import SqlStore

    path = Path(db.removeprefix("sqlite:///"))
    if must_exist and db.startswith("sqlite:///") and not path.exists() and path.parent.is_dir():
        fail(f"{db}: no such database (nothing stored there yet)")
    try:
        return SqlStore(db)
    except CtxwiseError as e:  # a schema from a newer ctxwise, a foreign table: its one line
        fail(_store_error(db, e))
    except Exception as e:  # a bad URL or an unreachable server: one line, no traceback
        fail(f"{_shown(db)}: cannot open the store ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})")


def _db(fn, *args, **kw):
    """``fn(*args, **kw)``; a database error (a file that is not a ctxwise store, a value the
    database refuses) is one ``error:`` line and exit 2, never a traceback."""
    from sqlalchemy.exc import SQLAlchemyError

    try:
        return fn(*args, **kw)
    except SQLAlchemyError as e:
        first = str(getattr(e, "orig", e)).strip().splitlines()
        fail(f"memory {fn.__name__.split('_')[0]}: the database refused it ({type(e).__name__}: {first[0] if first else ''})")


@memory_app.command("list")
def memory_list(
    user: UserOpt,
    db: DbOpt = "sqlite:///ctxwise.db",
    all_: Annotated[bool, typer.Option("--all", help="Also superseded and retracted entries.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List a user's long-term memory entries, oldest first.

    Example: ctxwise memory list --user alice
    """
    from rich.table import Table

    entries = _db(_store(db).list_memory, user, include_inactive=all_)
    if json_out:
        out.print_json(json.dumps([{"id": e.id, "text": e.text, "kind": e.kind, "status": e.status,
                                    "source_session_id": e.source_session_id} for e in entries], default=str))
        return
    t = Table(title=f"memory of {user} ({len(entries)} entries)")
    for col in ("id", "kind", "status", "text", "from session"):
        t.add_column(col)
    for e in entries:
        t.add_row(str(e.id), e.kind, e.status, e.text, e.source_session_id or "")
    out.print(t)


@memory_app.command("add")
def memory_add(
    text: Annotated[str, typer.Argument(help="What to remember, in the user's words.")],
    user: UserOpt,
    kind: Annotated[str, typer.Option(help="Entry kind (preference, profile, ...).")] = "preference",
    db: DbOpt = "sqlite:///ctxwise.db",
) -> None:
    """Add one entry as given (the explicit API: no decision rules; an identical active entry
    is not added twice).

    Example: ctxwise memory add "prefers over-ear headphones" --user alice
    """
    if not text.strip():
        fail("memory add: the text is empty")
    store = _store(db, must_exist=False)
    same = [e for e in _db(store.list_memory, user) if " ".join(e.text.lower().split()) == " ".join(text.lower().split())]
    if same:
        out.print(f"already remembered as {same[0].id}: {same[0].text}")
        return
    e = _db(store.add_memory, user, text.strip(), kind)
    out.print(f"added {e.id}: {e.text}")


@memory_app.command("forget")
def memory_forget(
    entry_id: Annotated[str, typer.Argument(help="The entry id (see `ctxwise memory list`).")],
    user: UserOpt,
    db: DbOpt = "sqlite:///ctxwise.db",
) -> None:
    """Retract one entry (kept in history, no longer sent).

    Example: ctxwise memory forget 3 --user alice
    """
    if not entry_id.strip().isdigit():  # ids are integers: 'abc' is a usage error, not a database error
        fail(f"memory forget: entry ids are whole numbers (see `ctxwise memory list --user {user}`), not {entry_id!r}")
    ident = int(entry_id.strip())
    if ident > 2**63 - 1:
        fail(f"memory forget: user {user!r} has no active entry {entry_id!r}")
    if not _db(_store(db).retract_memory, user, ident):
        fail(f"memory forget: user {user!r} has no active entry {entry_id!r}")
    out.print(f"forgot {entry_id}")


@memory_app.command("clear")
def memory_clear(
    user: UserOpt,
    db: DbOpt = "sqlite:///ctxwise.db",
    purge: Annotated[bool, typer.Option(help="Delete the rows instead of retracting them.")] = False,
) -> None:
    """Retract (or with --purge delete) all of a user's entries.

    Example: ctxwise memory clear --user alice
    """
    n = _db(_store(db).clear_memory, user, purge=purge)
    out.print(f"{'deleted' if purge else 'retracted'} {n} entries of {user}")


db_app = typer.Typer(help="The ctxwise database: create or upgrade its tables.", no_args_is_help=True)
app.add_typer(db_app, name="db")


@db_app.command("upgrade")
def db_upgrade(
    db: DbOpt = "sqlite:///ctxwise.db",
    schema: Annotated[Optional[str], typer.Option(help="PostgreSQL schema for ctxwise's tables (created if missing).")] = None,
) -> None:
    """Create ctxwise's tables, or upgrade them to this version's schema (every open does this
    too; run it ahead of a deploy). The revision is kept in ctxwise_alembic_version, so an
    application's own Alembic table is never touched. On PostgreSQL, --schema NAME keeps
    the tables in their own schema (e.g. --db postgresql+psycopg://app@db/app --schema ctxwise).

    Example: ctxwise db upgrade --db sqlite:///ctxwise.db
    """
    from . import SqlStore

    try:
        store = SqlStore(db, schema=schema, upgrade=False)
    except CtxwiseError as e:  # an unsupported URL, a database that cannot be reached
        fail(_store_error(db, e))
    except Exception as e:  # a schema option on SQLite
        fail(f"{_shown(db)}: cannot open the store ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})")
    try:
        before, head = store.upgrade()
        if before == head:
            out.print(f"{_shown(db)}: already at ctxwise schema {head}")
            return
    except CtxwiseError as e:
        fail(_store_error(db, e))
    except Exception as e:  # an unreachable server: one line, no traceback
        fail(f"{_shown(db)}: cannot upgrade ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})")
    finally:
        store.close()
    out.print(f"{_shown(db)}: ctxwise schema {before or 'none'} -> {head}")


KeysDb = Annotated[str, typer.Option(help="Store URL (SQLAlchemy); default $CTXWISE_DB or sqlite:///ctxwise.db.",
                                     envvar="CTXWISE_DB")]


@app.command()
def serve(
    db: KeysDb = "sqlite:///ctxwise.db",
    config: Annotated[Optional[Path], typer.Option(help="Policy TOML file for new sessions (default: "
                                                        "$CTXWISE_CONFIG, else the CTXWISE_* settings).")] = None,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.", min=0, max=65535)] = 8000,
    workers: Annotated[int, typer.Option(help="Worker processes (each serves every session).", min=1)] = 1,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "info",
    allowed_host: Annotated[Optional[list[str]], typer.Option(
        help="A host name the inspector answers to in local mode besides localhost, 127.0.0.1 and [::1] "
             "(repeatable; default $CTXWISE_SERVER_ALLOWED_HOSTS, comma-separated).")] = None,
) -> None:
    """Serve the HTTP API (and the /ui inspector) over a ctxwise database. Needs the server extra.

    Every /v1 call needs an API key (`ctxwise keys create --tenant NAME`). Any number of
    processes, on one machine or many, may serve the same PostgreSQL database. `--db` also takes
    the path of a SQLite file (`--db ctxwise.db`, what `ctxwise replay` wrote): the inspector at
    /ui browses it (when no API key was ever created in the database: local mode, a browser on
    this machine only, at localhost, 127.0.0.1, [::1] or an --allowed-host name).

    Example: ctxwise serve --db sqlite:///ctxwise.db --port 8000 --workers 2
    """
    from .errors import MissingExtra

    try:
        import uvicorn

        from .server import create_app_from_env
    except MissingExtra as e:
        fail(e)
    if "://" not in db:  # a file path: a SQLite database, e.g. the one `ctxwise replay` wrote (inspector)
        if not Path(db).is_file():
            fail(f"{db}: no such database file (to start a new one, give a URL: --db sqlite:///{db})")
        db = f"sqlite:///{Path(db).resolve()}"
    os.environ["CTXWISE_DB"] = db
    if config is not None:
        os.environ["CTXWISE_CONFIG"] = str(config)
    if allowed_host:
        os.environ["CTXWISE_SERVER_ALLOWED_HOSTS"] = ",".join(allowed_host)
    try:
        create_app_from_env().state.server.close()  # fail here, with one line, on a bad policy or store
    except CtxwiseError as e:
        fail(e)
    except Exception as e:
        fail(f"cannot open the store ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})")
    uvicorn.run("ctxwise.server:create_app_from_env", factory=True, host=host, port=port, workers=workers,
                log_level=log_level)


keys_app = typer.Typer(help="API keys of the server: create, list, revoke.", no_args_is_help=True)
app.add_typer(keys_app, name="keys")


def _keys(db: str) -> "KeyStore":
    """The key store at ``db`` (opening a store on it first creates the table)."""
    from .errors import MissingExtra

    try:
        from .server.keys import KeyStore
    except MissingExtra as e:
        fail(e)
    _store(db, must_exist=False).close()  # type: ignore[attr-defined]
    return KeyStore(db)


@keys_app.command("create")
def keys_create(
    tenant: Annotated[str, typer.Option(help="The tenant the key belongs to (letters, digits, - and _).")],
    name: Annotated[str, typer.Option(help="A note saying what the key is for.")] = "",
    db: KeysDb = "sqlite:///ctxwise.db",
) -> None:
    """Create an API key for a tenant and print it (shown only now; only its hash is stored).

    Example: ctxwise keys create --tenant acme --name "support bot"
    """
    from .server.keys import KeyError_

    try:
        key, record = _keys(db).create(tenant, name)
    except KeyError_ as e:
        fail(str(e))
    out.print(f"created key {record.key_id} for tenant {record.tenant} (shown once, store it now):", highlight=False)
    print(key)


@keys_app.command("list")
def keys_list(
    tenant: Annotated[Optional[str], typer.Option(help="Only this tenant's keys.")] = None,
    db: KeysDb = "sqlite:///ctxwise.db",
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List API keys (ids, tenants, names, times; never the keys).

    Example: ctxwise keys list --tenant acme
    """
    from rich.table import Table

    found = _keys(db).list(tenant)
    if json_out:
        out.print_json(json.dumps([k.as_dict() for k in found]))
        return
    t = Table(title=f"API keys ({len(found)})")
    for col in ("key id", "tenant", "name", "created", "revoked"):
        t.add_column(col)
    for k in found:
        d = k.as_dict()
        t.add_row(k.key_id, k.tenant, k.name, d["created_at"] or "", d["revoked_at"] or "")
    out.print(t)


@keys_app.command("revoke")
def keys_revoke(
    key_id: Annotated[str, typer.Argument(help="The key id (see `ctxwise keys list`).")],
    db: KeysDb = "sqlite:///ctxwise.db",
) -> None:
    """Revoke an API key: every server process refuses it from the next request on.

    Example: ctxwise keys revoke 3f2a9c01d4e5
    """
    from .server.keys import KeyError_

    try:
        record = _keys(db).revoke(key_id.strip())
    except KeyError_ as e:
        fail(str(e))
    out.print(f"revoked key {record.key_id} of tenant {record.tenant}", highlight=False)


def main() -> None:  # pragma: no cover - console script entry
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
