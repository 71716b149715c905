"""Kinds of fault: user mistakes that surfaced as raw tracebacks or wrong texts (issue 15 item 7):
a non-integer memory id on the CLI (an 88-line DataError traceback on PostgreSQL), a database
file that is not a ctxwise store, a message built with
``model_construct`` (skipping validation) that made its session unloadable, and the
PostgreSQL conflict text claiming a wait that never happened."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest
from sqlalchemy import text

from ctxwise import ContextManager, Policy
from ctxwise.errors import CtxwiseError, SessionConflict
from ctxwise.messages import Message, TextBlock


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ctxwise.cli", *args], capture_output=True, text=True, timeout=300)


def _one_error_line(res: subprocess.CompletedProcess) -> str:
    assert res.returncode == 2, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert lines and lines[0].startswith("error:") and "Traceback" not in res.stderr, res.stderr
    return " ".join(lines)


@pytest.mark.parametrize("bad_id", ["abc", "1.5", "99999999999999999999999"])
def test_memory_forget_bad_id_is_one_error_line(store_url, bad_id):
    ContextManager(store_url, Policy.preset("default")).close()
    msg = _one_error_line(_cli("memory", "forget", bad_id, "--user", "u1", "--db", store_url))
    assert "memory forget" in msg


def test_memory_list_on_a_file_that_is_not_a_store(tmp_path):
    f = tmp_path / "notes.db"
    f.write_text("not a database")
    _one_error_line(_cli("memory", "list", "--user", "u1", "--db", f"sqlite:///{f}"))


def test_model_construct_message_is_refused_and_the_session_stays_loadable(store_url):
    """``Message.model_construct`` skips validation: a block that is a plain dict, or a role
    that does not exist, must be refused at append, not stored to break every later load."""
    cm = ContextManager(store_url, Policy.preset("default", provider="openai"))
    s = cm.session("u1", "s1")
    s.append([Message(id="u0", role="user", blocks=[TextBlock(text="hi")])])
    bad = [Message.model_construct(id="x1", role="assistant", blocks=[{"type": "text"}], metadata={}),
           Message.model_construct(id="x2", role="robot", blocks=[TextBlock(text="hi")], metadata={}),
           Message.model_construct(id=None, role="assistant", blocks=[TextBlock(text="hi")], metadata={})]
    for m in bad:
        with pytest.raises(CtxwiseError, match=r"message 1"):
            s.append([m])
    again = cm.session("u1", "s1")
    assert [m.id for m in again.messages] == ["u0"]
    again.append([Message(id="a1", role="assistant", blocks=[TextBlock(text="hello")])])
    cm.close()


@pytest.mark.postgresql
def test_postgresql_nowait_conflict_does_not_claim_a_wait(pg_schema_url):
    cm = ContextManager(pg_schema_url, Policy.preset("default", provider="openai"))
    s = cm.session("u1", "s1")
    s.append([Message(id="u0", role="user", blocks=[TextBlock(text="hi")])])
    engine = cm.store.engine
    with engine.connect() as conn:  # another writer holds the session row
        conn.execute(text("BEGIN"))
        conn.execute(text("SELECT * FROM sessions WHERE session_id = 's1' FOR UPDATE"))
        with pytest.raises(SessionConflict) as e:
            s.append([Message(id="a1", role="assistant", blocks=[TextBlock(text="hello")])])
        conn.execute(text("ROLLBACK"))
    assert "longer than" not in str(e.value) and "does not wait" in str(e.value)
    cm.close()
