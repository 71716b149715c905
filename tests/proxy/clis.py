"""What the coding-agent CLI tests share (Claude Code, Codex, OpenCode through the proxy against
the stub): the CLI's path, the stub's model for a write-then-read tool loop, and the sessions the
proxy stored."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxwise import ContextManager, Message, Policy

from .conftest import Live, running
from .stub import Reply

BIG = Policy.preset("default", budget=60000, unit="tokens", tokenizer="o200k_base")
"""A coding agent's system prompt and tools alone are several thousand tokens (Claude Code's ~15-20k)."""

PROMPT = "Write a note to note.txt, then read it back to me."
"""The user's one instruction to each CLI."""


def cli_binary(env_var: str, command: str, package: str, version: str, cache: Path | None = None) -> str:
    """The CLI's executable: ``$env_var``, else ``command`` on PATH, else ``cache``'s
    ``node_modules/.bin/command`` (.ci/run installs it there). Fails (never skips) when none exists."""
    found = os.environ.get(env_var) or shutil.which(command) or str((cache or Path("/nonexistent")) / "node_modules"
                                                                   / ".bin" / command)
    assert Path(found).exists(), (
        f"{command} not found: npm install --prefix DIR {package}@{version} and set "
        f"{env_var}=DIR/node_modules/.bin/{command} (.ci/run does this)")
    return found


def ci_cache(name: str) -> Path:
    """.ci/run's install directory for one npm CLI (``~/.cache/ctxwise-ci/<name>``)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ctxwise-ci" / name


def note_responder(tool: str, tools_of: Callable[[dict[str, Any]], list[str]],
                   results_of: Callable[[dict[str, Any]], list[str]], calls: list[tuple[str, dict[str, Any]]],
                   side: str = "ok") -> Callable[[str, dict[str, Any]], Reply]:
    """The stub's model for a tool loop: with ``tool`` offered, the next of ``calls`` (id,
    arguments: write a note, read it back) while fewer results than calls came back, then the
    answer "The note says: <the last line read>"; a request without the tool (a CLI's side
    call: a title, a check) gets ``side``. ``tools_of`` / ``results_of`` read a request body's
    tool names and tool results in its wire's shape."""
    def respond(kind: str, body: dict[str, Any]) -> Reply:
        if tool not in tools_of(body):
            return Reply(text=side)
        done = results_of(body)
        if len(done) < len(calls):
            cid, args = calls[len(done)]
            return Reply(calls=[(cid, tool, args)])
        return Reply(text="The note says: " + done[-1].strip().splitlines()[-1])
    return respond


def session_ids(live: Live) -> set[str]:
    """The session ids the proxy's heads table holds for tenant ``acme``."""
    import sqlalchemy as sa

    engine = sa.create_engine(live.store_url)
    try:
        with engine.connect() as conn:
            return {r[0] for r in conn.execute(sa.text(
                "select distinct session_id from ctxwise_proxy_heads where tenant = 'acme'"))}
    finally:
        engine.dispose()


def tool_loops(live: Live) -> list[list[Message]]:
    """The stored context of every proxied session of tenant ``acme`` that holds a tool call
    (after the held replies are stored)."""
    live.settle()
    cm = ContextManager(live.store_url)
    try:
        loops = []
        for sid in session_ids(live):
            msgs = list(cm.session("acme:proxy", sid, create=False).messages)
            if any(b.type == "tool_use" for m in msgs for b in m.blocks):
                loops.append(msgs)
        return loops
    finally:
        cm.close()


@pytest.fixture
def live_cli(tmp_path: Path) -> Iterator[Live]:
    """``ctxwise serve`` and the stub, with the :data:`BIG` policy."""
    with running(tmp_path, BIG) as lv:
        yield lv
