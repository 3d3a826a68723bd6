"""A fast, faithful, crash-proof delta-debugging minifier for FX graphs compiled by Inductor.

::

    from minifier import minify, AccuracyFailure, CompileFailure, RuntimeFailure
    result = minify(gm, example_inputs, check=AccuracyFailure())
    result.graph_module, result.inputs, result.repro_path, result.log

``python -m minifier repro.py`` shrinks a saved repro again.

This package never imports ``instrumented_backend``: the backend uses the minifier, not the
other way round. Packages that change how Inductor compiles (fault injection) tell the
minifier what to carry into workers and repros through :func:`register_context_provider`.
"""

from .checks import AccuracyFailure, CompileFailure, Failure, RuntimeFailure
from .context import CarriedContext, current_context, register_context_provider
from .graph import Candidate, GraphSlicer
from .minify import MinifierError, MinifyResult, NotFailingError, detect_level, minify
from .strategies import STRATEGIES, strategy
from .workers import prewarm

__all__ = [
    "minify", "MinifyResult", "MinifierError", "NotFailingError", "detect_level",
    "Failure", "AccuracyFailure", "CompileFailure", "RuntimeFailure",
    "CarriedContext", "register_context_provider", "current_context",
    "Candidate", "GraphSlicer", "STRATEGIES", "strategy", "prewarm",
]
