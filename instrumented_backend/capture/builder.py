"""Build one :class:`GraphCapture` while Inductor compiles one AOT graph.

Every capturing step runs through :meth:`CaptureBuilder.guard`, which records a failure as a
:class:`CaptureProblem` instead of raising, so instrumentation can never crash a compile.
"""

from __future__ import annotations

import threading
import time
from functools import partial
from typing import Any, Callable, Mapping, Optional, Sequence

import torch

from ..deferred import Deferred
from ..fail_soft import guarded
from ..graphs import GraphCapture
from ..provenance.assemble import deferred_line_map
from ..recording.recorder import LineRecorder
from ..recording.recorder import pause as pause_line_tags
from ..recording.recorder import resume as resume_line_tags
from ..recording.rewrites import RewriteLog
from ..records import CaptureProblem, InputInfo, graph_label
from ..seams.aot.compile_entry import current_compile_id, graph_kind
from ..seams.codegen.output_code import read_generated_code, runnable_graph_text
from ..seams.dynamo.dynamo_reasons import recompile_reason
from ..seams.lowering import ir_format
from .graph_copy import GraphSnapshot, count_nodes, printed_later

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
        self.recorder = LineRecorder(root=aot_graph)  # names subgraph nodes by their submodule path
        self.rewrites = RewriteLog()  # what this graph's post-grad passes replaced
        self.ir_text_memo = ir_format.IrTextMemo()  # shared by the pre- and post-fusion logs
        # compile_fx_inner mutates aot_graph into the post-grad graph: keep the original.
        self.original_graph_copy = GraphSnapshot(aot_graph)
        self.aot_graph = aot_graph
        self.example_inputs = list(example_inputs)
        self.aot_node_count = count_nodes(aot_graph)
        self.inputs = self.guard("inputs", lambda: describe_inputs(example_inputs)) or []
        self._started = time.perf_counter()

    @property
    def original_graph(self) -> torch.fx.GraphModule:
        """The AOT graph as it came to ``compile_fx_inner`` (a copy, built on first read)."""
        return self.original_graph_copy.module()

    def guard(self, part: str, step: Callable[[], Any]) -> Any:
        """Run one capturing step; on failure record a problem and return None."""
        return guarded(self.problems, part, step)

    def on_ir(self, stage: str, nodes: Any) -> None:
        """IR listener: called by the patched IR loggers on this thread."""
        target = self.ir_pre_fusion if stage == "pre_fusion" else self.ir_post_fusion
        recorder = pause_line_tags()  # the IR text's own lines are never kernel lines: untagged
        try:
            self.guard(f"ir_{stage}", lambda: target.append(ir_format.format_ir(nodes, self.ir_text_memo)))
        finally:
            resume_line_tags(recorder)

    def build(self, compiled: Optional[Any], error: Optional[BaseException] = None) -> GraphCapture:
        """Assemble the record after compile_fx_inner returned ``compiled`` (or raised ``error``)."""
        from .registry import next_index

        elapsed = time.perf_counter() - self._started
        self.recorder.finish()
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
        # compile_fx_inner made aot_graph the post-grad graph, unless it failed before lowering.
        post_grad = self.aot_graph if error is None or lowered else None
        post_grad_code: "str | Deferred[str]" = ""
        post_grad_nodes = None
        if post_grad is not None:  # compile_fx_inner is done with the graph: print it on first read
            post_grad_code = printed_later(post_grad, "post_grad_graph")
            post_grad_nodes = count_nodes(post_grad)
        index = next_index()
        line_map = deferred_line_map(
            graph_label(index, self.compile_id, self.kind),
            output_code=output_code,
            recorder=self.recorder,
            post_grad=post_grad,
            post_grad_code=post_grad_code,
            dynamo_graph=self.job.dynamo_graph_copy,
            rewrites=(self.rewrites, self.job.rewrites),
            forward_by_seq_nr=self.job.forward_by_seq_nr if self.kind == "backward" else None,
            index_seq_nr=self.kind == "forward",
            called_from=self.job.called_from,
        )
        if self.kind == "forward":  # the lazy backward's node map falls back on it
            self.job.forward_by_seq_nr = line_map.map(lambda m: m.seq_nr_index, fallback={})
        for problem in self.recorder.problems:
            self.problems.append(CaptureProblem(part="provenance", error=problem))
        eager_problems = list(self.problems)
        node_counts = {"dynamo": self.job.dynamo_node_count, "aot": self.aot_node_count}
        if post_grad_nodes is not None:
            node_counts["post_grad"] = post_grad_nodes
        return GraphCapture(
            index=index,
            compile_id=self.compile_id,
            kind=self.kind,
            graph_id=self.graph_id if isinstance(self.graph_id, int) else None,
            dynamo_graph_code=self.job.dynamo_graph_code,
            aot_graph=runnable,
            post_grad_graph_code=post_grad_code,
            ir_pre_fusion="".join(self.ir_pre_fusion),
            ir_post_fusion="".join(self.ir_post_fusion),
            output_code=output_code,
            kernels=line_map.map(lambda m: m.kernels, fallback=[]),
            wrapper_lines=line_map.map(lambda m: m.wrapper_lines, fallback=[]),
            buffers=dict(self.recorder.buffer_nodes),
            nodes=line_map.map(lambda m: m.nodes, fallback={}),
            inputs=self.inputs,
            node_counts=node_counts,
            config_patches={k: repr(v) for k, v in self.job.options.inductor_patches.items()},
            problems=line_map.map(lambda m: eager_problems + m.problems, fallback=eager_problems),
            compile_seconds=elapsed,
            graph_break_reason=self.job.graph_break_reason,
            rank=self.job.rank.rank,
            world_size=self.job.rank.world_size,
            process_group=self.job.rank.process_group,
            ddp_bucket=self.job.ddp_bucket,
            recompile_reason=Deferred(partial(recompile_reason, self.compile_id), fallback=""),
            compile_error="" if error is None else f"{type(error).__name__}: {error}",
            thread_name=threading.current_thread().name,
            torch_version=torch.__version__,
            dynamo_graph=self.job.dynamo_graph_copy,
            post_grad_graph=post_grad,
            compiled=compiled,
        )

