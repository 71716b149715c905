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
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxwise import ContextManager, Policy

from .conftest import PROVIDER_KEY, Live, running
from .stub import Reply

VERSION = "0.171.0"
BIG = Policy.preset("default", budget=60000, unit="tokens", tokenizer="o200k_base")
"""Codex's instructions and tools are several thousand tokens."""


def codex_binary() -> str:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ctxwise-ci" / f"codex-{VERSION}"
    found = os.environ.get("CTXWISE_CODEX") or shutil.which("codex") or str(cache / "node_modules" / ".bin" / "codex")
    assert Path(found).exists(), (
        f"Codex not found: npm install --prefix DIR @openai/codex@{VERSION} and set "
        "CTXWISE_CODEX=DIR/node_modules/.bin/codex (.ci/run does this)")
    return found


def outputs(body: dict[str, Any]) -> list[str]:
    return [str(i.get("output")) for i in body.get("input") or []
            if isinstance(i, dict) and i.get("type") == "function_call_output"]


def responder(kind: str, body: dict[str, Any]) -> Reply:
    """The model: with the exec_command tool, write a file, read it back, then answer with what it read."""
    if "exec_command" not in [t.get("name") for t in body.get("tools") or []]:
        return Reply(text="ok")  # a side call
    done = outputs(body)
    if len(done) == 0:
        return Reply(calls=[("call_cx_1", "exec_command", {"cmd": "echo ctxwise-codex-step > note.txt"})])
    if len(done) == 1:
        return Reply(calls=[("call_cx_2", "exec_command", {"cmd": "cat note.txt"})])
    return Reply(text="The note says: " + done[-1].strip().splitlines()[-1])


@pytest.fixture
def live_cx(tmp_path: Path) -> Iterator[Live]:
    with running(tmp_path, BIG) as lv:
        yield lv


def test_codex_exec_tool_session(live_cx: Live, tmp_path: Path) -> None:
    live = live_cx
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
                           "Write a note to note.txt, then read it back to me."],
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
    live.settle()
    cm = ContextManager(live.store_url)
    try:
        sids = _session_ids(live)
        assert len(sids) == 1, sids
        msgs = cm.session("acme:proxy", sids.pop(), create=False).messages
        roles = [m.role for m in msgs]
        assert roles.count("tool") == 2 and roles[-1] == "assistant"
        assert "ctxwise-codex-step" in msgs[-1].text
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
