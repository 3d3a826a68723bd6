"""Attach recorded provenance marks to the kernel lines of the output code."""

from __future__ import annotations

from typing import Optional

from .model import KernelInfo, KernelLine, NodeProvenance, SourceLocation
from .provenance import LineRecorder, Origin

__all__ = ["attach_lines"]


def _unique(items: list[Optional[str]]) -> list[str]:
    seen: list[str] = []
    for item in items:
        if item and item not in seen:
            seen.append(item)
    return seen


def _align(kernel: KernelInfo, clean_source: str, line_origins: list[list[Origin]],
           per_line: list[list[Origin]]) -> int:
    """Copy origins of tagged clean lines onto the matching kernel lines; return how many were lost."""
    target = [line.strip() for line in kernel.source_lines]
    cursor, lost = 0, 0
    for text, origins in zip(clean_source.split("\n"), line_origins):
        if not origins:
            continue
        wanted = text.strip()
        index = cursor
        while index < len(target) and target[index] != wanted:
            index += 1
        if index == len(target):
            lost += 1
            continue
        for origin in origins:
            if origin not in per_line[index]:
                per_line[index].append(origin)
        cursor = index + 1
    return lost


def attach_lines(kernels: list[KernelInfo], recorder: LineRecorder, nodes: dict[str, NodeProvenance]) -> int:
    """Fill ``kernel.lines`` for every generated kernel; returns the count of marks that found no line."""
    lost = 0
    for kernel in kernels:
        if kernel.kind == "extern":
            continue
        source_lines = kernel.source_lines
        per_line: list[list[Origin]] = [[] for _ in source_lines]
        for tagged in recorder.kernels.get(kernel.name, []):
            lost += _align(kernel, tagged.clean_source, tagged.line_origins, per_line)
        kernel.lines = []
        for offset, (text, origins) in enumerate(zip(source_lines, per_line)):
            fx_nodes = _unique([o.fx_node for o in origins])
            dynamo: list[str] = []
            source: Optional[SourceLocation] = None
            for name in fx_nodes:
                info = nodes.get(name)
                if info is not None:
                    dynamo.extend(d for d in info.dynamo_nodes if d not in dynamo)
                    source = source or info.source
            kernel.lines.append(KernelLine(
                kernel=kernel.name,
                number=kernel.source_start_line + offset,
                text=text,
                ir_ops=_unique([o.ir_op for o in origins]),
                fx_nodes=fx_nodes,
                dynamo_nodes=dynamo,
                source=source,
            ))
    return lost
