"""The package's import graph: no cycles, and the core never loads the applications.

The graph is built from the source with :mod:`ast`, without importing anything.

Two graphs, with these rules for an edge ``A -> B``:

* the **load-time graph** counts the imports that run when module ``A`` is loaded:
  statements in the module body, also inside top-level ``if`` / ``try`` / ``with``
  blocks and class bodies, but not under ``if TYPE_CHECKING:`` (never run) and not
  inside functions (they run on first use);
* the **full graph** also counts the imports inside functions.  A cycle there is not
  a load failure, but it means two modules depend on each other, against the one-way
  layering (domains <- structure <- model <- models/exact <- kernels <- learn/smc <-
  fit <- diagnostics/plots <- cli; applications on top).
  Facades that resolve names by module path at run time (``ugm_infer/_lazy.py``) are
  not edges in either graph.
* ``import a.b.c`` and ``from a.b import c`` name the deepest ``ugm_infer`` module
  they reach (``a.b.c`` when it is a module, else ``a.b``); relative imports are
  resolved against ``A``'s package.
* Loading ``B`` also runs the ``__init__`` of every package above it, so ``A`` gets
  an edge to those packages as well, except the packages that contain ``A`` (they
  are already being loaded when ``A`` runs) and the root ``ugm_infer`` (loaded first).

Then: neither graph has a cycle (apart from the known ones listed in
``KNOWN_CYCLES``, each tested as a strict ``xfail`` so that its entry must be deleted
once it is gone); and no module outside ``ugm_infer.applications`` (the core) has a
load-time edge into ``ugm_infer.applications``.  The core reaches the
applications only through lazy facades (module ``__getattr__``, see
``ugm_infer/_lazy.py``), which import them on first use.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "ugm_infer"
APPLICATIONS = f"{PACKAGE}.applications"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted((ROOT / PACKAGE).rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _load_time_imports(body: list[ast.stmt]):
    """Import statements executed when a module body (or a class body in it) runs."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _load_time_imports(node.body)
            yield from _load_time_imports(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                yield from _load_time_imports(block)
        elif isinstance(node, (ast.With, ast.ClassDef)):
            yield from _load_time_imports(node.body)


def _deepest(name: str, modules: dict) -> str | None:
    parts = name.split(".")
    for k in range(len(parts), 0, -1):
        candidate = ".".join(parts[:k])
        if candidate in modules:
            return candidate
    return None


def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:k]) for k in range(1, len(parts))]


def _all_imports(body: list[ast.stmt]):
    """Every import statement, functions included (``TYPE_CHECKING`` blocks excluded)."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _all_imports(node.orelse)
        else:
            for field in ("body", "orelse", "finalbody", "handlers"):
                block = getattr(node, field, None)
                if isinstance(block, list):
                    yield from _all_imports(block)


@functools.cache
def import_graph(lazy: bool = False) -> dict[str, set[str]]:
    """``{module: modules it imports}``: the load-time graph, or with ``lazy`` the full graph."""
    collect = _all_imports if lazy else _load_time_imports
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        package = name if is_package else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in collect(tree.body):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    stem = ".".join(base + ([node.module] if node.module else []))
                else:
                    stem = node.module or ""
                targets = [f"{stem}.{alias.name}" for alias in node.names]
            for target in targets:
                reached = _deepest(target, modules)
                if reached is None or reached == name:
                    continue
                own = set(_ancestors(name)) | {PACKAGE}
                if is_package:
                    own.add(name)
                for dep in [*_ancestors(reached), reached]:
                    if dep not in own and dep != name:
                        graph[name].add(dep)
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph[v]:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


#: Cycles of the full graph known today: name -> (the packages its modules lie in, why).
#: Each is excused in ``test_no_cycles_with_lazy_imports`` and tested on its own as a
#: strict xfail, which fails as soon as the cycle is gone: then delete its entry.
KNOWN_CYCLES: dict[str, tuple[tuple[str, ...], str]] = {}


def _excused(cycle: list[str]) -> str | None:
    for name, (scopes, _) in KNOWN_CYCLES.items():
        if all(any(_in(m, s) for s in scopes) for m in cycle):
            return name
    return None


def test_graph_sees_the_package():
    graph, full = import_graph(), import_graph(lazy=True)
    assert len(graph) > 60
    assert "ugm_infer.kernels._updates" in graph["ugm_infer.kernels.gibbs"]
    assert "ugm_infer.applications.ergm.model" in graph["ugm_infer.applications.ergm.estimation"]
    # ergm_mcmc_mle's module imports the simulation at load time; diagnostics imports numpyro in a function
    assert "ugm_infer.applications.ergm.simulation" in graph["ugm_infer.applications.ergm.estimation"]
    assert "ugm_infer.numpyro" not in graph["ugm_infer.diagnostics"]
    assert "ugm_infer.numpyro" in full["ugm_infer.diagnostics"]
    # the facades resolve their targets by module path at run time: no edge
    assert not any(_in(d, APPLICATIONS) for d in full["ugm_infer.dca"])


def test_no_load_time_cycles():
    cycles = find_cycles(import_graph())
    assert not cycles, f"modules that import each other when loaded: {cycles}"


def test_no_cycles_with_lazy_imports():
    cycles = [c for c in find_cycles(import_graph(lazy=True)) if _excused(c) is None]
    assert not cycles, f"modules that depend on each other (imports inside functions included): {cycles}"


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=why)) for n, (_, why) in KNOWN_CYCLES.items()],
)
def test_known_cycle_is_gone(name):
    cycles = [c for c in find_cycles(import_graph(lazy=True)) if _excused(c) == name]
    assert not cycles, f"known cycle {name!r}: {cycles}"


def test_core_does_not_load_applications():
    graph = import_graph()
    bad = {
        module: sorted(d for d in deps if _in(d, APPLICATIONS))
        for module, deps in graph.items()
        if not _in(module, APPLICATIONS)
    }
    bad = {m: d for m, d in bad.items() if d}
    assert not bad, f"core modules import applications at load time: {bad}"


def test_rules_on_a_small_example():
    """Load-time imports exclude functions and TYPE_CHECKING; the full list adds functions."""
    src = (
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "import ugm_infer.kernels.gibbs\n"
        "from . import exact\n"
        "if TYPE_CHECKING:\n"
        "    from ugm_infer.applications import dca\n"
        "def f():\n"
        "    from ugm_infer.applications import ergm\n"
        "class C:\n"
        "    from ugm_infer import sampling\n"
    )
    body = ast.parse(src).body
    names = []
    for node in _load_time_imports(body):
        names.extend(a.name for a in node.names)
        if isinstance(node, ast.ImportFrom):
            names.append(f"from:{node.module}:{node.level}")
    assert "ugm_infer.kernels.gibbs" in names and "exact" in names and "sampling" in names
    assert "dca" not in names and "ergm" not in names
    every = [a.name for node in _all_imports(body) for a in node.names]
    assert "ergm" in every and "dca" not in every and "sampling" in every
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycles(graph) == [["a", "b", "c"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []
