"""Which FX nodes a graph pass created, and which node(s) each one replaced.

Inductor's graph passes (pre-grad, joint-graph, post-grad pattern rewrites, decompositions)
create nodes that carry no stack trace and no ``from_node`` chain: a ``dynamic=True`` softmax
comes out as ``amax_default``/``mul_tensor``/..., the nll_loss backward as
``select_scatter_default``. While a :class:`RewriteLog` is active on the thread, the hooks in
``seams/aot/rewrite_origins.py`` record, for each node a pass makes, a snapshot of the provenance of
the node(s) it replaced, taken before the replaced node is erased. The node map reads the log
(``attribution="rewrite"``). Node metadata is never written: Inductor sees the graph it made.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from .thread_state import thread_local

__all__ = ["ReplacedNode", "RewriteLog", "active_log", "activate_log", "chain_roots", "chain_root_graphs"]


@dataclass(frozen=True)
class ReplacedNode:
    """The provenance a replaced node had when a pass replaced it."""

    name: str
    stack_trace: Optional[str] = None
    roots: tuple[str, ...] = ()  # roots of its from_node chain (Dynamo graph nodes)
    seq_nr: Optional[int] = None


def chain_roots(node: Any) -> tuple[str, ...]:
    """The roots of a node's ``from_node`` chain: the Dynamo graph nodes it came from."""
    return tuple(dict.fromkeys(name for name, _ in chain_root_graphs(node)))


def chain_root_graphs(node: Any) -> tuple[tuple[str, Optional[int]], ...]:
    """``(name, graph id)`` of each root of a node's ``from_node`` chain: the id of the graph the
    root node was in when it was traced from (a Dynamo subgraph's, for a checkpointed body's op),
    None where the chain does not say."""
    roots: list[tuple[str, Optional[int]]] = []
    for source in node.meta.get("from_node") or []:
        while getattr(source, "from_node", None):
            source = source.from_node[0]
        name = getattr(source, "name", None)
        graph_id = getattr(source, "graph_id", None)
        root = (name, graph_id if isinstance(graph_id, int) else None)
        if name and root not in roots:
            roots.append(root)
    return tuple(roots)


@dataclass
class RewriteLog:
    """Nodes the passes created, by name, and the nodes each new node replaced."""

    created: set[str] = field(default_factory=set)
    replaced: dict[str, list[ReplacedNode]] = field(default_factory=dict)

    def on_create(self, node: Any) -> None:
        self.created.add(node.name)

    def on_replace(self, old: Any, new: str, user: Any) -> None:
        """``old``'s uses now go to the node named ``new`` (or ``old`` was renamed ``new``)."""
        if new == old.name:
            return
        sources = self.replaced.get(old.name) or [self.snapshot(old)]
        entries = self.replaced.setdefault(new, [])
        entries.extend(source for source in sources if source not in entries)

    @staticmethod
    def snapshot(node: Any) -> ReplacedNode:
        meta = getattr(node, "meta", {}) or {}
        seq_nr = meta.get("seq_nr")
        return ReplacedNode(name=node.name, stack_trace=meta.get("stack_trace"), roots=chain_roots(node),
                            seq_nr=seq_nr if isinstance(seq_nr, int) else None)

    def sources(self, name: str) -> list[ReplacedNode]:
        """What the node ``name`` replaced ([] if no pass made it, or it replaced nothing)."""
        return self.replaced.get(name, [])


_state = thread_local("RewriteLogState", log=None)


def active_log() -> Optional[RewriteLog]:
    """The log the graph passes running on this thread record into, or None."""
    return _state.log


def activate_log(log: Optional[RewriteLog]) -> Optional[RewriteLog]:
    """Make ``log`` this thread's active log; returns the previous one, to restore."""
    previous = _state.log
    _state.log = log
    return previous
