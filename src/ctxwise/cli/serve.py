"""``ctxwise serve``: the HTTP API and the /ui inspector (:mod:`ctxwise.server`) under uvicorn."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..errors import CtxwiseError, MissingExtra
from .console import DEFAULT_DB, fail, first_line

KeysDb = Annotated[str, typer.Option(help="Store URL (SQLAlchemy): SQLite or PostgreSQL.",
                                     envvar="CTXWISE_DB", metavar="URL")]


def _sqlite_url(db: str) -> str:
    """``db`` as a store URL: a file path (the database ``ctxwise replay`` wrote, say) becomes a
    SQLite URL; one ``error:`` line when that file does not exist."""
    if "://" in db:
        return db
    if not Path(db).is_file():
        fail(f"{db}: no such database file (to start a new one, give a URL: --db sqlite:///{db})")
    return f"sqlite:///{Path(db).resolve()}"


def serve(
    db: KeysDb = DEFAULT_DB,
    config: Annotated[Optional[Path], typer.Option(help="Policy TOML file for new sessions (default: "
                                                        "$CTXWISE_CONFIG, else the CTXWISE_* settings).",
                                                   metavar="FILE")] = None,
    host: Annotated[str, typer.Option(help="Address to listen on.", metavar="ADDRESS")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.", min=0, max=65535, metavar="PORT")] = 8000,
    workers: Annotated[int, typer.Option(help="Worker processes (each serves every session).", min=1,
                                                 metavar="N")] = 1,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.", metavar="LEVEL")] = "info",
    allowed_host: Annotated[Optional[list[str]], typer.Option(
        help="A host name the inspector answers to in local mode besides localhost, 127.0.0.1 and [::1] "
             "(repeatable; default $CTXWISE_SERVER_ALLOWED_HOSTS, comma-separated).", metavar="HOST")] = None,
    openai_upstream: Annotated[Optional[str], typer.Option(
        help="Where the drop-in routes /v1/chat/completions and /v1/responses forward to: an OpenAI base URL "
             "with /v1 (default $CTXWISE_OPENAI_UPSTREAM, else openai_upstream in the --config file's [proxy] table, "
             "else https://api.openai.com/v1).", metavar="URL",
        rich_help_panel="Drop-in endpoint")] = None,
    anthropic_upstream: Annotated[Optional[str], typer.Option(
        help="Where the drop-in route /v1/messages forwards to: an Anthropic base URL "
             "(default $CTXWISE_ANTHROPIC_UPSTREAM, else anthropic_upstream in the --config file's [proxy] table, "
             "else https://api.anthropic.com).", metavar="URL",
        rich_help_panel="Drop-in endpoint")] = None,
) -> None:
    """Serve the HTTP API (and the /ui inspector) over a ctxwise database. Needs the server extra.

    Every /v1 call needs an API key (`ctxwise keys create --tenant NAME`). Any number of
    processes, on one machine or many, may serve the same PostgreSQL database. `--db` also takes
    the path of a SQLite file (`--db ctxwise.db`, what `ctxwise replay` wrote): the inspector at
    /ui browses it (when no API key was ever created in the database: local mode, a browser on
    this machine only, at localhost, 127.0.0.1, [::1] or an --allowed-host name).

    The same server answers the drop-in routes (POST /v1/chat/completions, /v1/responses,
    /v1/messages): point an agent's base URL at it and send the ctxwise key in X-Ctxwise-Key (or
    in the base URL as /k/<key>); calls go on to --openai-upstream / --anthropic-upstream.

    Example: ctxwise serve --db sqlite:///ctxwise.db --port 8000 --workers 2
    """
    try:
        import uvicorn

        from ..server import create_app_from_env
    except MissingExtra as e:
        fail(e)
    os.environ["CTXWISE_DB"] = _sqlite_url(db)
    if config is not None:
        os.environ["CTXWISE_CONFIG"] = str(config)
    if allowed_host:
        os.environ["CTXWISE_SERVER_ALLOWED_HOSTS"] = ",".join(allowed_host)
    for value, var in ((openai_upstream, "CTXWISE_OPENAI_UPSTREAM"), (anthropic_upstream, "CTXWISE_ANTHROPIC_UPSTREAM")):
        if value is not None:
            if not value.startswith(("http://", "https://")):
                fail(f"--{var[8:].lower().replace('_', '-')} {value!r}: expected an http:// or https:// URL")
            os.environ[var] = value
    try:
        create_app_from_env().state.server.close()  # fail here, with one line, on a bad policy or store
    except CtxwiseError as e:
        fail(e)
    except Exception as e:
        fail(f"cannot open the store ({first_line(e)})")
    from ..proxy.auth import uvicorn_log_config

    uvicorn.run("ctxwise.server:create_app_from_env", factory=True, host=host, port=port, workers=workers,
                log_level=log_level, log_config=uvicorn_log_config())
