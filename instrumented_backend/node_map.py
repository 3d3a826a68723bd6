"""Map post-grad FX nodes to the Dynamo nodes and user source lines they came from.

Reads public FX node metadata only: ``from_node`` (the provenance chain FX keeps through
AOTAutograd and Inductor passes; its root is the Dynamo graph node), ``stack_trace`` (the user
frame Dynamo recorded) and ``nn_module_stack``. Nodes created by pattern-matcher rewrites or
decompositions may lack ``from_node``; they fall back to the Dynamo nodes sharing their source
line, and are marked ``attribution="stack_trace"``. Backward nodes that AOTAutograd created
without either (the gradient formulas) take the provenance of the forward op with the same
``seq_nr`` (the autograd sequence number AOTAutograd stamps on both), marked
``attribution="seq_nr"``. Graph inputs are listed with ``attribution="input"``.
"""

from __future__ import annotations

import re
from typing import Any, Optional

import torch.fx

from .deferred import Deferred, resolve
from .model import NodeProvenance, SourceLocation

__all__ = ["parse_stack_trace", "build_node_map", "seq_nr_index"]

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>[^\n]+)\n(?P<code>[^\n]*)')


def parse_stack_trace(stack_trace: Optional[str]) -> Optional[SourceLocation]:
    """The innermost user frame of an FX ``stack_trace``, or None."""
    if not stack_trace:
        return None
    frames = list(_FRAME.finditer(stack_trace))
    if not frames:
        return None
    last = frames[-1]
    return SourceLocation(file=last.group("file"), line=int(last.group("line")),
                          code=last.group("code").strip(), function=last.group("function").strip())


def _chain_roots(node: torch.fx.Node) -> list[str]:
    roots = []
    for source in node.meta.get("from_node") or []:
        while getattr(source, "from_node", None):
            source = source.from_node[0]
        name = getattr(source, "name", None)
        if name and name not in roots:
            roots.append(name)
    return roots


def _target_name(node: torch.fx.Node) -> str:
    target = node.target
    if isinstance(target, str):
        return target
    name = getattr(target, "name", None)
    if callable(name):  # OpOverload.name() -> "aten::neg"
        return str(target).replace("::", ".")
    return getattr(target, "__name__", str(target))


def _code_lines(graph_code: str) -> dict[str, str]:
    """``{node name: its line in the printed graph}`` (the tutorial's "FX code line")."""
    lines = {}
    for raw in graph_code.splitlines():
        line = raw.strip()
        match = re.match(r"^([A-Za-z_]\w*)(?:: \"[^\"]*\")? = ", line)
        if match:
            lines.setdefault(match.group(1), re.sub(r'^([A-Za-z_]\w*): "[^"]*"', r"\1", line))
    return lines


def _module_path(node: torch.fx.Node) -> str:
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    path, _ = list(stack.values())[-1]
    return str(path)


def seq_nr_index(post_grad: Any, node_map: dict[str, NodeProvenance]) -> dict[int, NodeProvenance]:
    """``{seq_nr: provenance}`` of a forward graph's attributed nodes (first node per number)."""
    index: dict[int, NodeProvenance] = {}
    for node in post_grad.graph.nodes:
        seq_nr = node.meta.get("seq_nr")
        info = node_map.get(node.name)
        if isinstance(seq_nr, int) and info is not None and info.dynamo_nodes and seq_nr not in index:
            index[seq_nr] = info
    return index


def build_node_map(post_grad: Any, post_grad_code: "str | Deferred[str]", dynamo_graph: Any,
                   forward_by_seq_nr: Optional[dict[int, NodeProvenance]] = None) -> dict[str, NodeProvenance]:
    """NodeProvenance for every call_function node and input of the post-grad graph.

    ``forward_by_seq_nr`` (from :func:`seq_nr_index` on the forward graph) lets a backward
    graph's nodes fall back to the forward op they differentiate.
    """
    if post_grad is None:
        return {}
    dynamo_nodes = {n.name: n for n in dynamo_graph.graph.nodes} if dynamo_graph is not None else {}
    by_source: dict[tuple[str, int], list[str]] = {}
    for dyn in dynamo_nodes.values():
        if dyn.op not in ("call_function", "call_method", "call_module"):
            continue
        loc = parse_stack_trace(dyn.meta.get("stack_trace"))
        if loc is not None:
            by_source.setdefault((loc.file, loc.line), []).append(dyn.name)
    # Each node's printed line is looked up on first read of its ``code`` (see ..deferred).
    code_lines = Deferred(lambda: _code_lines(resolve(post_grad_code)), fallback={})
    result: dict[str, NodeProvenance] = {}
    for node in post_grad.graph.nodes:
        if node.op == "placeholder":
            result[node.name] = NodeProvenance(name=node.name, target="input", code="", dynamo_nodes=[],
                                               source=None, module="", attribution="input")
            continue
        if node.op != "call_function":
            continue
        source = parse_stack_trace(node.meta.get("stack_trace"))
        roots = [r for r in _chain_roots(node) if not dynamo_nodes or r in dynamo_nodes]
        attribution = "from_node" if roots else "none"
        if not roots and source is not None:
            roots = list(by_source.get((source.file, source.line), []))
            attribution = "stack_trace" if roots else "none"
        forward = (forward_by_seq_nr or {}).get(node.meta.get("seq_nr"))  # type: ignore[arg-type]
        if not roots and forward is not None:
            roots, attribution = list(forward.dynamo_nodes), "seq_nr"
            source = source or forward.source
        if source is None and roots and roots[0] in dynamo_nodes:
            source = parse_stack_trace(dynamo_nodes[roots[0]].meta.get("stack_trace"))
        result[node.name] = NodeProvenance(
            name=node.name,
            target=_target_name(node),
            code=code_lines.map(lambda lines, name=node.name: lines.get(name, ""), fallback=""),
            dynamo_nodes=roots,
            source=source,
            module=_module_path(node),
            attribution=attribution,
        )
    return result
