"""Claude Code (the npm CLI, print mode) running a multi-step tool session through the proxy
against the stub: only ANTHROPIC_BASE_URL changed (the ctxwise key in the base URL's path).

The CLI is found at $CTXWISE_CLAUDE_CODE (CI installs it: .ci/run), else on PATH, else in .ci/run's cache
directory; the test fails, never skips, when it is missing."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from .clis import PROMPT, ci_cache, cli_binary, live_cli, note_responder, session_ids, tool_loops  # noqa: F401 (fixture)
from .conftest import PROVIDER_KEY, Live

VERSION = "2.1.197"


def claude_binary() -> str:
    return cli_binary("CTXWISE_CLAUDE_CODE", "claude", "@anthropic-ai/claude-code", VERSION,
                      ci_cache(f"claude-code-{VERSION}"))


def tool_results(body: dict[str, Any]) -> list[str]:
    out = []
    for m in body.get("messages", []):
        for b in m.get("content") if isinstance(m.get("content"), list) else []:
            if b.get("type") == "tool_result":
                c = b.get("content")
                out.append(c if isinstance(c, str) else "".join(x.get("text", "") for x in c or []))
    return out


responder = note_responder("Bash", lambda body: [t.get("name") for t in body.get("tools") or []], tool_results,
                           [("toolu_cc_1", {"command": "echo ctxwise-proxy-step > note.txt", "description": "Write a note"}),
                            ("toolu_cc_2", {"command": "cat note.txt", "description": "Read the note"})])
"""The model: with the Bash tool, write a file, read it back, then answer with what it read (Claude
Code's side calls, titles and checks, get "ok")."""


def test_claude_code_print_mode_tool_session(live_cli: Live, tmp_path: Path) -> None:
    live = live_cli
    live.stub.responder = responder
    work = tmp_path / "work"
    home = tmp_path / "home"
    work.mkdir()
    home.mkdir()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
           "ANTHROPIC_BASE_URL": f"{live.url}/k/{live.keys['a']}", "ANTHROPIC_API_KEY": PROVIDER_KEY,
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1",
           "CI": "true"}
    proc = subprocess.run([claude_binary(), "-p", PROMPT,
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
    loops = tool_loops(live)
    assert len(loops) == 1, session_ids(live)
    roles = [m.role for m in loops[0]]
    assert roles[0] == "system" and roles.count("tool") == 2 and roles[-1] == "assistant"
