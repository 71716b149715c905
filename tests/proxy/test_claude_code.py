"""Claude Code (the npm CLI, print mode) running a multi-step tool session through the proxy
against the stub: only ANTHROPIC_BASE_URL changed (the ctxwise key in the base URL's path).

The CLI is found at $CTXWISE_CLAUDE_CODE (CI installs it: .ci/run), else on PATH, else at
/work/npm/node_modules/.bin/claude; the test fails, never skips, when it is missing."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxwise import ContextManager, Policy

from .conftest import PROVIDER_KEY, Live, running
from .stub import Reply

BIG = Policy.preset("default", budget=60000, unit="tokens", tokenizer="o200k_base")
"""Claude Code's system prompt and tools alone are ~15-20k tokens."""


def claude_binary() -> str:
    found = os.environ.get("CTXWISE_CLAUDE_CODE") or shutil.which("claude") or "/work/npm/node_modules/.bin/claude"
    assert Path(found).exists(), (
        "Claude Code not found: npm install --prefix DIR @anthropic-ai/claude-code@2.1.197 and set "
        "CTXWISE_CLAUDE_CODE=DIR/node_modules/.bin/claude (.ci/run does this)")
    return found


def tool_results(body: dict[str, Any]) -> list[str]:
    out = []
    for m in body.get("messages", []):
        for b in m.get("content") if isinstance(m.get("content"), list) else []:
            if b.get("type") == "tool_result":
                c = b.get("content")
                out.append(c if isinstance(c, str) else "".join(x.get("text", "") for x in c or []))
    return out


def responder(kind: str, body: dict[str, Any]) -> Reply:
    """The model: with the Bash tool, write a file, read it back, then answer with what it read."""
    if "Bash" not in [t.get("name") for t in body.get("tools") or []]:
        return Reply(text="ok")  # Claude Code's side calls (titles, checks)
    done = tool_results(body)
    if len(done) == 0:
        return Reply(calls=[("toolu_cc_1", "Bash", {"command": "echo ctxwise-proxy-step > note.txt",
                                                    "description": "Write a note"})])
    if len(done) == 1:
        return Reply(calls=[("toolu_cc_2", "Bash", {"command": "cat note.txt", "description": "Read the note"})])
    return Reply(text=f"The note says: {done[-1].strip()}")


@pytest.fixture
def live_cc(tmp_path: Path) -> Iterator[Live]:
    with running(tmp_path, BIG) as lv:
        yield lv


def test_claude_code_print_mode_tool_session(live_cc: Live, tmp_path: Path) -> None:
    live = live_cc
    live.stub.responder = responder
    work = tmp_path / "work"
    home = tmp_path / "home"
    work.mkdir()
    home.mkdir()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
           "ANTHROPIC_BASE_URL": f"{live.url}/k/{live.keys['a']}", "ANTHROPIC_API_KEY": PROVIDER_KEY,
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1",
           "CI": "true"}
    proc = subprocess.run([claude_binary(), "-p", "Write a note to note.txt, then read it back to me.",
                           "--tools", "Bash", "--allowedTools", "Bash", "--output-format", "json",
                           "--model", "claude-sonnet-4-5"],
                          cwd=work, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert "ctxwise-proxy-step" in result["result"]
    assert (work / "note.txt").read_text().strip() == "ctxwise-proxy-step"  # the tool really ran
    assert live.stub.invalid == []
    main = [r for r in live.stub.of("messages") if "Bash" in [t.get("name") for t in r.json.get("tools") or []]]
    assert len(main) == 3  # three model calls of one tool loop
    for r in main:
        assert PROVIDER_KEY in (r.headers.get("x-api-key"), r.headers.get("authorization", "")[7:])
    # one session holds the loop: its transcript is complete
    live.settle()
    cm = ContextManager(live.store_url)
    try:
        sessions = _session_ids(live)
        loops = []
        for sid in sessions:
            msgs = cm.session("acme:proxy", sid, create=False).messages
            if any(b.type == "tool_use" for m in msgs for b in m.blocks):
                loops.append(msgs)
        assert len(loops) == 1, sessions
        roles = [m.role for m in loops[0]]
        assert roles[0] == "system" and roles.count("tool") == 2 and roles[-1] == "assistant"
    finally:
        cm.close()


def _session_ids(live: Live) -> set[str]:
    import sqlalchemy as sa

    engine = sa.create_engine(live.store_url)
    try:
        with engine.connect() as conn:
            return {r[0] for r in conn.execute(sa.text(
                "select distinct session_id from ctxwise_proxy_heads where tenant = 'acme'"))}
    finally:
        engine.dispose()
