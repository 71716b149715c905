"""The code's own contracts (issue 24 item 7, pydantic-ai's pattern of testing them):

* a module's private names (a leading underscore) are its own: no module under
  ``src/ctxwise`` imports one from another module, except from a package-private helper
  module (``_something.py``) of its own package; and such a helper module is imported only
  from inside the package that holds it (``formats/_common.py`` by the formats);
* the public methods of :class:`ctxwise.ContextManager` and :class:`ctxwise.Session` say
  what they take and return: no ``Any`` (nor a bare ``list`` / ``dict``, which means the
  same) in their parameters or return annotations.

The imports are read with :mod:`ast` (function-level imports included); the signatures with
:func:`typing.get_type_hints`, names imported under ``if TYPE_CHECKING:`` resolved from the
modules they name.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import typing
from pathlib import Path
from typing import Any

import pytest

import ctxwise

from sources import SRC, module_name  # noqa: E402



def package_of(path: Path) -> str:
    me = module_name(path)
    return me if path.name == "__init__.py" else me.rpartition(".")[0]


def is_private(name: str) -> bool:
    """A leading underscore, not a dunder (``__version__`` is public)."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def is_module(name: str) -> bool:
    """Whether ``name`` (dotted, under ``ctxwise``) is a module or package of the source tree."""
    rel = Path(*name.split("."))
    return (SRC.parent / rel).with_suffix(".py").is_file() or (SRC.parent / rel / "__init__.py").is_file()


def helper_package(module: str) -> str | None:
    """The package a package-private helper module (``ctxwise.formats._common``) belongs to, or
    None when ``module`` is not one."""
    parent, _, last = module.rpartition(".")
    return parent if is_private(last) else None


def inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def private_imports(source: str, me: str) -> dict[str, int]:
    """Every import in module ``me`` (its ``source``) that breaks the first contract:
    ``{"<me> imports ...": line}``."""
    package = me.rpartition(".")[0]
    bad: dict[str, int] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                first = next((i for i, p in enumerate(parts) if is_private(p)), None)
                if alias.name.startswith("ctxwise.") and first is not None:
                    target = ".".join(parts[: first + 1])
                    owner = helper_package(target)
                    if owner is not None and not inside(me, owner):
                        bad[f"{me} imports {target}, a helper private to {owner}"] = node.lineno
            continue
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            mod = ".".join(base + ([node.module] if node.module else []))
        else:
            mod = node.module or ""
        if not inside(mod, "ctxwise"):
            continue  # the standard library and third-party packages
        for alias in node.names:
            target = f"{mod}.{alias.name}" if is_module(f"{mod}.{alias.name}") else mod
            owner = helper_package(target)
            if owner is not None and not inside(me, owner):
                bad[f"{me} imports {target}, a helper private to {owner}"] = node.lineno
            elif target == mod and is_private(alias.name) and owner is None:
                bad[f"{me} imports private {alias.name} from {mod}"] = node.lineno
    return bad


def all_private_imports() -> dict[str, int]:
    return {k: v for path in sorted(SRC.rglob("*.py"))
            for k, v in private_imports(path.read_text(encoding="utf-8"), module_name(path)).items()}


KNOWN_PRIVATE_IMPORTS: set[str] = set()
"""Exact entries of tolerated violations (none). A new violation fails, and so does a fixed one
still listed here."""


def test_no_module_imports_another_modules_private_names():
    """Kind: a helper used across modules while its name says it is nobody else's business
    (it then cannot change without breaking a module that nothing points to)."""
    found = all_private_imports()
    new = sorted(f"{v} (line {found[v]})" for v in set(found) - KNOWN_PRIVATE_IMPORTS)
    assert new == [], "\n".join(new)
    assert sorted(KNOWN_PRIVATE_IMPORTS - set(found)) == [], "fixed: remove these from KNOWN_PRIVATE_IMPORTS"


@pytest.mark.parametrize("source, me, expected", [
    ("from .tau2 import _read_tool", "ctxwise.formats.x", "imports private _read_tool from ctxwise.formats.tau2"),
    ("from ctxwise.formats.tau2 import _read_tool", "ctxwise.providers.x",
     "imports private _read_tool from ctxwise.formats.tau2"),
    ("from ._common import need_dict, _ABSENT", "ctxwise.formats.x", None),   # the package's own helper
    ("from ..formats._common import need_dict", "ctxwise.providers.x",
     "imports ctxwise.formats._common, a helper private to ctxwise.formats"),
    ("from ..formats import _common", "ctxwise.providers.x",
     "imports ctxwise.formats._common, a helper private to ctxwise.formats"),
    ("import ctxwise.formats._common", "ctxwise.providers.x",
     "imports ctxwise.formats._common, a helper private to ctxwise.formats"),
    ("from .._optional import require", "ctxwise.providers.x", None),   # private to ctxwise: all of it
    ("from ctxwise import __version__", "ctxwise.providers.x", None),
    ("from json import _default_decoder", "ctxwise.providers.x", None),  # not ctxwise's
])
def test_the_private_import_check_catches_what_it_should(source, me, expected):
    """The checker itself, on sources that break the contract and sources that keep it."""
    got = list(private_imports(source + "\n", me))
    assert got == ([f"{me} {expected}"] if expected else []), got


# -- no Any in the signatures of the public API ---------------------------------------------


def typing_namespace(*modules: str) -> dict[str, Any]:
    """The names ``modules`` import under ``if TYPE_CHECKING:`` (their annotations use them),
    plus the JSON aliases a recursive annotation names."""
    ns: dict[str, Any] = dict(vars(importlib.import_module("ctxwise.messages")))
    for name in modules:
        mod = importlib.import_module(name)
        tree = ast.parse(inspect.getsource(mod))
        package = name if Path(mod.__file__ or "").name == "__init__.py" else name.rpartition(".")[0]
        for block in ast.walk(tree):
            if not (isinstance(block, ast.If) and getattr(block.test, "id", None) == "TYPE_CHECKING"):
                continue
            for node in block.body:
                if isinstance(node, ast.ImportFrom):
                    base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
                    source = ".".join(base + ([node.module] if node.module else []))
                    src_mod = importlib.import_module(source)
                    for alias in node.names:
                        ns[alias.asname or alias.name] = getattr(src_mod, alias.name)
    return ns


def loose_parts(t: Any, seen: frozenset[int] = frozenset()) -> list[str]:
    """The parts of annotation ``t`` that say nothing: ``Any``, and generic classes without
    their parameters (``list``, ``dict``: ``list[Any]``, ``dict[Any, Any]``)."""
    if t is Any:
        return ["Any"]
    if id(t) in seen:
        return []
    if isinstance(t, (typing.ForwardRef, str)):
        return []  # a recursive alias (JSONValue) naming itself: its first level is checked
    if isinstance(t, type) and typing.get_origin(t) is None and t in (list, dict, set, frozenset, tuple, type):
        return [f"bare {t.__name__}"]
    return [p for a in typing.get_args(t) if a is not Ellipsis for p in loose_parts(a, seen | {id(t)})]


def public_methods(cls: type) -> list[tuple[str, Any]]:
    """``(name, function)`` for every public method of ``cls`` (inherited ones included),
    its constructor and context-manager methods, and the getters of its properties."""
    out = []
    for name, member in inspect.getmembers(cls):
        if name.startswith("_") and name not in ("__init__", "__enter__", "__exit__"):
            continue
        fn = member.fget if isinstance(member, property) else member
        if inspect.isfunction(fn) or inspect.iscoroutinefunction(fn):
            out.append((name, fn))
    return out


@pytest.mark.parametrize("cls", [ctxwise.ContextManager, ctxwise.Session], ids=lambda c: c.__name__)
def test_public_signatures_carry_no_any(cls):
    """Kind: an API whose types say nothing (``Any``), so neither a type checker nor a reader
    learns what to pass or what comes back."""
    ns = typing_namespace(cls.__module__, "ctxwise.records")
    methods = public_methods(cls)
    assert len(methods) >= (5 if cls is ctxwise.ContextManager else 20), [n for n, _ in methods]
    bad = []
    for name, fn in methods:
        hints = typing.get_type_hints(fn, localns=ns)
        params = [p for p in inspect.signature(fn).parameters if p != "self"]
        missing = [p for p in [*params, "return"] if p not in hints]
        if missing:
            bad.append(f"{cls.__name__}.{name}: no annotation for {missing}")
        for arg, t in hints.items():
            loose = loose_parts(t)
            if loose:
                bad.append(f"{cls.__name__}.{name}({arg}): {t} holds {', '.join(loose)}")
    assert not bad, "\n".join(bad)


def test_the_any_check_catches_what_it_should():
    """The checker itself: Any at any depth, and a bare generic, are found; precise types,
    ``Callable[..., X]`` and the recursive JSON alias pass."""
    from ctxwise.messages import JSONObject, JSONValue

    assert loose_parts(Any) == ["Any"]
    assert loose_parts(list[dict[str, Any]]) == ["Any"]
    assert loose_parts(typing.Optional[list[dict]]) == ["bare dict"]  # noqa: UP007 (the runtime form)
    assert loose_parts(typing.Callable[..., list[Any]]) == ["Any"]
    assert loose_parts(typing.Callable[..., list[int]]) == []
    assert loose_parts(list[JSONObject]) == [] and loose_parts(JSONValue) == []


MAX_FUNCTION_LINES = 80
"""Issue 24's bound: a longer function is a sign that a step wants its own name."""


def test_no_function_under_src_is_longer_than_80_lines():
    """Kind: a function grown past what one reading holds (``cli.replay`` had 143 lines,
    ``server.calls.session_calls`` 170). Counts from ``def`` to the last line, docstring included."""
    import ast
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "src" / "ctxwise"
    long = []
    for path in sorted(src.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(src)}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, long


def test_no_block_in_the_core_is_worse_than_grade_c():
    """Issue 24: radon's cyclomatic-complexity grade of every function, method and class in the
    engine, the core plans, compaction and the store is A, B or C (complexity <= 20)."""
    from pathlib import Path

    from radon.complexity import cc_rank, cc_visit

    src = Path(__file__).resolve().parents[1] / "src" / "ctxwise"
    files = [src / "engine.py", src / "manager.py",
             *(p for d in ("core", "compaction", "store") for p in sorted((src / d).glob("*.py")))]
    worse = [f"{path.relative_to(src)}:{b.lineno} {b.name} {cc_rank(b.complexity)} ({b.complexity})"
             for path in files for b in cc_visit(path.read_text(encoding="utf-8"))
             if cc_rank(b.complexity) not in ("A", "B", "C")]
    assert len(files) > 20 and not worse, worse
