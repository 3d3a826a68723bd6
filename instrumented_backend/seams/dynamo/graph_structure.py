"""Seam: the private fields of ``torch.fx`` a graph snapshot reads and restores.

A snapshot of an FX graph (see :mod:`..capture.graph_copy`) keeps each node's ``_args`` and
``_kwargs`` (FX keeps them as immutable containers and replaces them on every change, so holding
them is a copy; a node that reads others, ``_input_nodes``, has them rewritten with positions for
nodes), and the graph's ``_codegen`` (copied, its immutable pytree specs shared) and
``_tracer_cls``, which ``copy.deepcopy(graph)`` carries over. :func:`rebuild` makes a new graph from them, as
``Graph.__deepcopy__`` would have at the time of the snapshot.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch.fx
from torch.fx.node import map_aggregate

from .. import SeamMoved

__all__ = ["GraphStructure", "take", "rebuild", "flat_inputs", "check"]


class _Slot(int):
    """A node's position in a snapshot, standing for the node in the snapshot's arguments (so a
    snapshot keeps no node of the original graph, nor through them the graph and its module)."""

    __slots__ = ()


@dataclass
class GraphStructure:
    """A graph's nodes (each: op, target, args, kwargs, name, type, a copy of its meta; other
    nodes in the arguments by position) and its code-generation settings, as they were when taken."""

    nodes: list[tuple[Any, ...]]
    codegen: Any
    tracer_cls: Any


def take(graph: torch.fx.Graph) -> GraphStructure:
    """The structure of ``graph`` now (meta shallow-copied, as ``Graph.__deepcopy__`` does)."""
    position: dict[torch.fx.Node, _Slot] = {}
    slot = position.__getitem__
    nodes = []
    for index, n in enumerate(graph.nodes):
        position[n] = _Slot(index)
        args, kwargs = n._args, n._kwargs
        if n._input_nodes:  # arguments naming other nodes: by position
            args, kwargs = torch.fx.map_arg(args, slot), torch.fx.map_arg(kwargs, slot)
        meta = n.meta
        nodes.append((n.op, n.target, args, kwargs, n.name, n.type,
                      meta.copy() if type(meta) is dict else copy.copy(meta)))  # copy.copy's dispatch, inlined
    return GraphStructure(nodes, _codegen_copy(graph._codegen), graph._tracer_cls)


def _codegen_copy(codegen: Any) -> Any:
    """A copy of a graph's code generator that later changes to the graph's cannot reach: its own
    attributes, and of a pytree code generator (an exported module's) its ``pytree_info`` with its
    own list of argument names. The input and output specs are shared: pytree specs are immutable,
    and deep-copying them makes PyTorch warn (a deprecated ``isinstance`` in their constructor),
    which plain Inductor never does here."""
    copied = copy.copy(codegen)
    info = getattr(codegen, "pytree_info", None)
    if info is not None and hasattr(info, "_replace") and isinstance(getattr(info, "orig_args", None), list):
        copied.pytree_info = info._replace(orig_args=list(info.orig_args))
    return copied


def flat_inputs(graph: torch.fx.Graph, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """``args`` and ``kwargs`` laid out as the placeholders of ``graph`` take them, by its code
    generator's input spec (an exported module's: keywords in the spec's order, whatever the
    caller's); TypeError for a graph whose code takes no keyword arguments."""
    import torch.fx._pytree as fx_pytree

    spec = getattr(getattr(graph._codegen, "pytree_info", None), "in_spec", None)
    if spec is None:
        raise TypeError("this graph's code takes its placeholders positionally: no keyword arguments")
    return fx_pytree.tree_flatten_spec((args, kwargs), spec)


def rebuild(structure: GraphStructure) -> torch.fx.Graph:
    """A new graph with the nodes of ``structure`` (arguments pointing at the new nodes)."""
    graph = torch.fx.Graph(tracer_cls=structure.tracer_cls)
    new: list[torch.fx.Node] = []

    def node_at(value: Any) -> Any:
        return new[value] if type(value) is _Slot else value

    for op, target, args, kwargs, name, type_expr, meta in structure.nodes:
        node = graph.create_node(op, target, map_aggregate(args, node_at), map_aggregate(kwargs, node_at),
                                 name, type_expr)
        node.meta = meta
        new.append(node)
    graph._codegen = structure.codegen
    return graph


def check() -> None:
    """Raise SeamMoved unless the fields read here hold what a snapshot needs."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    neg = graph.call_function(torch.neg, (x,), {"out": None})
    graph.output((neg,))
    if getattr(neg, "_args", None) is not neg.args or getattr(neg, "_kwargs", None) is not neg.kwargs:
        raise SeamMoved("graph_structure: torch.fx.Node no longer keeps its args/kwargs in _args/_kwargs")
    if list(getattr(neg, "_input_nodes", {})) != [x] or getattr(x, "_input_nodes", None):
        raise SeamMoved("graph_structure: torch.fx.Node no longer lists the nodes it reads in _input_nodes")
    for attr in ("_codegen", "_tracer_cls"):
        if not hasattr(graph, attr):
            raise SeamMoved(f"graph_structure: torch.fx.Graph no longer has {attr}")
    expected = copy.deepcopy(graph).python_code("self").src
    rebuilt = rebuild(take(graph)).python_code("self").src
    if rebuilt != expected:
        raise SeamMoved(f"graph_structure: a rebuilt graph no longer reads like a deep copy:\n{rebuilt}\n{expected}")
    _check_pytree_codegen()


def _check_pytree_codegen() -> None:
    """An exported module's graph (a pytree code generator) rebuilt reads like its deep copy, and
    a later change to the original's argument names does not reach the snapshot."""
    import warnings

    class TwoInputs(torch.nn.Module):
        def forward(self, x: torch.Tensor, *, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return x + y, x.neg()

    example = torch.ones(2)
    graph = torch.export.export(TwoInputs(), (example,), {"y": example}).module().graph
    info = getattr(graph._codegen, "pytree_info", None)
    if info is None or not isinstance(getattr(info, "orig_args", None), list):
        raise SeamMoved("graph_structure: an exported module's code generator no longer keeps its argument "
                        "names in pytree_info.orig_args (a list)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        expected = copy.deepcopy(graph).python_code("self").src
    x, y = torch.ones(2), torch.zeros(2)
    if [id(v) for v in flat_inputs(graph, (x,), {"y": y})] != [id(x), id(y)]:
        raise SeamMoved("graph_structure: an exported module's input spec no longer lays out (x, *, y) as [x, y]")
    structure = take(graph)
    info.orig_args.append("later")
    if rebuild(structure).python_code("self").src != expected:
        raise SeamMoved("graph_structure: a rebuilt exported module's graph no longer reads like a deep copy")
