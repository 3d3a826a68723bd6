"""Seam: the buffers the wrapper code names, read when Inductor loads it (``GraphLowering._compile_to_module_lines``)
or AOTInductor compiles it into a package (``AotCodeCompiler.compile``).

Every statement of the wrapper's ``call()`` names the buffers it allocates, writes or frees
(``buf0 = empty_strided_cpu(...)``, ``extern_kernels.addmm(..., out=buf0)``,
``buf3 = torch.ops.mkl._mkl_linear.default(...)``, ``del buf0``). Each buffer is an IR node
whose ``origins`` are the FX nodes lowered into it, recorded by Inductor at lowering time. We read
``GraphLowering.name_to_buffer`` once the wrapper is final, so the line map can attribute extern
kernel calls and the wrapper's own lines to FX nodes. (Inductor's own wrapper line map is not
usable for this: C++ kernel calls are flushed after the next node's context is entered.)
The wrapper text is kept too: when a kernel fails to compile while the module loads, it is the
only output code there is.
"""

from __future__ import annotations

import inspect
from typing import Any

from ...recording import recorder as recording
from .. import SeamMoved, install_once
from ..lowering.ir_origins import value_node

__all__ = ["install", "check", "buffer_origins", "buffer_nodes"]


def buffer_origins(graph: Any) -> dict[str, list[str]]:
    """``{buffer name: FX node names}`` for every buffer of a GraphLowering, the op it computes first.

    Inductor's ``origins`` of a buffer are that op and the nodes lowered into its inputs: for an
    extern kernel's buffer (a GEMM, a fallback), the views folded into its ``reinterpret_tensor``
    arguments, but also every node of the pointwise chain its input was realized from (the layer
    norm before a linear), which a generated kernel computes and whose lines carry them. Those are
    left out of an extern kernel's buffer, so its call line is the op's and its views', not the
    norm's too (``lines_for("rsqrt")`` listed the query projection's ``mm``). An input realized
    while the extern op itself was being lowered (a convolution backward's gradient, copied into
    the layout it needs) has the op among its own origins: the op's nodes (:func:`_own_nodes`) and
    the views it reads its arguments through stay the extern buffer's all the same. The buffer's
    ``origin_node`` leads when Inductor names one, then the rest, latest in the graph first (a
    while_loop's result names none: the loop leads, then what feeds it). The node whose value the
    buffer holds (:func:`~.ir_origins.value_node`) counts as its ``origin_node``."""
    from torch._inductor import ir

    order = {node: index for index, node in enumerate(getattr(getattr(graph, "graph", None), "nodes", ()))}
    buffers = graph.name_to_buffer
    generated = {node for buffer in buffers.values() if not isinstance(buffer, ir.ExternKernel)
                 for node in getattr(buffer, "origins", None) or ()}
    result: dict[str, list[str]] = {}
    for name, buffer in buffers.items():
        own = value_node(buffer)  # nodes outside this graph (-1) after the rest
        origins = getattr(buffer, "origins", None) or ()
        if isinstance(buffer, ir.ExternKernel):
            kept = _own_nodes(buffer, origins, own)
            kept |= {view for node in kept for view in _argument_views(node)}
            origins = [node for node in origins if node in kept or node not in generated] or origins
        ranked = sorted(origins, key=lambda node, own=own: (node is not own, -order.get(node, -1), node.name))
        result[name] = [recording.fx_label(node) for node in ranked]
    return result


def _own_nodes(buffer: Any, origins: Any, own: Any) -> set[Any]:
    """The FX nodes an extern buffer's op is: the node whose value it holds, and those of its
    origins that call its op (a multi-output fallback's: ``convolution_backward``, which names no
    ``origin_node``; a ``MultiOutput`` item's: its fallback's op)."""
    from torch._inductor import ir

    nodes = {own} if own is not None else set()
    kernel = buffer
    if isinstance(buffer, ir.MultiOutput) and getattr(buffer, "inputs", None):
        kernel = buffer.inputs[0]
    op = getattr(kernel, "op_overload", None)
    if op is not None:
        nodes |= {node for node in origins if getattr(node, "target", None) is op}
    return nodes


def _argument_views(node: Any) -> set[Any]:
    """The view nodes ``node`` reads its arguments through (a permute, a reshape), transitively."""
    views: set[Any] = set()
    stack = list(getattr(node, "all_input_nodes", ()))
    while stack:
        arg = stack.pop()
        if arg in views or not getattr(getattr(arg, "target", None), "is_view", False):
            continue
        views.add(arg)
        stack.extend(arg.all_input_nodes)
    return views


def buffer_nodes(graph: Any) -> dict[str, str]:
    """``{buffer name: the FX node whose value it holds}`` (:func:`~.ir_origins.value_node`: the
    ``origin_node``, or the node a copy copies; fused inputs are origins only)."""
    result: dict[str, str] = {}
    for name, buffer in graph.name_to_buffer.items():
        node = value_node(buffer)
        if node is not None:
            result[name] = recording.fx_label(node)
    return result


def _record(graph: Any, wrapper_code: str) -> None:
    """Hand the active recorder what the line map needs of ``graph`` once its wrapper is final."""
    recorder = recording.active_recorder()
    if recorder is None:
        return
    try:
        recorder.wrapper_code = wrapper_code  # output_code.py, even if loading it fails
        recorder.buffer_origins.update(buffer_origins(graph))
        recorder.buffer_nodes.update(buffer_nodes(graph))
        recorder.graph_inputs.extend(n for n in graph.graph_inputs if n not in recorder.graph_inputs)
    except Exception as exc:  # noqa: BLE001 - provenance must never break a compile
        recorder.problems.append(f"wrapper_buffers: {exc!r}")


@install_once
def install() -> None:
    """Patch GraphLowering._compile_to_module_lines (the Python and C++ wrappers, loaded in process)
    and AotCodeCompiler.compile (AOTInductor's wrapper, compiled into a package) once per process."""
    from torch._inductor.codecache import AotCodeCompiler
    from torch._inductor.graph import GraphLowering

    original = GraphLowering._compile_to_module_lines

    def compile_to_module_lines(self: Any, wrapper_code: Any) -> Any:
        _record(self, wrapper_code.value)
        return original(self, wrapper_code)

    GraphLowering._compile_to_module_lines = compile_to_module_lines

    original_aot = AotCodeCompiler.compile.__func__

    def aot_compile(cls: Any, graph: Any, wrapper_code: str, *args: Any, **kwargs: Any) -> Any:
        _record(graph, wrapper_code)
        return original_aot(cls, graph, wrapper_code, *args, **kwargs)

    AotCodeCompiler.compile = classmethod(aot_compile)


def check() -> None:
    """Raise SeamMoved unless GraphLowering still loads the wrapper through _compile_to_module_lines,
    and extern calls' buffers are still ``ir.ExternKernel``s and generated kernels' are not."""
    from torch._inductor.graph import GraphLowering

    method = getattr(GraphLowering, "_compile_to_module_lines", None)
    if not callable(method):
        raise SeamMoved("wrapper_buffers: GraphLowering._compile_to_module_lines is gone")
    if list(inspect.signature(method).parameters)[:2] != ["self", "wrapper_code"]:
        raise SeamMoved("wrapper_buffers: GraphLowering._compile_to_module_lines(self, wrapper_code) changed")
    init_source = inspect.getsource(GraphLowering.__init__)
    for attr in ("self.name_to_buffer", "self.graph_inputs"):
        if attr not in init_source:
            raise SeamMoved(f"wrapper_buffers: GraphLowering no longer has {attr.split('.')[1]}")
    from torch._inductor import ir

    extern = getattr(ir, "ExternKernel", None)
    if not (isinstance(extern, type) and issubclass(getattr(ir, "ExternKernelOut", object), extern)
            and issubclass(getattr(ir, "FallbackKernel", object), extern)
            and issubclass(getattr(ir, "MultiOutput", object), extern)
            and not issubclass(getattr(ir, "ComputedBuffer", extern), extern)):
        raise SeamMoved("wrapper_buffers: ir.ExternKernel no longer tells an extern call's buffer (ExternKernelOut, "
                        "FallbackKernel, MultiOutput) from a generated kernel's (ComputedBuffer); buffer_origins "
                        "reads it")
    if "self.op_overload = " not in inspect.getsource(ir.ExternKernel.__init__):
        raise SeamMoved("wrapper_buffers: ir.ExternKernel no longer keeps its op_overload; buffer_origins reads "
                        "it to tell a fallback's own node from its inputs'")
    from torch._inductor.codecache import AotCodeCompiler

    if not isinstance(inspect.getattr_static(AotCodeCompiler, "compile", None), classmethod):
        raise SeamMoved("wrapper_buffers: AotCodeCompiler.compile is no longer a classmethod")
    if list(inspect.signature(AotCodeCompiler.compile).parameters)[:2] != ["graph", "wrapper_code"]:
        raise SeamMoved("wrapper_buffers: AotCodeCompiler.compile(graph, wrapper_code, ...) changed")
