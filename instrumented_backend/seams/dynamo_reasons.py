"""Seam: why Dynamo compiled a graph: the graph break that ended it, and why a frame recompiled.

* Dynamo records a ``GraphCompileReason`` (reason text and user stack) in
  ``torch._dynamo.utils.graph_break_reasons`` when a graph break ends a graph, just before it
  hands that graph to the backend; :func:`take_graph_break_reason` returns the newest one not
  handed out yet, read when the backend receives the graph.
* Each frame compile ends with a ``CompilationMetrics`` record (``get_compilation_metrics()``)
  whose ``recompile_reason`` names the guard that failed; it is written after the backend
  returns, so :func:`recompile_reason` is read later, on first use. A frame whose compile failed
  and fell back to eager (Dynamo's skip reason then says only "an error was suppressed during
  compilation") has the error in the same record's ``fail_type`` and ``fail_reason``, and the
  user line it stopped at: :func:`frame_failure`.
"""

from __future__ import annotations

import threading

from . import SeamMoved

__all__ = ["take_graph_break_reason", "recompile_reason", "frame_failure", "check"]

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


def frame_failure(name: str, filename: str, first_line: int) -> str:
    """Why Dynamo's newest compile of the frame of function ``name`` defined at ``filename:first_line``
    failed: the error's type and its first lines (Dynamo's explanation and hints), and the user line it
    stopped at, as ``Unsupported: ... (at file:line)``; "" when no failed compile of it is recorded."""
    from torch._dynamo.utils import get_compilation_metrics

    for metrics in reversed(get_compilation_metrics()):
        if (metrics.co_name, metrics.co_filename, metrics.co_firstlineno) != (name, filename, first_line):
            continue
        if not metrics.fail_type:
            return ""
        text = " ".join(line.strip() for line in (metrics.fail_reason or "").strip().splitlines()[:3] if line.strip())
        where = (f" (at {metrics.fail_user_frame_filename}:{metrics.fail_user_frame_lineno})"
                 if metrics.fail_user_frame_filename else "")
        return f"{metrics.fail_type}: {text or '?'}{where}"
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
    failure = {"co_name", "co_filename", "co_firstlineno", "fail_type", "fail_reason", "fail_user_frame_filename",
               "fail_user_frame_lineno"}
    if failure - fields:
        raise SeamMoved(f"dynamo_reasons: CompilationMetrics no longer has {sorted(failure - fields)} (why a frame's "
                        "compile failed)")
