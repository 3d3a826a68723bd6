"""The import graph of this project's packages, and its cycles.

Run ``python tests/import_graph.py`` to print every cycle (exit status 1 when there is one).
Every ``import`` statement counts, function-level ones included: a cycle hidden inside a
function is still a cycle in the design. ``if TYPE_CHECKING:`` blocks do not count, since they
never run.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("instrumented_backend", "minifier")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    found: set[str] = set()
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                if not is_package:
                    base = base[:-1]
                base = base[: len(base) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            found.add(prefix)
            found.update(f"{prefix}.{alias.name}" for alias in node.names)
        stack.extend(ast.iter_child_nodes(node))
    return found


def import_graph() -> nx.DiGraph:
    """A directed graph: an edge ``a -> b`` when module ``a`` imports module ``b`` of ours."""
    files = {module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}
    graph = nx.DiGraph()
    graph.add_nodes_from(files)
    for module, path in files.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for target in _imports(tree, module, path.name == "__init__.py"):
            if target in files and target != module:
                graph.add_edge(module, target)
    return graph


def import_cycles(graph: nx.DiGraph | None = None) -> list[list[str]]:
    """Every elementary cycle among our modules, a package's ``__init__`` excepted.

    A package's ``__init__`` re-exports its submodules, so ``pkg -> pkg.mod`` edges are its
    job; a cycle through it is reported only when a submodule imports the package *and*
    the package imports that submodule back through another module.
    """
    graph = import_graph() if graph is None else graph
    inits = {m for m in graph if (ROOT / m.replace(".", "/") / "__init__.py").exists()}
    core = graph.subgraph(m for m in graph if m not in inits)
    return [list(c) for c in nx.simple_cycles(core)]


def main() -> int:
    cycles = import_cycles()
    for cycle in cycles:
        print(" -> ".join([*cycle, cycle[0]]))
    print(f"{len(cycles)} import cycle(s) among {len(import_graph())} modules")
    return 1 if cycles else 0


if __name__ == "__main__":
    sys.exit(main())
