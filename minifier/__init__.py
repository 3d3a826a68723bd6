"""A fast, faithful, crash-proof delta-debugging minifier for FX graphs compiled by Inductor.

::

    from minifier import minify, AccuracyFailure, CompileFailure, RuntimeFailure
    result = minify(gm, example_inputs, check=AccuracyFailure())
    result.graph_module, result.inputs, result.repro_path, result.log

``python -m minifier repro.py`` (:func:`minify_repro`) shrinks a saved repro again.

This package never imports ``instrumented_backend``: the backend uses the minifier, not the
other way round. Packages that change how Inductor compiles (fault injection) tell the
minifier what to carry into workers and repros through :func:`register_context_provider`.

Importing the package is cheap: each public name loads its module (and torch) on first use,
so ``python -m minifier`` can start its worker process before this process imports torch.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "minify", "MinifyResult", "MinifierError", "NotFailingError", "UnbuildableGraph", "detect_level",
    "Failure", "AccuracyFailure", "CompileFailure", "RuntimeFailure",
    "CarriedContext", "register_context_provider", "current_context",
    "Candidate", "GraphSlicer", "STRATEGIES", "strategy", "prewarm", "minify_repro",
]

_HOME = {
    **dict.fromkeys(("minify", "MinifyResult", "MinifierError", "NotFailingError", "UnbuildableGraph",
                     "detect_level"), ".search"),
    **dict.fromkeys(("Failure", "AccuracyFailure", "CompileFailure", "RuntimeFailure"), ".checks"),
    **dict.fromkeys(("CarriedContext", "register_context_provider", "current_context"), ".context"),
    **dict.fromkeys(("Candidate", "GraphSlicer"), ".graph"),
    **dict.fromkeys(("STRATEGIES", "strategy"), ".strategies"),
    "prewarm": ".workers",
    "minify_repro": ".saved",
}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'minifier' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOME[name], __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
