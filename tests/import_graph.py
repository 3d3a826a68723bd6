"""The import graph of this project's packages, and its cycles.

Run ``python tests/import_graph.py`` to print every cycle (exit status 1 when there is one).
Every ``import`` statement counts, function-level ones included: a cycle hidden inside a
function is still a cycle in the design. ``if TYPE_CHECKING:`` blocks do not count for cycles,
since they never run; they do count for the layers (:func:`upward_imports`): a type named from a
layer above is still a dependency on it.
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


def _imports(tree: ast.AST, module: str, is_package: bool, type_checking: bool = False) -> set[str]:
    found: set[str] = set()
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node) and not type_checking:
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


def import_graph(type_checking: bool = False) -> nx.DiGraph:
    """A directed graph: an edge ``a -> b`` when module ``a`` imports module ``b`` of ours
    (``type_checking``: imports under ``if TYPE_CHECKING:`` too)."""
    files = {module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}
    graph = nx.DiGraph()
    graph.add_nodes_from(files)
    for module, path in files.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for target in _imports(tree, module, path.name == "__init__.py", type_checking):
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


# The package's layers, bottom first: a module may import its own layer and those below, never one
# above. ``minifier`` is a package of its own that imports nothing of ``instrumented_backend``.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("records", ("instrumented_backend.records", "instrumented_backend.deferred",
                 "instrumented_backend._torch_support", "instrumented_backend.fail_soft", "minifier")),
    ("recording", ("instrumented_backend.recording",)),
    ("seams", ("instrumented_backend.seams",)),
    ("provenance", ("instrumented_backend.provenance",)),
    ("capture", ("instrumented_backend.capture", "instrumented_backend.graphs")),
    ("diagnosis", ("instrumented_backend.diagnosis",)),
    ("profiling", ("instrumented_backend.profiling",)),
    ("report", ("instrumented_backend.report",)),
    ("package", ("instrumented_backend",)),  # its __init__: the public API, re-exported
    ("cli", ("instrumented_backend.cli", "instrumented_backend.__main__")),  # the command line, over the API
)


def layer_of(module: str) -> int:
    """The index in :data:`LAYERS` of ``module``'s layer (its longest matching prefix)."""
    best, found = -1, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, found = len(prefix), index
    if found < 0:
        raise ValueError(f"{module} is in no layer of LAYERS")
    return found


def upward_imports() -> list[tuple[str, str]]:
    """Every ``(importer, imported)`` pair of modules where the imported one's layer is above the
    importer's, counting every import: module-level, function-level and ``TYPE_CHECKING``."""
    graph = import_graph(type_checking=True)
    return sorted((a, b) for a, b in graph.edges if layer_of(b) > layer_of(a))


def main() -> int:
    cycles = import_cycles()
    for cycle in cycles:
        print(" -> ".join([*cycle, cycle[0]]))
    print(f"{len(cycles)} import cycle(s) among {len(import_graph())} modules")
    upward = upward_imports()
    for importer, imported in upward:
        print(f"upward: {importer} ({LAYERS[layer_of(importer)][0]}) -> {imported} ({LAYERS[layer_of(imported)][0]})")
    print(f"{len(upward)} import(s) of a layer above")
    return 1 if cycles else 0


if __name__ == "__main__":
    sys.exit(main())
