"""Candidates as slices of the original graph.

A :class:`Candidate` names the compute nodes it keeps (by their names in the original graph),
the graph inputs it takes and the values it returns. :class:`GraphSlicer` turns one into a
runnable ``GraphModule`` plus inputs: a kept node whose producer was removed reads that
producer's *concrete* value (recorded once from an eager run of the original graph) through a
new input of the same name. The dependency structure is a networkx DiGraph, so ancestors,
descendants and topological slices are one call each.
"""

from __future__ import annotations

import dataclasses
import hashlib
import operator
from typing import Any, Iterable, Optional, Sequence

import networkx as nx
import torch
import torch.fx

from .in_place import UPDATES, updates_first_argument

__all__ = ["Candidate", "GraphSlicer", "InvalidCandidate", "record_values", "input_ok", "inline_subgraph_calls",
           "sizes_as_tuples", "attribute", "install_attribute"]

_COMPUTE = ("call_function", "call_method", "call_module", "get_attr")


class InvalidCandidate(ValueError):
    """The node set cannot be made into a runnable graph (no output, or an input that is not a value)."""


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A sub-graph of the original: kept compute nodes, inputs and outputs, all by original name."""

    nodes: frozenset[str]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    def describe(self) -> str:
        return f"({len(self.nodes)} nodes, {len(self.inputs)} inputs)"


def input_ok(value: Any) -> bool:
    """Can this value be a graph input? (tensors and Python / symbolic scalars)."""
    return isinstance(value, (torch.Tensor, int, float, bool, torch.SymInt, torch.SymFloat))


class _Recorder(torch.fx.Interpreter):
    """Keeps a *copy* of every node's value as it is produced (``Interpreter.env`` would hold the
    tensors themselves, which a later in-place op in the graph may change)."""

    def __init__(self, module: torch.fx.GraphModule) -> None:
        super().__init__(module, garbage_collect_values=False)
        self.values: dict[str, Any] = {}

    def run_node(self, n: torch.fx.Node) -> Any:
        value = super().run_node(n)
        # Cloned: a later in-place op must not change what this node produced.
        self.values[n.name] = value.detach().clone() if isinstance(value, torch.Tensor) else value
        return value


def record_values(module: torch.fx.GraphModule, inputs: Sequence[Any], seed: int = 0) -> dict[str, Any]:
    """Every node's value in one seeded eager run of ``module`` (inputs are not modified)."""
    from .judge import clone_inputs

    recorder = _Recorder(module)
    torch.manual_seed(seed)
    with torch.no_grad():
        recorder.run(*clone_inputs(inputs))
    for node, value in zip((n for n in module.graph.nodes if n.op == "placeholder"), inputs):
        recorder.values[node.name] = value
    return recorder.values


def inline_subgraph_calls(module: torch.fx.GraphModule,
                          names: Optional[dict[str, str]] = None) -> torch.fx.GraphModule:
    """``module`` with each call of a higher-order op that only calls a subgraph replaced by the
    subgraph's own nodes applied to its operands: a new GraphModule, or ``module`` itself when it
    has none. Such ops (:func:`~minifier._seams.subgraph_calls`): Inductor's ordering wrapper
    ``control_deps`` (in a post-grad graph around every random op under ``fallback_random``, each
    attention of a transformer; compiling the graph again orders them again), activation
    checkpointing's ``tag_activation_checkpoint`` (in a Dynamo graph, for each
    ``torch.utils.checkpoint`` call; it only changes what the backward recomputes), ``wrap`` and
    ``invoke_subgraph``. A graph calling subgraphs cannot be rebuilt in a worker; inlined, it
    computes the same values. Calls nested in an inlined subgraph are inlined too.

    ``names``, when given, is filled with the name each inlined node has now, by its label
    ``subgraph.node`` (the subgraph's attribute name and the node's name in it: how
    instrumented_backend and Dynamo's logs name a subgraph's nodes)."""
    from ._seams import subgraph_calls

    forms = subgraph_calls()
    if not any(n.target in forms for n in module.graph.nodes):
        return module
    graph = torch.fx.Graph()
    graph.output(graph.graph_copy(module.graph, {}))
    pending = [n for n in graph.nodes if n.target in forms]
    while pending:
        node = pending.pop(0)
        subgraph_at, operands_at, options = forms[node.target]
        getter = node.args[subgraph_at] if len(node.args) > subgraph_at else None
        path = str(getattr(getter, "target", ""))
        subgraph = attribute(module, path) if getattr(getter, "op", None) == "get_attr" else None
        several = [user for user in node.users if user.target is not operator.getitem]
        if not isinstance(subgraph, torch.fx.GraphModule) or (node.kwargs and not options) or \
                (several and not isinstance(subgraph.graph.output_node().args[0], torch.fx.Node)):
            continue  # not a form inlining reproduces: left as it is (and refused as a subgraph call)
        env: dict[torch.fx.Node, Any] = dict(zip(subgraph.graph.find_nodes(op="placeholder"), node.args[operands_at:]))
        with graph.inserting_before(node):
            for inner in subgraph.graph.nodes:
                if inner.op in ("placeholder", "output"):
                    continue
                if inner.op == "get_attr":  # a subgraph of the subgraph, reached from the root module
                    copy = graph.get_attr(f"{path}.{inner.target}")
                    copy.meta = dict(inner.meta)
                    env[inner] = copy
                    continue
                env[inner] = copy = graph.node_copy(inner, env.__getitem__)
                if names is not None:
                    names[f"{path}.{inner.name}"] = copy.name
                if inner.target in forms:
                    pending.append(copy)
        result = torch.fx.map_arg(subgraph.graph.output_node().args[0], env.__getitem__)
        if isinstance(result, torch.fx.Node):
            result.meta = {**node.meta, **result.meta}
            node.replace_all_uses_with(result)
        else:  # several outputs: each getitem of the call reads the one it names
            for user in list(node.users):
                user.replace_all_uses_with(result[user.args[1]])
                graph.erase_node(user)
        graph.erase_node(node)
    for getter in graph.find_nodes(op="get_attr"):
        if not getter.users and isinstance(attribute(module, str(getter.target)), torch.fx.GraphModule):
            graph.erase_node(getter)
    graph.lint()
    if names is not None:  # the inlined calls' own nodes (a nested call, its getitem) are gone
        kept = {n.name for n in graph.nodes}
        for label in [label for label, name in names.items() if name not in kept]:
            del names[label]
    return torch.fx.GraphModule(module, graph)


def sizes_as_tuples(module: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``module`` with each ``torch.Size([a, b])`` node of sizes it computes replaced, where its
    users read it, by the tuple ``(a, b)``: a new GraphModule, or ``module`` itself when it has none.

    Dynamo builds such a Size for the symbolic sizes of a dynamic-shape graph (a SegFormer's
    ``reshape(batch_size, num_channels, height, width)``), and a worker, which rebuilds a graph by
    re-tracing its code with FX, cannot: ``torch.Size()`` refuses the tracer's proxies. A tuple of
    the same sizes is what every op taking a size accepts, and the values are the same. A Size a
    user calls a method of (``size.numel()``) is left as it is."""
    sizes = [n for n in module.graph.find_nodes(op="call_function", target=torch.Size)
             if len(n.args) == 1 and not n.kwargs and isinstance(n.args[0], (list, tuple))
             and not any(user.op == "call_method" and user.args and user.args[0] is n for user in n.users)]
    if not sizes:
        return module
    graph = torch.fx.Graph()
    copies: dict[torch.fx.Node, torch.fx.Node] = {}
    graph.output(graph.graph_copy(module.graph, copies))
    for original in sizes:
        node = copies[original]
        items = tuple(node.args[0])
        for user in list(node.users):
            user.args = torch.fx.map_arg(user.args, lambda arg: items if arg is node else arg)
            user.kwargs = torch.fx.map_arg(user.kwargs, lambda arg: items if arg is node else arg)
        graph.erase_node(node)
    graph.lint()
    return torch.fx.GraphModule(module, graph)


def attribute(module: torch.nn.Module, path: str) -> Any:
    """``module``'s attribute at the dotted ``path`` (None when there is none)."""
    value: Any = module
    for part in path.split("."):
        value = getattr(value, part, None)
    return value


class GraphSlicer:
    """Builds candidates of one original graph; knows its dependency DAG and eager values."""

    def __init__(self, module: torch.fx.GraphModule, values: dict[str, Any]) -> None:
        self.module = module
        self.values = values
        self.nodes = {n.name: n for n in module.graph.nodes}
        self.placeholders = [n.name for n in module.graph.nodes if n.op == "placeholder"]
        self.order = [n.name for n in module.graph.nodes if n.op in _COMPUTE]
        self.position = {name: i for i, name in enumerate(n.name for n in module.graph.nodes)}
        output = next(n for n in module.graph.nodes if n.op == "output")
        self.original_outputs = tuple(a.name for a in output.all_input_nodes)
        self.dag = nx.DiGraph()  # data dependencies: what a node reads
        for node in module.graph.nodes:
            if node.op == "output":
                continue
            self.dag.add_node(node.name)
            for producer in node.all_input_nodes:
                self.dag.add_edge(producer.name, node.name)
        # Influence: data dependencies plus an in-place op's effect on later readers of what it mutates.
        self.flow = self.dag.copy()
        for node in module.graph.nodes:
            mutated = [_mutated_argument(node)] + [self.nodes[name] for name in node.meta.get(UPDATES, ())]
            for changed in (m for m in mutated if m is not None):
                for reader in changed.users:
                    if self.position[reader.name] > self.position[node.name] and reader.op != "output":
                        self.flow.add_edge(node.name, reader.name)

    # ------------------------------------------------------------------ shapes of candidates

    def full(self) -> Candidate:
        return Candidate(frozenset(self.order), tuple(self.placeholders), self.original_outputs)

    def sort(self, names: Iterable[str]) -> list[str]:
        return sorted(names, key=self.position.__getitem__)

    def needed_inputs(self, nodes: Iterable[str]) -> list[str]:
        kept = set(nodes)
        needed = {p for n in kept for p in self.dag.predecessors(n) if p not in kept}
        return self.sort(needed)

    def frontier(self, nodes: Iterable[str]) -> list[str]:
        """Kept nodes whose value leaves the set (used outside it, or an original output)."""
        kept = set(nodes)
        originals = set(self.original_outputs)
        return self.sort(n for n in kept if n in originals or any(u not in kept for u in self.dag.successors(n)))

    def ancestors(self, names: Iterable[str]) -> set[str]:
        """Nodes that can change the values of ``names`` (in-place effects included)."""
        found: set[str] = set()
        for name in names:
            found |= nx.ancestors(self.flow, name) | {name}
        return found

    def make(
        self, nodes: Iterable[str], *, inputs: Sequence[str] = (), outputs: Optional[Sequence[str]] = None
    ) -> Candidate:
        """A valid candidate keeping ``nodes`` (minus those that cannot be kept), or InvalidCandidate.

        A kept node reading a removed producer whose value cannot be an input (a tuple from a
        multi-output op) is itself removed, and becomes an input when its own value can. Inputs
        are those needed plus ``inputs`` (earlier ones, kept until "remove unused inputs" drops
        them); outputs are ``outputs`` or else the frontier, tensor values only.
        """
        kept = {n for n in nodes if n in self.nodes and self.nodes[n].op in _COMPUTE}
        changed = True
        while changed:
            changed = False
            for name in list(kept):
                if any(p not in kept and not input_ok(self.values.get(p)) for p in self.dag.predecessors(name)):
                    kept.discard(name)
                    changed = True
        if not kept:
            raise InvalidCandidate("no node left")
        wanted = self.frontier(kept) if outputs is None else [o for o in outputs if o in kept]
        wanted = [o for o in wanted if isinstance(self.values.get(o), torch.Tensor)]
        if not wanted:
            raise InvalidCandidate("no tensor output")
        needed = self.needed_inputs(kept)
        if any(not input_ok(self.values.get(p)) for p in needed):
            raise InvalidCandidate("an input is not a tensor or scalar")
        carried = [i for i in inputs if i not in kept]
        return Candidate(frozenset(kept), tuple(self.sort(set(needed) | set(carried))), tuple(self.sort(wanted)))

    # ------------------------------------------------------------------ building

    def build(self, candidate: Candidate) -> tuple[torch.fx.GraphModule, list[Any]]:
        """The candidate as a GraphModule (inputs named as in the original) and its input values."""
        graph = torch.fx.Graph()
        env: dict[str, torch.fx.Node] = {}
        for name in candidate.inputs:
            placeholder = graph.placeholder(name)
            original = self.nodes[name]
            placeholder.meta.update(
                {k: v for k, v in original.meta.items() if k in ("val", "example_value", "tensor_meta")}
            )
            env[name] = placeholder
        for name in self.order:
            if name not in candidate.nodes:
                continue
            env[name] = graph.node_copy(self.nodes[name], lambda n: env[n.name])
        graph.output(tuple(env[name] for name in candidate.outputs))
        owner = torch.nn.Module()
        for name in candidate.nodes:
            node = self.nodes[name]
            if node.op in ("get_attr", "call_module"):
                install_attribute(owner, str(node.target), attribute(self.module, str(node.target)))
        module = torch.fx.GraphModule(owner, graph, class_name=type(self.module).__name__)
        return module, [self.values[name] for name in candidate.inputs]

    def key(self, candidate: Candidate) -> str:
        """A hash of what would be compiled. A candidate of this graph determines its code and its
        inputs' values (names in the original, sorted), so it is hashed without building it."""
        described = (sorted(candidate.nodes), candidate.inputs, candidate.outputs)
        return hashlib.sha1(repr(described).encode()).hexdigest()


def _mutated_argument(node: torch.fx.Node) -> Optional[torch.fx.Node]:
    """The node an in-place op writes to (``x.add_(1)``, ``aten.add_.Tensor``), or None."""
    if not updates_first_argument(node) or not isinstance(node.args[0], torch.fx.Node):
        return None
    return node.args[0]


def install_attribute(root: torch.nn.Module, qualified: str, value: Any) -> None:
    """Make ``value`` ``root``'s attribute at the dotted path ``qualified`` (plain modules made for
    the path's parents): a module as a submodule, a parameter as a parameter, a tensor as a buffer."""
    *path, last = qualified.split(".")
    owner = root
    for part in path:
        if not hasattr(owner, part):
            owner.add_module(part, torch.nn.Module())
        owner = getattr(owner, part)
    if isinstance(value, torch.nn.Module):
        owner.add_module(last, value)
    elif isinstance(value, torch.nn.Parameter):
        owner.register_parameter(last, value)
    elif isinstance(value, torch.Tensor):
        owner.register_buffer(last, value)
    else:
        setattr(owner, last, value)
