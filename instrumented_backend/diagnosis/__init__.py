"""Diagnosis: explain compile errors, check accuracy, find the failing layer and the first diverging kernel.

* :func:`check_accuracy` - compiled vs eager, fp64 as referee (``options={"check_accuracy": True}``
  does it inside the backend);
* :func:`find_failing_layer` - eager / aot_eager / aot_eager_decomp_partition / inductor /
  instrumented, the first that errors or is inaccurate;
* :func:`find_first_divergence` - the first buffer whose value differs from eager, its kernel,
  the culprit FX node and its kernel lines;
* :class:`KernelCompileError` - what a failed C++ compile raises under the instrumented backend.
"""

from __future__ import annotations

from .accuracy import AccuracyError, AccuracyReport, OutputComparison, check_accuracy
from .compile_error import (
    CompileErrorReport,
    CompilerMessage,
    ExplainedLine,
    KernelCompileError,
    explain_compile_error,
)
from .diagnose import Diagnosis, DiagnosisStep, diagnose
from .divergence import BufferCheck, DivergenceReport, find_first_divergence
from .layers import LAYERS, LayerReport, LayerResult, find_failing_layer
from .ranks import Collective, CollectiveDivergence, GraphDigest, RankComparison, RankDivergence, compare_ranks
from .script import ScriptNotDiagnosed

__all__ = [
    "AccuracyError", "AccuracyReport", "OutputComparison", "check_accuracy", "CompileErrorReport", "CompilerMessage",
    "ExplainedLine", "KernelCompileError", "explain_compile_error", "DivergenceReport", "find_first_divergence",
    "BufferCheck", "LAYERS", "LayerReport", "LayerResult", "find_failing_layer", "compare_ranks", "RankComparison",
    "RankDivergence", "CollectiveDivergence", "GraphDigest", "Collective", "diagnose", "Diagnosis", "DiagnosisStep",
    "ScriptNotDiagnosed",
]

from . import backend_checks  # noqa: E402 - answers what capture asks of the diagnosis (capture/hooks.py)

backend_checks.register()
