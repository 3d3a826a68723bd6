"""Line-level provenance: which IR op and FX node produced each line of a generated kernel.

Tagging happens at the point of emission, not by matching text afterwards:

1. When Inductor lowers an FX node into a ``Loops`` IR node, its ``inner_fn`` is wrapped so
   that calling it pushes that FX node as the *current FX origin* (nested calls give the
   innermost producer); stores push the origin of the buffer they write.
2. When a ``LoopBody`` is traced, every node it creates is stamped with the current FX origin
   (a body re-traced from another body inherits the stamp of the node being re-run).
3. During codegen, while a LoopBody node runs, every line the kernel writes gets an inline mark
   naming (IR op, FX node); the marks are stripped from the kernel source in ``define_kernel``
   before Inductor deduplicates and compiles it, so the generated code stays byte-identical.

The Inductor-facing hooks live in ``seams/ir_origins.py``, ``seams/loop_body_origins.py`` and
``seams/line_marks.py``; this module holds the thread-local state they share and does nothing
unless an instrumented compile has activated a :class:`LineRecorder` on the current thread.
"""

from __future__ import annotations

import functools
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Optional

__all__ = ["Origin", "origin_of", "LineRecorder", "active_recorder", "activate", "push_fx_origin", "pop_fx_origin",
           "current_fx_origin", "set_emission", "current_emission", "MARK_PATTERN", "strip_marks"]

MARK_PREFIX = "/*@ib"
MARK_PATTERN = re.compile(r"/\*@ib(\d+)@\*/")


@dataclass(frozen=True)
class Origin:
    """What produced one emitted line: the IR op (``ops.neg``) and the post-grad FX node name."""

    ir_op: Optional[str]
    fx_node: Optional[str]


@functools.lru_cache(maxsize=8192)
def origin_of(ir_op: Optional[str], fx_node: Optional[str]) -> Origin:
    """The (shared) Origin for this pair: the codegen hooks ask for one per LoopBody node run."""
    return Origin(ir_op=ir_op, fx_node=fx_node)


@dataclass
class TaggedKernel:
    """A kernel's marks, recorded in define_kernel: for each line of the clean source, its origins."""

    clean_source: str
    line_origins: list[list[Origin]] = field(default_factory=list)


class LineRecorder:
    """Per-AOT-graph registry of origins and of the tagged kernels Inductor defined."""

    def __init__(self) -> None:
        self.origins: list[Origin] = []
        self._marks: dict[Origin, str] = {}
        self.kernels: dict[str, list[TaggedKernel]] = {}
        self.problems: list[str] = []
        # Buffers the wrapper names -> FX nodes lowered into them; the graph's input names.
        self.buffer_origins: dict[str, list[str]] = {}
        self.buffer_nodes: dict[str, str] = {}  # buffer -> the FX node it is the value of
        self.graph_inputs: list[str] = []
        self.wrapper_code: str = ""  # the output code Inductor went on to load
        # kernel name -> {"reads": [...], "writes": [...]} (seams.kernel_traffic)
        self.traffic: dict[str, dict[str, list[dict[str, Any]]]] = {}

    def mark_for(self, origin: Origin) -> str:
        """The inline mark for ``origin`` (a C/C++ comment, stripped before compilation)."""
        mark = self._marks.get(origin)
        if mark is None:
            mark = self._marks[origin] = f"{MARK_PREFIX}{len(self.origins)}@*/"
            self.origins.append(origin)
        return mark

    def strip(self, source: str) -> tuple[str, list[list[Origin]]]:
        """Remove every mark; return the clean source and the origins of each of its lines."""
        clean_lines, per_line = [], []
        for line in source.split("\n"):
            if MARK_PREFIX not in line:  # most lines: no regex needed
                clean_lines.append(line)
                per_line.append([])
                continue
            ids = [int(m) for m in MARK_PATTERN.findall(line)]
            clean_lines.append(MARK_PATTERN.sub("", line) if ids else line)
            per_line.append([self.origins[i] for i in ids if i < len(self.origins)])
        return "\n".join(clean_lines), per_line

    def record_kernel(self, kernel_name: str, clean_source: str, line_origins: list[list[Origin]]) -> None:
        self.kernels.setdefault(kernel_name, []).append(TaggedKernel(clean_source, line_origins))


def strip_marks(text: str) -> str:
    """``text`` without any provenance marks."""
    return MARK_PATTERN.sub("", text)


_state = threading.local()


def thread_state() -> threading.local:
    """The thread-local the functions below read (``recorder``, ``emission``, ``fx_stack``), for the
    one hook hot enough that a function call per read shows in the compile time: ``writeline``,
    which runs for every line Inductor writes. It only reads; everything else goes through the
    functions below."""
    return _state


def active_recorder() -> Optional[LineRecorder]:
    """The recorder of the instrumented compile running on this thread, or None."""
    return getattr(_state, "recorder", None)


def activate(recorder: Optional[LineRecorder]) -> Optional[LineRecorder]:
    """Make ``recorder`` this thread's active recorder; returns the previous one."""
    previous = getattr(_state, "recorder", None)
    _state.recorder = recorder
    if recorder is None:
        _state.fx_stack = []
        _state.emission = None
    return previous


# The hooks run thousands of times per compile, so they call plain push/pop (set/restore)
# functions in a try/finally: a generator context manager costs more than the hook's own work.

def push_fx_origin(node_name: Optional[str]) -> None:
    """Push ``node_name`` as the FX node producing whatever IR ops are created until the pop."""
    stack = getattr(_state, "fx_stack", None)
    if stack is None:
        stack = _state.fx_stack = []
    stack.append(node_name)


def pop_fx_origin() -> None:
    """Undo the matching :func:`push_fx_origin`."""
    _state.fx_stack.pop()


def current_fx_origin() -> Optional[str]:
    """The innermost FX node currently being lowered/traced, or None."""
    stack = getattr(_state, "fx_stack", None)
    return stack[-1] if stack else None


def set_emission(origin: Optional[Origin]) -> Optional[Origin]:
    """Mark lines written from now on with ``origin``; returns the previous one, to restore."""
    previous = getattr(_state, "emission", None)
    _state.emission = origin
    return previous


def current_emission() -> Optional[Origin]:
    """The origin to mark emitted lines with, or None outside a LoopBody node's codegen."""
    return getattr(_state, "emission", None)
