"""Updates of a graph's inputs, made outputs so an accuracy check can see them.

A graph can return nothing and still be wrong: an optimizer step updates weights and moments in
place (``_foreach_addcdiv_``, ``copy_`` into an input), a cache is written with ``index_copy_``
or ``cache[:, pos] = k``. The minifier compares outputs, so before an accuracy search
:func:`expose_updates` rewrites such a graph, one of two ways:

1. Out of place, where it can: each in-place update becomes its out-of-place op
   (``_foreach_add_`` -> ``_foreach_add``, ``x.add_(y)`` -> ``x.add(y)``, ``copy_`` -> ``copy``),
   later readers read that op's result instead, and each updated input's final value becomes one
   more output. Updates of the graph's
   own values are rewritten too, so the search slices a graph whose values only flow forward.
   Made only where it computes what the graph computed: every update of an input has an
   out-of-place op, and no updated value is a view of an input, or has a view read after the
   update (it would see updates the rewrite no longer makes), which one eager run checks.
2. Otherwise (an update through a view, ``operator.setitem``, an op without an out-of-place
   twin): the graph as it is, plus a copy of each input it changes, taken at its end, as one more
   output each. One eager run finds those inputs, and the nodes that change each, by the inputs'
   version counters; the nodes are marked for the slicer (``node.meta[UPDATES]``), so that it
   knows the copy depends on them.

Either way the graph's tensor attributes (the optimizer state of a Dynamo graph) become inputs
first, valued as the attributes are: every run starts from copies of them, and no run, here or in
the search, changes the caller's. A graph that updates no input is returned as it was.
"""

from __future__ import annotations

import dataclasses
import operator
from typing import Any, Optional, Sequence

import torch
import torch.fx

from .graph import attribute
from .in_place import UPDATES, out_of_place_target, updates_first_argument

__all__ = ["ExposedUpdates", "expose_updates", "attributes_as_inputs", "updates_in_place"]


@dataclasses.dataclass
class ExposedUpdates:
    """The rewritten graph, its inputs (the original ones, then the lifted attributes') and the
    names of the inputs whose final values it returns after its own outputs (empty: unchanged)."""

    module: torch.fx.GraphModule
    inputs: list[Any]
    updated: list[str]
    note: str = ""


def _written(node: torch.fx.Node) -> list[torch.fx.Node]:
    first = node.args[0]
    items = [first] if isinstance(first, torch.fx.Node) else list(first) if isinstance(first, (list, tuple)) else []
    return [item for item in items if isinstance(item, torch.fx.Node)]


def expose_updates(module: torch.fx.GraphModule, inputs: Sequence[Any], *, seed: int = 0) -> ExposedUpdates:
    """``module`` rewritten so that the inputs (and tensor attributes) it updates in place are
    outputs too (see the module docstring); unchanged, with a note, when it updates none or
    neither rewrite is safe."""
    # Tensor attributes become inputs first (kept only if the graph updates something): no run
    # here or in the search then changes the caller's attributes, and every run starts from them.
    lifted, values = attributes_as_inputs(module, inputs)
    functional = _out_of_place_rewrite(lifted, values, seed)
    if functional.updated:
        return functional
    copied = _copies_at_the_end(lifted, values, seed)
    if copied.updated:
        return copied
    return ExposedUpdates(module, list(inputs), [], functional.note)


def _out_of_place_rewrite(module: torch.fx.GraphModule, inputs: Sequence[Any], seed: int) -> ExposedUpdates:
    """The updates of inputs rewritten out of place (the first rewrite of the module docstring)."""
    unchanged = ExposedUpdates(module, list(inputs), [])
    roots = {n.name for n in module.graph.nodes if n.op == "placeholder"}
    in_place = [n for n in module.graph.nodes if updates_first_argument(n)]
    if not any(w.name in roots for n in in_place for w in _written(n)):
        return unchanged
    missing = sorted({str(getattr(n.target, "__name__", n.target)) for n in in_place
                      if out_of_place_target(n) is None and any(w.name in roots for w in _written(n))})
    if missing:
        unchanged.note = f"no out-of-place op for {', '.join(missing)}: its updates of inputs are left as they are"
        return unchanged
    # Every update that has an out-of-place op is rewritten, of inputs and of the graph's own values
    # alike: the search then slices a graph whose values only flow forward.
    writers = {n.name for n in in_place if out_of_place_target(n) is not None}

    graph = torch.fx.Graph()
    result = graph.graph_copy(module.graph, {})  # the node names are kept; no output node yet
    alias_of: dict[torch.fx.Node, torch.fx.Node] = {}  # a value -> the value it updates (itself or an alias)
    newest: dict[torch.fx.Node, torch.fx.Node] = {}  # an updated value -> the node holding its newest value
    first_update: dict[torch.fx.Node, torch.fx.Node] = {}  # an updated value -> its first writer

    def current(value: torch.fx.Node) -> torch.fx.Node:
        return newest.get(alias_of.get(value, value), value)

    for node in list(graph.nodes):
        written = [alias_of.get(item, item) for item in _written(node)] if node.name in writers else []
        for used in node.all_input_nodes:
            if current(used) is not used:
                node.replace_input_with(used, current(used))
        if not written:
            continue
        node.target = out_of_place_target(node)
        if isinstance(node.args[0], torch.fx.Node):
            versions = [node]
        else:
            items = {u.args[1]: u for u in node.users if u.target is operator.getitem}
            anchor = node
            for index in range(len(node.args[0])):
                if index not in items:
                    with graph.inserting_after(anchor):
                        items[index] = graph.call_function(operator.getitem, (node, index))
                anchor = items[index]
            versions = [items[index] for index in range(len(node.args[0]))]
        for value, version in zip(written, versions):
            newest[value], alias_of[version] = version, value
            first_update.setdefault(value, node)
    updated = [n for n in graph.nodes if n.name in roots and n in newest]
    outputs = torch.fx.node.map_arg(result, current)
    outputs = tuple(outputs) if isinstance(outputs, (tuple, list)) else (outputs,)
    graph.output((*outputs, *(newest[root] for root in updated)))
    graph.lint()
    rewritten = torch.fx.GraphModule(module, graph)
    problem = _aliasing_problem(rewritten, inputs, first_update, seed)
    if problem:
        unchanged.note = f"updates of inputs left as they are: {problem}"
        return unchanged
    return ExposedUpdates(rewritten, list(inputs), [root.name for root in updated])


def _storage(value: Any) -> Optional[int]:
    if not isinstance(value, torch.Tensor) or value.layout != torch.strided or value.device.type == "meta":
        return None
    try:
        return value.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):  # a tensor without a storage of its own
        return None


def _aliasing_problem(module: torch.fx.GraphModule, inputs: Sequence[Any],
                      first_update: dict[torch.fx.Node, torch.fx.Node], seed: int) -> str:
    """Why the rewritten ``module`` may not compute what the original did, or "".

    Runs it once: a value that shares memory with an updated value (a view of it) and is read
    after that value's first update would have seen the update; an updated value that is a view
    of an input updated the input; an input the rewritten graph still changes was changed
    through such a view."""
    from .judge import clone_inputs

    position = {node: index for index, node in enumerate(module.graph.nodes)}
    interpreter = torch.fx.Interpreter(module, garbage_collect_values=False)
    copies = clone_inputs(inputs)
    before = clone_inputs(copies)
    torch.manual_seed(seed)
    try:
        with torch.no_grad():
            interpreter.run(*copies)
    except Exception as exc:  # noqa: BLE001 - a graph the check cannot run is not rewritten
        return f"the rewritten graph does not run eagerly ({type(exc).__name__}: {str(exc)[:200]})"
    storages: dict[int, list[torch.fx.Node]] = {}
    for node, value in interpreter.env.items():
        for item in (value if isinstance(value, (list, tuple)) else [value]):
            storage = _storage(item)
            if storage is not None:
                storages.setdefault(storage, []).append(node)
    for value, writer in first_update.items():
        storage = _storage(interpreter.env.get(value))
        for other in storages.get(storage, []) if storage is not None else []:
            if other is value:
                continue
            if other.op == "placeholder":  # an update of a view of an input is an update of the input
                return f"{writer.name} updates {value.name}, a view of the input {other.name}"
            last_read = max([position[other], *(position[u] for u in other.users)])
            if last_read > position[writer]:
                return (f"{other.name} shares memory with {value.name}, which {writer.name} updates, "
                        "and is read after it")
    for placeholder, (old, new) in zip((n for n in module.graph.nodes if n.op == "placeholder"),
                                       zip(before, copies)):
        if isinstance(old, torch.Tensor) and not torch.equal(old, new):
            return f"input {placeholder.name} is still changed in place"
    return ""


def _copies_at_the_end(module: torch.fx.GraphModule, inputs: Sequence[Any], seed: int) -> ExposedUpdates:
    """``module`` with a copy of each input it changes, taken after its last node, as one more
    output each; its nodes, in-place ones included, left as they are.

    For updates the out-of-place rewrite cannot make: through a view (``x[:, :4].add_(y)``,
    ``cache[:, pos] = k``), by an op without an out-of-place twin. The inputs changed, and the
    nodes that change each (through whatever view), are seen in one eager run by the inputs'
    version counters; each such node is marked (``node.meta[UPDATES]``: the inputs it changes),
    so that the search knows that what reads those inputs afterwards depends on it."""
    from .judge import clone_inputs

    unchanged = ExposedUpdates(module, list(inputs), [])
    placeholders = [n for n in module.graph.nodes if n.op == "placeholder"]
    changes: dict[str, list[str]] = {}  # node -> the inputs it changes

    tensors: list[tuple[str, torch.Tensor]] = []  # the inputs, held past their last use in the graph

    class _Watcher(torch.fx.Interpreter):
        def run_node(self, n: torch.fx.Node) -> Any:
            versions = [t._version for _, t in tensors]
            result = super().run_node(n)
            if n.op == "placeholder" and isinstance(result, torch.Tensor):
                tensors.append((n.name, result))
            changed = [name for (name, t), v in zip(tensors, versions) if t._version != v]
            if changed:
                changes[n.name] = changed
            return result

    torch.manual_seed(seed)
    try:
        with torch.no_grad():
            _Watcher(module).run(*clone_inputs(inputs))
    except Exception:  # noqa: BLE001 - a graph eager cannot run: the search says so itself
        return unchanged
    updated = [p.name for p in placeholders if any(p.name in names for names in changes.values())]
    if not updated:
        return unchanged
    graph = torch.fx.Graph()
    result = graph.graph_copy(module.graph, {})
    nodes = {n.name: n for n in graph.nodes}
    for name, changed in changes.items():
        nodes[name].meta[UPDATES] = list(changed)
    copies = [graph.call_function(torch.ops.aten.clone.default, (nodes[name],)) for name in updated]
    outputs = tuple(result) if isinstance(result, (tuple, list)) else (result,)
    graph.output((*outputs, *copies))
    graph.lint()
    return ExposedUpdates(torch.fx.GraphModule(module, graph), list(inputs), updated)


def updates_in_place(module: torch.fx.GraphModule) -> bool:
    """Does a node of ``module`` update a value in place (an in-place op, ``operator.setitem``)?"""
    return any(updates_first_argument(n) or n.target is operator.setitem for n in module.graph.nodes)


def attributes_as_inputs(module: torch.fx.GraphModule,
                         inputs: Sequence[Any]) -> tuple[torch.fx.GraphModule, list[Any]]:
    """``module`` with each tensor attribute it reads (``get_attr``) made an input after its own,
    valued the attribute: runs on copies of the inputs then never change the attributes."""
    getters = [n for n in module.graph.nodes
               if n.op == "get_attr" and isinstance(attribute(module, str(n.target)), torch.Tensor)]
    if not getters:
        return module, list(inputs)
    graph = torch.fx.Graph()
    graph.output(graph.graph_copy(module.graph, {}))
    copied = {n.name: n for n in graph.nodes}
    anchor = next((n for n in reversed(graph.nodes) if n.op == "placeholder"), None)
    values = list(inputs)
    for getter in getters:
        values.append(attribute(module, str(getter.target)))
        with graph.inserting_after(anchor) if anchor is not None else graph.inserting_before(None):
            placeholder = graph.placeholder(f"{getter.name}_input")
        copied[getter.name].replace_all_uses_with(placeholder)
        graph.erase_node(copied[getter.name])
        anchor = placeholder
    graph.lint()
    return torch.fx.GraphModule(module, graph), values
