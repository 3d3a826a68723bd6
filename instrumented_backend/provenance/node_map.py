"""Map post-grad FX nodes to the Dynamo nodes and user source lines they came from.

Reads public FX node metadata only: ``from_node`` (the provenance chain FX keeps through
AOTAutograd and Inductor passes; its root is the Dynamo graph node), ``stack_trace`` (the user
frame Dynamo recorded) and ``nn_module_stack``. Nodes created by pattern-matcher rewrites or
decompositions may lack ``from_node``; they fall back to the Dynamo nodes sharing their source
line, and are marked ``attribution="stack_trace"``. Backward nodes that AOTAutograd created
without either (the gradient formulas) take the provenance of the forward op with the same
``seq_nr`` (the autograd sequence number AOTAutograd stamps on both), marked
``attribution="seq_nr"``; so do those whose source line holds several Dynamo nodes, that op among
them (an activation checkpoint's recomputed body, whose line is the ``checkpoint`` call's). Nodes
a graph pass made take the provenance of the node(s) they replaced, recorded by the rewrite log as
the pass ran (``attribution="rewrite"``); what is left takes that of the value it consumes or of
its first user (``attribution="data_flow"``). Graph inputs are listed with
``attribution="input"`` (constants an exported program or freezing put in the graph, ``get_attr``
nodes, with ``"constant"``), no Dynamo node and no source; ``first_use`` names the line of their
first user (the code Inductor writes for an input, e.g. a weight's layout copy, serves that line).
A node a lowering pattern made (a oneDNN convolution with its ReLU, under freezing) is known by
the nodes its match replaced (:func:`~..seams.lowering.lowering_patterns.matched_nodes`): all of their
Dynamo nodes, and the computation's source line and module, not only the epilogue's whose
metadata Inductor copied onto it.

A node with no frame anywhere (Dynamo leaves out frames inside ``torch/nn/modules``, so a model
made only of torch's own modules, an ``nn.Sequential`` of them, has none) takes the ``forward`` of
the innermost module it was traced in as its source (``BatchNorm2d.forward`` in
``torch/nn/modules/batchnorm.py``); ``module`` tells two such modules apart.
"""

from __future__ import annotations

import functools
import inspect
import linecache
import os
import re
from functools import partial
from typing import Any, Optional, Sequence

import torch.fx

from ..deferred import Deferred, resolve
from ..recording.recorder import subgraph_paths
from ..recording.rewrites import ReplacedNode, RewriteLog, chain_root_graphs, chain_roots
from ..records import NodeProvenance, SourceLocation
from ..seams.dynamo.dynamo_sources import module_name
from ..seams.lowering.lowering_patterns import matched_nodes

__all__ = ["parse_stack_trace", "module_source", "module_label", "node_module", "module_labels", "build_node_map",
           "seq_nr_index"]

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>[^\n]+)\n(?P<code>[^\n]*)')


_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
# This package's own frames (the diagnosis calls a target through a frame of its own) are never the user's line.
_OWN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
# Dynamo's own frames (``wrap_inline``, the frame it puts around a torch function compiled directly)
# are no line of anyone's program.
_DYNAMO_DIR = os.path.join(_TORCH_DIR, "_dynamo") + os.sep


def parse_stack_trace(stack_trace: Optional[str]) -> Optional[SourceLocation]:
    """The innermost user frame of an FX ``stack_trace``, or None.

    Frames inside torch's own package (``torch/nn/modules/linear.py``, functional collectives)
    are the library the user called, not the user's line: the innermost frame outside torch is
    taken, and the innermost torch frame only when every frame is torch's. Frames of this
    package (the diagnosis calling the target) and of Dynamo itself are never the user's: a trace
    of only those is no trace (the module's own line is found as for a module compiled directly).
    """
    if not stack_trace:
        return None
    frames = [frame for frame in _FRAME.finditer(stack_trace)
              if not frame.group("file").startswith((_OWN_DIR, _DYNAMO_DIR))]
    if not frames:
        return None
    outside = [frame for frame in frames if not frame.group("file").startswith(_TORCH_DIR)]
    last = (outside or frames)[-1]
    return SourceLocation(file=last.group("file"), line=int(last.group("line")),
                          code=last.group("code").strip(), function=last.group("function").strip())


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


def _class_name(module_class: Any) -> str:
    """A class's name, from the class or its qualified name (a serialised graph's, an exported program's)."""
    return module_class.__name__ if isinstance(module_class, type) else str(module_class).rsplit(".", 1)[-1]


def _module_path(node: torch.fx.Node) -> tuple[str, str]:
    """(the innermost ``nn.Module`` ``node`` was traced in, as Dynamo names it (``L['self'].layers.1``);
    its class's name), or ("", "") outside every submodule."""
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return "", ""
    path, module_class = list(stack.values())[-1]
    return str(path), _class_name(module_class)


def module_label(path: str, class_name: str = "") -> str:
    """A module as people name it: ``named_modules()``'s name, then its class (``layers.1 (GELU)``);
    "" for the root module (or none)."""
    name = module_name(path)
    return f"{name} ({class_name})" if name and class_name else name


def node_module(node: Optional[NodeProvenance]) -> str:
    """The :func:`module_label` of the module a post-grad node ran in ("" for none, or no node)."""
    return module_label(node.module, node.module_type) if node is not None else ""


def module_labels(graph: Optional[torch.fx.GraphModule]) -> dict[str, str]:
    """``{module key: module_label}`` for every submodule a graph's nodes ran in; the key is
    ``nn_module_stack``'s, the module's ``id`` as a string (what an eager run can name it by)."""
    found: dict[str, str] = {}
    for node in graph.graph.nodes if graph is not None else ():
        for key, (path, module_class) in (node.meta.get("nn_module_stack") or {}).items():
            if key not in found:
                found[key] = module_label(str(path), _class_name(module_class))
    return {key: label for key, label in found.items() if label}


@functools.lru_cache(maxsize=256)
def _forward_location(module_class: type) -> Optional[SourceLocation]:
    forward = getattr(module_class, "forward", None)
    code = getattr(forward, "__code__", None)
    if code is None:
        return None
    try:
        file = inspect.getsourcefile(forward) or code.co_filename
    except TypeError:
        file = code.co_filename
    line = code.co_firstlineno
    text = linecache.getline(code.co_filename, line).strip()
    return SourceLocation(file=file, line=line, code=text, function=f"{module_class.__name__}.forward")


def module_source(node: torch.fx.Node) -> Optional[SourceLocation]:
    """The ``forward`` of the innermost ``nn.Module`` ``node`` was traced in, or None: the source
    of a node Dynamo recorded no frame for (every frame was inside ``torch/nn/modules``)."""
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return None
    _, module_class = list(stack.values())[-1]
    return _forward_location(module_class) if isinstance(module_class, type) else None


def _traced_source(node: torch.fx.Node) -> Optional[SourceLocation]:
    """The line inside torch's own modules that made a Dynamo node Dynamo kept no frame for
    (:func:`~..seams.dynamo.dynamo_frames.traced_frame`), or None."""
    from ..seams.dynamo.dynamo_frames import traced_frame

    frame = traced_frame(node)
    if frame is None or frame[0].startswith(_DYNAMO_DIR):  # Dynamo's own frame is no line of the program
        return None
    file, line, function, code = frame
    return SourceLocation(file=file, line=line, code=code, function=function)


def seq_nr_index(post_grad: Any, node_map: dict[str, NodeProvenance]) -> dict[int, NodeProvenance]:
    """``{seq_nr: provenance}`` of a forward graph's attributed nodes (first node per number)."""
    index: dict[int, NodeProvenance] = {}
    for node in post_grad.graph.nodes:
        seq_nr = node.meta.get("seq_nr")
        info = node_map.get(node.name)
        if isinstance(seq_nr, int) and info is not None and info.dynamo_nodes and seq_nr not in index:
            index[seq_nr] = info
    return index


def _rewrite_sources(node: torch.fx.Node, rewrites: Sequence[RewriteLog]) -> list[ReplacedNode]:
    """What the pass that made ``node`` replaced: its own record, else (an intermediate node of a
    replacement) that of the nearest node it feeds that the same passes made."""
    made = [log for log in rewrites if node.name in log.created or log.sources(node.name)]
    if not made:
        return []
    seen, frontier = {node}, [node]
    for _ in range(16):
        for current in frontier:
            for log in made:
                if log.sources(current.name):
                    return log.sources(current.name)
        frontier = [user for current in frontier for user in current.users
                    if user not in seen and any(user.name in log.created for log in made)]
        seen.update(frontier)
        if not frontier:
            break
    return []


# (Dynamo node labels, source line, attribution) of one post-grad node, as it is being found
_Found = tuple[list[str], Optional[SourceLocation], str]


class _DynamoIndex:
    """The Dynamo graph's nodes, looked up the ways a post-grad node is traced back to them: by
    name (through what a pre-grad pass replaced), in a subgraph, and by source line."""

    def __init__(self, dynamo_graph: Any, rewrites: Sequence[RewriteLog]) -> None:
        self.nodes = {label: n for label, n, _ in _labelled_nodes(dynamo_graph)} if dynamo_graph is not None else {}
        self.rewrites = rewrites
        self.in_subgraphs: dict[str, list[str]] = {}  # a Dynamo subgraph node's name -> its labels
        self.by_source: dict[tuple[str, int], list[str]] = {}
        for label, dyn in self.nodes.items():
            if label != dyn.name:
                self.in_subgraphs.setdefault(dyn.name, []).append(label)
            if dyn.op not in ("call_function", "call_method", "call_module"):
                continue
            loc = parse_stack_trace(dyn.meta.get("stack_trace"))
            if loc is not None:
                self.by_source.setdefault((loc.file, loc.line), []).append(label)
        self.subgraph_by_id = ({graph_id: path for graph_id, (_, path) in subgraph_paths(dynamo_graph).items()}
                               if dynamo_graph is not None else {})

    def _known(self, name: str) -> bool:
        return not self.nodes or name in self.nodes

    def named(self, names: Sequence[str]) -> list[str]:
        """``names`` as Dynamo nodes; a name a pre-grad pass made stands for what it replaced."""
        result: list[str] = []
        for name in names:
            if self._known(name):
                candidates = [name]
            else:  # only then look up what the pass replaced
                replaced = [src for log in self.rewrites for src in log.sources(name)]
                candidates = [root for src in replaced for root in (src.roots or (src.name,))]
            for candidate in candidates:
                if self._known(candidate) and candidate not in result:
                    result.append(candidate)
        return result

    def in_subgraph(self, node: torch.fx.Node, location: Optional[SourceLocation]) -> list[str]:
        """``node``'s chain roots as Dynamo subgraph nodes: a cond branch's, or a body AOTAutograd
        traced into the root graph (an activation checkpoint's). Where a name is in several
        subgraphs (two checkpointed blocks), the subgraph the chain names, else the one whose node
        ran in the same module, else on the same source line."""
        result: list[str] = []
        for name, graph_id in chain_root_graphs(node):
            candidates = self.in_subgraphs.get(name, [])
            if len(candidates) > 1 and graph_id in self.subgraph_by_id:
                candidates = [c for c in candidates if c == f"{self.subgraph_by_id[graph_id]}.{name}"] or candidates
            module = _module_path(node)
            if len(candidates) > 1 and module:
                candidates = [c for c in candidates if _module_path(self.nodes[c]) == module] or candidates
            if len(candidates) > 1 and location is not None:
                on_line = set(self.on_line(location))
                candidates = [c for c in candidates if c in on_line] or candidates
            result.extend(c for c in candidates if c not in result)
        return result

    def on_line(self, location: Optional[SourceLocation]) -> list[str]:
        """The Dynamo nodes traced on ``location``'s line."""
        return list(self.by_source.get((location.file, location.line), [])) if location is not None else []

    def source_of(self, label: str) -> Optional[SourceLocation]:
        """The user line of a Dynamo node, or None."""
        node = self.nodes.get(label)
        return parse_stack_trace(node.meta.get("stack_trace")) if node is not None else None


class _NodeMapBuilder:
    """:func:`build_node_map`'s steps over one post-grad graph, in the order they run."""

    def __init__(self, post_grad: Any, dynamo: _DynamoIndex,
                 forward_by_seq_nr: Optional[dict[int, NodeProvenance]], rewrites: Sequence[RewriteLog],
                 called_from: Optional[SourceLocation]) -> None:
        self.dynamo = dynamo
        self.forward_by_seq_nr = forward_by_seq_nr or {}
        self.rewrites = rewrites
        self.called_from = called_from
        self.labelled = _labelled_nodes(post_grad)
        self.label_of = {node: label for label, node, _ in self.labelled}
        self.found: dict[str, _Found] = {}
        self.computation: dict[str, torch.fx.Node] = {}  # a fusion's node: the matched node whose module it ran in

    def attribute(self) -> None:
        """Each call_function node's Dynamo nodes, source and attribution, as far as its own
        metadata and the rewrite log take it."""
        for label, node, subgraph in self.labelled:
            if node.op != "call_function":
                continue
            if subgraph:  # a cond branch, a loop body: its names are its own, never the root graph's
                source = parse_stack_trace(node.meta.get("stack_trace"))
                roots = self.dynamo.in_subgraph(node, source) or self.dynamo.on_line(source)
                self.found[label] = (roots, source, "from_node" if roots else "none")
            else:
                self.found[label] = self._attribute_root_node(label, node)

    def _attribute_root_node(self, label: str, node: torch.fx.Node) -> _Found:
        source = parse_stack_trace(node.meta.get("stack_trace"))
        matched = matched_nodes(node)  # a oneDNN fusion freezing made: the convolution, then its ReLU
        if matched:
            self.computation[label] = matched[0]
            roots = list(dict.fromkeys(r for m in matched for r in self.dynamo.named(chain_roots(m))))
            source = parse_stack_trace(matched[0].meta.get("stack_trace"))
        else:
            roots = self.dynamo.named(chain_roots(node)) or self.dynamo.in_subgraph(node, source)
        attribution = "from_node" if roots else "none"
        if not roots and source is not None:
            roots = self.dynamo.on_line(source)
            attribution = "stack_trace" if roots else "none"
        seq_nrs = [node.meta.get("seq_nr")]
        if not roots:
            for replaced in _rewrite_sources(node, self.rewrites):
                location = parse_stack_trace(replaced.stack_trace)
                roots.extend(r for r in self.dynamo.named(replaced.roots) or self.dynamo.on_line(location)
                             if r not in roots)
                source = source or location
                seq_nrs.append(replaced.seq_nr)
            attribution = "rewrite" if roots else "none"
        forward = next((self.forward_by_seq_nr[n] for n in seq_nrs
                        if isinstance(n, int) and n in self.forward_by_seq_nr), None)
        if not roots and forward is not None:
            roots, attribution = list(forward.dynamo_nodes), "seq_nr"
            source = source or forward.source
        elif attribution == "stack_trace" and len(roots) > 1 and forward is not None and forward.dynamo_nodes and \
                set(forward.dynamo_nodes) <= set(roots):  # of the line's ops, the one this node differentiates
            roots, attribution = list(forward.dynamo_nodes), "seq_nr"
        if source is None and roots:
            source = self.dynamo.source_of(roots[0])
        return roots, source, attribution

    def fill_from_data_flow(self) -> None:
        _fill_from_data_flow(self.labelled, self.label_of, self.found)

    def fill_sources(self) -> None:
        """A node no frame was kept for: the line inside torch's own module that made it, else its
        module's ``forward``; a graph of nothing the user wrote (``torch.compile(torch.min)``): the
        line that called the compiled function."""
        for label, node, _ in self.labelled:
            entry = self.found.get(label)
            if entry is None or entry[1] is not None:
                continue
            roots = entry[0]
            root = self.dynamo.nodes.get(roots[0]) if roots else None
            location = (_traced_source(root) or module_source(root)) if root is not None else None
            self.found[label] = (roots, location or module_source(node) or self.called_from, entry[2])

    def records(self, code_lines: dict[str, Any]) -> dict[str, NodeProvenance]:
        """The node map: a record for every attributed node and every input."""
        result: dict[str, NodeProvenance] = {}
        for label, node, subgraph in self.labelled:
            if node.op in ("placeholder", "get_attr") and not subgraph:
                result[label] = self._input_record(label, node)
            elif label in self.found:
                roots, source, attribution = self.found[label]
                module, module_type = _module_path(self.computation.get(label, node))  # a fusion: its computation's
                if not module and roots and roots[0] in self.dynamo.nodes:  # a backward node: its forward op's module
                    module, module_type = _module_path(self.dynamo.nodes[roots[0]])
                if subgraph not in code_lines:
                    code_lines[subgraph] = Deferred(partial(_graph_code_lines, node.graph), fallback={})
                result[label] = NodeProvenance(
                    name=label,
                    target=_target_name(node),
                    code=code_lines[subgraph].map(lambda lines, name=node.name: lines.get(name, ""), fallback=""),
                    dynamo_nodes=roots,
                    source=source,
                    module=module,
                    module_type=module_type,
                    attribution=attribution,
                )
        return result

    def _input_record(self, label: str, node: torch.fx.Node) -> NodeProvenance:
        """A graph input or constant; ``first_use``: the line that first uses it."""
        users = [self.found[self.label_of[user]][1] for user in node.users
                 if self.label_of.get(user) in self.found and self.found[self.label_of[user]][1]]
        kind = "input" if node.op == "placeholder" else "constant"
        return NodeProvenance(name=label, target=kind, code="", dynamo_nodes=[], source=None, module="",
                              attribution=kind, first_use=users[0] if users else None)


def build_node_map(post_grad: Any, post_grad_code: "str | Deferred[str]", dynamo_graph: Any,
                   forward_by_seq_nr: Optional[dict[int, NodeProvenance]] = None,
                   rewrites: Sequence[RewriteLog] = (),
                   called_from: Optional[SourceLocation] = None) -> dict[str, NodeProvenance]:
    """NodeProvenance for every call_function node and input of the post-grad graph.

    ``forward_by_seq_nr`` (from :func:`seq_nr_index` on the forward graph) lets a backward
    graph's nodes fall back to the forward op they differentiate; ``rewrites`` (what the graph
    passes replaced, innermost first) lets the nodes a pass made take the provenance of the
    node(s) they replaced; ``called_from`` (the user's line that called the compiled function) is
    the source of nodes with no other (a torch function compiled directly).
    """
    if post_grad is None:
        return {}
    builder = _NodeMapBuilder(post_grad, _DynamoIndex(dynamo_graph, rewrites), forward_by_seq_nr, rewrites,
                              called_from)
    builder.attribute()
    builder.fill_from_data_flow()
    builder.fill_sources()
    # Each node's printed line is looked up on first read of its ``code`` (see ..deferred).
    return builder.records({"": Deferred(lambda: _code_lines(resolve(post_grad_code)), fallback={})})


def _labelled_nodes(root: Any) -> list[tuple[str, torch.fx.Node, str]]:
    """``(label, node, subgraph path)`` for every node of ``root``'s graph (path ``""``), then of
    each subgraph module under it, labelled ``path.name`` (see ``recorder.fx_label``)."""
    labelled = [(n.name, n, "") for n in root.graph.nodes]
    for graph, path in subgraph_paths(root).values():
        labelled += [(f"{path}.{n.name}", n, path) for n in graph.nodes]
    return labelled


def _graph_code_lines(graph: torch.fx.Graph) -> dict[str, str]:
    return _code_lines(graph.python_code(root_module="self").src)


def _fill_from_data_flow(labelled: list[tuple[str, torch.fx.Node, str]], label_of: dict[torch.fx.Node, str],
                         found: dict[str, tuple[list[str], Optional[SourceLocation], str]]) -> None:
    """Nodes still without provenance (an input-mutation ``copy_``, a view AOTAutograd added) take
    that of the value they consume, else of their first user that has one: ``data_flow``."""
    def attributed(node: Any) -> Optional[tuple[list[str], Optional[SourceLocation], str]]:
        entry = found.get(label_of.get(node))
        return entry if entry is not None and entry[0] else None

    nodes = [(label, n) for label, n, _ in labelled if label in found]
    for order in (nodes, list(reversed(nodes))):
        for label, node in order:
            if found[label][0]:
                continue
            neighbours = list(node.all_input_nodes) if order is nodes else list(node.users)
            donor = next((attributed(n) for n in reversed(neighbours) if attributed(n)), None)
            if donor is not None:
                found[label] = (list(donor[0]), donor[1], "data_flow")
