"""The profiling data model: what ``ib.profile`` returns and the CLI, tables and JSON read.

Times are microseconds per profiled step unless a name says otherwise; ``calls`` are per step.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

__all__ = ["TimingStats", "KernelTiming", "OpTiming", "SourceLineTiming", "CategoryComparison",
           "LineComparison", "Comparison", "Finding", "ProfileReport", "GEMM", "FUSED", "OTHER"]

GEMM, FUSED, OTHER = "gemm", "fused", "other"


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
class CategoryComparison:
    """Eager vs compiled time of one category (GEMM-like, fused memory-bound, other/overhead)."""

    category: str
    eager_us: float
    compiled_us: float
    eager_ops: list[str] = field(default_factory=list)
    kernels: list[str] = field(default_factory=list)
    share_of_saving: float = 0.0

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


@dataclass
class ProfileReport:
    """Everything ``ib.profile`` measured: timings, joined kernel table, eager ops, diagnosis."""

    device: str
    eager: TimingStats
    compiled: TimingStats
    kernels: list[KernelTiming]
    eager_ops: list[OpTiming]
    eager_step_us: list[float]
    compiled_step_us: list[float]
    copy_bandwidth_gbps: Optional[float]
    findings: list[Finding] = field(default_factory=list)
    graphs: list[str] = field(default_factory=list)
    unmatched_events: list[str] = field(default_factory=list)
    source_code: dict[str, str] = field(default_factory=dict)
    # Chrome traces (dicts), kept in memory for export_chrome_trace; not part of to_json.
    compiled_trace: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    eager_trace: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    captures: list[Any] = field(default_factory=list, repr=False, compare=False)

    @property
    def speedup(self) -> float:
        """Eager median over compiled median."""
        return self.eager.median_ms / self.compiled.median_ms if self.compiled.median_ms else float("inf")

    @property
    def eager_step_median_us(self) -> float:
        """Median duration of a profiled eager step (0 when none was profiled)."""
        return statistics.median(self.eager_step_us) if self.eager_step_us else 0.0

    @property
    def compiled_step_median_us(self) -> float:
        """Median duration of a profiled compiled step (0 when none was profiled)."""
        return statistics.median(self.compiled_step_us) if self.compiled_step_us else 0.0

    @property
    def kernel_us(self) -> float:
        """Kernel time per compiled step (the sum of the kernels' medians)."""
        return sum(k.busy_us for k in self.kernels)

    @property
    def share_total_us(self) -> float:
        """What kernel shares are of: the median compiled step, or the kernels' summed medians when
        those come to more (medians of parts need not add up to the median of the whole)."""
        return max(self.compiled_step_median_us, self.kernel_us)

    @property
    def share_total_label(self) -> str:
        """The total shares are of, in words."""
        if self.kernel_us > self.compiled_step_median_us:
            return "the kernels' summed median time"
        return "the median compiled step"

    def kernel(self, name: str) -> KernelTiming:
        """The row of kernel ``name`` (Inductor's name or the profiler's event name)."""
        for row in self.kernels:
            if name in (row.kernel, row.event):
                return row
        raise KeyError(f"no kernel {name!r}; kernels: {', '.join(k.kernel for k in self.kernels) or 'none'}")

    def by_source_line(self) -> list[SourceLineTiming]:
        """Compiled kernel time grouped by the user's source lines, largest first."""
        from .compare import by_source_line

        return by_source_line(self)

    def compare(self) -> Comparison:
        """Eager ops beside the compiled kernels that replaced them, and where the speed-up comes from."""
        from .compare import compare

        return compare(self)

    def export_chrome_trace(self, path: "str | Path", *, which: str = "compiled") -> Path:
        """Write a Perfetto-ready trace; compiled kernel events carry FX nodes and source lines."""
        from .trace import annotated_trace

        if which not in ("compiled", "eager"):
            raise ValueError(f"export_chrome_trace: which must be 'compiled' or 'eager', got {which!r}")
        trace = annotated_trace(self) if which == "compiled" else self.eager_trace
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(trace))
        return path

    def to_dict(self) -> dict[str, Any]:
        """Every serializable field as plain JSON types, plus the derived figures."""
        data = {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self) if f.compare}
        data["speedup"] = self.speedup
        data["eager"]["median_ms"] = self.eager.median_ms
        data["compiled"]["median_ms"] = self.compiled.median_ms
        data["by_source_line"] = _plain(self.by_source_line())
        data["compare"] = _plain(self.compare())
        return data

    def to_json(self, path: "str | Path | None" = None, **dump_kwargs: Any) -> str:
        """The report as JSON text (written to ``path`` too when given)."""
        text = json.dumps(self.to_dict(), indent=dump_kwargs.pop("indent", 2), **dump_kwargs)
        if path is not None:
            Path(path).write_text(text)
        return text

    def render(self, *, rows: int = 15) -> str:
        """The speed-up, the kernel, source-line and comparison tables, and the diagnosis."""
        from .render import render

        return render(self, rows=rows)

    def __str__(self) -> str:
        return self.render()


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value) if f.compare}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
