"""The package's shape: no import cycles, records at the bottom, every stage in its subpackage."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from import_graph import LAYERS, ROOT, import_cycles, import_graph, layer_of, upward_imports

# Plain data: these may import each other, and nothing else of ours.
RECORD_MODULES = {
    "instrumented_backend.records",
    "instrumented_backend.deferred",
    "instrumented_backend.profiling.records",
}


def test_no_import_cycles_among_the_packages_modules():
    cycles = import_cycles()
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join([*c, c[0]]) for c in cycles)


def test_the_cycle_check_runs_as_a_command_and_sees_function_level_imports(tmp_path):
    result = subprocess.run([sys.executable, str(Path(__file__).parent / "import_graph.py")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 import cycle(s)" in result.stdout
    # The checker counts an import inside a function body: a cycle hidden there is still found.
    import ast

    from import_graph import _imports

    tree = ast.parse("def f():\n    from .b import x\n")
    assert "pkg.b" in _imports(tree, "pkg.a", is_package=False)


# Imports of a layer above: none, of any kind (module-level, function-level, TYPE_CHECKING). Where a lower
# layer reads an upper one's records (the capture record's accuracy check, the queries' captured graph), it
# names what it reads as a Protocol of its own.
KNOWN_UPWARD: set[tuple[str, str]] = set()


def test_no_module_imports_a_layer_above_its_own():
    """Every import counts: module-level, function-level and ``TYPE_CHECKING``. Where a lower layer
    needs an upper one (capture starting a diagnosis, the diagnosis drawing its HTML report), the
    upper one registers a hook (``capture/hooks.py``, ``diagnosis/written.py``)."""
    upward = set(upward_imports())
    assert upward <= KNOWN_UPWARD, "imports of a layer above:\n" + "\n".join(
        f"{a} ({LAYERS[layer_of(a)][0]}) -> {b} ({LAYERS[layer_of(b)][0]})" for a, b in sorted(upward - KNOWN_UPWARD))
    assert upward == KNOWN_UPWARD, f"no longer imported, drop them from KNOWN_UPWARD: {sorted(KNOWN_UPWARD - upward)}"


def test_every_module_is_in_a_layer_and_the_layers_are_the_packages():
    graph = import_graph(type_checking=True)
    layers = {module: LAYERS[layer_of(module)][0] for module in graph if module.startswith("instrumented_backend")}
    assert layers["instrumented_backend.records"] == "records" and layers["instrumented_backend.cli"] == "cli"
    for package in ("recording", "seams", "provenance", "capture", "diagnosis", "profiling", "report"):
        assert {layer for module, layer in layers.items()
                if module.startswith(f"instrumented_backend.{package}.")} == {package}, package
    # a TYPE_CHECKING import is seen: the layer test counts it
    type_only = ("instrumented_backend.report.html", "instrumented_backend.capture.left_out")
    assert graph.has_edge(*type_only) and not import_graph().has_edge(*type_only)


def test_records_import_nothing_of_ours_above_them():
    graph = import_graph()
    for module in RECORD_MODULES:
        above = set(graph.successors(module)) - RECORD_MODULES
        assert not above, f"{module} imports {sorted(above)}"


def test_the_top_level_holds_only_the_records_and_the_public_entry():
    top = sorted(p.stem for p in (ROOT / "instrumented_backend").glob("*.py"))
    assert top == ["__init__", "__main__", "_torch_support", "deferred", "fail_soft", "graphs", "records"]


def test_the_quick_run_names_test_modules_that_exist():
    """`make test` runs the modules of tests/quick.txt: a renamed module must not drop out silently."""
    listed = [line.strip() for line in (ROOT / "tests" / "quick.txt").read_text().splitlines()
              if line.strip() and not line.startswith("#")]
    assert listed and all((ROOT / name).is_file() for name in listed), [n for n in listed if not (ROOT / n).is_file()]
    assert "tests/test_verdict_mechanisms.py" in listed and "tests/test_provenance.py" in listed
