"""The first diverging kernel: compare every buffer the compiled code writes with eager's value.

1. Compile with the instrumented backend and keep each compiled graph's call arguments.
2. Make a copy of the graph's output code with ``run_intermediate_hooks('<fx node>', bufN)``
   after every statement that writes a buffer (kernel launches, extern calls), load it, and run
   it on the same arguments, collecting every buffer. (Inductor's own
   ``generate_intermediate_hooks`` only hooks extern and Triton kernels, not C++ kernels.) An
   input the graph updates in place (an optimizer's weights and moments) is read when the call
   returns, as the value of the node that last updates it.
3. Run the post-grad graph eagerly with an FX interpreter, keeping every node's value as it was
   computed (a later in-place update does not change it), and walk the buffers in execution
   order: the first whose value differs from its FX node's eager value is the first diverging
   buffer, and the kernel that wrote it the first diverging kernel.
4. A fused kernel computes several FX nodes; to say which one is wrong, the kernel's nodes that
   feed the diverging buffer are compiled together with Inductor, on eager inputs, every node's
   value an output (one compile), and the first that diverges is compiled alone to confirm it:
   it is the culprit, and its kernel lines are the answer. When the probe names none, or its
   first is right alone (a bug of the fusion, not of one node), each node is compiled alone in turn.

A value differs from eager by the package's accuracy rule, an fp64 referee included as for
outputs (the graph run in float64, its casts to a low precision widened too: Inductor leaves out
of a fused kernel the roundings to bfloat16 eager makes between ops, and is closer to it than
eager), and a small one (every value under 1, where the rule's absolute tolerance passes errors of
any relative size) also when it is wrong at its own scale against a float64 run of the same
computation (:func:`~.accuracy.wrong_at_its_own_scale`): a 1%-wrong ``tanh`` in a Gemma-2 attention's
softcapping (``tanh(logits / 50) * 50``, values of 1e-5) matched eager until the ``* 50``.
"""

from __future__ import annotations

import linecache
import math
import operator
import re
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import torch
import torch.fx

from minifier.in_place import out_of_place_target, updates_first_argument
from minifier.judge import autocast_off, widened

from ..capture.as_written import judged_as_written
from ..graphs import GraphCapture
from ..provenance.kernels import is_cpp_wrapper
from ..provenance.node_map import node_module
from ..records import KernelInfo, KernelLine, SourceLocation
from ..seams.codegen.output_code import loaded_constants
from ..seams.lowering.lowering_patterns import lowered_only
from ..seams.runtime.intermediate_hooks import IMPORT_LINE, intermediate_hook
from .accuracy import (
    clone_inputs,
    compare_outputs,
    fp64_reference,
    relative_error_beyond_eager,
    run_seeded,
    wrong_at_its_own_scale,
)
from .optimizer_updates import update_is_wrong
from .undefined import is_empty_op, run_twice, undefined_names

__all__ = ["BufferCheck", "DivergenceReport", "find_first_divergence", "divergence_in_graph", "less_accurate_op",
           "rounding_chain", "user_op_chain", "dynamo_target_name",
           "hooked_output_code",
           "collect_buffers", "has_cpp_wrapper", "python_wrapper_note"]

_PLUMBING_OPS = {"ops.load", "ops.store", "ops.index_expr", "ops.constant", "ops.indirect_indexing"}


@dataclass
class BufferCheck:
    """One compared buffer: the post-grad node it is named after and its eager counterpart."""

    node: str
    dynamo_node: str
    passed: bool
    max_abs_error: float = 0.0
    first_bad_index: Optional[list[int]] = None
    # Set when it matched at the accuracy rule's tolerance but is wrong at its own scale: its largest |eager|
    small_values: Optional[float] = None
    # Set for an input updated in place whose values matched but whose update is wrong at the
    # update's scale: the update's largest |eager change|
    small_update: Optional[float] = None


@dataclass
class DivergenceReport:
    """Where compiled and eager first disagree, down to kernel lines and source."""

    graph: str = ""
    checked: list[BufferCheck] = field(default_factory=list)
    diverging_node: Optional[str] = None  # the buffer's post-grad node
    kernel: Optional[str] = None
    culprit: Optional[str] = None  # the FX node whose code is wrong (after narrowing)
    culprit_target: str = ""
    culprit_module: str = ""  # its nn.Module as named_modules() names it, and its class (``layers.1 (GELU)``)
    probed: list[tuple[str, bool]] = field(default_factory=list)  # (node, diverges) compiled together
    # Nodes outside the writing kernel's lines among the candidates: upstream, no buffer showed them
    unseen_upstream: list[str] = field(default_factory=list)
    narrowed: list[tuple[str, bool]] = field(default_factory=list)  # (node, diverges alone)
    lines: list[KernelLine] = field(default_factory=list)  # the culprit's lines in the kernel
    note: str = ""
    build: str = ""  # which build was searched, when not the one judged (a C++ wrapper's Python-wrapper twin)
    undefined: list[str] = field(default_factory=list)  # buffers of memory no op wrote (torch.empty): not compared
    # When no node diverges alone: the shortest chain of the kernel's nodes ending at the diverging
    # one that diverges compiled together, each (node, its error in units of its tolerance); the
    # culprit is the chain's first node to differ from eager, ``amplifier`` the one past tolerance.
    chain: list[tuple[str, float]] = field(default_factory=list)
    amplifier: str = ""
    chain_lines: list[KernelLine] = field(default_factory=list)
    # Found by :func:`less_accurate_op`: (compiled's worst relative error against fp64, eager's)
    relative_errors: Optional[tuple[float, float]] = None
    # When the culprit is inside the torch.cond branch that ran: (the branch's name, its post-grad
    # subgraph, the eager values of its operands), in memory only: the graph a minifier can shrink.
    branch: Optional[tuple[str, torch.fx.GraphModule, list[Any]]] = field(default=None, compare=False, repr=False)
    # When every buffer matches its post-grad graph run eagerly: the first of the user's ops whose
    # value that graph gets wrong (:func:`user_op_chain`), its op, the post-grad node holding it, its line
    given_wrong: str = ""
    given_wrong_op: str = ""
    given_wrong_held_by: str = ""
    given_wrong_source: Optional[SourceLocation] = None

    @property
    def found(self) -> bool:
        return self.diverging_node is not None

    @property
    def key_lines(self) -> list[KernelLine]:
        """The culprit's compute lines (a chain's: every node's): loads and stores left out, and the
        braces and call parentheses of a C++ lambda block (``[&]()``, ``{``, ``}``, ``()``, ``;``:
        ``sign`` is written as one)."""
        lines = self.chain_lines or self.lines
        compute = [line for line in lines if not set(line.ir_ops) <= _PLUMBING_OPS] or lines
        return [line for line in compute if any(c.isalnum() for c in line.text)] or compute

    def _undefined_line(self) -> list[str]:
        if not self.undefined:
            return []
        return [f"not compared: {', '.join(self.undefined[:5])}{' ...' if len(self.undefined) > 5 else ''}, values "
                "two eager replays with one seed do not agree on (memory an empty-family op returned and no op "
                "wrote, or a nondeterministic op)"]

    def _given_wrong_line(self) -> list[str]:
        if not self.given_wrong:
            return []
        where = f" at {self.given_wrong_source.cited()}" if self.given_wrong_source else ""
        return [f"the first of the user's ops that graph computes otherwise than eager, past its tolerance: "
                f"{self.given_wrong} ({self.given_wrong_op}){where}; its value is post-grad node "
                f"{self.given_wrong_held_by}'s"]

    def render(self) -> str:
        searched = [self.build] if self.build else []
        if not self.found:
            if not self.checked and self.note:
                return "\n".join([*searched, f"no buffer compared: {self.note}"])
            return "\n".join([*searched, f"no diverging buffer: all {len(self.checked)} compared buffers match eager"
                               + (f" ({self.note})" if self.note else ""), *self._undefined_line(),
                               *self._given_wrong_line()])
        first = next(c for c in self.checked if not c.passed)
        where = (f", updated wrongly at the update's own scale (eager changed it by at most {first.small_update:.3g}, "
                 "where the tolerance on its values passes any error of the update)" if first.small_update is not None
                 else f" at {first.first_bad_index}" if first.small_values is None else
                 f", wrong at its own scale (every |value| under {first.small_values:.3g}, where the absolute "
                 "tolerance passes any error)")
        out = [
            *searched,
            f"first diverging buffer: {self.diverging_node} (Dynamo node {first.dynamo_node}) in graph {self.graph}, "
            f"max abs err {first.max_abs_error:.3g}{where}; "
            f"{sum(c.passed for c in self.checked)} buffer(s) before it match eager"
        ] if self.relative_errors is None else [
            *searched,
            f"first op less accurate than eager's: {self.diverging_node} (Dynamo node {first.dynamo_node}) in graph "
            f"{self.graph}, {self.relative_errors[0]:.3g} off fp64 in relative terms where eager is "
            f"{self.relative_errors[1]:.3g} off, each op compiled alone on eager's inputs"
        ]
        if self.kernel:
            out.append(f"  written by kernel {self.kernel}")
        if self.probed:
            first_bad = next((node for node, diverges in self.probed if diverges), None)
            unseen = {name for name, _ in self.probed} & set(self.unseen_upstream)
            whose = (f"its {len(self.probed)} nodes" if not unseen else
                     f"{len(self.probed)} nodes (its own, and {len(unseen)} before it that no buffer showed)")
            out.append(f"  {whose} compiled together, each value an output: "
                       + (f"{first_bad} diverges first" if first_bad else "none diverges"))
        for node, diverges in self.narrowed:
            out.append(f"  {node} compiled alone: {'DIVERGES' if diverges else 'matches eager'}")
        if self.chain:
            steps = " -> ".join(f"{node} ({used:.2g}x tol)" for node, used in self.chain)
            out.append(f"  no node diverges alone; these diverge compiled together, each value's error in units of "
                       f"its tolerance: {steps}")
            out.append(f"  the difference starts at {self.culprit} and {self.amplifier} amplifies it past the tolerance"
                       if self.amplifier and self.amplifier != self.culprit else
                       f"  the difference starts at {self.culprit}")
        if self.culprit:
            module = f" in module {self.culprit_module}" if self.culprit_module else ""
            out.append(f"  culprit: {self.culprit} ({self.culprit_target}){module}")
        shown: dict[str, int] = {}  # a line the kernel repeats (once per tensor of a foreach op) is shown once
        for line in self.key_lines:
            source = (
                f"{line.source.code}  [{line.source.file.rsplit('/', 1)[-1]}:{line.source.line}]"
                if line.source
                else "?"
            )
            text = f"    {line.text.strip()}    <- {', '.join(line.ir_ops) or '?'} <- {source}"
            shown[text] = shown.get(text, 0) + 1
        out.extend(text + (f"  ({count} lines alike)" if count > 1 else "") for text, count in shown.items())
        if self.note:
            out.append(f"  note: {self.note}")
        return "\n".join(out)

    def __str__(self) -> str:
        return self.render()


class _EagerReplay(torch.fx.Interpreter):
    """Runs a post-grad graph eagerly, keeping every node's value as it was when computed.

    Post-grad reinplacing leaves graphs Inductor reads and eager cannot: an in-place foreach op
    (``_foreach_add_``) returns nothing in eager, yet its ``getitem`` users read the updated
    tensors (Inductor lowers it so). Such a call's value is its updated first argument here.
    A graph that updates tensors in place has each value copied when computed, so a later update
    does not change what an earlier node is compared with (the compiled code's buffers are
    copied when written, too). A node only Inductor's lowering can run (a oneDNN fusion freezing
    enables) takes its value from ``given``, the compiled code's buffers, widened to float64
    where its inputs were."""

    def __init__(self, graph: torch.fx.GraphModule, given: Optional[dict[str, Any]] = None) -> None:
        super().__init__(graph, garbage_collect_values=False)
        self.snapshot = any(updates_first_argument(node) for node in graph.graph.nodes)
        self.values: dict[str, Any] = {}
        self.given = given or {}

    def run_node(self, n: torch.fx.Node) -> Any:
        result = self._given(n) if lowered_only(n) else super().run_node(n)
        if result is None and updates_first_argument(n):
            result = self.fetch_args_kwargs_from_env(n)[0][0]
        self.values[n.name] = (result.detach().clone() if self.snapshot and isinstance(result, torch.Tensor)
                               else result)
        return result

    def _given(self, n: torch.fx.Node) -> Any:
        if n.name not in self.given:
            raise RuntimeError(f"{n.name} calls {getattr(n.target, '__module__', '?')}."
                               f"{getattr(n.target, '__name__', n.target)}, which only Inductor's lowering runs, and "
                               "the compiled code kept no buffer of its value")
        value = self.given[n.name].clone()
        inputs = [v for v in self.fetch_args_kwargs_from_env(n)[0] if isinstance(v, torch.Tensor)]
        if value.is_floating_point() and any(v.dtype == torch.float64 for v in inputs):
            value = value.to(torch.float64)  # the float64 referee's run: the compiled value, widened
        return value


def _views_down(node: Any) -> list[torch.fx.Node]:
    """``node`` and each node it is a view of (``slice``, ``select``, ``view`` of it ...), in turn,
    down to the first that is no view (a graph input, or the op that made the storage)."""
    chain: list[torch.fx.Node] = []
    while isinstance(node, torch.fx.Node):
        chain.append(node)
        schema = getattr(node.target, "_schema", None) if node.op == "call_function" else None
        alias = schema.returns[0].alias_info if schema is not None and schema.returns else None
        if alias is None or alias.is_write or not node.args:
            break
        node = node.args[0]
    return chain


def _viewed_input(node: Any, placeholders: set[torch.fx.Node]) -> Optional[torch.fx.Node]:
    """The graph input ``node`` is, or is a view of (``slice``, ``select``, ``view`` of it ...), or None."""
    chain = _views_down(node)
    return chain[-1] if chain and chain[-1] in placeholders else None


def _input_writers(graph: torch.fx.GraphModule) -> dict[str, str]:
    """{a graph input the graph updates in place, directly or through a view: the node that last
    updates it} (a ``copy_`` into it or into a slice of it, an in-place op on it, the ``getitem``
    of an in-place foreach op's item, or the foreach op when no ``getitem`` reads that item).
    The input is compared whole, as it is when the call returns, under that node's name."""
    placeholders = {n for n in graph.graph.nodes if n.op == "placeholder"}
    writers: dict[str, str] = {}
    for node in graph.graph.nodes:
        if not updates_first_argument(node):
            continue
        first = node.args[0]
        items = {user.args[1]: user.name for user in node.users
                 if user.target is operator.getitem and isinstance(user.args[1], int)}
        written = [(first, node.name)] if isinstance(first, torch.fx.Node) else [
            (item, items.get(index, node.name)) for index, item in enumerate(first)
        ] if isinstance(first, (list, tuple)) else []
        for item, writer in written:
            updated = _viewed_input(item, placeholders)
            if updated is not None:
                writers[updated.name] = writer
    return writers


def _written_later(graph: torch.fx.GraphModule) -> set[str]:
    """The nodes (not graph inputs) an in-place op of the graph writes after them, directly or
    through a view (``index_put_`` into ``zeros(...).expand(...)``, reinplaced): Inductor may fuse
    the write into the kernel that computes them, so their buffer holds the writer's value by the
    time it is read, never evidence against them. The writer's own value is compared."""
    written: set[str] = set()
    for node in graph.graph.nodes:
        if updates_first_argument(node) and node.args:
            written.update(n.name for n in _views_down(node.args[0]) if n.op != "placeholder")
    return written


def _eager_run(graph: torch.fx.GraphModule, args: list[Any], seed: int,
               given: Optional[dict[str, Any]] = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Every node's value in one seeded eager run, as it was when computed; and each input the
    graph updates, as it is at the end, under the name of its last writer (:func:`_input_writers`).
    ``given``: the values of nodes only Inductor's lowering can run (:class:`_EagerReplay`)."""
    replay = _EagerReplay(graph, given)
    copies = clone_inputs(args)
    run_seeded(lambda: replay.run(*copies), [], seed)
    placeholders = [n.name for n in graph.graph.nodes if n.op == "placeholder"]
    writers = _input_writers(graph)
    finals = {writers[name]: value.detach().clone() for name, value in zip(placeholders, copies)
              if name in writers and isinstance(value, torch.Tensor)}
    return replay.values, finals


def _eager_run_defined(graph: torch.fx.GraphModule, args: list[Any], seed: int, given: Optional[dict[str, Any]] = None
                       ) -> tuple[dict[str, Any], dict[str, Any], set[str]]:
    """:func:`_eager_run`, and the names of the values it gives that no op defines: the graph is
    replayed twice with one seed, an ``empty``-family op's results filled with two patterns, and a
    value that differs between the two depends on memory nothing wrote (:mod:`.undefined`) or on
    an op eager itself does not repeat: never evidence."""
    fill = any(is_empty_op(node.target) for node in graph.graph.nodes)
    (values, finals), (other_values, other_finals) = run_twice(lambda: _eager_run(graph, args, seed, given), fill)
    return values, finals, undefined_names({**values, **finals}, {**other_values, **other_finals})


class _NodeValues(torch.nn.Module):
    """A graph as a module whose call gives :func:`_eager_run`'s values, for
    :func:`~.accuracy.fp64_reference` to widen (its constants too) and run."""

    def __init__(self, graph: torch.fx.GraphModule, seed: int, given: Optional[dict[str, Any]] = None) -> None:
        super().__init__()
        self.graph_module, self.seed, self.given = graph, seed, given

    def forward(self, *args: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        return _eager_run(self.graph_module, list(args), self.seed, self.given)


def _fp64_run(graph: torch.fx.GraphModule, args: list[Any], seed: int,
              given: Optional[dict[str, Any]] = None) -> Optional[dict[str, Any]]:
    """Every node's value (and each updated input's, as :func:`_eager_run` names it) in a float64
    run of ``graph`` on float64 copies of ``args``, drawing the random numbers a run at the graph's
    own precision draws; None when some op has no float64 kernel or the draws differ."""
    result = fp64_reference(_NodeValues(graph, seed, given), args, seed)
    if result is None:
        return None
    values, finals = result
    return {**values, **finals}


_EQUALITY = {"eq": True, "ne": False}  # an exact tie reads True under eq, False under ne


def _ties_lost(graph: torch.fx.GraphModule, eager: dict[str, Any], fp64: dict[str, Any]) -> set[str]:
    """The nodes a float64 replay reaches through an exact float tie it lost: an ``eq`` (``ne``)
    true (false) in eager's run and not in the replay's. The replay widens the graph's inputs and
    recomputes the rest, so a value recomputed in float64 no longer equals the float32 one it was
    saved as (an ``amin``'s backward compares its input with the saved minimum, which is one of its
    elements by construction): from there the replay answers another question than eager's run and
    is no referee."""
    lost: list[torch.fx.Node] = []
    for node in graph.graph.nodes:
        packet = getattr(node.target, "overloadpacket", None)
        tie = _EQUALITY.get(getattr(packet, "__name__", ""))
        before, after = eager.get(node.name), fp64.get(node.name)
        if tie is None or not isinstance(before, torch.Tensor) or not isinstance(after, torch.Tensor) \
                or before.dtype != torch.bool or after.shape != before.shape:
            continue
        if bool(((before == tie) & (after != tie)).any()):
            lost.append(node)
    reached: set[str] = set()
    while lost:
        node = lost.pop()
        if node.name not in reached:
            reached.add(node.name)
            lost.extend(node.users)
    return reached


def _differs(compiled: Any, eager: Any, fp64: Any, tol: Optional[float]) -> bool:
    """``compiled`` differs from ``eager``: by the accuracy rule, or, a tensor the rule passes only
    because its values are small, at their own scale (:func:`~.accuracy.wrong_at_its_own_scale`)."""
    if not compare_outputs(compiled, eager, tol=tol).passed:
        return True
    return (isinstance(compiled, torch.Tensor) and isinstance(eager, torch.Tensor)
            and wrong_at_its_own_scale(compiled, eager, fp64, tol))


def _probe_module(nodes: list[torch.fx.Node]) -> tuple[torch.fx.GraphModule, list[torch.fx.Node]]:
    """A graph computing ``nodes`` (in graph order) from their other inputs, every node an output.

    The ``getitem`` of a tuple-valued member (``var_mean``'s halves) is computed inside too; any
    other input is a placeholder, fed its eager value."""
    members = set(nodes)

    def inside(value: torch.fx.Node) -> bool:
        return value in members or (value.op == "call_function" and value.target is operator.getitem
                                    and value.args[0] in members)

    graph = torch.fx.Graph()
    inputs: list[torch.fx.Node] = []
    mapping: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in nodes:  # placeholders first, in order of first use
        for value in node.all_input_nodes:
            if not inside(value) and value not in mapping:
                mapping[value] = graph.placeholder(f"in_{len(inputs)}")
                inputs.append(value)
    for node in nodes[0].graph.nodes:
        if node in members or (inside(node) and node not in mapping):
            mapping[node] = graph.node_copy(node, lambda value: mapping[value])
            functional = out_of_place_target(node) if updates_first_argument(node) else None
            if functional is not None:  # its eager value is its updated first argument: the variant's result
                mapping[node].target = functional
    graph.output(tuple(mapping[node] for node in nodes))
    return torch.fx.GraphModule(torch.nn.Module(), graph), inputs


def _compiled_result(module: torch.fx.GraphModule, inputs: list[torch.fx.Node], values: dict[str, Any], seed: int,
                     options: dict[str, Any]) -> Any:
    """``module`` compiled by Inductor and run on the eager values of ``inputs``: with symbolic sizes
    when any input had one in the graph searched (a build with dynamic shapes: a bug only its
    symbolic sizes show must show here too), else specialised to the values' sizes, as that build
    was. Where the symbolic compile raises, the specialised one answers (what the probe said
    before it knew symbolic sizes: never a node blamed for a compile only this probe asked for)."""
    arguments = [values[i.name] for i in inputs]
    if _takes_symbolic_sizes(inputs):
        torch.compiler.reset()
        try:
            return run_seeded(torch.compile(module, backend="inductor", options=options, dynamic=True), arguments,
                              seed)
        except Exception:  # noqa: BLE001 - the specialised compile below decides
            pass
    torch.compiler.reset()
    return run_seeded(torch.compile(module, backend="inductor", options=options), arguments, seed)


def _probe_fp64(module: torch.fx.GraphModule, inputs: list[torch.fx.Node], values: dict[str, Any],
                seed: int) -> Optional[list[Any]]:
    """``module`` run in float64 on float64 copies of the eager values of ``inputs`` (its outputs), or
    None where it cannot be (no float64 kernel, other random draws)."""
    result = fp64_reference(module, [values[i.name] for i in inputs], seed)
    return list(result) if isinstance(result, (tuple, list)) else None


def _takes_symbolic_sizes(inputs: list[torch.fx.Node]) -> bool:
    """Whether any of ``inputs`` had a symbolic size (or was a symbolic integer) where it was traced."""
    for node in inputs:
        value = node.meta.get("val")
        if isinstance(value, torch.SymInt) or (
                isinstance(value, torch.Tensor) and any(isinstance(size, torch.SymInt) for size in value.shape)):
            return True
    return False


def _diverges_alone(node: torch.fx.Node, values: dict[str, Any], seed: int, tol: Optional[float],
                    options: dict[str, Any]) -> bool:
    """``node`` compiled alone on eager inputs differs from eager (or fails to compile or run)."""
    module, inputs = _probe_module([node])
    try:
        (result,) = _compiled_result(module, inputs, values, seed, options)
    except Exception:  # noqa: BLE001 - compiling alone failed: it is at fault on its own
        return True
    (fp64,) = _probe_fp64(module, inputs, values, seed) or (None,)
    return _differs(result, values[node.name], fp64, tol)


def _probe(candidates: list[torch.fx.Node], values: dict[str, Any], seed: int, tol: Optional[float],
           options: dict[str, Any]) -> list[tuple[str, bool]]:
    """Each candidate and whether its value diverges when all are compiled together (one compile);
    empty when that compile or run fails."""
    try:
        module, inputs = _probe_module(candidates)
        results = _compiled_result(module, inputs, values, seed, options)
    except Exception:  # noqa: BLE001 - the probe is a shortcut: without it, one compile per node
        return []
    if not isinstance(results, (tuple, list)) or len(results) != len(candidates):
        return []
    references = _probe_fp64(module, inputs, values, seed) or [None] * len(candidates)
    return [(node.name, _differs(result, values[node.name], fp64, tol))
            for node, result, fp64 in zip(candidates, results, references)]


def _narrow(report: DivergenceReport, graph: GraphCapture, diverging: str, kernel_nodes: list[str],
            values: dict[str, Any], seed: int, tol: Optional[float], options: dict[str, Any]) -> Optional[str]:
    """The culprit among the kernel's nodes that feed ``diverging``, the probe's and each node's
    verdicts recorded in ``report``; when none diverges alone, the chain that diverges together
    (``report.chain``) and its first node to differ, or None."""
    post_grad = graph.post_grad_graph
    nodes = {n.name: n for n in post_grad.graph.nodes}
    target = nodes[diverging]
    ancestors = _ancestors(target) | {target}
    candidates = [n for n in post_grad.graph.nodes if n.name in kernel_nodes and n in ancestors
                  and n.op == "call_function" and n.target is not operator.getitem]
    found, report.probed, report.narrowed, report.note = _culprit_among(candidates, values, seed, tol, options)
    if found is not None or len(candidates) < 2:
        return found
    chain = _diverging_chain(candidates, values, seed, tol, options)
    if chain is None:
        report.note += ": nor do they together, on eager inputs (a fusion or scheduling bug?)"
        return None
    report.note = ""
    report.chain = [(name, used) for name, used, _ in chain]
    report.amplifier = next((name for name, used, _ in chain if used > 1.0), "")
    return next((name for name, _, differs in chain if differs), chain[0][0])


_Narrowed = tuple[Optional[str], list[tuple[str, bool]], list[tuple[str, bool]], str]


def _chain_errors(chain: list[torch.fx.Node], values: dict[str, Any], seed: int, tol: Optional[float],
                  options: dict[str, Any]) -> Optional[list[tuple[str, float, bool]]]:
    """``chain`` compiled together on eager inputs: each node's (name, error in units of its
    tolerance, whether it differs from eager at all); None when the compile or run fails."""
    try:
        module, inputs = _probe_module(chain)
        results = _compiled_result(module, inputs, values, seed, options)
    except Exception:  # noqa: BLE001 - no chain from this start
        return None
    if not isinstance(results, (tuple, list)) or len(results) != len(chain):
        return None
    errors = []
    for node, result in zip(chain, results):
        eager = values[node.name]
        if isinstance(result, torch.Tensor) and isinstance(eager, torch.Tensor):
            comparison = compare_outputs(result, eager, tol=tol).outputs[0]
            # an integer or bool value (a mask) has no tolerance: any element off is past it
            used = comparison.tolerance_used if comparison.tolerance is not None else (
                0.0 if comparison.passed else math.inf)
            errors.append((node.name, used, comparison.unequal > 0 or not comparison.passed))
        else:
            errors.append((node.name, 0.0, False))
    return errors


def _diverging_chain(candidates: list[torch.fx.Node], values: dict[str, Any], seed: int, tol: Optional[float],
                     options: dict[str, Any]) -> Optional[list[tuple[str, float, bool]]]:
    """The shortest chain of ``candidates`` (in graph order, the diverging node last) ending at the
    last that makes it diverge compiled together, found by bisecting its start; each node's
    :func:`_chain_errors`. None when even all of them together match eager."""
    def diverges(start: int) -> Optional[list[tuple[str, float, bool]]]:
        errors = _chain_errors(candidates[start:], values, seed, tol, options)
        return errors if errors is not None and errors[-1][1] > 1.0 else None

    found = diverges(0)
    if found is None:
        return None
    low, high = 0, len(candidates) - 1  # the chain from ``low`` diverges; the last node alone does not
    while high - low > 1:
        middle = (low + high) // 2
        errors = diverges(middle)
        if errors is not None:
            low, found = middle, errors
        else:
            high = middle
    return found


def _culprit_among(candidates: list[torch.fx.Node], values: dict[str, Any], seed: int, tol: Optional[float],
                   options: dict[str, Any]) -> _Narrowed:
    """The first of ``candidates`` (in graph order) that diverges compiled alone on eager inputs,
    found by one probe compiling them all together when there are three or more: (culprit, the
    probe's verdicts, the nodes compiled alone and their verdicts, a note)."""
    nodes = {n.name: n for n in candidates}
    # Two compiles (the probe, the confirmation) beat one per node from three nodes on.
    probed = _probe(candidates, values, seed, tol, options) if len(candidates) > 2 else []
    tried: list[tuple[str, bool]] = []
    first_bad = next((name for name, diverges in probed if diverges), None)
    if first_bad is not None:
        diverges = _diverges_alone(nodes[first_bad], values, seed, tol, options)
        tried.append((first_bad, diverges))
        if diverges:
            return first_bad, probed, tried, ""
    for node in candidates:
        if node.name == first_bad:
            continue  # compiled alone above
        diverges = _diverges_alone(node, values, seed, tol, options)
        tried.append((node.name, diverges))
        if diverges:
            return node.name, probed, tried, ""
    return None, probed, tried, "no node of the kernel diverges alone"


def _branch_taken(post_grad: torch.fx.GraphModule, name: str, eager: dict[str, Any]
                  ) -> Optional[tuple[str, str, torch.fx.GraphModule, list[Any]]]:
    """When node ``name`` is an output of a ``torch.cond`` or a ``while_loop`` (one of its items),
    the subgraph that ran: the cond's branch taken, or the loop's body (on the loop's inputs: its
    first iteration): ("cond" or "while_loop", its attribute name, the subgraph, its operands'
    eager values); else None."""
    nodes = {n.name: n for n in post_grad.graph.nodes}
    node = nodes.get(name)
    if node is not None and node.op == "call_function" and node.target is operator.getitem:
        node = node.args[0]
    if not (isinstance(node, torch.fx.Node) and node.op == "call_function"):
        return None
    if node.target is getattr(torch.ops.higher_order, "cond", None) and len(node.args) >= 4:
        kind = "cond"
        predicate, on_true, on_false, operands = node.args[:4]
        taken = eager.get(predicate.name) if isinstance(predicate, torch.fx.Node) else predicate
        if taken is None:
            return None
        branch = on_true if bool(taken) else on_false
    elif node.target is getattr(torch.ops.higher_order, "while_loop", None) and len(node.args) >= 4:
        kind = "while_loop"
        _, branch, carried, additional = node.args[:4]
        operands = [*carried, *additional]  # the body's placeholders: the carried values, then the rest
    else:
        return None
    subgraph = getattr(post_grad, str(branch.target), None) if isinstance(branch, torch.fx.Node) else None
    if not isinstance(subgraph, torch.fx.GraphModule):
        return None
    values = [eager.get(o.name) if isinstance(o, torch.fx.Node) else o for o in operands]
    return kind, str(branch.target), subgraph, values


def _explain_branch(report: DivergenceReport, graph: GraphCapture, name: str, eager: dict[str, Any], seed: int,
                    tol: Optional[float], options: Optional[dict[str, Any]]) -> bool:
    """The diverging buffer is a ``torch.cond``'s or a ``while_loop``'s output: compare the nodes of
    the branch that ran, or of the loop's body on its first iteration (replayed eagerly on the
    operands' eager values) to name the culprit inside it; False when ``name`` is no such output."""
    taken = _branch_taken(graph.post_grad_graph, name, eager)
    if taken is None:
        return False
    kind, branch, subgraph, operands = taken
    report.diverging_node = name
    report.note = (f"it is the output of torch.cond: its branch {branch} ran, and the culprit is looked for inside it"
                   if kind == "cond" else f"it is the output of a while_loop: the culprit is looked for inside its "
                   f"body {branch}, run on the loop's inputs (its first iteration)")
    if options is None:
        report.culprit = name
        return True
    values, _ = _eager_run(subgraph, operands, seed)

    def calls_a_subgraph(node: torch.fx.Node) -> bool:  # a nested cond, a loop
        return any(a.op == "get_attr" and isinstance(getattr(subgraph, str(a.target), None), torch.fx.GraphModule)
                   for a in node.all_input_nodes)

    candidates = [n for n in subgraph.graph.nodes if n.op == "call_function" and n.target is not operator.getitem
                  and not calls_a_subgraph(n)]
    found, probed, tried, note = _culprit_among(candidates, values, seed, tol, options)
    report.probed = [(f"{branch}.{node}", diverges) for node, diverges in probed]
    report.narrowed = [(f"{branch}.{node}", diverges) for node, diverges in tried]
    if found is None:
        report.culprit = name
        report.note += f"; no node of {branch} diverges alone"
        return True
    culprit = f"{branch}.{found}"
    report.branch = (branch, subgraph, operands)
    report.kernel = next((k.name for k in graph.kernels if any(culprit in line.fx_nodes for line in k.lines)), None)
    _name_culprit(report, graph, culprit, op=str(next(n.target for n in candidates if n.name == found)))
    return True


def _name_culprit(report: DivergenceReport, graph: GraphCapture, culprit: str, op: str = "") -> None:
    """Set ``report``'s culprit, its op (``op`` when the capture does not know the node), and its
    lines in ``report.kernel``."""
    report.culprit = culprit
    report.culprit_target = graph.nodes[culprit].target if culprit in graph.nodes else op
    report.culprit_module = node_module(graph.nodes.get(culprit))
    if report.kernel is not None:
        report.lines = [line for line in graph.kernel(report.kernel).lines if culprit in line.fx_nodes]


def _unseen_upstream(graph: GraphCapture, name: str, compared: set[str]) -> list[str]:
    """The nodes ``name`` is computed from whose values the search never compared: up from its
    inputs, through every node no buffer showed, to the compared ones and the graph's inputs. Such a
    value lives in registers of the kernel that writes ``name``, or in a buffer that holds no node's
    value (an extern op's input realized in its layout: ``view_as_complex`` after a fused ``exp``),
    and may be the wrong one. Views are looked through, not listed: they compute nothing."""
    post_grad = graph.post_grad_graph
    target = next((n for n in post_grad.graph.nodes if n.name == name), None) if post_grad is not None else None
    if target is None:
        return []
    seen: list[str] = []
    stack = list(target.all_input_nodes)
    visited: set[torch.fx.Node] = set()
    while stack:
        node = stack.pop()
        if node in visited or node.op != "call_function" or node.name in compared or lowered_only(node):
            continue  # a node only Inductor's lowering runs: its value is the compiled code's own
        visited.add(node)
        if not getattr(node.target, "is_view", False):  # a view computes nothing: looked through
            seen.append(node.name)
        stack.extend(node.all_input_nodes)
    return seen


def _ancestors(node: torch.fx.Node) -> set[torch.fx.Node]:
    seen: set[torch.fx.Node] = set()
    stack = list(node.all_input_nodes)
    while stack:
        current = stack.pop()
        if current not in seen:
            seen.add(current)
            stack.extend(current.all_input_nodes)
    return seen


_BUFFER = re.compile(r"\bbuf\d+\b")


def _launches(graph: GraphCapture) -> dict[int, KernelInfo]:
    """{output-code line: kernel} for every kernel launch and extern call (its own line) in ``call()``."""
    return {n: k for k in graph.kernels for n in k.call_lines}


def _named_buffers(graph: GraphCapture, text: str) -> list[str]:
    """The graph's buffers a statement names, read or written, in order."""
    return [b for b in dict.fromkeys(_BUFFER.findall(text)) if b in graph.buffers]


_STORES = {"ops.store", "ops.store_reduction"}
# A buffer the wrapper takes out of a tuple of outputs (an extern's, a torch.cond's): ``buf4 = buf3[0]``.
_UNPACKED = re.compile(r"^\s*(buf\d+)\s*=\s*buf\d+\[\d+\]\s*$")
# The buffers an extern call writes: its ``out=``, the name it assigns, or the first argument of
# an in-place op (``aten.scatter_reduce_.two(buf7, ...)``); the other buffers it names it reads.
_EXTERN_OUTPUT = re.compile(r"\bout=\(?(buf\d+)|^\s*(buf\d+)\s*=|\w_(?:\.\w+)?\((buf\d+)\b")


# A generated kernel's parameters: C++ ``kernel(float* in_out_ptr0, const float* in_ptr0)``,
# Triton ``def triton_poi_fused_add_0(in_out_ptr0, in_ptr0, xnumel, XBLOCK : tl.constexpr)``.
_SIGNATURE = re.compile(r"(\bkernel|\bdef\s+\w+)\s*\(([^)]*)\)")
_WRITTEN_PARAMETER = re.compile(r"^(?:in_)?out_ptr\d+$")


def _top_level_arguments(text: str, name: str) -> Optional[list[str]]:
    """The positional arguments of the call of ``name`` (``name(...)`` or ``name.run(...)``) on
    ``text``, split at top-level commas; None when the line holds no such call."""
    match = re.search(rf"\b{re.escape(name)}(?:\.run)?\(", text)
    if match is None:
        return None
    arguments, depth, current = [], 0, ""
    for char in text[match.end():]:
        if char in "([{":
            depth += 1
        elif char in ")]}":
            if depth == 0:
                break
            depth -= 1
        if char == "," and depth == 0:
            arguments.append(current.strip())
            current = ""
            continue
        current += char
    if current.strip():
        arguments.append(current.strip())
    return [a for a in arguments if not re.match(r"^\w+\s*=(?!=)", a)]  # keywords (stream=) are not parameters


def _written_arguments(kernel: KernelInfo, text: str) -> Optional[set[str]]:
    """The buffers a launch of generated ``kernel`` on line ``text`` passes as its outputs
    (``out_ptr``/``in_out_ptr`` parameters); None when the signature or the call cannot be read."""
    signature = _SIGNATURE.search(kernel.source)
    arguments = _top_level_arguments(text, kernel.name)
    if signature is None or arguments is None:
        return None
    # Python: the name comes first (``XBLOCK : tl.constexpr``); C++: last (``at::BFloat16* out_ptr0``)
    python = signature.group(1).startswith("def")
    parameters = [re.findall(r"\w+", p)[0 if python else -1] for p in signature.group(2).split(",") if p.strip()]
    if len(arguments) > len(parameters) or not any(_WRITTEN_PARAMETER.match(p) for p in parameters):
        return None  # read wrong: every generated kernel writes something
    return {b for parameter, argument in zip(parameters, arguments) if _WRITTEN_PARAMETER.match(parameter)
            for b in _BUFFER.findall(argument)}


def _buffers_written(graph: GraphCapture, kernel: KernelInfo, text: str, passed: list[str]) -> list[str]:
    """Of the buffers ``passed`` to a launch of ``kernel`` on line ``text``, those it leaves holding
    their own FX node's value: an extern call's outputs; a generated kernel's buffers passed as its
    outputs whose nodes its store lines store (whose nodes are among its lines' when no line is
    tagged as a store). One kernel can serve several launches (the same block's code, deduplicated):
    its lines carry every launch's nodes, so a buffer another launch wrote, read by this one, is not
    taken for one this launch writes."""
    if kernel.kind == "extern":
        outputs = {name for match in _EXTERN_OUTPUT.finditer(text) for name in match.groups() if name}
        return [b for b in passed if b in outputs]
    stored = {n for line in kernel.lines if _STORES & set(line.ir_ops) for n in line.fx_nodes}
    if not stored:
        stored = {n for line in kernel.lines for n in line.fx_nodes}
    written = _written_arguments(kernel, text)
    return [b for b in passed if graph.buffers[b] in stored and (written is None or b in written)]


def _final_writes(graph: GraphCapture) -> dict[str, tuple[int, str]]:
    """{buffer: (output-code line, kernel)} of the statement after which the buffer holds its FX
    node's value: the last launch that writes that value into it.

    A node can take several statements: a scatter's buffer is zeroed by a fused kernel, then
    filled by an in-place fallback (``aten.scatter_reduce_.two(buf7, ...)``); its value after the
    first is not the node's. A later launch that only reads the buffer does not count. A buffer
    that no launch writes, when no generated kernel computes its node (the wrapper made it: an
    item of an extern's or a ``torch.cond``'s outputs, ``buf4 = buf3[0]``), is read on the line that
    unpacks it, else at the first launch that passes it (before what that launch writes), and left
    out otherwise: Inductor can name a buffer after a node it then computes only in registers, the
    buffer holding another node's value (a log-softmax's ``log`` buffer, reused in place, holds the
    sum of exponentials). ``kernel`` is "" for an unpacking line."""
    lines = graph.output_code.splitlines()
    in_kernels = {n for k in graph.kernels if k.kind != "extern" for line in k.lines for n in line.fx_nodes}
    written: dict[str, tuple[int, str]] = {}
    first_passed: dict[str, tuple[int, str]] = {}
    for number, kernel in sorted(_launches(graph).items()):
        text = lines[number - 1]
        passed = _named_buffers(graph, text)
        for buffer in passed:
            first_passed.setdefault(buffer, (number, kernel.name))
        for buffer in _buffers_written(graph, kernel, text, passed):
            written[buffer] = (number, kernel.name)
    unpacked = {match.group(1): (number, "") for number, text in enumerate(lines, start=1)
                if (match := _UNPACKED.match(text)) and match.group(1) in graph.buffers}
    final: dict[str, tuple[int, str]] = {}
    for buffer in graph.buffers:  # read before what the same launch writes
        if buffer not in written and graph.buffers[buffer] not in in_kernels:
            launch = unpacked.get(buffer) or first_passed.get(buffer)
            if launch is not None:
                final[buffer] = launch
    final.update(written)
    return final


def buffer_writers(graph: GraphCapture) -> dict[str, str]:
    """{FX node: the kernel whose launch completes its buffer} (see :func:`_final_writes`); an
    input the graph updates in place counts as its last writer's buffer, completed by the last
    launch that names the input."""
    writers = {graph.buffers[buffer]: kernel for buffer, (_, kernel) in _final_writes(graph).items() if kernel}
    if graph.post_grad_graph is not None:
        lines = graph.output_code.splitlines()
        launches = sorted(_launches(graph).items())
        for placeholder, node in _input_writers(graph.post_grad_graph).items():
            named = re.compile(rf"\b{re.escape(placeholder)}\b")
            last = [kernel.name for number, kernel in launches if named.search(lines[number - 1])]
            if last:
                writers.setdefault(node, last[-1])
    return writers


def hooked_output_code(graph: GraphCapture) -> str:
    """``graph.output_code`` with a ``run_intermediate_hooks`` call after the statement that
    completes each buffer (see :func:`_final_writes`)."""
    lines = graph.output_code.splitlines()
    insert: dict[int, list[str]] = {}
    for buffer, (number, _) in sorted(_final_writes(graph).items(), key=lambda item: item[1][0]):
        text = lines[number - 1]
        indent = text[: len(text) - len(text.lstrip())]
        insert.setdefault(number, []).append(f"{indent}run_intermediate_hooks({graph.buffers[buffer]!r}, {buffer})")
    out = [IMPORT_LINE]
    for number, text in enumerate(lines, start=1):
        out.append(text)
        out.extend(insert.get(number, []))
    return "\n".join(out) + "\n"


def _load_module(source: str, name: str) -> types.ModuleType:
    """``source`` run as a module; its lines reach tracebacks through ``linecache``, not through a
    file (a search runs many of them, and a file per run would be left behind)."""
    module = types.ModuleType(name)
    path = f"<{name}>"
    linecache.cache[path] = (len(source), None, source.splitlines(keepends=True), path)
    module.__file__ = path
    exec(compile(source, path, "exec"), module.__dict__)  # noqa: S102 - Inductor's own generated code
    return module


def collect_buffers(graph: GraphCapture, args: list[Any], seed: int = 0) -> dict[str, torch.Tensor]:
    """Run a hooked copy of ``graph``'s output code on ``args``, the RNG seeded to ``seed`` as for
    the eager run it is compared with (dropout draws the same numbers: the graph is compiled with
    ``fallback_random``); return {FX node: buffer value}."""
    module = _load_module(hooked_output_code(graph), f"ib_hooked_{graph.index}")
    # what Inductor set on the module it loaded: frozen parameters, under freezing the oneDNN-packed weights
    unset = [name for name, value in vars(module).items() if value is None and not name.startswith("__")]
    for name, value in loaded_constants(graph.compiled, unset).items():
        setattr(module, name, value)
    buffers: dict[str, torch.Tensor] = {}
    placeholders = [n.name for n in graph.post_grad_graph.graph.nodes if n.op == "placeholder"]
    updated = _input_writers(graph.post_grad_graph)

    def keep(name: str, value: Any) -> None:
        if isinstance(value, torch.Tensor) and name not in buffers:
            buffers[name] = value.detach().clone()

    def call(*call_args: Any) -> Any:
        result = module.call(list(call_args))  # empties the list it is given, not call_args
        for placeholder, value in zip(placeholders, call_args):  # inputs it updated, whole, when it is done
            if placeholder in updated and isinstance(value, torch.Tensor):
                buffers[updated[placeholder]] = value.detach().clone()
        return result

    with intermediate_hook(keep):
        run_seeded(call, args, seed)
    return buffers


def has_cpp_wrapper(graph: GraphCapture) -> bool:
    """Whether ``graph`` was built with a C++ wrapper (``cpp_wrapper=True``), whose buffers the
    search cannot read."""
    return bool(graph.output_code) and is_cpp_wrapper(graph.output_code.splitlines())


@judged_as_written
def find_first_divergence(fn: Callable[..., Any], *inputs: Any, options: Optional[dict[str, Any]] = None,
                          tol: Optional[float] = None, seed: int = 0, narrow: bool = True) -> DivergenceReport:
    """Compile ``fn`` with the instrumented backend and find the first buffer that disagrees with eager.

    Runs under ``torch.no_grad()`` (inference graphs), each graph replayed on the arguments of
    its first compiled call (module attributes AOTAutograd lifts included). ``narrow`` compiles
    the nodes of the diverging kernel one by one to name the culprit node and its kernel lines.
    Graphs built with a C++ wrapper (``cpp_wrapper=True``) are searched in their Python-wrapper
    build, whose kernels are generated alike (``report.build`` says so).
    """
    compile_options = {"fallback_random": True, **(options or {})}
    report, graphs = _first_divergence(fn, inputs, compile_options, tol, seed, narrow)
    wrapped = list(dict.fromkeys(g.label for g in graphs if has_cpp_wrapper(g)))
    if report.found or not wrapped:
        return report
    report, graphs = _first_divergence(fn, inputs, {**compile_options, "cpp_wrapper": False}, tol, seed, narrow)
    report.build = python_wrapper_note(wrapped)
    return report


def python_wrapper_note(labels: "list[str]", *, fails_alike: bool = False) -> str:
    """What a report says when it searched the Python-wrapper build of the graphs ``labels``
    (``fails_alike``: that build was judged first and fails as the C++ wrapper's did)."""
    alike = ", which fails alike" if fails_alike else ""
    return (f"searched in the Python-wrapper build (cpp_wrapper=False) of the same graphs ({', '.join(labels)})"
            f"{alike}: the search reads buffers through a Python wrapper, and both builds generate the same kernels")


def _first_divergence(fn: Callable[..., Any], inputs: tuple[Any, ...], compile_options: dict[str, Any],
                      tol: Optional[float], seed: int, narrow: bool) -> tuple[DivergenceReport, list[GraphCapture]]:
    """:func:`find_first_divergence` for one build: (the report, every graph it compiled)."""
    from ..capture.backend import compiles_instrumented, instrumented, keep_call_args
    from ..capture.registry import capture

    calls: list[tuple[list[GraphCapture], list[Any]]] = []

    @compiles_instrumented
    def backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        with capture() as session:  # not an index into captures(): that list keeps only the newest 100
            compiled = instrumented(gm, example_inputs, options=compile_options)
        graph_captures = list(session.graphs)

        def run(*args: Any) -> Any:
            calls.append((graph_captures, clone_inputs(args)))
            return compiled(*args)

        return run

    torch.compiler.reset()
    with keep_call_args():
        run_seeded(torch.compile(fn, backend=backend), inputs, seed)
    torch.compiler.reset()
    report = DivergenceReport()
    for graph_captures, args in calls:
        graph = next((g for g in graph_captures if g.kind in ("inference", "forward") and g.output_code), None)
        # the compiled graph's own arguments: the Dynamo call's, after the attributes AOTAutograd lifts
        # (optimizer state, frozen parameters)
        if graph is not None and divergence_in_graph(graph, graph.call_args if graph.call_args is not None else args,
                                                     report, seed=seed, tol=tol,
                                                     narrow_options=compile_options if narrow else None):
            break
    else:
        if not report.checked and not report.note:
            report.note = "no buffer could be compared"
    return report, [g for graph_captures, _ in calls for g in graph_captures]


# At most this many nodes are compiled together in the search for an op less accurate than eager's
LESS_ACCURATE_NODES = 400


@autocast_off()
def less_accurate_op(graph: GraphCapture, args: list[Any], report: DivergenceReport, *, seed: int = 0,
                     tol: Optional[float] = None, options: Optional[dict[str, Any]] = None) -> bool:
    """For outputs that pass against fp64 only because eager is as far off there (an ill-conditioned
    output: a reciprocal near a zero crossing): the first node of ``graph``'s post-grad graph whose
    compiled value, every node compiled together on the eager values of the graph's inputs, is
    relatively less accurate than eager's (:func:`~.accuracy.relative_error_beyond_eager`),
    confirmed compiled alone. Fills ``report`` and returns True when there is one."""
    post_grad = graph.post_grad_graph
    if post_grad is None or has_cpp_wrapper(graph) or options is None:
        return False
    nodes = [n for n in post_grad.graph.nodes if n.op == "call_function" and n.target is not operator.getitem
             and isinstance(n.meta.get("val"), torch.Tensor) and n.meta["val"].is_floating_point()]
    if not nodes or len(nodes) > LESS_ACCURATE_NODES:
        return False
    try:
        values, _, undefined = _eager_run_defined(post_grad, args, seed)
        module, inputs = _probe_module(nodes)
        results = _compiled_result(module, inputs, values, seed, options)
        references = _probe_fp64(module, inputs, values, seed)
    except Exception:  # noqa: BLE001 - the verdict stands without this search
        return False
    if references is None or not isinstance(results, (tuple, list)) or len(results) != len(nodes):
        return False
    for node, result, fp64 in zip(nodes, results, references):
        if node.name in undefined or relative_error_beyond_eager(result, values[node.name], fp64, tol) is None:
            continue  # a value two eager replays disagree on is never evidence
        alone, alone_inputs = _probe_module([node])
        try:
            (compiled_alone,) = _compiled_result(alone, alone_inputs, values, seed, options)
            (fp64_alone,) = _probe_fp64(alone, alone_inputs, values, seed) or (None,)
        except Exception:  # noqa: BLE001 - not confirmed
            continue
        found = relative_error_beyond_eager(compiled_alone, values[node.name], fp64_alone, tol)
        if found is None:
            continue
        report.graph, report.diverging_node = graph.label, node.name
        report.kernel = buffer_writers(graph).get(node.name) or next(
            (k.name for k in graph.kernels if any(node.name in line.fx_nodes for line in k.lines)), None)
        roots = graph.nodes[node.name].dynamo_nodes if node.name in graph.nodes else []
        report.checked.append(BufferCheck(node.name, ", ".join(roots), False, 0.0, None))
        report.relative_errors = found
        report.note = ("the outputs pass against fp64 only because eager is as far off there: they are "
                       "ill-conditioned where compiled and eager differ, and amplify this op's error")
        _name_culprit(report, graph, node.name)
        return True
    return False


def rounding_chain(graph: GraphCapture, args: list[Any], *, seed: int = 0, tol: Optional[float] = None,
                   options: Optional[dict[str, Any]] = None) -> list[tuple[str, float]]:
    """Where compiled and eager part in ``graph`` and how the difference grows: its post-grad
    graph's floating nodes compiled together on the eager values of its inputs (``args``), and
    each node that differs from eager there, in graph order, with its difference in units of its
    tolerance. Values two eager replays disagree on are left out; [] when the graph cannot be
    replayed, or nothing differs."""
    post_grad = graph.post_grad_graph
    if post_grad is None or has_cpp_wrapper(graph) or options is None:
        return []
    nodes = [n for n in post_grad.graph.nodes if n.op == "call_function" and n.target is not operator.getitem
             and isinstance(n.meta.get("val"), torch.Tensor) and n.meta["val"].is_floating_point()]
    if not nodes or len(nodes) > LESS_ACCURATE_NODES:
        return []
    try:
        values, _, undefined = _eager_run_defined(post_grad, args, seed)
    except Exception:  # noqa: BLE001 - the verdict stands without the chain
        return []
    errors = _chain_errors(nodes, values, seed, tol, options) or []
    return [(name, used) for name, used, differs in errors if differs and name not in undefined]


def dynamo_target_name(graph: GraphCapture, node: str) -> str:
    """What Dynamo node ``node`` of ``graph`` calls, as the user wrote it: ``group_norm``, ``log``."""
    dynamo = graph.dynamo_graph
    found = next((n for n in dynamo.graph.nodes if n.name == node), None) if dynamo is not None else None
    target = getattr(found, "target", "")
    return getattr(target, "__name__", None) or str(target)


def user_op_chain(graph: GraphCapture, dynamo_args: list[Any], *, seed: int = 0, tol: Optional[float] = None
                  ) -> list[tuple[str, str, float]]:
    """Where the graph Inductor compiles parts from eager, by the user's ops: each node of
    ``graph``'s Dynamo graph, run eagerly on ``dynamo_args``, whose value differs from the same
    value in its post-grad graph (decompositions applied) run eagerly on the same call: (the Dynamo
    node, the post-grad node holding its value, the difference in units of its tolerance), in graph
    order. A Dynamo node's value is the last post-grad node made from it with its shape and dtype;
    values two eager replays disagree on are left out. [] when either graph cannot be replayed."""
    dynamo, post_grad = graph.dynamo_graph, graph.post_grad_graph
    if dynamo is None or post_grad is None or graph.call_args is None or not dynamo_args:
        return []
    try:
        eager, _ = _eager_run(dynamo, dynamo_args, seed)
        compiled, _, undefined = _eager_run_defined(post_grad, graph.call_args, seed)
    except Exception:  # noqa: BLE001 - the verdict stands without the chain
        return []
    holder: dict[str, str] = {}  # Dynamo node -> the last post-grad node made from it, alike
    for node in post_grad.graph.nodes:
        provenance = graph.nodes.get(node.name)
        for root in provenance.dynamo_nodes if provenance is not None else ():
            ours, theirs = compiled.get(node.name), eager.get(root)
            if isinstance(ours, torch.Tensor) and isinstance(theirs, torch.Tensor) and (
                    ours.shape == theirs.shape and ours.dtype == theirs.dtype):
                holder[root] = node.name
    chain = []
    for node in dynamo.graph.nodes:
        held = holder.get(node.name)
        if held is None or held in undefined:
            continue
        comparison = compare_outputs(compiled[held], eager[node.name], tol=tol).outputs[0]
        if comparison.unequal > 0 or not comparison.passed:
            used = comparison.tolerance_used if comparison.tolerance is not None else (
                0.0 if comparison.passed else math.inf)
            chain.append((node.name, held, used))
    return chain


@autocast_off()  # a post-grad graph holds autocast's casts: compiled, replayed and narrowed without it again
def divergence_in_graph(graph: GraphCapture, args: list[Any], report: DivergenceReport, *, seed: int = 0,
                        tol: Optional[float] = None, narrow_options: Optional[dict[str, Any]] = None) -> bool:
    """Compare every buffer ``graph``'s compiled code writes, run on ``args``, with its post-grad graph
    run eagerly on the same arguments; fill ``report`` and return True at the first that differs.

    Works for any captured graph whose call arguments are known: an inference or forward graph's
    (its Dynamo call's arguments) and a backward graph's (``GraphCapture.call_args``: saved
    tensors and incoming gradients). ``narrow_options`` (compile options) names the culprit node
    of a fused kernel by compiling its nodes one by one; None skips that.
    """
    if graph.post_grad_graph is None:
        report.note = f"graph {graph.label}: its post-grad graph is not kept"
        return False
    if has_cpp_wrapper(graph):
        report.graph = graph.label
        report.note = (f"graph {graph.label} has a C++ wrapper (cpp_wrapper=True or AOTInductor): the search reads "
                       "buffers through the Python wrapper; compile without cpp_wrapper to search it")
        return False
    report.graph = graph.label
    placeholders = [n for n in graph.post_grad_graph.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(args):
        report.note = f"graph {graph.label}: its {len(placeholders)} inputs are not the call's {len(args)} arguments"
        return False
    lowered = {n.name for n in graph.post_grad_graph.graph.nodes if lowered_only(n)}
    try:
        buffers = collect_buffers(graph, args, seed)
        eager, finals, undefined = _eager_run_defined(graph.post_grad_graph, args, seed, given=buffers)
    except Exception as exc:  # noqa: BLE001 - the diagnosis stands without the search
        report.note = (f"graph {graph.label}: its post-grad graph could not be replayed to compare buffers "
                       f"({type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''})")
        return False
    fp64: list[Optional[dict[str, Any]]] = []  # computed once a buffer needs it
    no_referee: set[str] = set()  # reached through a tie the float64 replay lost
    # an input updated in place, under its last writer's name: its value before the call
    writers = _input_writers(graph.post_grad_graph)
    starts = {writers[node.name]: value for node, value in zip(placeholders, args)
              if node.name in writers and isinstance(value, torch.Tensor)}

    def referee(node_name: str) -> Any:
        """The float64 run's value of ``node_name`` (the run made on first need), or None."""
        if not fp64:
            fp64.append(_fp64_run(graph.post_grad_graph, args, seed, given=buffers))
            no_referee.update(_ties_lost(graph.post_grad_graph, eager, fp64[0] or {}))
        return None if node_name in no_referee else (fp64[0] or {}).get(node_name)

    written_later = _written_later(graph.post_grad_graph)
    for name, value in buffers.items():
        if name in lowered or name in written_later:  # this buffer is its eager value, or a later write's
            continue
        if name in undefined:  # memory no op wrote, or a value eager does not repeat: never evidence
            report.undefined.append(name)
            continue
        expected = finals[name] if name in finals else eager.get(name)
        if not isinstance(expected, torch.Tensor) or expected.shape != value.shape:
            continue
        comparison = compare_outputs(value, expected, tol=tol).outputs[0]
        # judged as outputs are: failing allclose, no further from fp64 than eager's own error allows
        if not comparison.passed and referee(name) is not None:
            comparison = compare_outputs(value, expected, referee(name), tol=tol).outputs[0]
        at_scale = False
        if comparison.passed and comparison.largest_value is not None and 0.0 < comparison.largest_value < 1.0:
            at_scale = wrong_at_its_own_scale(value, expected, referee(name), tol)
        small_update = None
        if comparison.passed and not at_scale and name in starts:  # a weight: is the update right?
            if update_is_wrong(value, expected, referee(name), starts[name], tol):
                small_update = float((widened(expected) - widened(starts[name])).abs().max().item())
        roots = graph.nodes[name].dynamo_nodes if name in graph.nodes else []
        report.checked.append(BufferCheck(name, ", ".join(roots), comparison.passed and not at_scale
                                          and small_update is None, comparison.max_abs_error,
                                          comparison.first_bad_index, comparison.largest_value if at_scale else None,
                                          small_update))
        if not report.checked[-1].passed:
            _explain(report, graph, name, eager, seed, tol, narrow_options)
            return True
    return False


def _producer(graph: GraphCapture, name: str) -> str:
    """The op that computes ``name``: itself, or for a ``getitem`` of a multi-output op (the indices
    of ``min(dim)``) that op, whose code the kernel holds."""
    post_grad = graph.post_grad_graph
    node = next((n for n in post_grad.graph.nodes if n.name == name), None) if post_grad is not None else None
    if node is not None and node.target is operator.getitem and isinstance(node.args[0], torch.fx.Node):
        return node.args[0].name
    return name


def _explain(report: DivergenceReport, graph: GraphCapture, name: str, eager: dict[str, Any], seed: int,
             tol: Optional[float], options: Optional[dict[str, Any]]) -> None:
    if _explain_branch(report, graph, name, eager, seed, tol, options):
        return
    report.diverging_node = name
    kernel = buffer_writers(graph).get(name)
    report.kernel = kernel
    kernel_nodes: list[str] = []
    if kernel is not None:
        for line in graph.kernel(kernel).lines:
            kernel_nodes.extend(n for n in line.fx_nodes if n not in kernel_nodes)
    compared = {check.node for check in report.checked}
    report.unseen_upstream = [n for n in _unseen_upstream(graph, name, compared) if n not in kernel_nodes]
    kernel_nodes.extend(report.unseen_upstream)
    culprit = name
    if options is not None and len(kernel_nodes) > 1:
        culprit = _narrow(report, graph, name, kernel_nodes, eager, seed, tol, options) or name
    _name_culprit(report, graph, _producer(graph, culprit))
    if report.chain and report.kernel is not None:
        chained = {node for node, _ in report.chain}
        report.chain_lines = [line for line in graph.kernel(report.kernel).lines if chained & set(line.fx_nodes)]
