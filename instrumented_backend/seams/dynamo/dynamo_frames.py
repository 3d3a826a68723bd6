"""Seam: the line inside torch's own modules that made a Dynamo node, where Dynamo records none.

Dynamo leaves the frames of ``torch/nn/modules`` out of a node's ``stack_trace`` (the user's line
is the one that matters), so a graph traced wholly inside torch's modules
(``torch.compile(nn.Sequential(...))``, an ``nn.TransformerEncoderLayer`` compiled directly) has
no trace at all, and each node's source fell back on its module's ``def forward`` line: every
op of a training batch norm (the running-statistics update, the normalization) on
``batchnorm.py``'s ``def forward``. The wrapper around ``SubgraphTracer.create_proxy`` records,
for a node Dynamo leaves without a trace, the frame being traced when the node was made (file,
line, function) in ``node.meta[FRAME_KEY]``: ``return F.batch_norm(`` for the normalization. It
does so only in a compile for the instrumented backend, and costs a plain compile one check of
the node's trace.
"""

from __future__ import annotations

import functools
import linecache
from typing import Any, Optional

from .. import SeamMoved, install_once, names_used

__all__ = ["install", "check", "traced_frame", "FRAME_KEY", "BACKEND_MARK"]

FRAME_KEY = "instrumented_backend_frame"
# Set (True) on the instrumented backend's function by its module: how a trace tells it is for it.
BACKEND_MARK = "_instrumented_backend_compiler"


def traced_frame(node: Any) -> Optional[tuple[str, int, str, str]]:
    """``(file, line, function, code)`` of the frame that made a Dynamo node Dynamo left without a
    ``stack_trace``, or None."""
    frame = getattr(node, "meta", {}).get(FRAME_KEY)
    if not frame:
        return None
    file, line, function = frame
    return file, line, function, linecache.getline(file, line).strip()


def _compiles_instrumented(output_graph: Any) -> bool:
    """Whether the graph Dynamo is tracing goes to the instrumented backend (through Dynamo's
    debug wrapper, ``torch.compile``'s wrapper, DDPOptimizer, or a ``functools.partial``)."""
    backend = getattr(output_graph, "compiler_fn", None)
    for _ in range(8):
        if getattr(backend, BACKEND_MARK, False) is True:
            return True
        owner = getattr(backend, "__self__", None)
        backend = (getattr(backend, "_torchdynamo_orig_backend", None)
                   or (backend.func if isinstance(backend, functools.partial) else None)
                   or getattr(owner, "backend_compile_fn", None)
                   or getattr(backend, "compiler_fn", None))
        if backend is None:
            return False
    return False


_DECIDED = "_instrumented_backend_frames"  # on an OutputGraph: whether its frames are kept, once decided


def _record(tracer: Any, node: Any) -> None:
    output_graph = tracer.output_graph
    keep = getattr(output_graph, _DECIDED, None)
    if keep is None:  # once per traced graph, not once per node
        keep = _compiles_instrumented(output_graph)
        setattr(output_graph, _DECIDED, keep)
    if not keep:
        return
    tx = output_graph.current_tx
    code, line = getattr(tx, "f_code", None), getattr(tx, "lineno", None)
    if code is not None and isinstance(line, int):
        node.meta[FRAME_KEY] = (code.co_filename, line, getattr(code, "co_qualname", code.co_name))


@install_once
def install() -> None:
    """Wrap SubgraphTracer.create_proxy, once per process."""
    from torch._dynamo.output_graph import SubgraphTracer

    original = SubgraphTracer.create_proxy

    def create_proxy(self: Any, *args: Any, **kwargs: Any) -> Any:
        proxy = original(self, *args, **kwargs)
        node = getattr(proxy, "node", None)
        if node is not None and not node.meta.get("stack_trace"):
            try:
                _record(self, node)
            except Exception:  # noqa: BLE001 - a source line is never worth a failed trace
                pass
        return proxy

    SubgraphTracer.create_proxy = create_proxy


def check() -> None:
    """Raise SeamMoved unless Dynamo's SubgraphTracer still makes nodes through create_proxy, still
    leaves torch.nn's frames out of their stack_trace, and its OutputGraph still names the
    translator being traced and the backend it compiles for."""
    from torch._dynamo import output_graph

    tracer = getattr(output_graph, "SubgraphTracer", None)
    if tracer is None or not callable(vars(tracer).get("create_proxy")):  # its own, not fx.Tracer's
        raise SeamMoved("dynamo_frames: torch._dynamo.output_graph.SubgraphTracer.create_proxy is gone")
    used = names_used(tracer)
    for needed in ("stack_trace", "is_co_filename_from_nn_modules", "current_tx"):
        if needed not in used:
            raise SeamMoved(f"dynamo_frames: SubgraphTracer no longer uses {needed}; the frames Dynamo leaves out "
                            "of a node's stack_trace may have changed")
    graph_class = output_graph.OutputGraph
    if not isinstance(vars(graph_class).get("current_tx"), property) or "compiler_fn" not in names_used(graph_class):
        raise SeamMoved("dynamo_frames: OutputGraph no longer has a current_tx property, or no longer keeps its "
                        "compiler_fn")
