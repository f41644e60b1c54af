"""The serve package's imports run one way: no cycle, type-only imports included, and each
module imports only from its own layer or the layers below (the README's serving drawing)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import memory_core.serve

PACKAGE = "memory_core.serve"
ROOT = Path(memory_core.serve.__file__).parent
# low to high, as drawn in the README's serving section
LAYERS = ("shapes", "needs", "cards", "index", "walk", "snapshot", "retrieval", "cache", "service")
LAYER_LINE = re.compile(r"^Layer: (\w+)\.$", re.MULTILINE)


def imports_of(source: str, modules: set[str]) -> set[str]:
    """The package's modules a source imports, anywhere: top level, functions, TYPE_CHECKING."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == PACKAGE:
                out |= {a.name for a in node.names if a.name in modules}
            elif node.module.startswith(PACKAGE + "."):
                out.add(node.module.split(".")[2])
        elif isinstance(node, ast.ImportFrom) and node.level:  # relative: from . import x
            base = (node.module or "").split(".")[0]
            out |= {base} if base else {a.name for a in node.names if a.name in modules}
        elif isinstance(node, ast.Import):
            out |= {a.name.split(".")[2] for a in node.names if a.name.startswith(PACKAGE + ".")}
    return out


def package_graph() -> dict[str, set[str]]:
    """Each module of the package and the package's modules it imports."""
    modules = {p.stem for p in ROOT.glob("*.py")} - {"__init__"}
    return {m: imports_of((ROOT / f"{m}.py").read_text(), modules) - {m} for m in sorted(modules)}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path that ends where it starts, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                return [*path[path.index(n) :], n]
            if n not in state and (found := visit(n)) is not None:
                return found
        path.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)) is not None:
            return found
    return None


def test_the_cycle_finder_finds_a_type_only_circle() -> None:
    a = "import typing\nif typing.TYPE_CHECKING:\n    from memory_core.serve.b import B\n"
    b = "from memory_core.serve import a\n"
    graph = {"a": imports_of(a, {"a", "b"}), "b": imports_of(b, {"a", "b"})}
    assert find_cycle(graph) == ["a", "b", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle_in_serve() -> None:
    cycle = find_cycle(package_graph())
    assert cycle is None, "import cycle in memory_core/serve: " + " -> ".join(cycle or [])


def test_every_module_names_its_layer_and_imports_only_downward() -> None:
    layer: dict[str, int] = {}
    for m in package_graph():
        doc = ast.get_docstring(ast.parse((ROOT / f"{m}.py").read_text())) or ""
        named = LAYER_LINE.findall(doc)
        assert len(named) == 1 and named[0] in LAYERS, f"{m}.py: docstring names no layer"
        layer[m] = LAYERS.index(named[0])
    upward = [
        f"{m} ({LAYERS[layer[m]]}) imports {n} ({LAYERS[layer[n]]})"
        for m, deps in package_graph().items()
        for n in sorted(deps)
        if layer[n] > layer[m]
    ]
    assert not upward, "imports up the serving layers: " + "; ".join(upward)
