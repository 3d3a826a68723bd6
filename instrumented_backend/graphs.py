"""What the ``instrumented`` backend records for one compiled AOT graph, and a run's worth of them.

:class:`GraphCapture` holds the texts and the records of :mod:`.records`, and is the user's
handle on them: its query methods delegate to :mod:`.provenance.queries` and :mod:`.capture.dump`,
which see it only as a type. :func:`~.capture.load.load` reads a dump back into these classes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, Optional, Protocol, Sequence

from .capture.dump import PathLike, dump_session
from .deferred import DeferredField, stored
from .records import (
    GRAPH_KINDS,
    CaptureProblem,
    InputInfo,
    KernelInfo,
    KernelLine,
    NodeProvenance,
    graph_label,
    kernel_from_dict,
    line_from_dict,
    node_from_dict,
    to_plain,
)

if TYPE_CHECKING:
    from pathlib import Path


__all__ = ["GraphCapture", "CaptureSession"]


class CheckedAccuracy(Protocol):
    """What a capture holds of its graph's accuracy check (``options={"check_accuracy": ...}``): the
    diagnosis's :class:`~instrumented_backend.diagnosis.accuracy.AccuracyReport`, one layer above."""

    @property
    def passed(self) -> bool: ...

    def render(self) -> str: ...


class ExplainedCompileError(Protocol):
    """What a capture holds of a kernel compile that failed, explained line by line: the
    diagnosis's :class:`~instrumented_backend.diagnosis.compile_error.CompileErrorReport`."""

    @property
    def lines(self) -> Sequence[Any]: ...  # each with its role ("error", ...) and its kernel line

    def render(self) -> str: ...


@dataclass
class GraphCapture:
    """Everything recorded for one AOT graph compiled by the ``instrumented`` backend.

    Text fields carry the same content TORCH_COMPILE_DEBUG writes: ``aot_graph`` is
    fx_graph_runnable.py, ``post_grad_graph_code`` is fx_graph_transformed.py, ``ir_pre_fusion``
    and ``ir_post_fusion`` are ir_pre_fusion.txt / ir_post_fusion.txt, ``output_code`` is
    output_code.py. The two printed graphs (``dynamo_graph_code``, ``post_grad_graph_code``) and
    each node's ``NodeProvenance.code`` are printed on first read, from the graphs the capture
    keeps, rather than inside the compile; they read as plain strings.
    """

    index: int
    compile_id: str
    kind: str
    graph_id: Optional[int]
    dynamo_graph_code: str = DeferredField()  # printed on first read (see .deferred)
    aot_graph: str
    post_grad_graph_code: str = DeferredField()  # printed on first read
    ir_pre_fusion: str
    ir_post_fusion: str
    output_code: str
    # The kernels, line maps and node map are assembled on first read (see .provenance.assemble).
    kernels: list[KernelInfo] = DeferredField(factory=list)
    wrapper_lines: list[KernelLine] = DeferredField(factory=list)
    # The wrapper's buffers: name -> the post-grad FX node whose value it holds (``buf0 -> maximum``).
    buffers: dict[str, str] = field(default_factory=dict)
    nodes: dict[str, NodeProvenance] = DeferredField(factory=dict)
    inputs: list[InputInfo] = field(default_factory=list)
    node_counts: dict[str, int] = field(default_factory=dict)
    config_patches: dict[str, str] = field(default_factory=dict)
    problems: list[CaptureProblem] = DeferredField(factory=list)  # includes the line maps' problems
    compile_seconds: float = 0.0
    graph_break_reason: str = ""  # the graph break that ended this Dynamo graph (``reason (file:line)``)
    # torch.distributed: the rank that compiled it, the world size, the default group's backend
    # (None outside a distributed run); under DDP, the DDPOptimizer bucket it is (None otherwise).
    rank: Optional[int] = None
    world_size: Optional[int] = None
    process_group: Optional[str] = None
    ddp_bucket: Optional[int] = None
    recompile_reason: str = DeferredField("")  # the guard that failed, when this frame recompiled
    compile_error: str = ""
    thread_name: str = ""
    torch_version: str = ""
    # Set when a kernel failed to compile (diagnosis.compile_error.CompileErrorReport); in-process.
    compile_error_report: Optional["ExplainedCompileError"] = field(default=None, repr=False, compare=False)
    # Set by options={"check_accuracy": ...} on the first call (diagnosis.accuracy.AccuracyReport).
    accuracy: Optional["CheckedAccuracy"] = field(default=None, repr=False, compare=False)
    # Live objects, in-process only: never serialized, None after load().
    dynamo_graph: Any = field(default=DeferredField(None), repr=False, compare=False)  # a copy, built on first read
    post_grad_graph: Any = field(default=None, repr=False, compare=False)
    compiled: Any = field(default=None, repr=False, compare=False)
    # The arguments of the compiled graph's first call, kept only inside ``keep_call_args()``
    # (what ``ib.diagnose`` replays a backward graph on); in-process only.
    call_args: Optional[list[Any]] = field(default=None, repr=False, compare=False)

    def __repr__(self) -> str:
        parts = [f"{len(self.kernels)} kernels"]
        if "post_grad" in self.node_counts:
            parts.append(f"{self.node_counts['post_grad']} post-grad nodes")
        parts.append("failed" if self.failed else "complete" if self.complete else f"{len(self.problems)} problem(s)")
        return f"GraphCapture({self.label}: {', '.join(parts)})"

    @property
    def live(self) -> bool:
        """True while the capture still holds its GraphModules and compiled callable."""
        return any(v is not None for v in (stored(self, "dynamo_graph"), self.post_grad_graph, self.compiled))

    def release_live_objects(self) -> None:
        """Assemble everything read from the live graphs, then drop the GraphModules and the
        compiled callable (what a long run must not keep for every graph it ever compiled).
        The record reads the same afterwards; only ``dynamo_graph``, ``post_grad_graph`` and
        ``compiled`` become None."""
        for node in self.nodes.values():
            node.code  # noqa: B018 - printed now, from the graph about to be released
        self.kernels, self.wrapper_lines, self.problems  # noqa: B018 - assembled on read
        self.dynamo_graph_code, self.post_grad_graph_code  # noqa: B018
        self.dynamo_graph = self.post_grad_graph = self.compiled = self.call_args = None

    @property
    def complete(self) -> bool:
        """True when every part was captured (no problems recorded)."""
        return not self.problems

    @property
    def failed(self) -> bool:
        """True when Inductor failed to compile this graph (``compile_error`` says why)."""
        return bool(self.compile_error)

    @property
    def label(self) -> str:
        """A short unique name: ``#3 0/1 backward``."""
        return graph_label(self.index, self.compile_id, self.kind)

    def kernel(self, name: str) -> KernelInfo:
        """The kernel called ``name``; raises KeyError naming the kernels there are."""
        for kernel in self.kernels:
            if kernel.name == name:
                return kernel
        names = ", ".join(k.name for k in self.kernels) or "none"
        raise KeyError(f"no kernel {name!r} in graph {self.label}; kernels: {names}")

    def lines_for(self, node: Optional[str] = None, *, source: Optional[str] = None,
                  op: Optional[str] = None) -> list[KernelLine]:
        """Every kernel line produced by an FX node (post-grad or Dynamo name), a source line, or
        every node of an ATen op.

        ``source`` is ``"file.py:12"`` (a path suffix and a line number) or ``"12"``. ``op`` is an
        ATen op, with or without its namespace and overload (``"rsqrt"``, ``"aten.rsqrt"``,
        ``"aten.rsqrt.default"``): every node of it, ``rsqrt`` and ``rsqrt_1`` of two blocks alike.
        """
        from .provenance.queries import lines_for

        return lines_for(self, node=node, source=source, op=op)

    def explain(self, node: str) -> str:
        """The chain from user source to kernel lines for one node, as the tutorial writes it."""
        from .provenance.queries import explain

        return explain(self, node)

    @property
    def annotated_output_code(self) -> str:
        """output_code with a "Corresponding FX code line" comment above each tagged kernel line."""
        from .provenance.queries import annotate_output_code

        return annotate_output_code(self)

    def dump(self, directory: PathLike) -> "Path":
        """Write this graph under ``directory`` (its folder plus index.json), readable by ``load``."""
        return dump_session([self], directory)

    def to_dict(self) -> dict[str, Any]:
        """The serializable fields as plain JSON types (live objects left out)."""
        data = {}
        for f in dataclasses.fields(self):
            if f.compare is False:
                continue
            data[f.name] = to_plain(getattr(self, f.name))
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "GraphCapture":
        """Rebuild a capture from ``to_dict`` output."""
        data = dict(data)
        data["kernels"] = [kernel_from_dict(k) for k in data.get("kernels", [])]
        data["wrapper_lines"] = [line_from_dict(line) for line in data.get("wrapper_lines", [])]
        data["nodes"] = {name: node_from_dict(n) for name, n in data.get("nodes", {}).items()}
        data["inputs"] = [InputInfo(**i) for i in data.get("inputs", [])]
        data["problems"] = [CaptureProblem(**p) for p in data.get("problems", [])]
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass
class CaptureSession:
    """An ordered collection of graph captures (from ``capture()``, ``captures()`` or ``load()``)."""

    graphs: list[GraphCapture] = field(default_factory=list)

    def __iter__(self) -> Iterator[GraphCapture]:
        return iter(list(self.graphs))

    def __len__(self) -> int:
        return len(self.graphs)

    def __getitem__(self, item: int) -> GraphCapture:
        return self.graphs[item]

    def by_kind(self, kind: str) -> list[GraphCapture]:
        """The graphs of one kind (``inference``, ``forward`` or ``backward``)."""
        if kind not in GRAPH_KINDS:
            raise ValueError(f"unknown graph kind {kind!r}; expected one of {GRAPH_KINDS}")
        return [g for g in self.graphs if g.kind == kind]

    def by_compile_id(self, compile_id: str) -> list[GraphCapture]:
        """The graphs Dynamo compiled under one compile id (e.g. a forward and its backward)."""
        return [g for g in self.graphs if g.compile_id == compile_id]

    def dump(self, directory: PathLike) -> "Path":
        """Write every graph and an index.json under directory; returns the directory path."""
        return dump_session(self.graphs, directory)
