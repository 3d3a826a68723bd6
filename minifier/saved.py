"""A saved repro read back: imported as a module, and its graph shrunk again.

What ``python -m minifier repro.py`` runs, callable from Python as :func:`minify_repro` (the
diagnose command shrinks the repro of a graph that crashed on its first call with it).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional

from .search import MinifierError, MinifyResult, minify

if TYPE_CHECKING:
    from .checks import Failure

__all__ = ["load_repro", "minify_repro"]


def load_repro(path: "str | Path") -> Any:
    """Import a repro script as a module (its ``ENV`` and carried imports take effect here)."""
    path = Path(path)
    if not path.is_file():
        raise MinifierError(f"no repro script at {path}")
    spec = importlib.util.spec_from_file_location("minifier_repro", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name in ("SPEC", "EXPECTED", "make_module", "make_inputs"):
        if not hasattr(module, name):
            raise MinifierError(f"{path} is not a minifier repro (no {name})")
    return module


def _check_for(expected: dict[str, Any], spec: dict[str, Any], pattern: Optional[str]) -> "Failure":
    from .checks import AccuracyFailure, CompileFailure, RuntimeFailure

    kind = expected["kind"]
    if kind == "accuracy":
        return AccuracyFailure(pattern=pattern, tol=spec.get("tol"))
    if kind == "compile_error":
        return CompileFailure(pattern=pattern)
    return RuntimeFailure(pattern=pattern)


def minify_repro(path: "str | Path", *, out: "str | Path | None" = None, pattern: Optional[str] = None,
                 isolate: bool = True, timeout: Optional[float] = None, hint_nodes: Iterable[str] = (),
                 echo: Optional[Callable[[str], None]] = None) -> MinifyResult:
    """Shrink the graph of the repro script at ``path`` again, pinned to the failure it expects
    (and ``pattern``, else the script's own), with its config and carried setup; the new repro
    goes to ``out`` (default: beside it). What ``python -m minifier repro.py`` runs."""
    path = Path(path)
    repro = load_repro(path)
    spec = repro.SPEC
    config = {k: v for k, v in (spec.get("config") or {}).items() if k != "fallback_random"}
    return minify(repro.make_module(), repro.make_inputs(),
                  check=_check_for(repro.EXPECTED, spec, pattern or getattr(repro, "PATTERN", None)),
                  level=spec["level"], config=config, dynamic=spec.get("dynamic") or {}, isolate=isolate,
                  timeout=timeout, hint_nodes=hint_nodes, repro_dir=out if out is not None else path.parent,
                  seed=spec.get("seed", 0), echo=echo)
