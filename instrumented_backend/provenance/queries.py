"""Queries over a capture's line map: lines for a node or source line, the chain, annotated code."""

from __future__ import annotations

from typing import Optional, Protocol

from ..records import WRAPPER, KernelInfo, KernelLine, NodeProvenance

__all__ = ["MappedGraph", "lines_for", "explain", "annotate_output_code"]


class MappedGraph(Protocol):
    """What the queries read of a captured graph (a :class:`~instrumented_backend.graphs.GraphCapture`,
    one layer above): its kernels and wrapper lines, its node map and its output code."""

    @property
    def label(self) -> str: ...

    @property
    def kernels(self) -> list[KernelInfo]: ...

    @property
    def wrapper_lines(self) -> list[KernelLine]: ...

    @property
    def nodes(self) -> dict[str, NodeProvenance]: ...

    @property
    def output_code(self) -> str: ...


def _all_lines(graph: "MappedGraph") -> list["KernelLine"]:
    """Kernel lines, then the wrapper lines that are not an extern kernel's line already."""
    lines = [line for kernel in graph.kernels for line in kernel.lines]
    taken = {line.number for line in lines}
    return lines + [line for line in graph.wrapper_lines if line.number not in taken]


def _op_matches(target: str, op: str) -> bool:
    """Whether an FX node's target (``aten.rsqrt.default``) is ``op``: ``rsqrt``, ``aten.rsqrt`` or
    ``aten.rsqrt.default``."""
    parts = target.split(".")
    namespace, name = (parts[0], parts[1]) if len(parts) >= 2 else ("", target)
    return op in (target, name, f"{namespace}.{name}")


def lines_for(graph: "MappedGraph", node: Optional[str] = None, *, source: Optional[str] = None,
              op: Optional[str] = None) -> list["KernelLine"]:
    """Kernel lines produced by ``node`` (post-grad or Dynamo node name), by ``source``, or by every
    node of the ATen ``op``."""
    if sum(value is not None for value in (node, source, op)) != 1:
        raise ValueError("lines_for takes exactly one of a node name, source='file.py:LINE' or op='aten.OP'")
    if op is not None:
        names = {name for name, info in graph.nodes.items() if _op_matches(str(info.target), op)}
        if not names:
            ops = sorted({str(info.target) for info in graph.nodes.values() if "." in str(info.target)})
            raise KeyError(f"no node of op {op!r} in graph {graph.label}; its ops: {', '.join(ops) or 'none'}")
        return [line for line in _all_lines(graph) if names & set(line.fx_nodes)]
    if node is not None:
        known = set(graph.nodes) | {d for info in graph.nodes.values() for d in info.dynamo_nodes}
        if node not in known:
            raise KeyError(f"no FX node {node!r} in graph {graph.label}; nodes: {', '.join(sorted(known)) or 'none'}")
        return [line for line in _all_lines(graph) if node in line.fx_nodes or node in line.dynamo_nodes]
    assert source is not None

    def from_source(line: "KernelLine") -> bool:
        # A line from several FX nodes (a fused allocation, a kernel launch) has one ``source``
        # shown, but belongs to every source line of its nodes.
        if line.source is not None and line.source.matches(source):
            return True
        return any((info := graph.nodes.get(n)) is not None and info.source is not None
                   and info.source.matches(source) for n in line.fx_nodes)

    return [line for line in _all_lines(graph) if from_source(line)]


def explain(graph: "MappedGraph", node: str) -> str:
    """The tutorial's chain, for every post-grad node that is (or came from) ``node``.

    ``torch.neg(x1)`` (source) -> ``aten.neg.default`` (FX node) -> ``ops.neg`` (IR) -> the C++ lines.
    """
    names = [n for n, info in graph.nodes.items() if n == node or node in info.dynamo_nodes]
    if not names:
        lines_for(graph, node)  # raises the KeyError naming the known nodes
    out = []
    for name in names:
        info = graph.nodes[name]
        where = f"{info.source}" if info.source else "source unknown"
        user = info.source.code if info.source and info.source.code else "?"
        dynamo = ", ".join(info.dynamo_nodes) or "?"
        out.append(f"{user}    [{where}; Dynamo node {dynamo}; via {info.attribution}]")
        out.append(f"  -> {info.target}    [post-grad FX node {name}: {info.code or '?'}]")
        kernel_lines = [line for line in _all_lines(graph) if name in line.fx_nodes]
        by_op: dict[str, list["KernelLine"]] = {}
        for line in kernel_lines:
            for op in line.ir_ops or (["(wrapper code)"] if line.kernel == WRAPPER else ["?"]):
                by_op.setdefault(op, []).append(line)
        if not by_op:
            out.append("  -> (no kernel line: folded away, a view, or an extern call)")
        for op, lines in by_op.items():
            out.append(f"    -> {op}")
            for line in lines:
                out.append(f"      -> {line.text.strip()}    [{line.kernel}, output_code.py:{line.number}]")
    return "\n".join(out)


def annotate_output_code(graph: "MappedGraph") -> str:
    """output_code with ``// Corresponding FX code line: ...`` above each tagged kernel line.

    Comments only: the generated code itself is unchanged (``#`` comments for Triton kernels
    and for the Python wrapper's lines).
    """
    comments: dict[int, tuple[str, str]] = {}
    python_lines = {line.number for line in graph.wrapper_lines}
    for kernel in graph.kernels:
        python_lines.update(line.number for line in kernel.lines if kernel.kind in ("triton", "extern"))
    for line in _all_lines(graph):
        marker = "#" if line.number in python_lines or line.kernel.startswith("triton_") else "//"
        codes = [graph.nodes[n].code or n for n in line.fx_nodes if n in graph.nodes]
        if codes:
            indent = line.text[: len(line.text) - len(line.text.lstrip())]
            comments[line.number] = (indent, f"{marker} Corresponding FX code line: {' | '.join(codes)}")
    out = []
    previous: Optional[str] = None
    for number, text in enumerate(graph.output_code.splitlines(), start=1):
        if number in comments:
            indent, comment = comments[number]
            if comment != previous:  # one comment per run of lines from the same nodes
                out.append(indent + comment)
            previous = comment
        else:
            previous = None
        out.append(text)
    return "\n".join(out) + ("\n" if graph.output_code.endswith("\n") else "")
