"""A saved repro read back: imported as a module, and its graph shrunk again.

What ``python -m minifier repro.py`` runs, callable from Python as :func:`minify_repro` (the
diagnose command shrinks the repro of a graph that crashed with it), and :func:`repro_with_inputs`,
a repro's copy on another call's arguments.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional, Sequence

from .repro import INPUTS_HEADER, inputs_block
from .search import MinifierError, MinifyResult, minify

if TYPE_CHECKING:
    from .checks import Failure

__all__ = ["load_repro", "minify_repro", "repro_with_inputs"]


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
                 echo: Optional[Callable[[str], None]] = None, max_seconds: Optional[float] = None) -> MinifyResult:
    """Shrink the graph of the repro script at ``path`` again, pinned to the failure it expects
    (and ``pattern``, else the script's own), with its config and carried setup; the new repro
    goes to ``out`` (default: beside it); ``max_seconds`` bounds the search as :func:`minify`'s
    does. What ``python -m minifier repro.py`` runs."""
    path = Path(path)
    repro = load_repro(path)
    spec = repro.SPEC
    config = {k: v for k, v in (spec.get("config") or {}).items() if k != "fallback_random"}
    return minify(repro.make_module(), repro.make_inputs(),
                  check=_check_for(repro.EXPECTED, spec, pattern or getattr(repro, "PATTERN", None)),
                  level=spec["level"], config=config, dynamic=spec.get("dynamic") or {},
                  dynamic_ints=spec.get("dynamic_ints"), requires_grad=spec.get("requires_grad") or [], isolate=isolate,
                  timeout=timeout, hint_nodes=hint_nodes, repro_dir=out if out is not None else path.parent,
                  seed=spec.get("seed", 0), echo=echo, max_seconds=max_seconds)


def repro_with_inputs(path: "str | Path", inputs: Sequence[Any], target: "str | Path") -> Path:
    """Write to ``target`` a copy of the repro script at ``path`` that judges ``inputs`` in place
    of its own (same graph and constants, failure, config and carried setup); return ``target``.

    For a failure seen on another call of the same graph than the one the repro was written from.
    Importing the repro applies its ``ENV`` and carried imports here, as loading it to shrink does."""
    path, target = Path(path), Path(target)
    text = path.read_text()
    start = text.find(INPUTS_HEADER)
    data = text.find("\nDATA = ", start) if start >= 0 else -1
    end = text.find("\n", data + 1) if data >= 0 else -1
    if end < 0:
        raise ValueError(f"{path} has no '# Inputs:' block followed by a DATA line: not a minifier repro")
    state = load_repro(path).load_data()["state"]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.with_suffix(".inputs.pt").unlink(missing_ok=True)  # a stale sidecar would be read for DATA = None
    target.write_text(text[:start] + inputs_block(inputs, state, target) + text[end:])
    return target
