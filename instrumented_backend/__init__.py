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

import torch as _torch

from ._torch_support import SUPPORTED_TORCH, UnsupportedTorchError, check_torch_version

check_torch_version(_torch.__version__)

import minifier  # noqa: E402

from . import report  # noqa: E402
from .capture.aoti import aoti_compile_and_package, capturing_aoti  # noqa: E402
from .capture.backend import instrumented  # noqa: E402
from .capture.dump import DumpError  # noqa: E402
from .capture.left_out import LeftOut  # noqa: E402
from .capture.load import load  # noqa: E402
from .capture.recompiles import FrameRecompiles  # noqa: E402
from .capture.registry import capture, captures, clear, last_capture, set_capture_limit  # noqa: E402
from .capture.skipped_frames import NothingCompiled, SkippedFrame  # noqa: E402
from .diagnosis import (  # noqa: E402
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
    faults,  # noqa: E402
    find_failing_layer,
    find_first_divergence,
)
from .fail_soft import InstrumentationWarning  # noqa: E402
from .graphs import CaptureSession, GraphCapture  # noqa: E402
from .profiling import ProfileReport, profile  # noqa: E402
from .profiling.records import Finding, KernelTiming, OpTiming, SourceLineTiming, TimingStats  # noqa: E402
from .provenance.coverage import LineCoverage, line_coverage  # noqa: E402
from .records import (  # noqa: E402
    BufferAccess,
    CaptureProblem,
    InputInfo,
    KernelInfo,
    KernelLine,
    MemoryTraffic,
    NodeProvenance,
    SourceLocation,
)

__version__ = "0.1.0"

faults.install_from_environment()  # faults a parent process injected reach its children
minifier.register_context_provider(faults.carried_context)  # ... and the minifier's workers and repros

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
