"""Codex (the npm CLI ``@openai/codex``, ``codex exec``) running a multi-step tool session through
the proxy against the stub: streamed Responses calls, only the model provider's base URL
changed (the ctxwise key in the base URL's path).

Codex reads its base URL from its config, not from ``OPENAI_BASE_URL``: the test passes a model
provider with ``-c`` (``base_url``, ``env_key = "OPENAI_API_KEY"``, ``wire_api = "responses"``),
the same lines a user puts in ``~/.codex/config.toml``. The CLI is found at $CTXWISE_CODEX (CI
installs it: .ci/run), else on PATH, else in .ci/run's cache directory; the test fails, never
skips, when it is missing."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from .clis import PROMPT, ci_cache, cli_binary, live_cli, note_responder, session_ids, tool_loops  # noqa: F401 (fixture)
from .conftest import PROVIDER_KEY, Live

VERSION = "0.171.0"


def codex_binary() -> str:
    return cli_binary("CTXWISE_CODEX", "codex", "@openai/codex", VERSION, ci_cache(f"codex-{VERSION}"))


def outputs(body: dict[str, Any]) -> list[str]:
    return [str(i.get("output")) for i in body.get("input") or []
            if isinstance(i, dict) and i.get("type") == "function_call_output"]


responder = note_responder("exec_command", lambda body: [t.get("name") for t in body.get("tools") or []], outputs,
                           [("call_cx_1", {"cmd": "echo ctxwise-codex-step > note.txt"}),
                            ("call_cx_2", {"cmd": "cat note.txt"})])
"""The model: with the exec_command tool, write a file, read it back, then answer with what it read."""


def test_codex_exec_tool_session(live_cli: Live, tmp_path: Path) -> None:
    live = live_cli
    live.stub.responder = responder
    work, home = tmp_path / "work", tmp_path / "codex-home"
    work.mkdir()
    home.mkdir()
    provider = (f'{{name="ctxwise", base_url="{live.url}/k/{live.keys["a"]}/v1", env_key="OPENAI_API_KEY", '
                'wire_api="responses"}')
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "CODEX_HOME": str(home),
           "OPENAI_API_KEY": PROVIDER_KEY, "RUST_LOG": "error", "NO_COLOR": "1"}
    proc = subprocess.run([codex_binary(), "exec", "--skip-git-repo-check", "--sandbox", "danger-full-access",
                           "-m", "gpt-5", "-c", 'model_provider="ctxwise"', "-c", f"model_providers.ctxwise={provider}",
                           PROMPT],
                          cwd=work, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "The note says: ctxwise-codex-step" in proc.stdout
    assert (work / "note.txt").read_text().strip() == "ctxwise-codex-step"  # the tool really ran
    assert live.stub.invalid == []
    main = [r for r in live.stub.of("responses") if "exec_command" in [t.get("name") for t in r.json.get("tools") or []]]
    assert len(main) == 3 and all(r.json.get("stream") is True for r in main)  # three streamed calls of one loop
    for r in main:
        assert r.headers.get("authorization") == f"Bearer {PROVIDER_KEY}"
    # one session holds the loop: its transcript is complete
    loops = tool_loops(live)
    assert len(loops) == 1 and len(session_ids(live)) == 1, session_ids(live)
    roles = [m.role for m in loops[0]]
    assert roles.count("tool") == 2 and roles[-1] == "assistant"
    assert "ctxwise-codex-step" in loops[0][-1].text
