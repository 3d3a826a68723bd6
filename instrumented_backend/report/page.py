"""What the HTML report shows, as plain data: one :class:`GraphPage` per graph, its panes as lines
with link ids, and the relations that join them.

A line's ``ids`` say what it stands for: ``p:<post-grad node>``, ``d:<Dynamo node>`` or
``s:<file>:<line>`` (a user source line). A kernel line carries the post-grad nodes that produced
it; a graph line its node; an IR line the nodes of its scheduler node's buffers. ``relations``
join a post-grad node to its Dynamo nodes and its source line, so a click on any line can light
every linked line in every pane: the page expands the clicked ids by one hop through them.
"""

from __future__ import annotations

import linecache
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from ..records import SourceLocation, summarize_inputs
from .highlight import highlight_lines
from .tables import INPUTS_SHOWN

if TYPE_CHECKING:
    from ..graphs import GraphCapture

__all__ = ["Line", "Pane", "GraphPage", "graph_page", "PANES", "source_id"]

# Pane key -> title, in the order the page shows them.
PANES = {
    "source": "Your source",
    "dynamo": "Dynamo FX graph",
    "post_grad": "Post-grad graph (fx_graph_transformed.py)",
    "ir": "IR after fusion (ir_post_fusion.txt)",
    "code": "Output code (output_code.py)",
}
CONTEXT_LINES = 2  # source lines shown around each line the map names
_CLASS = re.compile(r"^(?P<indent>\s*)class (?P<name>[^\s(]+)\(")
_ASSIGNED = re.compile(r"^\s*(?P<name>[A-Za-z_]\w*)(?:\s*:\s*\"[^\"]*\")?\s*=\s")
_IR_OP = re.compile(r"^(?P<op>op\d+(?:_op\d+)*)\b")
_IR_BUFFER = re.compile(r"^\s*(?P<buf>buf\d+): ")
_IR_LOOP_BODY = re.compile(r"^class (?P<op>op\d+(?:_op\d+)*)_loop_body")


def source_id(location: SourceLocation) -> str:
    return f"s:{location.file}:{location.line}"


@dataclass
class Line:
    """One line of a pane: its HTML, what it stands for, and its gutter label."""

    html: str
    ids: list[str] = field(default_factory=list)
    gutter: str = ""
    kernel: str = ""  # output code: the kernel the line belongs to ("call" for the wrapper)
    error: bool = False  # the compiler's error points here

    def to_json(self) -> list[Any]:
        return [self.html, self.ids, self.gutter, self.kernel, 1 if self.error else 0]


@dataclass
class Pane:
    key: str
    title: str
    lines: list[Line] = field(default_factory=list)
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "title": self.title, "note": self.note, "lines": [ln.to_json() for ln in self.lines]}


@dataclass
class GraphPage:
    """Everything the page shows of one graph."""

    index: int
    label: str
    summary: dict[str, Any]
    panes: list[Pane]
    relations: dict[str, list[str]]  # post-grad node id -> its Dynamo node ids and source id
    kernels: list[dict[str, Any]]  # name, kind, first output-code line, time share (profiled)
    sections: list[dict[str, str]] = field(default_factory=list)  # diagnosis: title, text, kind

    def to_json(self) -> dict[str, Any]:
        """JSON for the page; each line's ids are numbers into ``ids`` (a big graph repeats them)."""
        table: dict[str, int] = {}
        panes = []
        for pane in self.panes:
            data = pane.to_json()
            for line in data["lines"]:
                line[1] = [table.setdefault(name, len(table)) for name in line[1]]
            panes.append(data)
        return {"index": self.index, "label": self.label, "summary": self.summary, "ids": list(table),
                "panes": panes, "relations": self.relations, "kernels": self.kernels, "sections": self.sections}


def _graph_lines(code: str, prefix: str, known: set[str]) -> list[Line]:
    """A printed FX graph, each assignment line carrying the id of the node it defines. A subgraph
    (a ``torch.cond`` branch) is printed as a nested class: its nodes are known by their submodule
    path (``true_graph_0.sin``), never as the root graph's namesakes."""
    lines = []
    scopes: list[tuple[int, str]] = []  # (indentation, class name) of the classes a line is inside
    path = ""
    for number, (text, fragment) in enumerate(zip(code.split("\n"), highlight_lines(code, "python")), 1):
        nested = _CLASS.match(text)
        if nested:
            while scopes and scopes[-1][0] >= len(nested["indent"]):
                scopes.pop()
            scopes.append((len(nested["indent"]), nested["name"]))
            path = ".".join(name for _, name in scopes[1:])
        match = _ASSIGNED.match(text)
        name = (f"{path}.{match['name']}" if path else match["name"]) if match else ""
        ids = [f"{prefix}:{name}"] if name in known else []
        lines.append(Line(fragment, ids, str(number)))
    return lines


def _ir_lines(ir: str, buffers: dict[str, str], nodes: set[str]) -> list[Line]:
    """IR after fusion; the lines of one scheduler node (``opN``) carry its buffers' post-grad nodes,
    and a loop-body line assigning a name that is a post-grad node carries that node too."""
    texts = ir.split("\n")
    op_buffers: dict[str, set[str]] = {}
    current = None
    for text in texts:
        op = _IR_OP.match(text)
        if op:
            current = op["op"]
        buf = _IR_BUFFER.match(text)
        if buf and current:
            op_buffers.setdefault(current, set()).add(buf["buf"])
    lines, current = [], None
    for number, text in enumerate(texts, 1):
        op = _IR_OP.match(text) or _IR_LOOP_BODY.match(text)
        if op:
            current = op["op"]
        elif text and not text.startswith((" ", "\t")) and not text.startswith("class "):
            current = None if "_layout = " in text else current
        ids = {f"p:{buffers[b]}" for b in op_buffers.get(current or "", ()) if b in buffers}
        assigned = _ASSIGNED.match(text)
        if assigned and assigned["name"] in nodes and current:
            ids.add(f"p:{assigned['name']}")
        lines.append(Line(_escape(text), sorted(ids), str(number)))
    return lines


def _escape(text: str) -> str:
    import html

    return html.escape(text)


def _code_lines(graph: "GraphCapture", error_lines: set[int]) -> tuple[list[Line], list[dict[str, Any]]]:
    """The output code; kernel and wrapper lines carry the post-grad nodes that produced them."""
    texts = graph.output_code.split("\n")
    fragments = highlight_lines(graph.output_code, "python")
    by_number: dict[int, Any] = {}
    owner: dict[int, str] = {}
    kernels = []
    for kernel in graph.kernels:
        kernels.append({"name": kernel.name, "kind": kernel.kind, "line": kernel.start_line,
                        "calls": list(kernel.call_lines)})
        for number in range(kernel.start_line, kernel.end_line + 1):
            owner[number] = kernel.name
        for line in kernel.lines:
            by_number[line.number] = line
    for line in graph.wrapper_lines:
        by_number.setdefault(line.number, line)
        owner.setdefault(line.number, line.kernel)
    lines = []
    for number, (text, fragment) in enumerate(zip(texts, fragments), 1):
        recorded = by_number.get(number)
        ids = [f"p:{name}" for name in recorded.fx_nodes] if recorded is not None else []
        if recorded is not None and not ids and recorded.source is not None:
            ids = [source_id(recorded.source)]
        lines.append(Line(fragment, ids, str(number), owner.get(number, ""), number in error_lines))
    return lines, kernels


# The comment print_readable() writes above each Dynamo node's code: ``# File: PATH:LINE in FN, code: CODE``.
_TRACED_FROM = re.compile(r"^\s*# File: (?P<file>.+?):(?P<line>\d+) in [^,]*, code: (?P<code>.*)$")


def _traced_lines(graph: "GraphCapture") -> dict[tuple[str, int], str]:
    """``(file, line) -> code`` of every line the Dynamo graph was traced from, as its printed code
    names them: what a graph whose compile failed before Inductor mapped its nodes still has."""
    found: dict[tuple[str, int], str] = {}
    for text in graph.dynamo_graph_code.splitlines():
        match = _TRACED_FROM.match(text)
        if match:
            found.setdefault((match["file"], int(match["line"])), match["code"])
    return found


def _source_pane(graph: "GraphCapture") -> Pane:
    """The user's source lines the map names, grouped by file, with a little context; for a graph
    whose compile failed before its nodes were mapped, the lines its Dynamo graph was traced from."""
    wanted: dict[str, set[int]] = {}
    codes: dict[tuple[str, int], str] = {}
    for node in graph.nodes.values():
        for location in (node.source, node.first_use):
            if location is not None:
                wanted.setdefault(location.file, set()).add(location.line)
                codes[(location.file, location.line)] = location.code
    traced_only = not wanted and graph.failed
    if traced_only:
        for (file, line), code in _traced_lines(graph).items():
            wanted.setdefault(file, set()).add(line)
            codes[(file, line)] = code
    pane = Pane("source", PANES["source"])
    for file in sorted(wanted):
        file_lines = linecache.getlines(file)
        shown = sorted({n for line in wanted[file] for n in range(line - CONTEXT_LINES, line + CONTEXT_LINES + 1)
                        if (1 <= n <= len(file_lines)) or (not file_lines and n == line)})
        pane.lines.append(Line(f'<span class="file">{_escape(file)}</span>', [], ""))
        previous = None
        for number in shown:
            if previous is not None and number != previous + 1:
                pane.lines.append(Line("…", [], ""))
            text = file_lines[number - 1].rstrip("\n") if file_lines else codes.get((file, number), "")
            fragment = highlight_lines(text, "python")[0]
            ids = [f"s:{file}:{number}"] if number in wanted[file] else []
            pane.lines.append(Line(fragment, ids, str(number)))
            previous = number
    if not wanted:
        pane.note = "No user source lines are known for this graph (a graph traced from a string or REPL)."
    elif traced_only:
        pane.note = ("The compile failed before Inductor mapped this graph's nodes: these are the lines its "
                     "Dynamo graph was traced from.")
    elif not any(linecache.getlines(file) for file in wanted):
        pane.note = "The source files are not readable here; only the lines the capture recorded are shown."
    return pane


def _relations(graph: "GraphCapture") -> dict[str, list[str]]:
    relations = {}
    for name, node in graph.nodes.items():
        linked = [f"d:{d}" for d in node.dynamo_nodes]
        location = node.source or node.first_use
        if location is not None:
            linked.append(source_id(location))
        relations[f"p:{name}"] = linked
    return relations


def graph_page(graph: "GraphCapture", *, kernel_shares: Optional[dict[str, float]] = None) -> GraphPage:
    """The page of one graph: its five panes, relations, kernels and diagnosis sections."""
    from .sections import error_lines, graph_sections

    nodes = set(graph.nodes)
    dynamo_nodes = {d for node in graph.nodes.values() for d in node.dynamo_nodes}
    errors = error_lines(graph)
    code, kernels = _code_lines(graph, errors)
    for kernel in kernels:
        kernel["share"] = (kernel_shares or {}).get(kernel["name"])
    panes = [
        _source_pane(graph),
        Pane("dynamo", PANES["dynamo"], _graph_lines(graph.dynamo_graph_code or "", "d", dynamo_nodes),
             "" if graph.dynamo_graph_code else "Not captured (or this is a backward graph: see its forward)."),
        Pane("post_grad", PANES["post_grad"], _graph_lines(graph.post_grad_graph_code or "", "p", nodes)),
        Pane("ir", PANES["ir"], _ir_lines(graph.ir_post_fusion or "", graph.buffers, nodes)),
        Pane("code", PANES["code"], code),
    ]
    summary = {
        "compile_id": graph.compile_id, "kind": graph.kind, "graph_id": graph.graph_id,
        "nodes": dict(graph.node_counts), "kernels": len(graph.kernels),
        "status": "failed" if graph.failed else "complete" if graph.complete else "partial",
        "problems": [f"{p.part}: {p.error}" for p in graph.problems],
        "accuracy": _accuracy_word(graph), "compile_seconds": round(graph.compile_seconds, 3),
        "inputs": summarize_inputs(graph.inputs, limit=INPUTS_SHOWN),
        "inputs_all": summarize_inputs(graph.inputs),
        "graph_break": graph.graph_break_reason, "recompile": graph.recompile_reason,
        "rank": graph.rank, "ddp_bucket": graph.ddp_bucket,
    }
    # a distributed run's ranks each have a #0: the heading says whose
    label = graph.label if graph.rank is None else f"{graph.label} on rank {graph.rank}"
    return GraphPage(graph.index, label, summary, panes, _relations(graph), kernels, graph_sections(graph))


def _accuracy_word(graph: "GraphCapture") -> str:
    report = graph.accuracy
    if report is None:
        return ""
    return "passed" if getattr(report, "passed", False) else "FAILED"
