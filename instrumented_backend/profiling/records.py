"""The profiling records: timings per kernel, eager op and source line, and the findings.

Plain data, importing nothing of this package's; :class:`~.report.ProfileReport` holds them.

Times are microseconds per profiled step unless a name says otherwise; ``calls`` are per step.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Optional

__all__ = ["TimingStats", "KernelTiming", "OpTiming", "SourceLineTiming", "ModuleTiming", "CategoryComparison",
           "LineComparison", "Comparison", "Finding", "GEMM", "FUSED", "OTHER"]

GEMM, FUSED, OTHER = "gemm", "fused", "other"


def format_us(us: float) -> str:
    """A duration given in microseconds, as people read it: ``12.3 us`` or ``4.567 ms``."""
    return f"{us / 1e3:.3f} ms" if us >= 1e3 else f"{us:.1f} us"


@dataclass
class TimingStats:
    """Wall-clock times of repeated calls (after warm-up), in milliseconds."""

    label: str
    samples_ms: list[float]

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples_ms)

    @property
    def p10_ms(self) -> float:
        return _quantile(self.samples_ms, 0.10)

    @property
    def p90_ms(self) -> float:
        return _quantile(self.samples_ms, 0.90)

    @property
    def spread(self) -> float:
        """(p90 - p10) / median: 0.05 means the middle 80% of calls lie within 5% of each other."""
        return (self.p90_ms - self.p10_ms) / self.median_ms if self.median_ms else 0.0

    def describe(self) -> str:
        return (f"{self.median_ms:.3f} ms/iter (median of {len(self.samples_ms)}; "
                f"p10 {self.p10_ms:.3f}, p90 {self.p90_ms:.3f})")


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass
class KernelTiming:
    """One kernel of the compiled code, timed by the profiler and joined to its provenance.

    ``event`` is the profiler's name for it (``graph_0_cpp_fused_add_0``, ``aten::addmm``).
    ``time_us`` is CPU time per step (for GPU kernels, ``device_us`` holds the device time):
    the median, over the profiled steps, of the kernel's time in each step (``step_us`` keeps
    those per-step times; ``p10_us``/``p90_us`` their spread). ``share`` is of
    :attr:`ProfileReport.share_total_us`, so no share and no sum of shares exceeds 1.
    ``bytes`` is the least memory the kernel must move (generated kernels only);
    ``bandwidth_share`` is bytes / time against the machine's measured copy bandwidth.
    """

    kernel: str
    event: str
    kind: str
    graph: str
    calls: float
    time_us: float
    device_us: float = 0.0
    share: float = 0.0
    category: str = OTHER
    fx_nodes: list[str] = field(default_factory=list)
    dynamo_nodes: list[str] = field(default_factory=list)
    source_lines: list[str] = field(default_factory=list)
    source_weights: dict[str, float] = field(default_factory=dict)
    # the modules it computes for (``layers.1 (GELU)``; "" the root module's code), its lines split between them
    module_weights: dict[str, float] = field(default_factory=dict)
    bytes: Optional[int] = None
    achieved_gbps: Optional[float] = None
    bandwidth_share: Optional[float] = None
    step_us: list[float] = field(default_factory=list)  # busy time in each profiled step
    # Profiler event ids of this kernel's calls (annotating the Chrome trace); in-process only.
    event_ids: list[int] = field(default_factory=list, repr=False, compare=False)

    @property
    def busy_us(self) -> float:
        """The time this kernel keeps its device busy per step (device time on GPU), median over steps."""
        return self.device_us or self.time_us

    @property
    def p10_us(self) -> float:
        return _quantile(self.step_us, 0.10) if self.step_us else self.busy_us

    @property
    def p90_us(self) -> float:
        return _quantile(self.step_us, 0.90) if self.step_us else self.busy_us

    @property
    def per_call_us(self) -> float:
        return self.busy_us / self.calls if self.calls else 0.0


@dataclass
class OpTiming:
    """One top-level eager op (``aten::addmm``): CPU total and self time per step."""

    name: str
    calls: float
    total_us: float
    self_us: float
    device_us: float = 0.0
    share: float = 0.0
    category: str = OTHER
    source_lines: list[str] = field(default_factory=list)
    module: str = ""  # the innermost submodule it ran in, named as the compiled side names it ("": none known)

    @property
    def busy_us(self) -> float:
        return self.device_us or self.total_us


@dataclass
class SourceLineTiming:
    """Compiled time attributed to one user source line (kernels shared by lines are split)."""

    source: str
    code: str
    compiled_us: float
    kernels: list[str] = field(default_factory=list)
    eager_us: float = 0.0
    eager_ops: list[str] = field(default_factory=list)


@dataclass
class ModuleTiming:
    """Compiled and eager time of one submodule (kernels shared by modules are split, as by line)."""

    module: str  # ``layers.1 (GELU)``; "" for the root module's own code
    compiled_us: float
    eager_us: float = 0.0
    kernels: list[str] = field(default_factory=list)
    eager_ops: list[str] = field(default_factory=list)


@dataclass
class CategoryComparison:
    """Eager vs compiled time of one category (GEMM-like, fused memory-bound, other/overhead)."""

    category: str
    eager_us: float
    compiled_us: float
    eager_ops: list[str] = field(default_factory=list)
    kernels: list[str] = field(default_factory=list)
    share_of_saving: Optional[float] = None  # of the time saved per step; None when compiling saves none

    @property
    def speedup(self) -> Optional[float]:
        return self.eager_us / self.compiled_us if self.compiled_us else None


@dataclass
class LineComparison:
    """The eager ops of one source line beside the compiled kernels that replaced them."""

    source: str
    code: str
    eager_ops: list[str]
    eager_us: float
    kernels: list[str]
    compiled_us: float


@dataclass
class Comparison:
    """``report.compare()``: by category (where the speed-up comes from) and by source line."""

    categories: list[CategoryComparison]
    lines: list[LineComparison]


@dataclass
class Finding:
    """One plain-words conclusion of the diagnosis, with the numbers behind it."""

    kind: str
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)
