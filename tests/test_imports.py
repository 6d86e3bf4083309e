"""The import graph of the project has no cycles, and every module imports on
its own in a fresh interpreter.

The graph is read from the source with `ast`: every `import` statement counts,
at module level or inside a function (a function-local import that closes a
cycle is still a cycle, only deferred), except those under `if TYPE_CHECKING:`.
A module that imports `a.b.c` from outside the package `a.b` also depends on
`a.b` and `a` (Python runs those packages' `__init__` first); a package's own
modules do not (its `__init__` has already started).
"""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("chad", "benchmarks", "experiments")


def project_modules() -> dict[str, pathlib.Path]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imported_names(module: str, path: pathlib.Path) -> set[str]:
    """Absolute names of everything `module` imports (modules or names in them)."""
    tree = ast.parse(path.read_text(), str(path))
    is_pkg = path.name == "__init__.py"
    package = module if is_pkg else module.rpartition(".")[0]
    out: set[str] = set()
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                if node.level > 1:
                    base = base[: len(base) - (node.level - 1)]
                prefix = ".".join(base)
                mod = f"{prefix}.{node.module}" if node.module else prefix
            else:
                mod = node.module or ""
            # `from a.b import c`: c is a module a.b.c or a name defined in a.b
            out.update(f"{mod}.{a.name}" for a in node.names)
        stack.extend(ast.iter_child_nodes(node))
    return out


def import_graph() -> dict[str, set[str]]:
    mods = project_modules()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        deps = set()
        for imp in imported_names(name, path):
            # a module, or a name defined in the module before the last dot
            target = imp if imp in mods else imp.rpartition(".")[0]
            if target not in mods or target == name:
                continue
            deps.add(target)
            # Importing a.b.c from outside package a.b runs a.b's __init__ (and
            # a's, from outside a) first: the importer depends on them too.
            pkg = target.rpartition(".")[0]
            while pkg and not (name == pkg or name.startswith(pkg + ".")):
                if pkg in mods:
                    deps.add(pkg)
                pkg = pkg.rpartition(".")[0]
        graph[name] = deps
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph (as a path a -> ... -> a), or None. Iterative DFS."""
    WHITE, GREY, BLACK = 0, 1, 2
    colour = dict.fromkeys(graph, WHITE)
    for root in sorted(graph):
        if colour[root] != WHITE:
            continue
        path = [root]
        iters = [iter(sorted(graph[root]))]
        colour[root] = GREY
        while iters:
            nxt = next(iters[-1], None)
            if nxt is None:
                colour[path.pop()] = BLACK
                iters.pop()
                continue
            if colour[nxt] == GREY:
                return path[path.index(nxt):] + [nxt]
            if colour[nxt] == WHITE:
                colour[nxt] = GREY
                path.append(nxt)
                iters.append(iter(sorted(graph[nxt])))
    return None


def test_cycle_finder_finds_a_planted_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    cycle = find_cycle(graph)
    assert cycle is not None and cycle[0] == cycle[-1] and set(cycle) == {"a", "b", "c"}
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_relative_imports_resolve(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("from .x import y\nfrom .. import z\ndef f():\n    import q.r\n"
                 "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import hidden\n")
    names = imported_names("pkg.sub.m", f)
    assert {"pkg.sub.x.y", "pkg.z", "q.r"} <= names
    assert "hidden" not in names


def test_no_import_cycles():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


# What the runtimes may use: the representation of values and cotangents (with
# their monoid, plusv) and the deep-recursion helper; not the compiler.
VALUE_LAYER = {"chad", "chad.errors", "chad.types", "chad.values", "chad.linear",
               "chad.tables", "chad.deep",
               "chad.memory"}  # (the malloc setting, set before chad's first thread: chad/deep.py)


def test_runtime_does_not_import_the_compiler():
    graph = import_graph()
    seen, stack = set(), [m for m in graph if m == "chad.runtime" or m.startswith("chad.runtime.")]
    while stack:
        m = stack.pop()
        if m in seen:
            continue
        seen.add(m)
        stack.extend(graph[m])
    compiler = sorted(m for m in seen if not m.startswith("chad.runtime") and m not in VALUE_LAYER)
    assert not compiler, f"chad/runtime/ reaches {compiler}"


def test_importing_a_runtime_loads_no_compiler_module():
    code = ("import sys, chad.runtime.array_evm, chad.runtime.map_evm, chad.runtime.parallel_evm\n"
            "print('\\n'.join(m for m in sys.modules if m.split('.')[0] == 'chad' "
            "and not m.startswith('chad.runtime')))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    loaded = set(r.stdout.split())
    assert loaded <= VALUE_LAYER, sorted(loaded - VALUE_LAYER)


def test_core_never_imports_an_extension():
    """The composition root (chad.features) wires the extensions in; the core
    (the language, the transforms, the tables, the reference evaluator and the
    runtimes) never imports chad.arrays, chad.functions or chad.loops."""
    graph = import_graph()
    extensions = ("chad.arrays", "chad.functions", "chad.loops")
    above_root = {"chad.features", "chad.api", "chad.cli", "chad.check_cli", "chad.demo"}
    tools = ("chad.costmodel", "chad.proofs")  # above the core; the reference evaluator
    reference = {"chad.costmodel.evaluate", "chad.costmodel.lacm"}  # and the LACM are core
    core = [m for m in graph
            if m.split(".")[0] == "chad" and m not in above_root
            and not m.startswith(extensions) and (not m.startswith(tools) or m in reference)]
    assert {"chad.terms", "chad.costmodel.evaluate", "chad.runtime.array_evm"} <= set(core)
    for mod in core:
        bad = sorted(d for d in graph[mod] if d.startswith(extensions))
        assert not bad, f"{mod} imports the extension(s) {bad}"


# A `__main__` module runs its program when imported; it is run by its package.
@pytest.mark.parametrize("module", sorted(m for m in project_modules()
                                          if not m.endswith("__main__")))
def test_imports_alone_in_a_fresh_interpreter(module):
    r = subprocess.run([sys.executable, "-c", f"import {module}"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]


def test_the_distribution_has_one_top_level_name(tmp_path):
    """Installed, chad is the only top-level package: its runtime, cost model and
    proofs are chad.runtime, chad.costmodel and chad.proofs, and no generic name
    (runtime, costmodel, proofs) is importable from outside the repository."""
    code = ("import importlib.util as u, chad.runtime, chad.costmodel.evaluate, chad.proofs\n"
            "print([n for n in ('runtime', 'costmodel', 'proofs') if u.find_spec(n)])")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "[]"
    import setuptools

    found = setuptools.find_packages(str(ROOT), include=["chad", "chad.*"])
    assert found and all(p == "chad" or p.startswith("chad.") for p in found)
    assert {"chad.runtime", "chad.costmodel", "chad.proofs"} <= set(found)
