"""No import cycle under src/ctxwise (issue 24 item 5).

The graph is built with :mod:`ast` from every module under ``src/ctxwise`` (migrations
included): an edge for every ``import`` statement a module can run, **function-level imports
included** (a lazy import still ties the two modules together: moving it to the top must not
create a cycle). Imports under ``if TYPE_CHECKING:`` are left out: they never run. A name taken
from the package (``from ctxwise import Session``, resolved lazily by ``ctxwise.__getattr__``)
is an edge to the module that defines it (``ctxwise.engine``); ``from . import pages`` is an
edge to the submodule. The implicit import of a module's parent packages is not an edge (a
package's ``__init__`` importing its own submodules is the usual layout, not a cycle).
"""

from __future__ import annotations

import ast
from pathlib import Path

import ctxwise

from sources import SRC, module_name  # noqa: E402



def _typing_only(tree: ast.AST) -> set[int]:
    """Ids of the nodes under an ``if TYPE_CHECKING:`` block."""
    return {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
            and isinstance(block.test, (ast.Name, ast.Attribute))
            and getattr(block.test, "id", getattr(block.test, "attr", None)) == "TYPE_CHECKING"
            for stmt in block.body for n in ast.walk(stmt)}


def edges(path: Path, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that ``path`` imports (see the module docstring)."""
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _typing_only(tree)
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in modules}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod not in modules:
                continue
            for alias in node.names:
                sub = f"{mod}.{alias.name}"
                if sub in modules:
                    out.add(sub)
                elif mod == "ctxwise" and alias.name in ctxwise._EXPORTS:
                    out.add(f"ctxwise.{ctxwise._EXPORTS[alias.name]}")
                else:
                    out.add(mod)
    out.discard(me)
    return out


def graph() -> dict[str, set[str]]:
    """Every module under src/ctxwise and the modules it imports."""
    paths = sorted(SRC.rglob("*.py"))
    modules = {module_name(p) for p in paths}
    return {module_name(p): edges(p, modules) for p in paths}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of ``g`` with more than one module (Tarjan's
    algorithm, iterative), each sorted; every cycle of ``g`` lies inside one of them."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(g):
        if root in index:
            continue
        work = [(root, iter(sorted(g[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(g.get(child, ())))))
                elif child in on:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_graph_sees_the_imports_it_should():
    """The walker is not vacuous: it finds top-level, relative, lazy-name and function-level
    imports of modules it knows."""
    g = graph()
    assert len(g) > 50
    assert "ctxwise.manager" in g["ctxwise.server.app"]  # `from .. import ContextManager` (a lazy name)
    assert "ctxwise.server.api" in g["ctxwise.server.app"]  # imported inside create_app
    assert "ctxwise.messages" in g["ctxwise.engine"]


def test_a_cycle_is_found_when_there_is_one():
    """Kind: a checker that never fails. Tarjan's components on small graphs."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []
    assert sorted(cycles({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}})) == [["a", "b"], ["c", "d"]]


def test_no_import_cycle_under_src():
    """Kind: modules that need each other (server/ and providers/render* had such cycles):
    neither can be read, tested or loaded without the other, and the import order decides
    what works."""
    found = cycles(graph())
    assert found == [], "\n".join(" <-> ".join(c) for c in found)
