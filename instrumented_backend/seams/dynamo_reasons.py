"""Seam: why Dynamo compiled a graph: the graph break that ended it, and why a frame recompiled.

* Dynamo records a ``GraphCompileReason`` (reason text and user stack) in
  ``torch._dynamo.utils.graph_break_reasons`` when a graph break ends a graph, just before it
  hands that graph to the backend; :func:`take_graph_break_reason` returns the newest one not
  handed out yet, read when the backend receives the graph.
* Each frame compile ends with a ``CompilationMetrics`` record (``get_compilation_metrics()``)
  whose ``recompile_reason`` names the guard that failed; it is written after the backend
  returns, so :func:`recompile_reason` is read later, on first use.
"""

from __future__ import annotations

import threading

from . import SeamMoved

__all__ = ["take_graph_break_reason", "recompile_reason", "check"]

_lock = threading.Lock()
_seen: set[int] = set()


def take_graph_break_reason() -> str:
    """The graph break that ended the graph being compiled now (the reason's first line and the
    user's ``(file:line)``), or ""."""
    from torch._dynamo.utils import graph_break_reasons

    with _lock:
        for reason in reversed(graph_break_reasons):
            if id(reason) in _seen:
                break
            _seen.add(id(reason))
            frame = reason.user_stack[-1] if reason.user_stack else None
            where = f" ({frame.filename}:{frame.lineno})" if frame is not None else ""
            return f"{reason.reason.strip().splitlines()[0] if reason.reason.strip() else '?'}{where}"
    return ""


def recompile_reason(compile_id: str) -> str:
    """Why Dynamo recompiled the frame of ``compile_id`` (the failed guard), or "" (first compile,
    or not recorded in this process)."""
    from torch._dynamo.utils import get_compilation_metrics

    for metrics in reversed(get_compilation_metrics()):
        if str(metrics.compile_id) == compile_id:
            return metrics.recompile_reason or ""
    return ""


def check() -> None:
    """Raise SeamMoved unless Dynamo still keeps graph break reasons and compilation metrics."""
    import dataclasses

    import torch._dynamo.utils as dynamo_utils
    from torch._dynamo.output_graph import GraphCompileReason

    if not isinstance(getattr(dynamo_utils, "graph_break_reasons", None), list):
        raise SeamMoved("dynamo_reasons: torch._dynamo.utils.graph_break_reasons is gone")
    if {"reason", "user_stack"} - {f.name for f in dataclasses.fields(GraphCompileReason)}:
        raise SeamMoved("dynamo_reasons: GraphCompileReason no longer has reason and user_stack")
    if not callable(getattr(dynamo_utils, "get_compilation_metrics", None)):
        raise SeamMoved("dynamo_reasons: torch._dynamo.utils.get_compilation_metrics is gone")
    fields = {f.name for f in dataclasses.fields(dynamo_utils.CompilationMetrics)}
    if {"compile_id", "recompile_reason"} - fields:
        raise SeamMoved("dynamo_reasons: CompilationMetrics no longer has compile_id and recompile_reason")
