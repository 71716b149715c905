"""Every example in README.md, in docs/*.md and in the CLI's --help runs, and the docs site builds.

Python blocks run as written against a temporary database. The names the agent loops leave to
the reader (`client`, `TOOLS`, `SYSTEM_PROMPT`, `run_tool`) come from a recorded tau2-bench
conversation: `client.chat.completions.create` answers with the recorded assistant messages as
the openai SDK's own `ChatCompletion` objects, `run_tool` returns the recorded tool results.
Every other block that names no framework runs alone, in a fresh interpreter where no extra
can be imported (the core install), and must print exactly the `text` block that follows it
under "It prints:". The framework and store-backend blocks run in their own tests (listed in
`RUN_ELSEWHERE`). Shell lines that call `ctxwise` run with `../shared` pointed at the shared
data, `--db` at a temporary file and `--limit 2` on replays of whole directories; the other
shell lines are listed below and the test fails on any line it does not know. The site builds
with `mkdocs build --strict`, and its API reference documents every name of `ctxwise.__all__`.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

import ctxwise
from ctxwise.cli import app
from tests.conftest import SHARED, TRAJECTORIES

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted(p for p in (REPO / "docs").rglob("*.md") if "hooks" not in p.parts)]
"""The README and every page of the docs site."""
TEXT = {p: p.read_text(encoding="utf-8") for p in PAGES}
RETAIL = TRAJECTORIES / "tau2-bench" / "retail_gpt-4.1_1trial.json"
NOT_RUN_HERE = {
    "make demo": "the quick start: `make test` runs this suite, test_cli runs the demo replay",
    "make test": "the quick start: this suite is what it runs",
    "python3 -m venv .venv": "the install: tests/test_install.py runs it in a clean copy of the repository",
    ".venv/bin/pip install -e .": "the install: tests/test_install.py runs the core line in a clean venv; make test installs the extras",
    ".venv/bin/pip install -e '.[": "an extra: make test installs every extra these lines name",
    ".venv/bin/python -m pytest": "runs part of this suite",
    "curl": "needs the running server and a key; tests/server/test_api.py makes these calls against a real server",
    "export ANTHROPIC_BASE_URL=": "the drop-in endpoint: tests/proxy/test_claude_code.py runs Claude Code with it",
    "export OPENAI_BASE_URL=": "the drop-in endpoint: tests/proxy/test_frameworks.py runs the SDKs with it",
}
RUN_ELSEWHERE = {
    "ctxwise.integrations.openai_agents": ("docs/frameworks.md", "tests/integrations/test_openai_agents.py"),
    "ctxwise.integrations.langchain": ("docs/frameworks.md", "tests/integrations/test_langchain_docs.py"),
    "ctxwise.integrations.agentscope": ("docs/frameworks.md", "tests/integrations/test_agentscope_docs.py"),
    "ctxwise.testing": ("docs/library.md", "tests/test_store_conformance.py"),
}
"""Blocks run by another test, keyed by a text they hold: (the page that test reads, the test)."""
CORE_ONLY = ("tiktoken", "tokenizers", "openai", "httpx", "typer", "rich", "psycopg", "fastapi", "starlette",
             "uvicorn", "anthropic", "agents", "langchain", "agentscope")
"""What the core install lacks: a standalone block runs with these unimportable."""


def rel(page: Path) -> str:
    return page.relative_to(REPO).as_posix()


def blocks(lang: str, text: str | None = None) -> list[str]:
    """The ``lang`` code blocks of ``text`` (default: README.md)."""
    text = TEXT[REPO / "README.md"] if text is None else text
    return [m.group(1) for m in re.finditer(rf"```{lang}\n(.*?)```", text, re.S)]


def all_blocks(lang: str) -> list[tuple[Path, str]]:
    """``(page, block)`` for every ``lang`` block of the README and the docs."""
    return [(p, b) for p in PAGES for b in blocks(lang, TEXT[p])]


def kind(block: str) -> str:
    """Which test runs a python block: ``openai-loop``, ``anthropic-loop``, a key of
    ``RUN_ELSEWHERE``, or ``standalone``."""
    if "chat.completions.create" in block:
        return "openai-loop"
    if "append_anthropic" in block:
        return "anthropic-loop"
    return next((k for k in RUN_ELSEWHERE if k in block), "standalone")


def of_kind(name: str) -> list[tuple[Path, str]]:
    return [(p, b) for p, b in all_blocks("python") if kind(b) == name]


# -- the recorded stand-ins for the model and the tools ---------------------------------------------


class RecordedChat:
    """`client.chat.completions.create(...)` answering with a recording's assistant messages."""

    def __init__(self, messages: list[dict[str, Any]]) -> None:
        first_user = next(i for i, m in enumerate(messages) if m["role"] == "user")
        self.replies = [m for m in messages[first_user:] if m["role"] == "assistant"]
        self.results = {m["tool_call_id"]: m for m in messages if m["role"] == "tool"}
        self.requests: list[dict[str, Any]] = []
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))

    def create(self, *, model: str, messages: list[dict], **kwargs: Any):
        from openai.types.chat import ChatCompletion

        self.requests.append({"model": model, "messages": messages, **kwargs})
        reply = {k: v for k, v in self.replies.pop(0).items() if k in ("role", "content", "tool_calls")}
        return ChatCompletion.model_validate({
            "id": f"recorded-{len(self.requests)}", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": reply,
                         "finish_reason": "tool_calls" if reply.get("tool_calls") else "stop"}]})

    def run_tool(self, call: Any) -> dict[str, Any]:
        recorded = self.results[call.id]
        return {"role": "tool", "tool_call_id": call.id, "content": recorded["content"]}


def tool_schemas(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Function schemas for the tools the recording calls (tau2 results carry none): each
    argument typed as the recorded values are."""
    kinds = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array", dict: "object"}
    props: dict[str, dict[str, Any]] = {}
    for m in messages:
        for c in m.get("tool_calls") or []:
            args = json.loads(c["function"]["arguments"] or "{}")
            p = props.setdefault(c["function"]["name"], {})
            p.update({k: {"type": kinds.get(type(v), "string")} for k, v in args.items()})
    return [{"type": "function", "function": {"name": n, "description": f"the recorded {n} tool",
                                              "parameters": {"type": "object", "properties": p}}}
            for n, p in sorted(props.items())]


@pytest.fixture
def recorded():
    from ctxwise.formats import load, to_openai

    conv = load(RETAIL)[0]
    messages = to_openai(conv.messages, extras=False)
    return messages, RecordedChat(messages)


@pytest.mark.parametrize("page, loop", of_kind("openai-loop"), ids=lambda x: rel(x) if isinstance(x, Path) else "")
def test_agent_loop_runs_twice_and_resumes_the_same_session(tmp_path, monkeypatch, recorded, page, loop):
    """Kind: a documented example that fails when run (here: the loop's second run appended the
    system prompt again). The block runs twice, as two runs of the same script would."""
    messages, client = recorded
    monkeypatch.chdir(tmp_path)
    tools = tool_schemas(messages)
    system = messages[0]["content"]
    for run in range(2):
        scope = {"client": client, "TOOLS": tools, "SYSTEM_PROMPT": system, "run_tool": client.run_tool}
        exec(compile(loop, rel(page), "exec"), scope)  # noqa: S102 - the docs' own code
        cm = scope["cm"]
        session = cm.session("user-42", "chat-7", tools=tools)
        roles = [m.role for m in session.messages]
        cm.close()
        assert roles.count("system") == 1, roles
        assert roles.count("user") == 2 * (run + 1), roles
    assert (tmp_path / "ctxwise.db").is_file()
    assert len(client.requests) >= 4
    for request in client.requests:  # every call got the tools and a payload that starts with the one system prompt
        assert request["tools"] == tools and request["max_tokens"] == 4_000
        assert request["messages"][0] == {"role": "system", "content": system}
        assert sum(m["role"] == "system" for m in request["messages"]) == 1
    last = client.requests[-1]["messages"]
    assert [m["role"] for m in last].count("user") == 4


def test_every_python_block_is_accounted_for():
    """Every python block is run by a test (a new kind of block needs one): the README holds
    the OpenAI loop, and a block another test runs stands on the page that test reads."""
    assert [rel(p) for p, _ in of_kind("openai-loop")][:1] == ["README.md"]
    for key, (page, _test) in RUN_ELSEWHERE.items():
        found = of_kind(key)
        assert [rel(p) for p, _ in found] == [page], (key, found)
    standalone = of_kind("standalone")
    assert {rel(p) for p, _ in standalone} >= {"docs/getting-started.md", "docs/configuration.md", "docs/concepts.md"}


def printed_after(text: str, block: str) -> str | None:
    """The ``text`` block under "It prints:" right after ``block`` in ``text``, if any."""
    after = text[text.index(block) + len(block):]
    m = re.match(r"```\s*\n+It prints:\s*\n+```text\n(.*?)```", after, re.S)
    return m.group(1) if m else None


@pytest.mark.parametrize("page, block", of_kind("standalone"), ids=lambda x: rel(x) if isinstance(x, Path) else "")
def test_standalone_blocks_run_on_the_core_install_and_print_what_the_page_says(tmp_path, page, block):
    """Kind: a snippet that needs an extra its page does not install (MissingExtra on the core
    install), or whose printed output the page misstates."""
    guard = "import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in CORE_ONLY)
    r = subprocess.run([sys.executable, "-c", guard + block], cwd=tmp_path, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    expected = printed_after(TEXT[page], block)
    if expected is not None:
        assert r.stdout == expected


@pytest.mark.parametrize("page, loop", of_kind("anthropic-loop"), ids=lambda x: rel(x) if isinstance(x, Path) else "")
def test_anthropic_loop_runs(tmp_path, monkeypatch, page, loop):
    """The Anthropic loop, with the recorded Claude conversation as the model, run twice as two
    runs of the same script would (the second resumes the session: one system prompt)."""
    from anthropic.types import Message as AnthropicMessage

    from ctxwise import ContextManager, Policy
    from ctxwise.formats import load
    from ctxwise.providers import render

    conv = load(TRAJECTORIES / "tau2-bench" / "airline_claude-sonnet-4-5-thinking_subset.json")[0]
    payload = render(conv.messages, "anthropic")
    recorded = payload["messages"]
    replies = [m for m in recorded[1:] if m["role"] == "assistant"]
    results = {b["tool_use_id"]: b for m in recorded if m["role"] == "user" and isinstance(m["content"], list)
               for b in m["content"] if b.get("type") == "tool_result"}
    requests: list[dict] = []

    def create(**kwargs: Any):
        requests.append(kwargs)
        reply = replies.pop(0)
        tool_use = any(b.get("type") == "tool_use" for b in reply["content"])
        return AnthropicMessage.model_validate({
            "id": f"msg_{len(requests)}", "type": "message", "role": "assistant", "model": kwargs["model"],
            "content": reply["content"], "stop_reason": "tool_use" if tool_use else "end_turn",
            "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}})

    monkeypatch.chdir(tmp_path)
    with ContextManager(f"sqlite:///{tmp_path / 'a.db'}", Policy(budget=60_000, unit="tokens",
                                                                   provider="anthropic")) as cm:
        for run, text in enumerate(["Hi, I need to change my flight.", "And add a bag, please."]):
            scope = {"client": SimpleNamespace(messages=SimpleNamespace(create=create)), "TOOLS": [],
                     "cm": cm, "user_id": "user-1", "chat_id": "claude-1", "user_input": text,
                     "run_tool": lambda b: results[b.id]}
            exec(compile(loop, rel(page), "exec"), scope)  # noqa: S102
            roles = [m.role for m in scope["session"].messages]
            assert requests and roles[0] == "system" and roles.count("system") == 1 and "assistant" in roles, run


# -- shell lines --------------------------------------------------------------------------------------


def shell_lines() -> list[str]:
    out = []
    for _, block in all_blocks("bash"):
        for raw in block.splitlines():
            line = raw.split("  #")[0].strip()
            if line:
                out.append(line)
    return out


def test_every_shell_line_is_known():
    unknown = [ln for ln in shell_lines() if not ln.startswith(".venv/bin/ctxwise")
               and not any(ln.startswith(k) for k in NOT_RUN_HERE)]
    assert not unknown, f"shell lines of the README or the docs this test does not run or explain: {unknown}"


@pytest.mark.parametrize("line", sorted(set(ln for ln in shell_lines() if ln.startswith(".venv/bin/ctxwise"))))
def test_ctxwise_lines_run(tmp_path, line):
    command, _, pipe = line.partition(" | ")
    args = shlex.split(command.replace("../shared", str(SHARED)))[1:]
    args = [str(RETAIL) if a == "session.json" else (str(tmp_path / a) if a.endswith(".html") else a) for a in args]
    if "--db" in args and args[args.index("--db") + 1].startswith("postgresql"):  # a deploy example: run it on SQLite
        args[args.index("--db") + 1] = f"sqlite:///{tmp_path / 'r.db'}"
    if args[0] == "serve":
        serve_answers(args, f"sqlite:///{tmp_path / 'r.db'}")
        return
    if args[0] == "keys":
        args += ["--db", f"sqlite:///{tmp_path / 'r.db'}"]
    if args[0] == "replay":
        args += ["--db", f"sqlite:///{tmp_path / 'r.db'}"]
        if any(Path(a).is_dir() for a in args[1:]) or "session.json" in line:
            args += ["--limit", "2"]
    r = subprocess.run([str(REPO / ".venv" / "bin" / "ctxwise"), *args], capture_output=True, text=True,
                       timeout=600, env={**os.environ, "COLUMNS": "120"})
    assert r.returncode == 0, r.stderr
    if pipe.startswith("jq .summary"):
        assert "summary" in json.loads(r.stdout)
    if "--report" in args:
        assert (tmp_path / "report.html").read_text(encoding="utf-8").startswith("<!doctype html>")


def test_the_policy_file_loads(tmp_path):
    from ctxwise import Policy

    ((page, toml),) = all_blocks("toml")
    assert rel(page) == "docs/configuration.md"  # tests/test_policy_settings.py reads it there too
    f = tmp_path / "policy.toml"
    f.write_text(toml, encoding="utf-8")
    policy = Policy.from_toml(f)
    assert (policy.budget, policy.reserve_output, policy.provider) == (8000, 1000, "anthropic")


# -- --help and its examples --------------------------------------------------------------------------


def commands() -> list[list[str]]:
    import typer.main

    group = typer.main.get_command(app)
    out = []

    def walk(cmd, path):
        sub = getattr(cmd, "commands", None)
        if sub:
            for name, c in sub.items():
                walk(c, [*path, name])
        else:
            out.append(path)

    walk(group, [])
    return out


@pytest.mark.parametrize("path", commands(), ids=" ".join)
def test_help_runs_and_shows_an_example(path):
    r = CliRunner().invoke(app, [*path, "--help"])
    assert r.exit_code == 0, r.output
    assert "Example: ctxwise " + " ".join(path) in " ".join(r.output.split()), r.output


def test_help_examples_run(tmp_path):
    """Each command's `Example:` runs, in the order given, on one temporary database (the memory
    examples follow each other: add, list, forget, clear)."""
    import typer.main

    db = f"sqlite:///{tmp_path / 'help.db'}"
    examples = []
    for path in commands():
        cmd = typer.main.get_command(app)
        for name in path:
            cmd = cmd.commands[name]  # type: ignore[attr-defined]
        for m in re.finditer(r"Example: ctxwise (.+)", cmd.help or ""):
            examples.append(shlex.split(m.group(1).replace("../shared", str(SHARED))))
    order = {"add": 0, "list": 1, "forget": 2, "clear": 3}
    examples.sort(key=lambda a: (a[0] == "memory", order.get(a[1], 9) if a[0] == "memory" else 0))
    for _ in range(3):  # entries for `memory forget 3` to find
        CliRunner().invoke(app, ["memory", "add", f"seed {_}", "--user", "alice", "--db", db])
    assert len(examples) == len(commands())
    created = None
    for args in examples:
        if args[0] == "serve":
            serve_answers(args, db)
            continue
        if args[:2] == ["keys", "revoke"]:  # the key the create example made
            assert created is not None, "keys create runs before keys revoke"
            args = [*args[:2], created]
        extra = ["--db", db] if args[0] in ("replay", "memory", "keys") else []
        if args[0] == "replay":
            extra += ["--limit", "1"]
        r = CliRunner().invoke(app, [*args, *extra])
        assert r.exit_code == 0, (args, r.output)
        if args[:2] == ["keys", "create"]:
            created = re.search(r"created key ([0-9a-f]+) ", r.output).group(1)  # type: ignore[union-attr]


def serve_answers(args: list[str], db: str) -> None:
    """Run a `ctxwise serve` example on ``db`` and a free port until /healthz answers, then stop it."""
    import socket
    import time
    import urllib.request

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    opts = dict(zip(args[1::2], args[2::2]))
    opts.update({"--db": db, "--port": str(port)})
    cmd = [str(REPO / ".venv" / "bin" / "ctxwise"), "serve", *[x for kv in opts.items() for x in kv]]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, (cmd, proc.stdout.read() if proc.stdout else "")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
                    assert json.loads(r.read()) == {"status": "ok"}
                    return
            except OSError:
                assert time.monotonic() < deadline, f"{cmd} did not answer /healthz in 90 s"
                time.sleep(0.3)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


# -- the docs site -------------------------------------------------------------------------------


def reference_targets() -> list[str]:
    """The object paths of the API reference's ``::: path`` directives."""
    return [m.group(1) for p in sorted((REPO / "docs" / "reference").glob("*.md"))
            for m in re.finditer(r"^::: ([\w.]+)$", TEXT[p], re.M)]


def test_the_api_reference_documents_every_public_name():
    """Kind: a name added to `ctxwise.__all__` (or removed) without its reference entry. Each
    directive names the module that defines the object, as mkdocstrings reads the source."""
    documented = {}
    for path in reference_targets():
        module, _, name = path.rpartition(".")
        documented[name] = getattr(importlib.import_module(module), name)
    public = set(ctxwise.__all__) - {"__version__"}
    assert public - set(documented) == set(), "public names missing from docs/reference/"
    for name in public:
        assert documented[name] is getattr(ctxwise, name), name


def test_the_site_builds_strict_with_every_page_and_reference_entry(tmp_path):
    """`mkdocs build --strict`: a broken link, a missing page or an unresolvable reference fails
    it. The bench write-ups are pages, and every public name has its heading."""
    site = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(REPO / "mkdocs.yml"),
                        "-d", str(site)], cwd=REPO, capture_output=True, text=True, timeout=600,
                       env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert r.returncode == 0, r.stderr
    assert "WARNING" not in r.stderr, r.stderr
    for page in PAGES[1:]:
        built = site / page.relative_to(REPO / "docs").with_suffix("") / "index.html"
        if page.name == "index.md":
            built = site / page.relative_to(REPO / "docs").parent / "index.html"
        assert built.is_file(), page
    assert (site / "bench" / "results" / "compare" / "index.html").is_file()
    reference = "".join(p.read_text(encoding="utf-8") for p in (site / "reference").rglob("index.html"))
    for path in reference_targets():
        assert f'id="{path}"' in reference, path
