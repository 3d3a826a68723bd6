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

from . import faults, report  # noqa: E402
from .backend import instrumented  # noqa: E402
from .coverage import LineCoverage, line_coverage  # noqa: E402
from .diagnosis import (  # noqa: E402
    AccuracyError,
    AccuracyReport,
    BufferCheck,
    CompileErrorReport,
    DivergenceReport,
    KernelCompileError,
    LayerReport,
    LayerResult,
    OutputComparison,
    check_accuracy,
    find_failing_layer,
    find_first_divergence,
)
from .diagnostics import InstrumentationWarning  # noqa: E402
from .dump import DumpError, load  # noqa: E402
from .model import (  # noqa: E402
    BufferAccess,
    CaptureProblem,
    CaptureSession,
    GraphCapture,
    InputInfo,
    KernelInfo,
    KernelLine,
    MemoryTraffic,
    NodeProvenance,
    SourceLocation,
)
from .profiling import ProfileReport, profile  # noqa: E402
from .profiling.model import Finding, KernelTiming, OpTiming, SourceLineTiming, TimingStats  # noqa: E402
from .registry import capture, captures, clear, last_capture, set_capture_limit  # noqa: E402

__version__ = "0.1.0"

faults.install_from_environment()  # faults a parent process injected reach its children
minifier.register_context_provider(faults.carried_context)  # ... and the minifier's workers and repros

__all__ = [
    "instrumented",
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
    "CompileErrorReport",
    "TimingStats",
    "KernelTiming",
    "OpTiming",
    "SourceLineTiming",
    "Finding",
    "UnsupportedTorchError",
    "SUPPORTED_TORCH",
]
