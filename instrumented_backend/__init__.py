"""instrumented-backend: a see-through ``torch.compile`` backend built on Inductor.

``torch.compile(fn, backend="instrumented")`` compiles exactly as ``backend="inductor"`` does
and records, for every AOT graph, the Dynamo graph, fx_graph_runnable, the post-grad graph,
IR before and after fusion, and the output code with its kernels::

    import instrumented_backend as ib
    cap = ib.last_capture()
    with ib.capture() as session:
        compiled(x)
    session.dump("dumps/run1"); ib.load("dumps/run1")
"""

from __future__ import annotations

import os as _os
import sys as _sys
import types as _types
from typing import TYPE_CHECKING, Any

from ._torch_support import SUPPORTED_TORCH, UnsupportedTorchError, check_torch_version

__version__ = "0.1.0"

# What each public name is imported from. Nothing is imported until a name is first read (or the
# backend is first looked up through its entry point): ``instrumented-backend --help`` answers
# without importing torch. The first read imports them all (:func:`_start`).
_PUBLIC = {
    "report": "", "faults": ".diagnosis",
    "aoti_compile_and_package": ".capture.aoti", "capturing_aoti": ".capture.aoti",
    "instrumented": ".capture.backend", "DumpError": ".capture.dump", "LeftOut": ".capture.left_out",
    "load": ".capture.load", "FrameRecompiles": ".capture.recompiles",
    "capture": ".capture.registry", "captures": ".capture.registry", "clear": ".capture.registry",
    "last_capture": ".capture.registry", "set_capture_limit": ".capture.registry",
    "NothingCompiled": ".capture.skipped_frames", "SkippedFrame": ".capture.skipped_frames",
    **dict.fromkeys(("AccuracyError", "AccuracyReport", "BufferCheck", "Collective", "CollectiveDivergence",
                     "CompileErrorReport", "CompilerMessage", "Diagnosis", "DiagnosisStep", "DivergenceReport",
                     "ExplainedLine", "GraphDigest", "KernelCompileError", "LayerReport", "LayerResult",
                     "OutputComparison", "RankComparison", "RankDivergence", "ScriptNotDiagnosed", "check_accuracy",
                     "compare_ranks", "diagnose", "find_failing_layer", "find_first_divergence"), ".diagnosis"),
    "InstrumentationWarning": ".fail_soft", "CaptureSession": ".graphs", "GraphCapture": ".graphs",
    "ProfileReport": ".profiling", "profile": ".profiling",
    **dict.fromkeys(("Finding", "KernelTiming", "OpTiming", "SourceLineTiming", "TimingStats"), ".profiling.records"),
    "LineCoverage": ".provenance.coverage", "line_coverage": ".provenance.coverage",
    **dict.fromkeys(("BufferAccess", "CaptureProblem", "InputInfo", "KernelInfo", "KernelLine", "MemoryTraffic",
                     "NodeProvenance", "SourceLocation"), ".records"),
}
# Set by a parent process that injected faults: its children (the minifier's workers, a repro)
# apply them as soon as they import the package (the name is diagnosis/faults.py's ENV_VAR).
_FAULTS_ENV = "INSTRUMENTED_BACKEND_FAULTS"
_started = False


def _start() -> None:
    """Import the package: check torch's version, import every public name, let the diagnosis
    register what capture asks of it, and apply the faults a parent process injected."""
    global _started
    if _started:
        return
    _started = True  # set first: a module imported below may read a public name
    try:
        _import_public_names()
    except BaseException:
        _started = False  # the next read raises the same error, not a missing name
        raise


def _import_public_names() -> None:
    import importlib

    import torch

    check_torch_version(torch.__version__)
    package = _sys.modules[__name__]
    for name, module in _PUBLIC.items():
        source = importlib.import_module(module or f".{name}", __name__)
        object.__setattr__(package, name, source if not module else getattr(source, name))
    from .diagnosis import faults

    faults.install_from_environment()  # faults a parent process injected reach its children


class _Package(_types.ModuleType):
    """The package module: a public name is read after :func:`_start`. Importing a subpackage
    binds its name on the package; ``capture`` is both a subpackage and a function, and the
    function is what ``ib.capture`` means."""

    def __getattr__(self, name: str) -> Any:
        if name not in _PUBLIC:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        _start()
        return self.__dict__[name]

    def __setattr__(self, name: str, value: Any) -> None:
        if _started is False and name in _PUBLIC and isinstance(value, _types.ModuleType) \
                and value.__name__ == f"{__name__}.{name}" and name != "report":
            return  # the import system binding a subpackage named as a public function: read through _start
        super().__setattr__(name, value)

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(_PUBLIC))


_sys.modules[__name__].__class__ = _Package

if _os.environ.get(_FAULTS_ENV):
    _start()

if TYPE_CHECKING:  # what the names are, for type checkers and the API reference
    from . import report
    from .capture.aoti import aoti_compile_and_package, capturing_aoti
    from .capture.backend import instrumented
    from .capture.dump import DumpError
    from .capture.left_out import LeftOut
    from .capture.load import load
    from .capture.recompiles import FrameRecompiles
    from .capture.registry import capture, captures, clear, last_capture, set_capture_limit
    from .capture.skipped_frames import NothingCompiled, SkippedFrame
    from .diagnosis import (
        AccuracyError,
        AccuracyReport,
        BufferCheck,
        Collective,
        CollectiveDivergence,
        CompileErrorReport,
        CompilerMessage,
        Diagnosis,
        DiagnosisStep,
        DivergenceReport,
        ExplainedLine,
        GraphDigest,
        KernelCompileError,
        LayerReport,
        LayerResult,
        OutputComparison,
        RankComparison,
        RankDivergence,
        ScriptNotDiagnosed,
        check_accuracy,
        compare_ranks,
        diagnose,
        faults,
        find_failing_layer,
        find_first_divergence,
    )
    from .fail_soft import InstrumentationWarning
    from .graphs import CaptureSession, GraphCapture
    from .profiling import ProfileReport, profile
    from .profiling.records import Finding, KernelTiming, OpTiming, SourceLineTiming, TimingStats
    from .provenance.coverage import LineCoverage, line_coverage
    from .records import (
        BufferAccess,
        CaptureProblem,
        InputInfo,
        KernelInfo,
        KernelLine,
        MemoryTraffic,
        NodeProvenance,
        SourceLocation,
    )

__all__ = [
    "instrumented",
    "aoti_compile_and_package",
    "capturing_aoti",
    "capture",
    "captures",
    "last_capture",
    "clear",
    "set_capture_limit",
    "load",
    "DumpError",
    "report",
    "faults",
    "check_accuracy",
    "profile",
    "ProfileReport",
    "find_failing_layer",
    "find_first_divergence",
    "compare_ranks",
    "diagnose",
    "Diagnosis",
    "DiagnosisStep",
    "line_coverage",
    "LineCoverage",
    "AccuracyError",
    "KernelCompileError",
    "GraphCapture",
    "KernelInfo",
    "InputInfo",
    "CaptureProblem",
    "CaptureSession",
    "InstrumentationWarning",
    # Every record a user receives from the functions above:
    "KernelLine",
    "NodeProvenance",
    "SourceLocation",
    "MemoryTraffic",
    "BufferAccess",
    "BufferCheck",
    "LayerResult",
    "AccuracyReport",
    "OutputComparison",
    "LayerReport",
    "DivergenceReport",
    "RankComparison",
    "RankDivergence",
    "ScriptNotDiagnosed",
    "CollectiveDivergence",
    "GraphDigest",
    "Collective",
    "CompileErrorReport",
    "CompilerMessage",
    "ExplainedLine",
    "TimingStats",
    "KernelTiming",
    "OpTiming",
    "SourceLineTiming",
    "Finding",
    "LeftOut",
    "NothingCompiled",
    "FrameRecompiles",
    "SkippedFrame",
    "UnsupportedTorchError",
    "SUPPORTED_TORCH",
]
