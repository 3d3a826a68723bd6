"""Why a minification could not start or go on: the graph, its inputs or the check are not usable."""

from __future__ import annotations

from typing import Sequence

__all__ = ["MinifierError", "NotFailingError", "UnbuildableGraph", "SubgraphCalls"]


class MinifierError(RuntimeError):
    """The minification could not start (the graph, its inputs or the check are not usable)."""


class NotFailingError(MinifierError):
    """The original graph does not fail the way the check describes."""


class UnbuildableGraph(MinifierError):
    """A worker cannot load the graph: FX ships a GraphModule by re-tracing its code, which some
    code refuses (a ``torch.func`` transform's batching calls; a ``torch.Size`` of symbolic sizes
    becomes a tuple first, :func:`~minifier.graph.sizes_as_tuples`, unless a method of it is
    called), or the graph holds a class a worker cannot import. The post-AOT ATen graph of the same
    computation can be minified instead. ``reason``: the worker's error."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"minify: a worker cannot load this graph ({reason}). A worker rebuilds a graph by "
                         "re-tracing its code with FX: the code must not refuse proxies (a torch.func transform's "
                         "batching calls, a torch.Size of symbolic sizes do) and its classes and ops must be "
                         "importable. For a Dynamo graph, minify the post-AOT ATen graph of the same computation "
                         "instead")


class SubgraphCalls(UnbuildableGraph):
    """The graph calls subgraphs through a higher-order op that does more than call them
    (``torch.cond``, ``while_loop``, a map, a scan): a worker cannot rebuild it, nor can a repro."""

    def __init__(self, subgraphs: Sequence[str], ops: Sequence[str]) -> None:
        self.subgraphs, self.ops = list(subgraphs), list(ops)
        self.reason = (f"it calls subgraphs {self.subgraphs} through {self.ops or ['a submodule']} (torch.cond, "
                       "while_loop, map, scan)")
        MinifierError.__init__(
            self, f"minify: the graph calls subgraphs {self.subgraphs} (through {self.ops or 'a submodule'}: "
            "torch.cond, while_loop, map, scan); a graph with subgraphs cannot be rebuilt in a worker or a repro "
            "yet (activation checkpoints, wrap and nested compile regions are inlined; these ops are not). "
            "Minify the subgraph's own ops: compile the branch's function alone and minify that graph")
