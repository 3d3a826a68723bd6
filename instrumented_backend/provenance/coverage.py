"""How much of the generated code a capture's line map attributes, as one record.

A kernel's *statement lines* are the lines that compute, load, store or accumulate: not braces,
loop headers, pragmas, the function signature or Triton's index set-up. Each is counted as
*mapped* when it carries an IR op and an FX node, and as *sourced* when it also reaches a line of
the user's Python source. The coverage benchmark and the model-corpus tests read this record.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable

from ..records import KernelLine
from .queries import MappedGraph

__all__ = ["LineCoverage", "line_coverage", "statement_lines"]

# Lines that are structure rather than computation: braces, loop and branch headers, pragmas and
# comments, the signature's parameter lines (``const int64_t ks0,``, ``at::Half* out_ptr0)``),
# argument aliases (``auto in_ptr5 = in_out_ptr0;``), the set-up of a kernel-local scratch buffer
# (``std::unique_ptr<float []> buf_local_buffer_data_0 = ...`` and its ``.get()``), the division
# error flag, and Triton's imports, decorator (with its arguments), numels, block sizes and index set-up.
_STRUCTURE = re.compile(
    r"^\s*(#|//|\{|\}|for\s*\(|if\s*\(|else\b|extern\s+\"C\"|(const\s+)?[\w:<>]+\*?\s+\w+[,)]\s*$|"
    r"#pragma|std::atomic|int tid|inductor_cpu_|auto \w+ = in_out_ptr\d+;|"
    r"std::unique_ptr<.*> buf_local_buffer_data_\d+ = |[\w:<>]+\* local_buffer_data_\d+ = buf_local_buffer_data_|"
    r"\)|return;|import |@triton|def |[xyz](offset|index|mask)\b|r0_|x\d+ = |.*= tl\.program_id|"
    r"from [\w.]+ import |triton_helpers\.set_driver_to_cpu\(\)|"
    r"(size_hints|filename|triton_meta|inductor_meta|min_elem_per_thread|reduction_hint|tile_hint)=|"
    r"[xyz]?r?\d?_?numel = |[XYZR]\d?_?BLOCK: tl\.constexpr|r(base|offset|index) = |for r\d*_offset in )"
)


def statement_lines(kernel_lines: Iterable[KernelLine]) -> list[KernelLine]:
    """The lines of a kernel that compute (see the module docstring)."""
    return [line for line in kernel_lines if line.text.strip() and not _STRUCTURE.match(line.text)]


def _percent(part: int, whole: int) -> float:
    return 100.0 * part / whole if whole else 100.0


@dataclass
class LineCoverage:
    """Line-map coverage of some captured graphs (counts, and examples of what was missed)."""

    graphs: int = 0
    kernels: int = 0
    kernels_tagged: int = 0
    statements: int = 0
    statements_mapped: int = 0  # with an IR op and an FX node
    statements_sourced: int = 0  # ... and a user source line
    extern_calls: int = 0
    extern_calls_tagged: int = 0
    wrapper_statements: int = 0
    wrapper_statements_tagged: int = 0
    unmapped: list[str] = field(default_factory=list)  # "kernel: line text", first few
    unsourced_nodes: list[str] = field(default_factory=list)  # FX nodes whose lines reach no source

    @property
    def kernels_tagged_percent(self) -> float:
        return _percent(self.kernels_tagged, self.kernels)

    @property
    def mapped_percent(self) -> float:
        return _percent(self.statements_mapped, self.statements)

    @property
    def sourced_percent(self) -> float:
        return _percent(self.statements_sourced, self.statements)

    @property
    def extern_calls_tagged_percent(self) -> float:
        return _percent(self.extern_calls_tagged, self.extern_calls)

    @property
    def wrapper_statements_tagged_percent(self) -> float:
        return _percent(self.wrapper_statements_tagged, self.wrapper_statements)

    def row(self) -> dict[str, object]:
        """The figures as one table row."""
        return {
            "graphs": self.graphs,
            "kernels": self.kernels,
            "kernels tagged %": round(self.kernels_tagged_percent, 1),
            "statement lines": self.statements,
            "with IR op + FX node %": round(self.mapped_percent, 1),
            "with source line %": round(self.sourced_percent, 1),
            "extern calls tagged %": round(self.extern_calls_tagged_percent, 1),
            "wrapper statements tagged %": round(self.wrapper_statements_tagged_percent, 1),
        }


def line_coverage(graphs: Iterable[MappedGraph], *, examples: int = 5) -> LineCoverage:
    """Count what the line maps of ``graphs`` attribute."""
    result = LineCoverage()
    unsourced: list[str] = []
    for graph in graphs:
        result.graphs += 1
        for kernel in graph.kernels:
            if kernel.kind == "extern":
                result.extern_calls += 1
                result.extern_calls_tagged += bool(kernel.tagged_lines)
                continue
            result.kernels += 1
            result.kernels_tagged += bool(kernel.tagged_lines)
            for line in statement_lines(kernel.lines):
                result.statements += 1
                if line.ir_ops and line.fx_nodes:
                    result.statements_mapped += 1
                    if line.source is not None:
                        result.statements_sourced += 1
                    else:
                        unsourced.extend(n for n in line.fx_nodes if n not in unsourced)
                elif len(result.unmapped) < examples:
                    result.unmapped.append(f"{kernel.name}: {line.text.strip()}")
        result.wrapper_statements += len(graph.wrapper_lines)
        result.wrapper_statements_tagged += sum(1 for line in graph.wrapper_lines if line.tagged)
    result.unsourced_nodes = unsourced[:examples * 4]
    return result
