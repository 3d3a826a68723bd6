"""Assemble a graph's kernels, node map and line maps from what its compile recorded.

The tags are recorded at emission, during the compile (:mod:`.recorder`); turning them into
:class:`~..records.KernelInfo` / :class:`~..records.KernelLine` / :class:`~..records.NodeProvenance`
objects is pure bookkeeping over the output code, the kept graphs and the recorder, yet it grows
with the graph. :func:`deferred_line_map` does it on the first read of any of those fields
instead of inside ``torch.compile``. A step that fails is recorded as a
:class:`~..records.CaptureProblem` of the capture, with one warning, exactly as an eager capture
step would be.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

from ..deferred import Deferred, resolve
from ..fail_soft import guarded, warn_capture_problem
from ..recording.recorder import LineRecorder
from ..recording.rewrites import RewriteLog
from ..records import CaptureProblem, KernelInfo, KernelLine, MemoryTraffic, NodeProvenance, SourceLocation
from .kernels import find_kernels
from .line_map import attach_lines, attach_wrapper_lines
from .node_map import build_node_map, seq_nr_index

__all__ = ["LineMap", "map_lines", "deferred_line_map", "attach_traffic"]


@dataclass
class LineMap:
    """What :func:`map_lines` assembles for one graph."""

    kernels: list[KernelInfo] = field(default_factory=list)
    wrapper_lines: list[KernelLine] = field(default_factory=list)
    nodes: dict[str, NodeProvenance] = field(default_factory=dict)
    problems: list[CaptureProblem] = field(default_factory=list)
    # A forward graph's {seq_nr: provenance}, the fallback of its backward's node map.
    seq_nr_index: dict[int, NodeProvenance] = field(default_factory=dict)


def attach_traffic(kernels: list[KernelInfo], traffic: dict[str, dict[str, Any]]) -> None:
    """Give each generated kernel the memory traffic recorded when Inductor defined it."""
    for kernel in kernels:
        if kernel.name in traffic:
            kernel.traffic = MemoryTraffic.from_dict(traffic[kernel.name])


def map_lines(
    *,
    output_code: str,
    recorder: LineRecorder,
    post_grad: Optional[Any],
    post_grad_code: "str | Deferred[str]",
    dynamo_graph: Any,
    rewrites: Sequence[RewriteLog] = (),
    forward_by_seq_nr: "Optional[dict[int, NodeProvenance] | Deferred[dict[int, NodeProvenance]]]" = None,
    index_seq_nr: bool = False,
    called_from: Optional[SourceLocation] = None,
) -> LineMap:
    """Find the kernels in ``output_code``, map the post-grad nodes, attach every line's origins.

    ``post_grad`` is None when the compile failed before lowering (no node map then).
    ``index_seq_nr`` also indexes the node map by autograd sequence number (forward graphs);
    ``called_from`` is the line that called the compiled function (:func:`build_node_map`).
    Never raises: each failing step becomes a problem of the result.
    """
    result = LineMap()

    def guard(part: str, step: Callable[[], Any]) -> Any:
        return guarded(result.problems, part, step)

    result.kernels = guard("kernels", lambda: find_kernels(output_code)) or []
    missing = sorted(set(recorder.kernels) - {k.name for k in result.kernels})
    if missing and output_code:  # never an empty kernel list in silence
        result.problems.append(CaptureProblem(
            part="kernels", error=f"{len(missing)} kernel(s) Inductor defined are not found in the output code "
                                  f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}): a wrapper layout "
                                  "this package does not read; their lines are not mapped"))
    guard("kernel_traffic", lambda: attach_traffic(result.kernels, recorder.traffic))
    if post_grad is not None:
        result.nodes = guard("node_map", lambda: build_node_map(
            post_grad, post_grad_code, resolve(dynamo_graph), resolve(forward_by_seq_nr), rewrites, called_from)) or {}
        if index_seq_nr:
            result.seq_nr_index = guard("node_map", lambda: seq_nr_index(post_grad, result.nodes)) or {}
    lost = guard("line_map", lambda: attach_lines(result.kernels, recorder, result.nodes))
    if lost:
        result.problems.append(
            CaptureProblem(part="line_map", error=f"{lost} tagged line(s) not found in the output code")
        )
    if output_code:
        result.wrapper_lines = guard("wrapper_lines", lambda: attach_wrapper_lines(
            output_code, result.kernels, recorder, result.nodes)) or []
    return result


def deferred_line_map(label: str, **inputs: Any) -> Deferred[LineMap]:
    """:func:`map_lines` over ``inputs``, run on first read; its problems warn once each then.

    ``inputs`` must not hold the capture builder (it holds the example inputs and a copy of the
    AOT graph that the record has no use for once built).
    """
    def assemble() -> LineMap:
        try:
            line_map = map_lines(**inputs)
        except Exception as exc:  # noqa: BLE001 - map_lines guards each step; this is a last resort
            line_map = LineMap(problems=[CaptureProblem(part="line_map", error=f"{type(exc).__name__}: {exc}")])
        for problem in line_map.problems:
            warn_capture_problem(label, problem)
        return line_map

    return Deferred(assemble, fallback=LineMap())
