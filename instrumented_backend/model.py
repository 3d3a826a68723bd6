"""The data model: one record per compiled AOT graph, and the kernels in its output code.

These dataclasses are what the API returns, what the CLI prints, what ``dump`` writes and
``load`` reads back. Live objects (GraphModules, the compiled callable) are kept alongside
for in-process use but are never serialized; after ``load`` they are ``None``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional, Sequence

from .deferred import DeferredField

__all__ = [
    "SourceLocation",
    "NodeProvenance",
    "KernelLine",
    "BufferAccess",
    "MemoryTraffic",
    "GRAPH_KINDS",
    "KERNEL_KINDS",
    "InputInfo",
    "KernelInfo",
    "CaptureProblem",
    "GraphCapture",
    "CaptureSession",
]

GRAPH_KINDS = ("inference", "forward", "backward")
KERNEL_KINDS = ("cpp", "triton", "extern", "template")


@dataclass
class InputInfo:
    """Shape, stride, dtype and device of one example input of an AOT graph (or a scalar)."""

    kind: str  # "tensor", "symint", "int", "float", "bool", "other"
    shape: Optional[list[str]] = None
    stride: Optional[list[str]] = None
    dtype: Optional[str] = None
    device: Optional[str] = None
    value: Optional[str] = None

    def describe(self) -> str:
        if self.kind == "tensor":
            return f"{self.dtype}[{', '.join(self.shape or [])}]@{self.device}"
        return f"{self.kind}={self.value}"


@dataclass
class SourceLocation:
    """A line of the user's Python source."""

    file: str
    line: int
    code: str = ""
    function: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"

    def matches(self, spec: str) -> bool:
        """True for ``"model.py:12"``, ``"/abs/path/model.py:12"`` or ``"12"`` naming this line."""
        file_part, _, line_part = spec.rpartition(":")
        if not line_part.isdigit() or int(line_part) != self.line:
            return False
        return not file_part or self.file == file_part or self.file.endswith("/" + file_part.lstrip("/"))


@dataclass
class NodeProvenance:
    """Where one post-grad FX node came from.

    ``attribution`` says how ``dynamo_nodes`` were found: ``from_node`` (FX provenance chain),
    ``stack_trace`` (fallback: the Dynamo node(s) with the same user source line, used for
    nodes created by pattern-matcher rewrites or decompositions), ``seq_nr`` (fallback for
    backward nodes: the forward op with the same autograd sequence number), ``rewrite`` (a node a
    graph pass made: the node(s) it replaced), ``data_flow`` (last resort: the value it consumes,
    or its first user), ``input`` (a graph input; no Dynamo node is named; ``first_use`` is
    the line that first uses it) or ``none``.
    """

    name: str
    target: str
    code: str = DeferredField("")  # the node's line in post_grad_graph_code, printed on first read
    dynamo_nodes: list[str] = field(default_factory=list)
    source: Optional[SourceLocation] = None
    module: str = ""
    attribution: str = "none"
    # A graph input's first user's source line: kernel code Inductor writes for the input itself
    # (a weight's layout copy) is attributed there. None for every other node.
    first_use: Optional[SourceLocation] = None


@dataclass
class KernelLine:
    """One line of a kernel's source, with what produced it (empty lists: untagged line)."""

    kernel: str
    number: int  # 1-based line in output_code
    text: str
    ir_ops: list[str] = field(default_factory=list)
    fx_nodes: list[str] = field(default_factory=list)
    dynamo_nodes: list[str] = field(default_factory=list)
    source: Optional[SourceLocation] = None

    @property
    def tagged(self) -> bool:
        return bool(self.fx_nodes or self.ir_ops)


@dataclass
class BufferAccess:
    """One buffer a kernel reads or writes in memory: ``elements`` is a sympy expression."""

    buffer: str
    dtype: str
    elements: str
    elements_hint: int
    bytes: int


@dataclass
class MemoryTraffic:
    """The least memory a generated kernel must move: each buffer argument touched once.

    Read from the scheduler nodes' memory dependencies when Inductor defines the kernel
    (:mod:`instrumented_backend.seams.kernel_traffic`); buffers produced and consumed inside
    the kernel move nothing.
    """

    reads: list[BufferAccess] = field(default_factory=list)
    writes: list[BufferAccess] = field(default_factory=list)

    @property
    def bytes_read(self) -> int:
        return sum(access.bytes for access in self.reads)

    @property
    def bytes_written(self) -> int:
        return sum(access.bytes for access in self.writes)

    @property
    def total_bytes(self) -> int:
        return self.bytes_read + self.bytes_written

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "MemoryTraffic":
        return cls(reads=[BufferAccess(**a) for a in data.get("reads", [])],
                   writes=[BufferAccess(**a) for a in data.get("writes", [])])


@dataclass
class KernelInfo:
    """One kernel of a graph's output code.

    ``start_line``/``end_line`` are 1-based line numbers in ``GraphCapture.output_code``:
    for a generated kernel, the ``name = async_compile.<kind>(...`` line through the closing
    quotes; for an extern kernel, the wrapper line that calls it. ``source_start_line`` is the
    output-code line of the first line of ``source``. ``call_lines`` are the lines of the
    wrapper's ``call()`` that launch the kernel.
    """

    name: str
    kind: str
    source: str
    start_line: int
    end_line: int
    source_start_line: int
    call_lines: list[int] = field(default_factory=list)
    lines: list[KernelLine] = field(default_factory=list)
    # Generated kernels only: the bytes it must read and write (None for extern kernels).
    traffic: Optional[MemoryTraffic] = None

    @property
    def source_lines(self) -> list[str]:
        return self.source.splitlines()

    @property
    def tagged_lines(self) -> list[KernelLine]:
        """The lines with a known producer."""
        return [line for line in self.lines if line.tagged]


@dataclass
class CaptureProblem:
    """A part of the capture that failed; the compile itself went on with plain Inductor."""

    part: str
    error: str


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
    # The kernels, line maps and node map are assembled on first read (see .mapping).
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
    compile_error: str = ""
    thread_name: str = ""
    torch_version: str = ""
    # Set when a kernel failed to compile (diagnosis.compile_error.CompileErrorReport); in-process.
    compile_error_report: Any = field(default=None, repr=False, compare=False)
    # Set by options={"check_accuracy": ...} on the first call (diagnosis.accuracy.AccuracyReport).
    accuracy: Any = field(default=None, repr=False, compare=False)
    # Live objects, in-process only: never serialized, None after load().
    dynamo_graph: Any = field(default=None, repr=False, compare=False)
    post_grad_graph: Any = field(default=None, repr=False, compare=False)
    compiled: Any = field(default=None, repr=False, compare=False)

    def __repr__(self) -> str:
        parts = [f"{len(self.kernels)} kernels"]
        if "post_grad" in self.node_counts:
            parts.append(f"{self.node_counts['post_grad']} post-grad nodes")
        parts.append("failed" if self.failed else "complete" if self.complete else f"{len(self.problems)} problem(s)")
        return f"GraphCapture({self.label}: {', '.join(parts)})"

    @property
    def live(self) -> bool:
        """True while the capture still holds its GraphModules and compiled callable."""
        return any(v is not None for v in (self.dynamo_graph, self.post_grad_graph, self.compiled))

    def release_live_objects(self) -> None:
        """Assemble everything read from the live graphs, then drop the GraphModules and the
        compiled callable (what a long run must not keep for every graph it ever compiled).
        The record reads the same afterwards; only ``dynamo_graph``, ``post_grad_graph`` and
        ``compiled`` become None."""
        for node in self.nodes.values():
            node.code  # noqa: B018 - printed now, from the graph about to be released
        self.kernels, self.wrapper_lines, self.problems  # noqa: B018 - assembled on read
        self.dynamo_graph_code, self.post_grad_graph_code  # noqa: B018
        self.dynamo_graph = self.post_grad_graph = self.compiled = None

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
        return f"#{self.index} {self.compile_id or '?'} {self.kind}"

    def kernel(self, name: str) -> KernelInfo:
        """The kernel called ``name``; raises KeyError naming the kernels there are."""
        for kernel in self.kernels:
            if kernel.name == name:
                return kernel
        names = ", ".join(k.name for k in self.kernels) or "none"
        raise KeyError(f"no kernel {name!r} in graph {self.label}; kernels: {names}")

    def lines_for(self, node: Optional[str] = None, *, source: Optional[str] = None) -> list[KernelLine]:
        """Every kernel line produced by an FX node (post-grad or Dynamo name) or a source line.

        ``source`` is ``"file.py:12"`` (a path suffix and a line number) or ``"12"``.
        """
        from .explain import lines_for

        return lines_for(self, node=node, source=source)

    def explain(self, node: str) -> str:
        """The chain from user source to kernel lines for one node, as the tutorial writes it."""
        from .explain import explain

        return explain(self, node)

    @property
    def annotated_output_code(self) -> str:
        """output_code with a "Corresponding FX code line" comment above each tagged kernel line."""
        from .explain import annotate_output_code

        return annotate_output_code(self)

    def dump(self, directory: "str | Any") -> Any:
        """Write this graph under ``directory`` (its folder plus index.json), readable by ``load``."""
        from .dump import dump_session

        return dump_session([self], directory)

    def to_dict(self) -> dict[str, Any]:
        """The serializable fields as plain JSON types (live objects left out)."""
        data = {}
        for f in dataclasses.fields(self):
            if f.compare is False:
                continue
            data[f.name] = _to_plain(getattr(self, f.name))
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "GraphCapture":
        """Rebuild a capture from ``to_dict`` output."""
        data = dict(data)
        data["kernels"] = [_kernel_from_dict(k) for k in data.get("kernels", [])]
        data["wrapper_lines"] = [_line_from_dict(line) for line in data.get("wrapper_lines", [])]
        data["nodes"] = {name: _node_from_dict(n) for name, n in data.get("nodes", {}).items()}
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

    def dump(self, directory: "str | Any") -> Any:
        """Write every graph and an index.json under directory; returns the directory path."""
        from .dump import dump_session

        return dump_session(self.graphs, directory)


def _source_from_dict(data: Optional[dict[str, Any]]) -> Optional[SourceLocation]:
    return SourceLocation(**data) if data else None


def _line_from_dict(data: dict[str, Any]) -> KernelLine:
    return KernelLine(**dict(data, source=_source_from_dict(data.get("source"))))


def _kernel_from_dict(data: dict[str, Any]) -> KernelInfo:
    data = dict(data)
    data["lines"] = [_line_from_dict(line) for line in data.get("lines", [])]
    data["traffic"] = MemoryTraffic.from_dict(data["traffic"]) if data.get("traffic") else None
    return KernelInfo(**data)


def _node_from_dict(data: dict[str, Any]) -> NodeProvenance:
    return NodeProvenance(**dict(data, source=_source_from_dict(data.get("source")),
                                 first_use=_source_from_dict(data.get("first_use"))))


def _to_plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_plain(v) for v in value]
    return value


def summarize_inputs(inputs: Sequence[InputInfo]) -> str:
    """``float32[8, 4]@cpu, int=3`` style summary."""
    return ", ".join(i.describe() for i in inputs)
