"""Kind: a store error the command line tells wrongly (issue 28, "Errors that say what to do").

Through the real command (``python -m ctxwise`` in a subprocess), each store that cannot be
used is one ``error:`` line, exit code 2, no traceback, the password never printed: an
unsupported URL scheme names the supported ones; a SQLite path whose folder is missing says
so; a PostgreSQL server that does not answer says so (and is not a schema error); a SQLite
file or folder this user may not write says it is read-only; a full database says it is out
of room and stores nothing. Read-only is a real ``chmod`` (run as an unprivileged user when the
tests run as root, for whom permissions do not apply); a full database is SQLite's
``max_page_count``, set on every connection the command opens."""

from __future__ import annotations

import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxwise.store import SqlStore

SRC = str(Path(__file__).resolve().parents[1] / "src")
NOBODY = 65534


def cli(*args: str, prelude: str = "", as_nobody: bool = False, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m ctxwise ARGS`` as the console script runs it, after ``prelude`` (Python
    run first in the same process); as an unprivileged user when ``as_nobody``."""
    code = f"{prelude}\nimport sys\nsys.argv = ['ctxwise', *{list(args)!r}]\nfrom ctxwise.__main__ import main\nmain()\n"
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""), "COLUMNS": "400"}
    # util-linux's setpriv: the interpreter may live where only root may look (a pyenv under
    # /root), and setpriv resolves it before the process loses root's rights
    drop = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"] if as_nobody else []
    return subprocess.run([*drop, sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                          cwd=cwd)


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    """The command failed with exit code 2 and said why in one ``error:`` line, no traceback."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    return lines[0]


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A folder every user may enter (pytest's own is private to its owner), removed after;
    owned by the unprivileged user when the tests run as root."""
    folder = Path(tempfile.mkdtemp(prefix="ctxwise-ro-"))
    folder.chmod(0o755)
    if os.geteuid() == 0:
        os.chown(folder, NOBODY, NOBODY)  # the unprivileged user the read-only test runs as owns it
    try:
        yield folder
    finally:
        for p in [folder, *folder.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)
        shutil.rmtree(folder)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed when the block ends: nothing listens there


COMMANDS = [["memory", "list", "--user", "u"], ["memory", "add", "--user", "u", "tea"], ["db", "upgrade"],
            ["keys", "list"]]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_an_unsupported_scheme_is_one_line_naming_the_supported_ones(command: list[str]) -> None:
    line = one_error_line(cli(*command, "--db", "mysql://app:s3cret@db.example/app"))
    assert "'mysql'" in line and "does not support" in line, line
    assert "sqlite:///" in line and "postgresql+psycopg://" in line, line
    assert "s3cret" not in line and "ModuleNotFoundError" not in line, line


def test_a_missing_folder_is_one_line_saying_so(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "ctxwise.db"
    for command in (["memory", "list", "--user", "u"], ["db", "upgrade"]):
        line = one_error_line(cli(*command, "--db", f"sqlite:///{missing}"))
        assert f"its folder '{missing.parent}' does not exist" in line and "mkdir -p" in line, line
        assert "StoreSchemaError" not in line and "upgrade ctxwise" not in line, line
    assert not missing.parent.exists()


@pytest.mark.parametrize("command", [["memory", "list", "--user", "u"], ["db", "upgrade"], ["keys", "list"]],
                         ids=lambda c: " ".join(c[:2]))
def test_a_database_that_is_down_is_one_line_without_the_password(command: list[str]) -> None:
    url = f"postgresql+psycopg://ctxwise:s3cret@127.0.0.1:{_closed_port()}/ctxwise"
    line = one_error_line(cli(*command, "--db", url))
    assert "cannot connect to the store" in line and "ctxwise:***@127.0.0.1" in line, line
    assert "server is running" in line and "s3cret" not in line, line
    assert "StoreSchemaError" not in line and "upgrade ctxwise" not in line, line


def _read_only(db: Path, what: str) -> None:
    """Take write permission away from the file or its folder."""
    (db if what == "file" else db.parent).chmod(0o444 if what == "file" else 0o555)


@pytest.mark.parametrize("what", ["file", "folder"])
def test_a_read_only_sqlite_store_is_one_line_and_keeps_what_it_holds(shared_tmp: Path, what: str) -> None:
    db = shared_tmp / "ctxwise.db"
    as_nobody = os.geteuid() == 0  # root writes whatever the permissions say
    assert not as_nobody or shutil.which("setpriv"), "running as root needs util-linux's setpriv to drop it"
    assert cli("memory", "add", "--user", "u", "tea", "--db", f"sqlite:///{db}", as_nobody=as_nobody).returncode == 0
    _read_only(db, what)
    line = one_error_line(cli("memory", "add", "--user", "u", "coffee", "--db", f"sqlite:///{db}", as_nobody=as_nobody))
    assert "read-only" in line and "chmod" in line and str(shared_tmp) in line, line
    assert "server is running" not in line and "upgrade ctxwise" not in line, line
    listed = cli("memory", "list", "--user", "u", "--db", f"sqlite:///{db}", as_nobody=as_nobody)
    if what == "file":  # reads work: SQLite opens the file read-only
        assert listed.returncode == 0 and "tea" in listed.stdout, listed
    else:  # a WAL database cannot be opened where its -shm file cannot be made: one line
        assert "read-only" in one_error_line(listed)
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        assert [t for (t,) in conn.execute("SELECT text FROM user_memory")] == ["tea"]


def test_a_full_database_is_one_line_and_stores_nothing(tmp_path: Path) -> None:
    db = tmp_path / "ctxwise.db"
    SqlStore(f"sqlite:///{db}").close()
    # every connection the command opens may not grow the file: SQLite's own SQLITE_FULL
    prelude = ("from sqlalchemy import event\nfrom sqlalchemy.pool import Pool\n"
               "def cap(conn, _rec):\n"
               "    pages = conn.execute('PRAGMA page_count').fetchone()[0]\n"
               "    conn.execute(f'PRAGMA max_page_count={pages}')\n"
               "event.listen(Pool, 'connect', cap)\n")
    line = one_error_line(cli("memory", "add", "--user", "u", "x" * 60_000, "--db", f"sqlite:///{db}",
                              prelude=prelude))
    assert "out of room" in line and "free disk space" in line and "nothing of this write was stored" in line, line
    with SqlStore(f"sqlite:///{db}") as store:
        assert store.list_memory("u") == []
