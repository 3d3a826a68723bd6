"""Seam: why Dynamo compiled a graph: the graph break that ended it, and why a frame recompiled.

* Dynamo hands the backend each graph with the ``GraphCompileReason`` (reason text, user stack,
  whether a graph break made it) it compiled the graph for, as ``gm.compile_subgraph_reason``, and
  keeps it on its ``OutputGraph`` (``compile_subgraph_reason``) while the backend runs: that is
  where :func:`take_graph_break_reason` reads it (through the translator being run for a
  DDPOptimizer bucket, a submodule split from that graph). Before, it took the newest reason of
  ``torch._dynamo.utils.graph_break_reasons`` not handed out yet; but a break before the frame
  traced any op ends an empty graph, which no backend receives, and its reason went to the next
  graph compiled anywhere (the resumed frame after a ``torch._dynamo.graph_break()`` at a
  function's top, a profiled module after a DDP forward's untraceable logger call), named as
  the break that ended it.
* Each frame compile ends with a ``CompilationMetrics`` record (``get_compilation_metrics()``)
  whose ``recompile_reason`` names the guard that failed; it is written after the backend
  returns, so :func:`recompile_reason` is read later, on first use. A frame whose compile failed
  and fell back to eager (Dynamo's skip reason then says only "an error was suppressed during
  compilation") has the error in the same record's ``fail_type`` and ``fail_reason``, and the
  user line it stopped at: :func:`frame_failure`.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

from .. import SeamMoved, names_used

__all__ = ["take_graph_break_reason", "recompile_reason", "frame_failure", "FrameCompile", "frame_compiles", "check"]

_lock = threading.Lock()
_NAMED = "_instrumented_backend_named"  # set on a GraphCompileReason once a graph is named as ended by it


def _reason_of(gm: object) -> object:
    """The ``GraphCompileReason`` Dynamo compiled ``gm`` (or the graph it was split from) for, or None."""
    reason = getattr(gm, "compile_subgraph_reason", None)
    if reason is None:
        from torch._dynamo.symbolic_convert import InstructionTranslator

        try:
            tx = InstructionTranslator.current_tx()
        except Exception:  # noqa: BLE001 - no Dynamo frame on this thread (AOTInductor's export)
            return None
        reason = getattr(getattr(tx, "output", None), "compile_subgraph_reason", None)
    return reason


def take_graph_break_reason(gm: object = None) -> str:
    """The graph break that ended graph ``gm`` being compiled now (the reason's first line and the
    user's ``(file:line)``), or "": not ended by a break, or its break named already (the graphs of
    DDPOptimizer's buckets share one; the first compiled is named)."""
    reason = _reason_of(gm)
    if reason is None or not getattr(reason, "graph_break", False):
        return ""
    with _lock:  # marked on the reason itself: an id could be another reason's once this one is freed
        if getattr(reason, _NAMED, False):
            return ""
        try:
            setattr(reason, _NAMED, True)
        except (AttributeError, TypeError):  # a reason that takes no attribute is named each time
            pass
    frame = reason.user_stack[-1] if reason.user_stack else None
    where = f" ({frame.filename}:{frame.lineno})" if frame is not None else ""
    return f"{reason.reason.strip().splitlines()[0] if reason.reason.strip() else '?'}{where}"


def recompile_reason(compile_id: str) -> str:
    """Why Dynamo recompiled the frame of ``compile_id`` (the failed guard), or "" (first compile,
    or not recorded in this process)."""
    from torch._dynamo.utils import get_compilation_metrics

    for metrics in reversed(get_compilation_metrics()):
        if str(metrics.compile_id) == compile_id:
            return metrics.recompile_reason or ""
    return ""


def _frame_of(compile_id: object) -> str:
    """The frame part of a compile id ("0" of "0/8"): the same for every compile of one frame."""
    return str(compile_id).rsplit("/", 1)[0]


def _is_first(compile_id: object) -> bool:
    """A compile id names its frame's first compile ("0/0", "3/0", "3/0_1" retried): its second part is 0."""
    return str(compile_id).rsplit("/", 1)[-1].split("_")[0] == "0"


def _guard_failed(recompile_reason: str) -> str:
    """The failed guard of a ``recompile_reason`` ("0/7: mode == 'aaa'"), without the source comment
    Dynamo pads it with."""
    first = recompile_reason.strip().splitlines()[0] if recompile_reason.strip() else ""
    return " ".join(first.split("  #")[0].split())


def frame_failure(name: str, filename: str, first_line: int) -> str:
    """Why Dynamo's newest compile of the frame of function ``name`` defined at ``filename:first_line``
    failed: the error's type and its first lines (Dynamo's explanation and hints), the user line it
    stopped at, and the guard whose failure made it a recompile, as ``Unsupported: ... (at file:line;
    recompiled as 0/7: n == 3 failed)``; "" when no failed compile of it is recorded. A compile that
    the recompile limit refused records no code object, only its compile id (see :func:`_of_frame`)."""
    from torch._dynamo.utils import get_compilation_metrics

    for metrics in reversed(_of_frame(get_compilation_metrics(), name, filename, first_line)):
        if not metrics.fail_type:
            return ""
        text = " ".join(line.strip() for line in (metrics.fail_reason or "").strip().splitlines()[:3] if line.strip())
        notes = [f"at {metrics.fail_user_frame_filename}:{metrics.fail_user_frame_lineno}"
                 ] if metrics.fail_user_frame_filename else []
        if guard := _guard_failed(metrics.recompile_reason or ""):
            notes.append(f"recompiled as {guard} failed")
        where = f" ({'; '.join(notes)})" if notes else ""
        return f"{metrics.fail_type}: {text or '?'}{where}"
    return ""


class FrameCompile(NamedTuple):
    """One compile Dynamo recorded of a frame: its id, the guard whose failure made it a recompile
    ("" for the first), its error ("" when it compiled), whether the recompile limit refused it
    (recorded with no code object), and whether it was the frame's first (its id's second part 0:
    the first ever, or the first since ``torch.compiler.reset()``)."""

    compile_id: str
    guard_failed: str
    failure: str
    refused: bool
    first: bool


def _of_frame(records: list, name: str, filename: str, first_line: int) -> list:
    """The compilation metrics of the frame of function ``name`` defined at ``filename:first_line``,
    in order: its own, and those of compiles the recompile limit refused (no code object recorded,
    only a compile id): such a refusal is the frame's whose compile with the same frame id came
    last before it (frame ids start again at 0 after ``torch.compiler.reset()``). A training graph's
    backward, compiled lazily at its first ``backward()``, records no code object either, under its
    forward's compile id (``is_forward`` False): not a compile of the frame, left out."""
    key = (name, filename, first_line)
    owner: dict[str, tuple] = {}  # frame id -> the code of its newest compile so far
    found = []
    for m in records:
        if m.co_name is None and m.is_forward is False:
            continue  # a backward: a ViT training step compiled twice counted four compiles
        frame = _frame_of(m.compile_id)
        if m.co_name is not None:
            owner[frame] = (m.co_name, m.co_filename, m.co_firstlineno)
        if owner.get(frame) == key:
            found.append(m)
    return found


def frame_compiles(name: str, filename: str, first_line: int) -> list[FrameCompile]:
    """Every compile of the frame of function ``name`` defined at ``filename:first_line`` that
    Dynamo still keeps a record of in this process, in order (it keeps the newest 64 by default)."""
    from torch._dynamo.utils import get_compilation_metrics

    return [FrameCompile(str(m.compile_id), _guard_failed(m.recompile_reason or ""),
                         f"{m.fail_type}: {(m.fail_reason or '').strip().splitlines()[0] if m.fail_reason else '?'}"
                         if m.fail_type else "", m.co_name is None, _is_first(m.compile_id))
            for m in _of_frame(get_compilation_metrics(), name, filename, first_line)]


def check() -> None:
    """Raise SeamMoved unless Dynamo still hands the backend why it compiled a graph, and keeps
    compilation metrics."""
    import dataclasses

    import torch._dynamo.utils as dynamo_utils
    from torch._dynamo.output_graph import GraphCompileReason, OutputGraph
    from torch._dynamo.symbolic_convert import InstructionTranslator

    if {"reason", "user_stack", "graph_break"} - {f.name for f in dataclasses.fields(GraphCompileReason)}:
        raise SeamMoved("dynamo_reasons: GraphCompileReason no longer has reason, user_stack and graph_break")
    if "compile_subgraph_reason" not in names_used(OutputGraph) or not callable(
            getattr(InstructionTranslator, "current_tx", None)):
        raise SeamMoved("dynamo_reasons: OutputGraph no longer keeps compile_subgraph_reason (set on the graph "
                        "it hands the backend), or InstructionTranslator.current_tx() is gone")
    if not callable(getattr(dynamo_utils, "get_compilation_metrics", None)):
        raise SeamMoved("dynamo_reasons: torch._dynamo.utils.get_compilation_metrics is gone")
    fields = {f.name for f in dataclasses.fields(dynamo_utils.CompilationMetrics)}
    if {"compile_id", "recompile_reason", "is_forward"} - fields:
        raise SeamMoved("dynamo_reasons: CompilationMetrics no longer has compile_id, recompile_reason and "
                        "is_forward (which tells a lazily compiled backward's record from a frame's compile)")
    failure = {"co_name", "co_filename", "co_firstlineno", "fail_type", "fail_reason", "fail_user_frame_filename",
               "fail_user_frame_lineno"}
    if failure - fields:
        raise SeamMoved(f"dynamo_reasons: CompilationMetrics no longer has {sorted(failure - fields)} (why a frame's "
                        "compile failed)")
