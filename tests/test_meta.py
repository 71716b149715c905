"""Meta tests: the public surface is pinned, the import layers of ARCHITECTURE.md hold, the optional
parts fail with one line naming their extra, and `import ctxwise` loads nothing heavy.

Import rules are checked by walking the AST of every module under src/ctxwise (imports inside
functions included), so a lazy import cannot slip past.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import ctxwise

from sources import SRC, module_name  # noqa: E402
REPO = SRC.parents[1]

PINNED = [
    "AudioBlock", "BaseStore", "Block", "BudgetReport", "CompactionEvent", "ContextBudgetExceeded", "ContextManager", "ContextRow", "Counter",
    "CtxwiseError", "DigestSummarizer", "DocumentBlock", "FormatError", "Hide", "ImageBlock", "InMemoryStore", "InsertSummary",
    "Marker", "MemoryBusy", "MemoryEntryNotFound", "MemoryStore", "Message", "MessageNotStorable", "MissingExtra",
    "NotNewestMessage", "NotStorable", "OpenAISummarizer", "PayloadInvalid", "Policy", "PolicyError", "PolicyMismatch", "Prepared", "ProviderBlock",
    "RECALL_TOOL_NAME", "RefusalBlock", "Replace", "RuntimeSettings", "SearchResultBlock", "Session", "SessionConflict", "SessionInfo", "SessionNotFound", "SessionPool", "SessionState",
    "SessionStore", "SqlStore", "StoreSchemaError", "StoreUnavailable", "Summarizer", "SummarizerError", "SummaryResult", "TextBlock",
    "ThinkingBlock", "TokenCounter", "ToolResultBlock", "ToolResultNotFound", "ToolUseBlock", "TranscriptRow",
    "Violation", "__version__", "find_original", "get_counter", "list_counters", "open_store", "recall_tool_output",
    "recall_tool_schema", "register_counter", "text_message",
]
"""`ctxwise.__all__`, exactly. A change here is a change of the public API: say so in the commit."""

PUBLIC_MODULES = ("ctxwise.formats", "ctxwise.tokens", "ctxwise.providers", "ctxwise.compaction", "ctxwise.units",
                  "ctxwise.salient", "ctxwise.task", "ctxwise.prices", "ctxwise.errors", "ctxwise.usage",
                  "ctxwise.resources", "ctxwise.store")
"""Modules that are public besides the top level: the names in their ``__all__`` (errors.py: its
classes) may be imported by the front ends (ctxwise.store: the store seam, its backends and the
indexed read the service's key and heads tables use)."""

FRONTS = ("ctxwise.cli", "ctxwise.replay", "ctxwise.server", "ctxwise.integrations", "ctxwise.proxy")
"""Front ends (ARCHITECTURE.md, "Layers": cli, server, integrations; replay drives recordings through the same
API): they use only the public surface."""

HEAVY = ("sqlalchemy", "alembic", "tiktoken", "tokenizers", "openai", "httpx", "typer", "rich", "psycopg", "fastapi",
         "starlette", "uvicorn")


# -- the public surface -------------------------------------------------------------------------


def test_every_error_is_public():
    """Every error class of errors.py can be caught by a name of `ctxwise`."""
    import inspect

    import ctxwise.errors as errors

    classes = {n for n, c in inspect.getmembers(errors, inspect.isclass)
               if issubclass(c, errors.CtxwiseError) and c.__module__ == errors.__name__}
    assert classes - set(ctxwise.__all__) == set()


def test_all_is_pinned_and_every_name_resolves():
    assert sorted(ctxwise.__all__) == sorted(PINNED)
    assert len(set(ctxwise.__all__)) == len(ctxwise.__all__)
    assert set(ctxwise._EXPORTS) | {"__version__"} == set(ctxwise.__all__)
    for name in ctxwise.__all__:
        value = getattr(ctxwise, name)
        assert value is not None, name
        if name != "__version__":
            module = importlib_module(ctxwise._EXPORTS[name])
            assert getattr(module, name) is value, name
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        ctxwise.Nope  # noqa: B018


def importlib_module(name: str):
    import importlib

    return importlib.import_module(f"ctxwise.{name}")


def test_importing_ctxwise_loads_no_heavy_package():
    """Kind: an eager import of an optional or heavy dependency at `import ctxwise` (it cost
    1.2-1.8 s). SQLAlchemy and Alembic load when a store is opened, not before."""
    probe = ("import sys, json\n"
             "import ctxwise\nfrom ctxwise import ContextManager, Policy, Message, Session, CompactionEvent\n"
             f"before = [m for m in {HEAVY!r} if m in sys.modules]\n"
             "ContextManager('sqlite://').close()\n"
             f"after = [m for m in {HEAVY!r} if m in sys.modules]\n"
             "print(json.dumps([before, after]))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    before, after = json.loads(out.stdout)
    assert before == []
    assert "sqlalchemy" in after and "alembic" in after


# -- import layers (ARCHITECTURE.md) ---------------------------------------------------------------



def imports(path: Path) -> list[tuple[str, list[str], int]]:
    """``(absolute module, imported names, line)`` for every import in ``path``."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                   and isinstance(block.test, ast.Name) and block.test.id == "TYPE_CHECKING"
                   for stmt in block.body for n in ast.walk(stmt)}
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue  # `if TYPE_CHECKING:` imports are for annotations, never run
        if isinstance(node, ast.Import):
            out += [(a.name, [], node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.append((mod, [a.name for a in node.names], node.lineno))
    return out


def sources() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if "migrations" not in p.parts)


def under(mod: str, *prefixes: str) -> bool:
    return any(mod == p or mod.startswith(p + ".") for p in prefixes)


def test_nothing_below_the_engine_imports_the_engine():
    """Kind: a lower layer reaching up (a stage or the store importing the engine, directly or
    through the package's lazy names)."""
    engine_names = {n for n, m in ctxwise._EXPORTS.items() if m in ("engine", "manager")}
    bad = []
    for path in sources():
        me = module_name(path)
        if me in ("ctxwise", "ctxwise.engine", "ctxwise.manager") or under(me, *FRONTS):
            continue
        for mod, names, line in imports(path):
            if under(mod, "ctxwise.engine", "ctxwise.manager") or (mod == "ctxwise" and engine_names & set(names)):
                bad.append(f"{me}:{line} imports {mod} {names}")
    assert not bad, bad


def test_stages_never_touch_the_store():
    """Kind: a compaction stage persisting on its own (ARCHITECTURE.md, "Layers": the engine persists what stages
    return). changes.py stays below both compaction and store."""
    bad = []
    for path in sources():
        me = module_name(path)
        if not (under(me, "ctxwise.compaction") or me == "ctxwise.changes"):
            continue
        for mod, names, line in imports(path):
            if under(mod, "ctxwise.store", "ctxwise.engine", "ctxwise.manager", "ctxwise.memory.repo"):
                bad.append(f"{me}:{line} imports {mod}")
    assert not bad, bad


def public_names(mod: str) -> set[str]:
    import importlib

    if mod == "ctxwise":
        return set(ctxwise.__all__)
    m = importlib.import_module(mod)
    if mod == "ctxwise.errors":
        return {n for n in vars(m) if not n.startswith("_")}
    return set(getattr(m, "__all__", ()))


def test_front_ends_use_only_the_public_surface():
    """Kind: a front end (cli, replay, server, integrations) reaching into internals, which then
    cannot change without breaking it. Allowed: names of `ctxwise.__all__`, names in the
    `__all__` of the public subpackages, and modules of the front end's own package."""
    bad = []
    for path in sources():
        me = module_name(path)
        front = next((f for f in FRONTS if under(me, f)), None)
        if front is None:
            continue
        for mod, names, line in imports(path):
            if not under(mod, "ctxwise"):
                continue  # the standard library and third-party packages
            if under(mod, *FRONTS) and (under(mod, front) or front in ("ctxwise.cli", "ctxwise.__main__")
                                        or (front == "ctxwise.server" and under(mod, "ctxwise.replay"))
                                        or (front == "ctxwise.proxy" and under(mod, "ctxwise.server"))):
                continue  # its own package; the CLI drives replay; the inspector draws replay's chart;
                # the proxy's routes run on the server
            if mod == "ctxwise" or mod in PUBLIC_MODULES:
                unknown = set(names) - public_names(mod)
                if not unknown:
                    continue
                bad.append(f"{me} imports non-public {sorted(unknown)} from {mod}")
            else:
                bad.append(f"{me} imports internal module {mod} {sorted(names)}")
    assert sorted(set(bad) - KNOWN_FRONT_EXCEPTIONS) == [], "\n".join(sorted(set(bad) - KNOWN_FRONT_EXCEPTIONS))
    assert sorted(KNOWN_FRONT_EXCEPTIONS - set(bad)) == [], "fixed: remove these from KNOWN_FRONT_EXCEPTIONS"


KNOWN_FRONT_EXCEPTIONS: set[str] = set()
"""Exact entries of known violations (none left: the `ctxwise memory` and `db` commands use the
public SqlStore and its MemoryStore calls). A new violation fails, and so does a fixed one still
listed here."""


# -- optional parts: one line naming the extra ----------------------------------------------------


def run_without(modules: tuple[str, ...], code: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter where ``modules`` cannot be imported (as when their
    extra is not installed)."""
    block = "import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in modules)
    return subprocess.run([sys.executable, "-c", block + code], capture_output=True, text=True, timeout=120)


def test_core_works_without_any_extra(tmp_path):
    """Kind: a required dependency that only one optional part needs. The core (SQLite store,
    chars and estimate counters, digest summarizer) runs with pydantic, SQLAlchemy and Alembic."""
    code = f"""
from ctxwise import ContextManager, Policy
with ContextManager("sqlite:///{tmp_path / 'core.db'}", Policy(budget=2000, unit="tokens", tokenizer="estimate")) as cm:
    s = cm.session("u", "s")
    s.append_openai([{{"role": "system", "content": "be brief"}}, {{"role": "user", "content": "hello " * 50}}])
    p = s.prepare()
    print(p.size, len(p.payload))
"""
    r = run_without(HEAVY[2:], code)
    assert r.returncode == 0, r.stderr
    size, n = map(int, r.stdout.split())
    assert n == 2 and size > 50


@pytest.mark.parametrize("blocked, code, extra", [
    (("tiktoken",), "from ctxwise import get_counter; get_counter('o200k_base')", "tokenizers"),
    (("tokenizers",), "from ctxwise import get_counter; get_counter('deepseek')", "tokenizers"),
    (("psycopg",), "from ctxwise import ContextManager; ContextManager('postgresql+psycopg://u@127.0.0.1:1/x')",
     "postgres"),
    (("openai",), "from ctxwise import OpenAISummarizer; OpenAISummarizer('gpt-4.1-mini')", "llm"),
    (("fastapi",), "from ctxwise.server import create_app", "server"),
    (("uvicorn",), "import ctxwise.server", "server"),
])
def test_a_missing_extra_is_one_line_naming_it(blocked, code, extra):
    r = run_without(blocked, "from ctxwise import MissingExtra\ntry:\n    " + code +
                    "\nexcept MissingExtra as e:\n    print(type(e).__name__, e.extra, '|', e, '|', e.hint)\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"MissingExtra {extra} |"), r.stdout
    assert f"pip install 'ctxwise[{extra}]'" in r.stdout and r.stdout.count("\n") == 1


def test_the_command_without_the_cli_extra_says_what_to_install():
    r = run_without(("typer",), "from ctxwise.__main__ import main\nmain()")
    assert r.returncode == 2
    assert r.stderr.strip().startswith("error: the ctxwise command needs 'typer'")
    assert r.stderr.strip().endswith("(hint: pip install 'ctxwise[cli]')") and r.stderr.count("\n") == 1


def test_serve_without_the_server_extra_says_what_to_install():
    """Kind: a front end whose optional dependency is missing answering with a traceback."""
    r = run_without(("fastapi",), "import sys\nsys.argv = ['ctxwise', 'serve', '--port', '1']\n"
                                  "from ctxwise.__main__ import main\nmain()")
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1
    assert "needs 'fastapi'" in r.stderr and "pip install 'ctxwise[server]'" in r.stderr


def test_demo_generator_is_not_in_the_package():
    assert not list(SRC.rglob("make_demo.py"))
    assert (REPO / "scripts" / "make_demo.py").is_file()
    assert (SRC / "data" / "demo_session.json").is_file()
