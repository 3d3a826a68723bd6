"""Join profiler events to the capture: kernel events to kernels, FX nodes and source lines.

Compiled side: each ``## Call CompiledFxGraph ##`` event runs one AOT graph's wrapper. Its child
events are the wrapper's kernel calls in order: C++ kernels as ``graph_<id>_<kernel>`` (from
``cpp.enable_kernel_profile``), Triton kernels by name (their launcher's range), extern kernels as
the ATen/custom op they call (``extern_kernels.addmm`` -> ``aten::addmm``). The graph whose call
sequence matches the children best is the one that ran; children are aligned to its kernel calls
in order, so the k-th ``aten::addmm`` is the k-th addmm call line of the wrapper.

Eager side: top-level ops (the outermost ``ns::op`` events of each step) become
:class:`OpTiming` rows; their source line comes from a SourceTagging pass.
"""

from __future__ import annotations

import linecache
import re
import statistics
from collections import defaultdict
from typing import Any, Iterable, Optional, Sequence

from ..graphs import GraphCapture
from ..provenance.node_map import module_labels, node_module
from ..records import KernelInfo
from ..seams.runtime.kernel_profile import CALL_EVENT, cpp_event_name
from .collect import Event, ProfiledRun
from .records import FUSED, GEMM, OTHER, KernelTiming, OpTiming
from .sources import DEFINITION, MODULE, SOURCE_PREFIX, label_module, parse_source_label

__all__ = ["event_name", "call_sequence", "join_compiled", "join_eager", "eager_op_sources", "module_names",
           "ops_outside_graphs", "GEMM_OPS", "CALL_EVENT"]

GEMM_OPS = frozenset({
    "addmm", "mm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "_mkl_linear", "mkldnn_linear",
    "_linear_pointwise", "_linear_pointwise_binary", "convolution", "_convolution", "conv1d", "conv2d", "conv3d",
    "mkldnn_convolution", "_convolution_pointwise", "einsum", "_int_mm", "_weight_int8pack_mm", "qlinear_pointwise",
    "scaled_dot_product_attention", "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention", "dot", "vdot", "mv", "addmv",
    "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "_addmm_activation", "tensordot", "_scaled_mm",
    # a training step's backward: the gradients of the above are GEMMs too
    "convolution_backward", "_scaled_dot_product_flash_attention_for_cpu_backward",
    "_scaled_dot_product_efficient_attention_backward", "_scaled_dot_product_flash_attention_backward",
    # a mixture of experts' GEMMs, one per expert group
    "_grouped_mm", "grouped_mm", "_scaled_grouped_mm",
})
# A library's own op named as a GEMM (transformers::grouped_mm_fallback, mylib::fused_linear_gelu):
# one of these words as a whole part of its name.
_GEMM_WORD = re.compile(r"(?:^|_)(?:mm|bmm|gemm|matmul|linear|conv\w*)(?:_|$)")


# An ATen op called through the C shim of a C++ wrapper or an AOTInductor package
# (``aoti_torch_cpu_addmm_out``, ``aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu``):
# its event is the shim function's name.
_SHIM_CALL = re.compile(r"^aoti_torch_(?:cpu|cuda|xpu|mps)_(?P<op>\w+?)(?:_out)?$")


def _op_base(event: str) -> str:
    shim = _SHIM_CALL.match(event)
    if shim is not None:
        return shim.group("op")
    return event.split("::", 1)[-1].split(".")[0]


# An eager backward op: the autograd node of the forward op it differentiates.
_AUTOGRAD_NODE = re.compile(r"evaluate_function: (?P<node>\w+?)Backward\d*$")


def category_of_op(event: str) -> str:
    """``gemm`` for matmul/conv-like ops (ATen's, and other libraries' ops named as one) and for
    their gradients (``autograd::engine::evaluate_function: AddmmBackward0``), ``other`` for the rest."""
    node = _AUTOGRAD_NODE.search(event)
    if node is not None:  # AddmmBackward0 -> addmm, ScaledDotProductFlashAttentionForCpuBackward0 -> ...
        forward = re.sub(r"(?<!^)(?=[A-Z])", "_", node.group("node")).lower()
        return GEMM if forward in GEMM_OPS or f"_{forward}" in GEMM_OPS else OTHER
    base = _op_base(event)
    if base in GEMM_OPS:
        return GEMM
    namespace = event.split("::", 1)[0] if "::" in event else ""
    return GEMM if namespace not in ("aten", "prims", "") and _GEMM_WORD.search(base) else OTHER


def event_name(kernel: KernelInfo, graph_id: Optional[int]) -> str:
    """The profiler event a kernel call produces."""
    if kernel.kind == "extern":
        name = kernel.name
        if name.startswith("extern_kernels."):
            return "aten::" + name.split(".", 1)[1]
        parts = name.split(".")
        if parts[0] == "torch" and len(parts) >= 4:  # torch.ops.ns.op[.overload]
            return f"{parts[2]}::{parts[3]}"
        if parts[0] == "aten" and len(parts) >= 2:
            return f"aten::{parts[1]}"
        return name
    if kernel.kind == "triton":
        return kernel.name
    return cpp_event_name(kernel.name, graph_id)


def call_sequence(graph: GraphCapture) -> list[tuple[str, KernelInfo, int]]:
    """(event name, kernel, wrapper line) for every kernel call of the wrapper, in call order."""
    calls = [(line, kernel) for kernel in graph.kernels for line in kernel.call_lines]
    calls.sort(key=lambda item: item[0])
    return [(event_name(kernel, graph.graph_id), kernel, line) for line, kernel in calls]


def _align(children: Sequence[str], expected: Sequence[str]) -> list[Optional[int]]:
    """For each child, the index of the expected call it is (in order), or None."""
    result: list[Optional[int]] = []
    position = 0
    for name in children:
        try:
            found = expected.index(name, position)
        except ValueError:
            result.append(None)
            continue
        result.append(found)
        position = found + 1
    return result


def _kernel_provenance(
    graph: GraphCapture, kernel: KernelInfo, line: int
) -> tuple[list[str], list[str], dict[str, float], dict[str, float]]:
    """FX nodes, Dynamo nodes, source-line weights and module weights of one kernel call (each
    line's weight split between the modules of its FX nodes, an extern call's all its op's; ""
    for the root module's own code)."""
    if kernel.kind == "extern":
        lines = [w for w in graph.wrapper_lines if w.number == line]
    else:
        lines = kernel.tagged_lines
    fx, dynamo = [], []
    weights: dict[str, float] = defaultdict(float)
    modules: dict[str, float] = defaultdict(float)
    for kernel_line in lines:
        fx.extend(n for n in kernel_line.fx_nodes if n not in fx)
        dynamo.extend(n for n in kernel_line.dynamo_nodes if n not in dynamo)
        if kernel_line.source is not None:
            weights[str(kernel_line.source)] += 1.0
        # an extern call's line names the op it runs first, then the nodes lowered into its inputs
        # (a convolution's backward, the batch norm backward before it): its time is the op's
        computed = kernel_line.fx_nodes[:1] if kernel.kind == "extern" else kernel_line.fx_nodes
        labels = {node_module(graph.nodes.get(name)) for name in computed}
        for label in labels:
            modules[label] += 1.0 / len(labels)
    if not weights:  # no tagged line names a source: fall back on the nodes' sources
        for name in fx:
            node = graph.nodes.get(name)
            if node is not None and node.source is not None:
                weights[str(node.source)] += 1.0
    return fx, dynamo, _normalised(weights), _normalised(modules)


def _normalised(weights: dict[str, float]) -> dict[str, float]:
    total = sum(weights.values())
    return {k: v / total for k, v in weights.items()} if total else {}


def _compiled_category(kernel: KernelInfo, event: str) -> str:
    if kernel.kind == "template":
        return GEMM
    if kernel.kind == "extern":
        return category_of_op(event)
    return FUSED


class _PerStep:
    """Per-step sums of calls and times for one row; the row gets their medians over all steps."""

    def __init__(self, steps: int) -> None:
        self.calls = [0.0] * steps
        self.total = [0.0] * steps
        self.own = [0.0] * steps
        self.device = [0.0] * steps

    def add(self, step: int, event: Event) -> None:
        self.calls[step] += 1
        self.total[step] += event.total_us
        self.own[step] += event.self_us
        self.device[step] += event.device_us


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def _by_median(rows: dict[Any, OpTiming], per_step: dict[Any, _PerStep]) -> list[OpTiming]:
    """Each op row given the medians of its per-step sums; the rows, largest first."""
    for key, row in rows.items():
        sums = per_step[key]
        row.calls, row.total_us = _median(sums.calls), _median(sums.total)
        row.self_us, row.device_us = _median(sums.own), _median(sums.device)
    return sorted(rows.values(), key=lambda r: -r.busy_us)


def join_compiled(run: ProfiledRun, graphs: Sequence[GraphCapture]) -> tuple[list[KernelTiming], list[str]]:
    """Kernel rows for every kernel call found in the run; and the unmatched child events.

    A row's calls and times are medians over the profiled steps of its per-step sums, so one
    slow step does not skew it (and shares compare with the median step).
    """
    steps = max(1, len(run.step_us))
    per_step: dict[tuple[int, str, int], _PerStep] = {}
    sequences = {g.index: call_sequence(g) for g in graphs if not g.failed}
    by_index = {g.index: g for g in graphs}
    rows: dict[tuple[int, str, int], KernelTiming] = {}
    unmatched: dict[str, int] = defaultdict(int)
    alignments: dict[tuple[str, ...], tuple[Optional[int], list[Optional[int]]]] = {}
    for call in (e for e in run.events.values() if CALL_EVENT.match(e.name) and e.step >= 0):
        children = [run.events[i] for i in call.children]
        names = tuple(c.name for c in children)
        if names not in alignments:
            best: tuple[int, Optional[int], list[Optional[int]]] = (0, None, [None] * len(names))
            for index, sequence in sequences.items():
                aligned = _align(names, [name for name, _, _ in sequence])
                score = sum(a is not None for a in aligned)
                if score > best[0]:
                    best = (score, index, aligned)
            alignments[names] = (best[1], best[2])
        graph_index, aligned = alignments[names]
        for child, position in zip(children, aligned):
            if graph_index is None or position is None:
                unmatched[child.name] += 1
                continue
            graph = by_index[graph_index]
            event, kernel, line = sequences[graph_index][position]
            key = (graph_index, kernel.name, line if kernel.kind == "extern" else 0)
            row = rows.get(key)
            if row is None:
                fx, dynamo, weights, modules = _kernel_provenance(graph, kernel, line)
                row = rows[key] = KernelTiming(
                    kernel=kernel.name, event=event, kind=kernel.kind, graph=graph.label, calls=0.0, time_us=0.0,
                    category=_compiled_category(kernel, event), fx_nodes=fx, dynamo_nodes=dynamo,
                    source_lines=sorted(weights, key=lambda s: -weights[s]), source_weights=weights,
                    module_weights=modules,
                    bytes=kernel.traffic.total_bytes if kernel.traffic is not None else None)
                per_step[key] = _PerStep(steps)
            row.event_ids.append(child.id)
            per_step[key].add(min(call.step, steps - 1), child)
    for key, row in rows.items():
        sums = per_step[key]
        row.step_us = list(sums.device if any(sums.device) else sums.total)
        row.calls, row.time_us, row.device_us = _median(sums.calls), _median(sums.total), _median(sums.device)
    result = sorted(rows.values(), key=lambda r: -r.busy_us)
    return result, [f"{name} x{count}" for name, count in sorted(unmatched.items(), key=lambda i: -i[1])]


def _top_level_ops(run: ProfiledRun, step: int) -> list[tuple[Event, Optional[Event]]]:
    """The outermost ``ns::op`` events of a step, each with its nearest SourceTagging range."""
    found: list[tuple[Event, Optional[Event]]] = []

    def walk(events: Iterable[Event], label: Optional[Event]) -> None:
        for event in events:
            if event.name.startswith(SOURCE_PREFIX):
                walk((run.events[i] for i in event.children), event)
            elif "::" in event.name and not event.name.startswith("##"):
                found.append((event, label))
            else:
                walk((run.events[i] for i in event.children), label)

    walk(run.roots_in(step), None)
    return found


def _runs_a_graph(run: ProfiledRun, event: Event) -> bool:
    """Some event under ``event`` (or ``event`` itself) is a compiled graph's call."""
    stack = [event]
    while stack:
        inner = stack.pop()
        if CALL_EVENT.match(inner.name):
            return True
        stack.extend(run.events[i] for i in inner.children)
    return False


def _ops_outside_graphs(run: ProfiledRun, step: int) -> list[Event]:
    """The outermost ``ns::op`` events of a compiled step that no compiled graph's call holds or
    runs: what the step ran eagerly. An op that runs a graph (autograd's
    ``evaluate_function: CompiledFunctionBackward``) is looked into, not counted."""
    found: list[Event] = []

    def walk(events: Iterable[Event]) -> None:
        for event in events:
            if CALL_EVENT.match(event.name):
                continue
            if "::" in event.name and not event.name.startswith("##") and not _runs_a_graph(run, event):
                found.append(event)
            else:
                walk(run.events[i] for i in event.children)

    walk(run.roots_in(step))
    return found


def ops_outside_graphs(run: ProfiledRun) -> list[OpTiming]:
    """One row per op the compiled steps ran eagerly, outside every compiled graph (the code
    between graph breaks, a frame Dynamo skipped, an optimizer step left uncompiled), medians over
    the steps of its per-step sums, largest first. No source line: no tagging pass runs compiled."""
    steps = max(1, len(run.step_us))
    rows: dict[str, OpTiming] = {}
    per_step: dict[str, _PerStep] = {}
    for step in range(len(run.step_us)):
        for event in _ops_outside_graphs(run, step):
            if event.name not in rows:
                rows[event.name] = OpTiming(name=event.name, calls=0.0, total_us=0.0, self_us=0.0,
                                            category=category_of_op(event.name))
                per_step[event.name] = _PerStep(steps)
            per_step[event.name].add(step, event)
    return _by_median(rows, per_step)


def _labels_by_sequence(run: ProfiledRun, ops: Sequence[tuple[Event, Optional[Event]]]) -> dict[int, Event]:
    """The SourceTagging range of each autograd sequence number a labelled forward op (or an op
    it calls) recorded: what the backward events of the same number differentiate.

    Every op run with grad on records the number the next backward node will get, also an op that
    makes none (``indices[0]`` on an integer tensor): the node's own op is the last to record it (the
    number moves on as the node is made), so the latest op by start time names it. The first one
    named the line's module for an ``EmbeddingBag``'s backward, not the bag."""
    numbered: list[tuple[float, int, Event]] = []
    for event, label in ops:
        if label is None:
            continue
        stack = [event]
        while stack:
            inner = stack.pop()
            if inner.sequence >= 0:
                numbered.append((inner.start_us, inner.sequence, label))
            stack.extend(run.events[i] for i in inner.children)
    numbered.sort(key=lambda item: item[0])  # stable: an op and the ops it calls, which share its label
    return {sequence: label for _, sequence, label in numbered}


def eager_op_sources(tagged: ProfiledRun) -> dict[tuple[str, int], list[str]]:
    """``{(op name, occurrence in the step): call stack}`` from a SourceTagging run's first step.

    A backward op (``autograd::engine::evaluate_function: AddmmBackward0``) runs outside any
    SourceTagging range; it gets the call stack of the forward op it differentiates, found by
    the autograd sequence number both events carry."""
    seen: dict[str, int] = defaultdict(int)
    result = {}
    ops = _top_level_ops(tagged, 0)
    forward_labels = _labels_by_sequence(tagged, ops)
    for event, label in ops:
        occurrence = seen[event.name]
        seen[event.name] += 1
        if label is None and event.sequence >= 0:
            label = forward_labels.get(event.sequence)
        result[(event.name, occurrence)] = parse_source_label(label.name) if label is not None else []
    return result


def _torch_internals() -> tuple[str, str]:
    """(torch's package folder, its ``nn/modules`` folder), each ending in a separator."""
    import os

    import torch

    root = os.path.join(os.path.dirname(torch.__file__), "")
    return root, os.path.join(root, "nn", "modules", "")


def _pick_source(stack: Sequence[str], known: set[str]) -> str:
    """The innermost frame of ``stack`` the compiled graphs also name; else the innermost function
    whose first line they name (a module's ``forward``); else the innermost frame outside torch,
    or in one of torch's own modules (``return F.relu(input, ...)`` in ``activation.py``, as the
    compiled side names a node of such a model), rather than ``torch.nn.functional``'s dispatch."""
    frames = [frame for frame in stack if not frame.startswith((DEFINITION, MODULE))]
    for frame in frames:
        if frame in known:
            return frame
    for frame in stack:
        if frame.startswith(DEFINITION) and frame[len(DEFINITION):] in known:
            return frame[len(DEFINITION):]
    torch_root, torch_modules = _torch_internals()
    readable = [frame for frame in frames if not frame.startswith(torch_root) or frame.startswith(torch_modules)]
    return (readable or frames)[0] if frames else ""


def join_eager(run: ProfiledRun, stacks: dict[tuple[str, int], list[str]], known_sources: set[str],
               module_names: Optional[dict[str, str]] = None) -> list[OpTiming]:
    """One row per (top-level op, source line, module), per step, largest total first.
    ``module_names``: ``{module key: name}`` (:func:`module_names`) for the modules the compiled
    graphs ran in; an op in any other module has none."""
    steps = max(1, len(run.step_us))
    names = module_names or {}
    rows: dict[tuple[str, str, str], OpTiming] = {}
    per_step: dict[tuple[str, str, str], _PerStep] = {}
    for step in range(len(run.step_us)):
        seen: dict[str, int] = defaultdict(int)
        for event, _ in _top_level_ops(run, step):
            occurrence = seen[event.name]
            seen[event.name] += 1
            stack = stacks.get((event.name, occurrence), [])
            source = _pick_source(stack, known_sources)
            key = (event.name, source, names.get(label_module(stack), ""))
            row = rows.get(key)
            if row is None:
                row = rows[key] = OpTiming(
                    name=event.name, calls=0.0, total_us=0.0, self_us=0.0, category=category_of_op(event.name),
                    source_lines=[source] if source else [], module=key[2])
                per_step[key] = _PerStep(steps)
            per_step[key].add(step, event)
    return _by_median(rows, per_step)


def module_names(graphs: Sequence[GraphCapture]) -> dict[str, str]:
    """``{module key: name}`` for every submodule the graphs ran in (see
    :func:`~instrumented_backend.provenance.node_map.module_labels`): an eager op names its
    module by that key."""
    found: dict[str, str] = {}
    for graph in graphs:
        for key, label in module_labels(graph.dynamo_graph).items():
            found.setdefault(key, label)
    return found


def source_code(sources: Iterable[str], graphs: Sequence[GraphCapture]) -> dict[str, str]:
    """The text of each ``file:line`` (from the captured provenance, else from the file)."""
    known = {str(n.source): n.source.code for g in graphs for n in g.nodes.values() if n.source is not None}
    result = {}
    for source in sources:
        if not source:
            continue
        if source in known and known[source]:
            result[source] = known[source]
            continue
        file, _, line = source.rpartition(":")
        result[source] = linecache.getline(file, int(line)).strip() if line.isdigit() else ""
    return result
