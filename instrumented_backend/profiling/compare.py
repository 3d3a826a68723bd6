"""Eager vs compiled, the way the tutorial does it by hand, from the joined tables.

By source line: the eager ops a line issued beside the kernels that now compute it (a kernel
that fuses several lines is split between them in proportion to its kernel lines per line).
By category: GEMM-like ops (matmul, linear, conv: eager ``aten::addmm`` vs compiled extern
GEMMs), memory-bound ops (eager pointwise/reduction ops vs the fused kernels replacing them),
and framework overhead (step time outside any op or kernel: Python dispatch in eager, guard
checks and the wrapper when compiled), each with its share of the time saved. An op the compiled
step ran eagerly, outside every compiled graph (between graph breaks), counts in its category on
the compiled side, not as overhead.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Callable, NamedTuple

from .records import (
    GEMM,
    CategoryComparison,
    Comparison,
    KernelTiming,
    LineComparison,
    ModuleTiming,
    OpTiming,
    SourceLineTiming,
)

if TYPE_CHECKING:
    from .report import ProfileReport

__all__ = ["by_source_line", "by_module", "compare", "NO_SOURCE"]

NO_SOURCE = "(no source line)"
MEMORY_BOUND = "memory-bound"
OVERHEAD = "overhead"


class _Grouped(NamedTuple):
    """Per key: compiled time (kernels split by their weights), the kernels, eager time, the eager ops."""

    compiled: dict[str, float]
    kernels: dict[str, list[str]]
    eager: dict[str, float]
    ops: dict[str, list[str]]

    def keys(self) -> set[str]:
        return set(self.compiled) | set(self.eager)


def _grouped(report: "ProfileReport", kernel_weights: Callable[[KernelTiming], dict[str, float]],
             op_key: Callable[[OpTiming], str]) -> _Grouped:
    """Each kernel's time split between its keys by ``kernel_weights``, each eager op's put under
    ``op_key``: what the by-line and by-module tables both sum."""
    grouped = _Grouped(defaultdict(float), defaultdict(list), defaultdict(float), defaultdict(list))
    for row in report.kernels:
        for key, weight in kernel_weights(row).items():
            grouped.compiled[key] += row.busy_us * weight
            if row.kernel not in grouped.kernels[key]:
                grouped.kernels[key].append(row.kernel)
    for op in report.eager_ops:
        key = op_key(op)
        grouped.eager[key] += op.busy_us
        if op.name not in grouped.ops[key]:
            grouped.ops[key].append(op.name)
    return grouped


def by_source_line(report: "ProfileReport") -> list[SourceLineTiming]:
    """Compiled (and eager) time per user source line, largest compiled time first."""
    grouped = _grouped(report, lambda row: row.source_weights or {NO_SOURCE: 1.0},
                       lambda op: op.source_lines[0] if op.source_lines else NO_SOURCE)
    rows = [SourceLineTiming(source=s, code=report.source_code.get(s, ""), compiled_us=grouped.compiled.get(s, 0.0),
                             kernels=grouped.kernels.get(s, []), eager_us=grouped.eager.get(s, 0.0),
                             eager_ops=grouped.ops.get(s, []))
            for s in grouped.keys()]
    return sorted(rows, key=lambda r: (-r.compiled_us, -r.eager_us))


def by_module(report: "ProfileReport") -> list[ModuleTiming]:
    """Compiled and eager time per submodule (``layers.1 (GELU)``; "" the root module's own code),
    largest compiled time first. Empty when no kernel names a submodule (a plain function)."""
    if not any(label for row in report.kernels for label in row.module_weights):
        return []
    grouped = _grouped(report, lambda row: row.module_weights or {"": 1.0}, lambda op: op.module)
    rows = [ModuleTiming(module=m, compiled_us=grouped.compiled.get(m, 0.0), eager_us=grouped.eager.get(m, 0.0),
                         kernels=grouped.kernels.get(m, []), eager_ops=grouped.ops.get(m, []))
            for m in grouped.keys()]
    return sorted(rows, key=lambda r: (-r.compiled_us, -r.eager_us, r.module))


def compare(report: "ProfileReport") -> Comparison:
    """Category totals with their share of the saving, and the per-line comparison."""
    eager_step, compiled_step = report.eager_step_median_us, report.compiled_step_median_us
    eager_gemm = [op for op in report.eager_ops if op.category == GEMM]
    eager_rest = [op for op in report.eager_ops if op.category != GEMM]
    compiled_gemm = [k for k in report.kernels if k.category == GEMM]
    compiled_rest = [k for k in report.kernels if k.category != GEMM]
    outside_gemm = [op for op in report.ops_outside_graphs if op.category == GEMM]
    outside_rest = [op for op in report.ops_outside_graphs if op.category != GEMM]

    def names(rows: list, suffix: str = "") -> list[str]:
        seen: list[str] = []
        for row in rows:
            name = (getattr(row, "name", None) or getattr(row, "kernel")) + suffix
            if name not in seen:
                seen.append(name)
        return seen

    eager_ops_us = sum(op.busy_us for op in report.eager_ops)
    categories = [
        CategoryComparison(GEMM, sum(o.busy_us for o in eager_gemm),
                           sum(r.busy_us for r in compiled_gemm) + sum(o.busy_us for o in outside_gemm),
                           names(eager_gemm), names(compiled_gemm) + names(outside_gemm, " (eager)")),
        CategoryComparison(MEMORY_BOUND, sum(o.busy_us for o in eager_rest),
                           sum(r.busy_us for r in compiled_rest) + sum(o.busy_us for o in outside_rest),
                           names(eager_rest), names(compiled_rest) + names(outside_rest, " (eager)")),
        CategoryComparison(OVERHEAD, max(0.0, eager_step - eager_ops_us),
                           max(0.0, compiled_step - report.kernel_us - report.outside_graphs_us)),
    ]
    set_shares_of_saving(categories)
    lines = [LineComparison(r.source, r.code, r.eager_ops, r.eager_us, r.kernels, r.compiled_us)
             for r in by_source_line(report) if r.eager_ops or r.kernels]
    lines.sort(key=lambda r: -(r.eager_us + r.compiled_us))
    return Comparison(categories=categories, lines=lines)


def set_shares_of_saving(categories: list[CategoryComparison]) -> None:
    """Each category's part of the time compiling saves per step; None for all when it saves
    nothing (compiled no faster than eager: a "share" of a loss would read backwards), or when a
    category is slower compiled while the whole is faster (the shares would pass 100% and go below
    zero: 219% and -116% of a net saving say less than the times themselves)."""
    deltas = [c.eager_us - c.compiled_us for c in categories]
    saved = sum(deltas)
    shares_add_up = saved > 0 and min(deltas, default=0.0) >= 0
    for category, delta in zip(categories, deltas):
        category.share_of_saving = delta / saved if shares_add_up else None
