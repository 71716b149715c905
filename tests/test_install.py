"""The install works as written (issue 28, item 1): ctxwise is not on the package index, so the
README installs it from a clone.

On a clean copy of the repository (the files git tracks, and new ones it does not ignore):

* the README's install lines, as written, up to the core install, then the README's agent
  loop run with that environment's Python: the core install alone (no extra), so the first
  snippet must not need one;
* `python -m build` makes the sdist and the wheel, `twine check --strict` passes them, and
  their metadata says what the README says (the core dependencies, the extras the docs list,
  the package data the code reads, the `ctxwise` command);
* the wheel installed into a fresh venv runs the same loop, and its `ctxwise` command without
  the `cli` extra says in one line what to install.

The loop's model and tool are a scripted stand-in written with pydantic (the core install has
no openai SDK): it answers the first call with a tool call and the others with text.
Needs the package index (pip installs pydantic, SQLAlchemy and Alembic; `build` installs
setuptools in its isolated environment); pip's cache makes the second install quick.
"""

from __future__ import annotations

import email
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import ctxwise

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
DOCUMENTED_EXTRAS = {"tokenizers", "postgres", "llm", "cli", "anthropic", "server", "openai-agents", "langchain",
                     "agentscope", "all", "docs"}
"""The extras docs/getting-started.md lists."""

STAND_IN = '''
from types import SimpleNamespace

from pydantic import BaseModel


class Function(BaseModel):
    name: str
    arguments: str


class ToolCall(BaseModel):
    id: str
    type: str = "function"
    function: Function


class ChatMessage(BaseModel):
    role: str = "assistant"
    content: str | None = None
    tool_calls: list[ToolCall] | None = None


class Choice(BaseModel):
    message: ChatMessage


class Reply(BaseModel):
    choices: list[Choice]


class Completions:
    def __init__(self):
        self.requests = []

    def create(self, *, model, messages, tools, max_tokens):
        self.requests.append(messages)
        if len(self.requests) == 1:
            call = ToolCall(id="call_1", function=Function(name="find_order", arguments='{"email": "mia@example.com"}'))
            return Reply(choices=[Choice(message=ChatMessage(tool_calls=[call]))])
        return Reply(choices=[Choice(message=ChatMessage(content=f"answer {len(self.requests)}"))])


client = SimpleNamespace(chat=SimpleNamespace(completions=Completions()))
TOOLS = [{"type": "function", "function": {"name": "find_order", "description": "Find an order by e-mail.",
          "parameters": {"type": "object", "properties": {"email": {"type": "string"}}}}}]
SYSTEM_PROMPT = "You are the support agent of a bicycle shop."


def run_tool(call):
    return {"role": "tool", "tool_call_id": call.id, "content": "order #W2378156: delivered 2024-05-05, $466.75"}
'''

CHECK = '''
import importlib.util
import ctxwise

requests = client.chat.completions.requests
assert len(requests) == 3, requests
assert all(r[0] == {"role": "system", "content": SYSTEM_PROMPT} for r in requests)
assert [m["role"] for m in requests[-1]] == ["system", "user", "assistant", "tool", "assistant", "user"]
assert importlib.util.find_spec("tiktoken") is None  # the core install: no extra
cm.close()
print("ok", ctxwise.__file__)
'''


def readme_loop() -> str:
    (loop,) = [m.group(1) for m in re.finditer(r"```python\n(.*?)```", README, re.S)
               if "chat.completions.create" in m.group(1)]
    return loop


def core_install_lines() -> list[str]:
    """The README's install lines up to and including the core install (`pip install -e .`)."""
    (block,) = [m.group(1) for m in re.finditer(r"```bash\n(.*?)```", README, re.S) if "-m venv" in m.group(1)]
    lines = [raw.split("  #")[0].strip() for raw in block.splitlines() if raw.strip()]
    core = next(i for i, ln in enumerate(lines) if ln.endswith("pip install -e ."))
    return lines[: core + 1]


def clean_env() -> dict[str, str]:
    """This environment without what points Python at the worktree or the test venv."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}


def run(cmd: list[str] | str, cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=clean_env(),
                       shell=isinstance(cmd, str))
    assert r.returncode == 0, (cmd, r.stdout[-2000:], r.stderr[-4000:])
    return r


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the repository as a fresh clone has it (tracked and new files, nothing ignored)."""
    out = tmp_path_factory.mktemp("clone")
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        src = REPO / name
        if src.is_file():
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, out / name)
    return out


@pytest.fixture(scope="module")
def dist(clone: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist and the wheel, built from the clean copy by `python -m build`."""
    out = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "build", "--outdir", str(out), str(clone)], cwd=clone)
    return out


def loop_script(where: Path) -> Path:
    script = where / "quick_start.py"
    script.write_text(STAND_IN + "\n" + readme_loop() + "\n" + CHECK, encoding="utf-8")
    return script


def test_the_readme_install_lines_then_its_agent_loop_run_on_the_core_install(clone: Path) -> None:
    for line in core_install_lines():
        run(line, cwd=clone)
    work = clone / "work"
    work.mkdir()
    r = run([str(clone / ".venv" / "bin" / "python"), str(loop_script(work))], cwd=work)
    assert r.stdout.split() == ["ok", str(clone / "src" / "ctxwise" / "__init__.py")]
    assert (work / "ctxwise.db").is_file()


def test_the_sdist_and_wheel_build_and_pass_twine_check(dist: Path) -> None:
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    assert wheel.name == f"ctxwise-{ctxwise.__version__}-py3-none-any.whl"
    r = run([sys.executable, "-m", "twine", "check", "--strict", str(wheel), str(sdist)], cwd=dist)
    assert r.stdout.count("PASSED") == 2, r.stdout


def test_the_wheel_metadata_says_what_the_docs_say(dist: Path) -> None:
    (wheel,) = dist.glob("*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        info = f"ctxwise-{ctxwise.__version__}.dist-info"
        meta = email.message_from_bytes(z.read(f"{info}/METADATA"))
        entry_points = z.read(f"{info}/entry_points.txt").decode()
    assert (meta["Name"], meta["Version"]) == ("ctxwise", ctxwise.__version__)
    assert meta["Requires-Python"] == ">=3.11" and meta["License-Expression"] == "MIT"
    assert meta["Description-Content-Type"] == "text/markdown"
    assert meta.get_payload().strip() == README.strip()
    core = sorted(d.split("==")[0] for d in meta.get_all("Requires-Dist") if "extra ==" not in d)
    assert core == ["alembic", "pydantic", "sqlalchemy"]
    assert DOCUMENTED_EXTRAS <= set(meta.get_all("Provides-Extra"))
    assert "ctxwise = ctxwise.__main__:main" in entry_points
    shipped = {"ctxwise/py.typed", "ctxwise/alembic.ini", "ctxwise/data/demo_session.json",
               "ctxwise/migrations/env.py", "ctxwise/migrations/versions/0001_sessions_context_transcript_events.py"}
    assert shipped <= names, shipped - names
    assert any(n.startswith("ctxwise/server/static/") for n in names)
    (sdist,) = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as t:
        members = {m.name.split("/", 1)[1] for m in t.getmembers() if "/" in m.name}
    assert {"README.md", "pyproject.toml", "src/ctxwise/__init__.py", "src/ctxwise/data/demo_session.json"} <= members


def test_the_wheel_in_a_fresh_venv_runs_the_quick_start(dist: Path, tmp_path: Path) -> None:
    (wheel,) = dist.glob("*.whl")
    venv = tmp_path / "venv"
    run(["python3", "-m", "venv", str(venv)], cwd=tmp_path)
    run([str(venv / "bin" / "pip"), "install", "-q", str(wheel)], cwd=tmp_path)
    r = run([str(venv / "bin" / "python"), str(loop_script(tmp_path))], cwd=tmp_path)
    site = r.stdout.split()[1]
    assert r.stdout.split()[0] == "ok" and site.startswith(str(venv)), r.stdout
    cli = subprocess.run([str(venv / "bin" / "ctxwise"), "replay"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120, env=clean_env())
    assert cli.returncode == 2 and cli.stderr.count("\n") == 1, cli.stderr
    assert cli.stderr.startswith("error: the ctxwise command needs 'typer'") and "ctxwise[cli]" in cli.stderr
