"""What ``ib.profile`` returns: the timings and findings, with the queries and views over them.

Times are microseconds per profiled step unless a name says otherwise; ``calls`` are per step.
The records live in :mod:`.records`; the views (:mod:`.compare`, :mod:`.trace`,
:mod:`.render`) see this class only as a type.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from ..capture.left_out import LeftOut
from ..records import to_plain
from .compare import by_module, by_source_line, compare
from .records import Comparison, Finding, KernelTiming, ModuleTiming, OpTiming, SourceLineTiming, TimingStats
from .render import render
from .trace import annotated_trace

if TYPE_CHECKING:
    from ..graphs import GraphCapture

__all__ = ["ProfileReport"]


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
    backward: bool = False  # each step ran the backward too (``ib.profile(..., backward=True)``)
    # What the compiled side's graphs leave out: nothing compiled (the frames Dynamo skipped), frames
    # whose compile failed and ran eagerly (a module Dynamo does not trace), and how often the script
    # being profiled compiled the target's frame, when that was a cost of its own (recompiles, the
    # recompile limit; the profile compiles afresh, in its own recompile region).
    left_out: LeftOut = field(default_factory=LeftOut)
    as_written: list[str] = field(default_factory=list)  # the torch.compile already on the target, taken off
    # The ops each compiled step ran eagerly, outside every compiled graph (between graph breaks,
    # in a frame Dynamo skipped, an optimizer step left uncompiled): time of the step no kernel has.
    ops_outside_graphs: list[OpTiming] = field(default_factory=list)
    # Chrome traces (dicts), kept in memory for export_chrome_trace; not part of to_json.
    compiled_trace: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    eager_trace: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    captures: list["GraphCapture"] = field(default_factory=list, repr=False, compare=False)

    @property
    def step(self) -> str:
        """What one timed step runs: the forward, the forward and the backward ``ib.profile`` ran after
        it, or the forward and the backward the target ran itself (a training step calling
        ``loss.backward()``, whose backward graph is among the graphs)."""
        if self.backward:
            return "forward and backward"
        if any(label.endswith(" backward") for label in self.graphs):
            return "forward and its own backward"
        return "forward"

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
    def outside_graphs_us(self) -> float:
        """Time per compiled step in ops run eagerly, outside every compiled graph."""
        return sum(op.busy_us for op in self.ops_outside_graphs)

    @property
    def share_total_us(self) -> float:
        """What kernel shares are of: the median compiled step, or the kernels' and the eager ops'
        summed medians when those come to more (medians of parts need not add up to the median of
        the whole)."""
        return max(self.compiled_step_median_us, self.kernel_us + self.outside_graphs_us)

    @property
    def share_total_label(self) -> str:
        """The total shares are of, in words."""
        if self.kernel_us + self.outside_graphs_us > self.compiled_step_median_us:
            return "the kernels' summed median time" + (" and the eager ops'" if self.ops_outside_graphs else "")
        return "the median compiled step"

    def kernel(self, name: str) -> KernelTiming:
        """The row of kernel ``name`` (Inductor's name or the profiler's event name)."""
        for row in self.kernels:
            if name in (row.kernel, row.event):
                return row
        raise KeyError(f"no kernel {name!r}; kernels: {', '.join(k.kernel for k in self.kernels) or 'none'}")

    def by_source_line(self) -> list[SourceLineTiming]:
        """Compiled kernel time grouped by the user's source lines, largest first."""
        return by_source_line(self)

    def by_module(self) -> list[ModuleTiming]:
        """Compiled kernel time (and eager op time) grouped by submodule, as ``named_modules()``
        names them, largest first; empty when the kernels name no submodule."""
        return by_module(self)

    def compare(self) -> Comparison:
        """Eager ops beside the compiled kernels that replaced them, and where the speed-up comes from."""
        return compare(self)

    def export_chrome_trace(self, path: "str | Path", *, which: str = "compiled") -> Path:
        """Write a Perfetto-ready trace; compiled kernel events carry FX nodes and source lines."""
        if which not in ("compiled", "eager"):
            raise ValueError(f"export_chrome_trace: which must be 'compiled' or 'eager', got {which!r}")
        trace = annotated_trace(self) if which == "compiled" else self.eager_trace
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(trace))
        return path

    def to_dict(self) -> dict[str, Any]:
        """Every serializable field as plain JSON types, plus the derived figures."""
        data = {f.name: to_plain(getattr(self, f.name)) for f in fields(self) if f.compare}
        data["speedup"] = self.speedup
        data["eager"]["median_ms"] = self.eager.median_ms
        data["compiled"]["median_ms"] = self.compiled.median_ms
        data["by_source_line"] = to_plain(self.by_source_line())
        data["by_module"] = to_plain(self.by_module())
        data["compare"] = to_plain(self.compare())
        return data

    def to_json(self, path: "str | Path | None" = None, **dump_kwargs: Any) -> str:
        """The report as JSON text (written to ``path`` too when given)."""
        text = json.dumps(self.to_dict(), indent=dump_kwargs.pop("indent", 2), **dump_kwargs)
        if path is not None:
            Path(path).write_text(text)
        return text

    def render(self, *, rows: int = 15) -> str:
        """The speed-up, the kernel, source-line and comparison tables, and the diagnosis."""
        return render(self, rows=rows)

    def __str__(self) -> str:
        return self.render()
