"""The records of one compiled graph: its kernels, their lines, the FX nodes and source lines.

Plain data: these dataclasses import nothing of this package's but :mod:`.deferred`. The
capture that holds them, :class:`~.graphs.GraphCapture`, and the queries over them live
above (:mod:`.graphs`, :mod:`.provenance.queries`); ``dump`` writes them and ``load`` reads
them back.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from .deferred import DeferredField

__all__ = [
    "SourceLocation",
    "NodeProvenance",
    "KernelLine",
    "BufferAccess",
    "MemoryTraffic",
    "GRAPH_KINDS",
    "InputInfo",
    "KernelInfo",
    "CaptureProblem",
    "WRAPPER",
]

GRAPH_KINDS = ("inference", "forward", "backward")


def graph_label(index: int, compile_id: str, kind: str) -> str:
    """How a graph is named everywhere: ``#3 0/1 backward`` (index, compile id, kind)."""
    return f"#{index} {compile_id or '?'} {kind}"


# KernelLine.kernel of the lines of the output code's wrapper (its ``call`` function).
WRAPPER = "call"


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

    def cited(self) -> str:
        """The line as reports quote it: ``model.py:12: y = torch.neg(x)``."""
        return f"{self}: {self.code}"

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
    or its first user), ``input`` (a graph input) or ``constant`` (a weight an exported program or
    freezing put in the graph; for both no Dynamo node is named and ``first_use`` is
    the line that first uses it) or ``none``.
    """

    name: str
    target: str
    code: str = DeferredField("")  # the node's line in post_grad_graph_code, printed on first read
    dynamo_nodes: list[str] = field(default_factory=list)
    source: Optional[SourceLocation] = None
    # the innermost nn.Module it was traced in (a backward node: its forward op's), as Dynamo names
    # it (``L['self'].layers.1``; ``seams.dynamo.dynamo_sources.module_name`` gives ``layers.1``)
    module: str = ""
    module_type: str = ""  # that module's class (``GELU``)
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
    (:mod:`instrumented_backend.seams.codegen.kernel_traffic`); buffers produced and consumed inside
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


def source_from_dict(data: Optional[dict[str, Any]]) -> Optional[SourceLocation]:
    return SourceLocation(**data) if data else None


def line_from_dict(data: dict[str, Any]) -> KernelLine:
    return KernelLine(**dict(data, source=source_from_dict(data.get("source"))))


def kernel_from_dict(data: dict[str, Any]) -> KernelInfo:
    data = dict(data)
    data["lines"] = [line_from_dict(line) for line in data.get("lines", [])]
    data["traffic"] = MemoryTraffic.from_dict(data["traffic"]) if data.get("traffic") else None
    return KernelInfo(**data)


def node_from_dict(data: dict[str, Any]) -> NodeProvenance:
    return NodeProvenance(**dict(data, source=source_from_dict(data.get("source")),
                                 first_use=source_from_dict(data.get("first_use"))))


def to_plain(value: Any) -> Any:
    """A record as plain JSON types: dataclasses become dicts of their compared fields (fields
    declared ``compare=False`` hold live or in-memory-only objects and are left out)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_plain(getattr(value, f.name)) for f in dataclasses.fields(value) if f.compare}
    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    return value


def summarize_inputs(inputs: Sequence[InputInfo], limit: Optional[int] = None) -> str:
    """``float32[8, 4]@cpu, int=3`` style summary; with ``limit``, the first ``limit`` inputs and
    how many more there are (a backward graph of a real model takes dozens)."""
    shown = list(inputs) if limit is None else list(inputs)[:limit]
    text = ", ".join(i.describe() for i in shown)
    return text if len(shown) == len(inputs) else f"{text}, ... (+{len(inputs) - len(shown)} more)"
