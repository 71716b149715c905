"""OpenCode (the npm CLI ``opencode-ai``, ``opencode run``) running a multi-step tool session
through the proxy against the stub: streamed Chat Completions calls, only the provider's base
URL changed (the ctxwise key in the base URL's path).

OpenCode reads its providers from ``opencode.json``: the test writes one in the working folder
with a provider of the ``@ai-sdk/openai-compatible`` package whose ``baseURL`` is the proxy (the
same lines a user puts there). The CLI is found at $CTXWISE_OPENCODE (CI installs it: .ci/run),
else on PATH, else in .ci/run's cache directory; the test fails, never skips, when it is missing."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from .clis import PROMPT, ci_cache, cli_binary, live_cli, note_responder, tool_loops  # noqa: F401 (fixture)
from .conftest import PROVIDER_KEY, Live

VERSION = "1.18.33"


def opencode_binary() -> str:
    return cli_binary("CTXWISE_OPENCODE", "opencode", "opencode-ai", VERSION, ci_cache(f"opencode-{VERSION}"))


def tool_names(body: dict[str, Any]) -> list[str]:
    return [str((t.get("function") or {}).get("name")) for t in body.get("tools") or [] if isinstance(t, dict)]


def tool_outputs(body: dict[str, Any]) -> list[str]:
    return [c if isinstance(c := m.get("content"), str) else json.dumps(c)
            for m in body.get("messages") or [] if m.get("role") == "tool"]


responder = note_responder("bash", tool_names, tool_outputs,
                           [("call_oc_1", {"command": "echo ctxwise-opencode-step > note.txt",
                                           "description": "Write the note"}),
                            ("call_oc_2", {"command": "cat note.txt", "description": "Read the note"})],
                           side="Note session")
"""The model: with the bash tool, write a file, read it back, then answer with what it read (a call
without tools, OpenCode's session title, gets a title)."""


def test_opencode_run_tool_session(live_cli: Live, tmp_path: Path) -> None:
    live = live_cli
    live.stub.responder = responder
    work = tmp_path / "work"
    work.mkdir()
    (work / "opencode.json").write_text(json.dumps({
        "$schema": "https://opencode.ai/config.json",
        "provider": {"ctxwise": {"npm": "@ai-sdk/openai-compatible", "name": "ctxwise",
                                 "options": {"baseURL": f"{live.url}/k/{live.keys['a']}/v1", "apiKey": PROVIDER_KEY},
                                 "models": {"stub-model": {"name": "stub model"}}}},
        "model": "ctxwise/stub-model", "autoupdate": False, "share": "disabled"}))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "NO_COLOR": "1",
           "XDG_CACHE_HOME": str(tmp_path / "cache"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_STATE_HOME": str(tmp_path / "state"),
           "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1"}
    proc = subprocess.run([opencode_binary(), "run", PROMPT],
                          cwd=work, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "The note says: ctxwise-opencode-step" in proc.stdout
    assert (work / "note.txt").read_text().strip() == "ctxwise-opencode-step"  # the tool really ran
    assert live.stub.invalid == []
    main = [r for r in live.stub.of("chat") if "bash" in tool_names(r.json)]
    assert len(main) == 3 and all(r.json.get("stream") is True for r in main)  # three streamed calls of one loop
    for r in main:
        assert r.headers.get("authorization") == f"Bearer {PROVIDER_KEY}"
    # one session holds the loop (the title call, without tools, is a conversation of its own)
    loops = tool_loops(live)
    assert len(loops) == 1, len(loops)
    roles = [m.role for m in loops[0]]
    assert roles.count("tool") == 2 and roles[-1] == "assistant"
    assert "ctxwise-opencode-step" in loops[0][-1].text
