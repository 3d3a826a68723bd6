"""Tables over captures, built from the data model (the CLI only prints these)."""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable

from tabulate import tabulate

from ..graphs import GraphCapture
from ..records import summarize_inputs

__all__ = ["graph_rows", "kernel_rows", "format_graphs", "format_kernels"]

GRAPH_HEADERS = [
    "#",
    "compile id",
    "kind",
    "dynamo nodes",
    "aot nodes",
    "post-grad nodes",
    "kernels",
    "inputs",
    "status",
]
INPUTS_SHOWN = 6  # inputs listed per graph in a table row; the rest are counted
KERNEL_HEADERS = ["graph", "kernel", "kind", "lines", "output_code lines", "calls"]


def _status(graph: GraphCapture) -> str:
    if graph.failed:
        return f"compile failed: {graph.compile_error.splitlines()[0][:60]}"
    if graph.problems:
        return "partial: " + ", ".join(p.part for p in graph.problems)
    return "ok"


def _kernel_summary(graph: GraphCapture) -> str:
    counts = Counter(k.kind for k in graph.kernels)
    return ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "none"


def graph_rows(graphs: Iterable[GraphCapture]) -> list[list[Any]]:
    """One row per graph: index, compile id, kind, node counts, kernel counts, inputs, status."""
    return [
        [
            g.index,
            g.compile_id,
            g.kind,
            g.node_counts.get("dynamo", ""),
            g.node_counts.get("aot", ""),
            g.node_counts.get("post_grad", ""),
            _kernel_summary(g),
            summarize_inputs(g.inputs, limit=INPUTS_SHOWN),
            _status(g),
        ]
        for g in graphs
    ]


def kernel_rows(graphs: Iterable[GraphCapture]) -> list[list[Any]]:
    """One row per kernel: graph, name, kind, source lines, position in output code, call lines."""
    rows = []
    for g in graphs:
        for k in g.kernels:
            rows.append([g.label, k.name, k.kind, len(k.source_lines), f"{k.start_line}-{k.end_line}",
                         ",".join(map(str, k.call_lines))])
    return rows


def format_graphs(graphs: Iterable[GraphCapture]) -> str:
    """The graph summary table as text (with a rank column when the graphs come from several ranks
    or from a distributed run, and a DDP bucket column under DDPOptimizer)."""
    graphs = list(graphs)
    headers, rows = list(GRAPH_HEADERS), graph_rows(graphs)
    if any(g.ddp_bucket is not None for g in graphs):
        headers.insert(3, "ddp bucket")
        for row, g in zip(rows, graphs):
            row.insert(3, "" if g.ddp_bucket is None else g.ddp_bucket)
    if any(g.rank is not None for g in graphs):
        headers.insert(0, "rank")
        for row, g in zip(rows, graphs):
            row.insert(0, "" if g.rank is None else g.rank)
    return tabulate(rows, headers=headers, tablefmt="simple")


def format_kernels(graphs: Iterable[GraphCapture]) -> str:
    """The kernel table as text."""
    return tabulate(kernel_rows(graphs), headers=KERNEL_HEADERS, tablefmt="simple")
