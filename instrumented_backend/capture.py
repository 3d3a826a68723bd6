"""Build one :class:`GraphCapture` while Inductor compiles one AOT graph.

Every capturing step runs through :meth:`CaptureBuilder.guard`, which records a failure as a
:class:`CaptureProblem` instead of raising, so instrumentation can never crash a compile.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Mapping, Optional, Sequence

import torch

from .deferred import Deferred
from .graph_copy import clone_graph_module, count_nodes, printed_later
from .kernels import find_kernels
from .line_map import attach_lines, attach_wrapper_lines
from .node_map import build_node_map, seq_nr_index
from .provenance import LineRecorder, strip_marks
from .model import CaptureProblem, GraphCapture, InputInfo, KernelInfo, MemoryTraffic
from .seams import ir_format
from .seams.compile_entry import current_compile_id, graph_kind
from .seams.output_code import read_generated_code, runnable_graph_text

__all__ = ["CaptureBuilder", "describe_inputs"]


def _describe_input(value: Any) -> InputInfo:
    if isinstance(value, torch.Tensor):
        return InputInfo(
            kind="tensor",
            shape=[str(s) for s in value.shape],
            stride=[str(s) for s in value.stride()],
            dtype=str(value.dtype).replace("torch.", ""),
            device=str(value.device),
        )
    if isinstance(value, torch.SymInt):
        return InputInfo(kind="symint", value=str(value))
    for kind in (bool, int, float):
        if isinstance(value, kind):
            return InputInfo(kind=kind.__name__, value=repr(value))
    return InputInfo(kind="other", value=type(value).__name__)


def describe_inputs(inputs: Sequence[Any]) -> list[InputInfo]:
    """InputInfo for each example input (fake tensors and SymInts included)."""
    return [_describe_input(v) for v in inputs]


def attach_traffic(kernels: list[KernelInfo], traffic: dict[str, dict[str, Any]]) -> None:
    """Give each generated kernel the memory traffic recorded when Inductor defined it."""
    for kernel in kernels:
        if kernel.name in traffic:
            kernel.traffic = MemoryTraffic.from_dict(traffic[kernel.name])


class CaptureBuilder:
    """Collects the parts of one AOT graph's capture during ``compile_fx_inner``."""

    def __init__(
        self,
        *,
        job: Any,
        aot_graph: torch.fx.GraphModule,
        example_inputs: Sequence[Any],
        inner_kwargs: Mapping[str, Any],
    ) -> None:
        self.job = job
        self.kind = graph_kind(inner_kwargs)
        self.graph_id = inner_kwargs.get("graph_id")
        self.compile_id = current_compile_id() or job.compile_id
        self.problems: list[CaptureProblem] = []
        self.ir_pre_fusion: list[str] = []
        self.ir_post_fusion: list[str] = []
        self.recorder = LineRecorder()
        self.ir_text_memo = ir_format.IrTextMemo()  # shared by the pre- and post-fusion logs
        # compile_fx_inner mutates aot_graph into the post-grad graph: keep the original.
        self.original_graph = clone_graph_module(aot_graph)
        self.aot_graph = aot_graph
        self.example_inputs = list(example_inputs)
        self.aot_node_count = count_nodes(aot_graph)
        self.inputs = self.guard("inputs", lambda: describe_inputs(example_inputs)) or []
        self._started = time.perf_counter()

    def guard(self, part: str, step: Callable[[], Any]) -> Any:
        """Run one capturing step; on failure record a problem and return None."""
        try:
            return step()
        except Exception as exc:  # noqa: BLE001 - instrumentation must never raise
            self.problems.append(CaptureProblem(part=part, error=f"{type(exc).__name__}: {exc}"))
            return None

    def on_ir(self, stage: str, nodes: Any) -> None:
        """IR listener: called by the patched IR loggers on this thread."""
        target = self.ir_pre_fusion if stage == "pre_fusion" else self.ir_post_fusion
        self.guard(f"ir_{stage}", lambda: target.append(ir_format.format_ir(nodes, self.ir_text_memo)))

    def build(self, compiled: Optional[Any], error: Optional[BaseException] = None) -> GraphCapture:
        """Assemble the record after compile_fx_inner returned ``compiled`` (or raised ``error``)."""
        from .registry import next_index

        elapsed = time.perf_counter() - self._started
        generated = self.guard("output_code", lambda: read_generated_code(compiled)) if compiled is not None else None
        output_code = generated.output_code if generated else ""
        if error is not None and not output_code:
            output_code = self.recorder.wrapper_code  # a kernel failed to compile while it loaded
        lowered = bool(self.ir_pre_fusion or self.recorder.kernels)  # post-grad passes ran
        runnable = generated.runnable_graph if generated else ""
        if not runnable:
            runnable = self.guard(
                "aot_graph", lambda: runnable_graph_text(self.original_graph, self.example_inputs)
            ) or ""
        post_grad_code: "str | Deferred[str]" = ""
        post_grad_nodes = None
        if error is None or lowered:  # compile_fx_inner is done with the graph: print it on first read
            post_grad_code = printed_later(self.aot_graph, "post_grad_graph")
            post_grad_nodes = count_nodes(self.aot_graph)
        kernels = self.guard("kernels", lambda: find_kernels(output_code)) or []
        self.guard("kernel_traffic", lambda: attach_traffic(kernels, self.recorder.traffic))
        nodes = {}
        if error is None or lowered:
            nodes = self.guard("node_map", lambda: build_node_map(
                self.aot_graph, post_grad_code, self.job.dynamo_graph,
                self.job.forward_by_seq_nr if self.kind == "backward" else None)) or {}
            if self.kind == "forward":
                self.job.forward_by_seq_nr = self.guard(
                    "node_map", lambda: seq_nr_index(self.aot_graph, nodes)) or {}
        lost = self.guard("line_map", lambda: attach_lines(kernels, self.recorder, nodes))
        if lost:
            self.problems.append(CaptureProblem(part="line_map", error=f"{lost} tagged line(s) not found in the output code"))
        wrapper_lines = self.guard("wrapper_lines", lambda: attach_wrapper_lines(
            output_code, kernels, self.recorder, nodes)) if output_code else []
        for problem in self.recorder.problems:
            self.problems.append(CaptureProblem(part="provenance", error=problem))
        if output_code and strip_marks(output_code) != output_code:
            self.problems.append(CaptureProblem(part="line_marks", error="a provenance mark reached the output code"))
        node_counts = {"dynamo": self.job.dynamo_node_count, "aot": self.aot_node_count}
        if post_grad_nodes is not None:
            node_counts["post_grad"] = post_grad_nodes
        return GraphCapture(
            index=next_index(),
            compile_id=self.compile_id,
            kind=self.kind,
            graph_id=self.graph_id if isinstance(self.graph_id, int) else None,
            dynamo_graph_code=self.job.dynamo_graph_code,
            aot_graph=runnable,
            post_grad_graph_code=post_grad_code,
            ir_pre_fusion="".join(self.ir_pre_fusion),
            ir_post_fusion="".join(self.ir_post_fusion),
            output_code=output_code,
            kernels=kernels,
            wrapper_lines=wrapper_lines or [],
            buffers=dict(self.recorder.buffer_nodes),
            nodes=nodes,
            inputs=self.inputs,
            node_counts=node_counts,
            config_patches={k: repr(v) for k, v in self.job.options.inductor_patches.items()},
            problems=list(self.problems),
            compile_seconds=elapsed,
            compile_error="" if error is None else f"{type(error).__name__}: {error}",
            thread_name=threading.current_thread().name,
            torch_version=torch.__version__,
            dynamo_graph=self.job.dynamo_graph,
            post_grad_graph=self.aot_graph if error is None or lowered else None,
            compiled=compiled,
        )

