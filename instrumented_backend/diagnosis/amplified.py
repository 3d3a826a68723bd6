"""The verdict ``amplified_rounding``: compiled differs from eager past the tolerance, and float64
finds compiled code no further off than eager.

Both programs round; an ill-conditioned op after them (``log(clamp(t, 1e-6))`` of a group norm
of constant values, ``inverse`` of a rank-deficient matrix) turns rounding-level differences into
large ones. The float64 referee then finds compiled code as close to the exact result as eager, or
closer: no op of the compiled code is less accurate than eager's (the diagnosis checked each
alone before this verdict). PyTorch's maintainers call such reports "torch.compile being more
accurate than eager" (pytorch#150165), or "log(clamp) amplification of small rounding
differences" when they change a decomposition to round as eager's kernel does (pytorch#181696).

The record says where the two part and what amplifies the difference: each node of the graph
that differs from eager, compiled together on eager's inputs, with its difference in units of its
tolerance and its source line (:func:`~.divergence.rounding_chain`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Sequence

from ..records import SourceLocation
from .divergence import dynamo_target_name, rounding_chain, user_op_chain
from .judged_compile import GraphCall, first_call

if TYPE_CHECKING:
    from ..graphs import GraphCapture
    from .accuracy import OutputComparison

__all__ = ["ChainStep", "AmplifiedRounding", "amplified_rounding"]


@dataclass
class ChainStep:
    """One node that differs from eager: its difference in units of its tolerance, its line."""

    node: str
    op: str
    used: float
    source: Optional[SourceLocation] = None

    def render(self) -> str:
        where = f" at {self.source.cited()}" if self.source is not None else ""
        return f"{self.node} ({self.op}): {self.used:.2g}x its tolerance{where}"


@dataclass
class AmplifiedRounding:
    """The output past allclose, its figures against float64, and the chain of nodes that differ."""

    output: str
    max_abs_error: float
    rmse_compiled: Optional[float]
    rmse_eager: Optional[float]
    graph: str = ""
    chain: list[ChainStep] = field(default_factory=list)
    # the chain is of the user's ops: where the graph Inductor compiles (decompositions applied)
    # parts from eager's kernels, before code generation; else of the compiled code's nodes
    before_codegen: bool = False

    @property
    def start(self) -> Optional[ChainStep]:
        """The first node where compiled and eager part."""
        return self.chain[0] if self.chain else None

    @property
    def amplifier(self) -> Optional[ChainStep]:
        """The first node whose difference is past its tolerance."""
        return next((step for step in self.chain if step.used > 1.0), None)

    def render(self) -> str:
        out = [f"{self.output}: compiled and eager differ by up to {self.max_abs_error:.3g}, past the tolerance; "
               f"against float64, compiled is off by RMSE {_figure(self.rmse_compiled)} and eager by "
               f"{_figure(self.rmse_eager)}: no op of the compiled code is less accurate than eager's"]
        start, amplifier = self.start, self.amplifier
        if start is None:
            return "\n".join(out)
        if self.before_codegen:
            out.append(f"the user's ops of graph {self.graph} whose value differs between the graph Inductor "
                       "compiles (decompositions applied, run eagerly) and eager's kernels, in units of its tolerance:")
        else:
            out.append(f"the nodes of graph {self.graph} whose value differs from it run eagerly (compiled together "
                       "on eager's inputs), in units of its tolerance:")
        shown = self.chain if len(self.chain) <= 8 else [*self.chain[:4], *self.chain[-4:]]
        out += [f"  {step.render()}" for step in shown]
        if len(shown) < len(self.chain):
            out.insert(-4, f"  ... {len(self.chain) - 8} more")
        if amplifier is not None and amplifier is not start:
            out.append(f"the difference starts at {start.node}, within its tolerance, and {amplifier.node} amplifies "
                       "it past: rounding either program may make, which an op this sensitive to its input turns "
                       "into a large difference")
        return "\n".join(out)


def _figure(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.2g}"


def amplified_rounding(output: tuple[str, "OutputComparison"], graphs: Sequence["GraphCapture"],
                       calls: Sequence["GraphCall"], *, seed: int, tol: Optional[float],
                       options: Optional[dict[str, Any]]) -> AmplifiedRounding:
    """The record for ``output`` (its name in words, its comparison), with the chain of the first
    of ``graphs`` (inference or forward, called; its Dynamo graph's arguments among ``calls``)
    where compiled and eager part: by the user's ops, where the graph Inductor compiles
    (decompositions applied) parts from eager's kernels (:func:`~.divergence.user_op_chain`);
    else by the compiled code's nodes (:func:`~.divergence.rounding_chain`)."""
    name, comparison = output
    found = AmplifiedRounding(name, comparison.max_abs_error, comparison.rmse_compiled, comparison.rmse_eager)
    for graph in graphs:
        if graph.kind not in ("inference", "forward") or graph.call_args is None:
            continue
        by_ops = user_op_chain(graph, first_call(graph, calls), seed=seed, tol=tol)
        if by_ops:
            found.graph, found.before_codegen = graph.label, True
            found.chain = [_step(graph, held, used, shown=(node, dynamo_target_name(graph, node)))
                           for node, held, used in by_ops]
            break
        by_nodes = rounding_chain(graph, graph.call_args, seed=seed, tol=tol, options=options)
        if by_nodes:
            found.graph = graph.label
            found.chain = [_step(graph, node, used) for node, used in by_nodes]
            break
    return found


def _step(graph: "GraphCapture", node: str, used: float, shown: Optional[tuple[str, str]] = None) -> ChainStep:
    """A chain step for post-grad ``node`` (its source line), shown as ``shown`` (a Dynamo node and
    its target) when given."""
    provenance = graph.nodes.get(node)
    if shown is None:
        post_grad = graph.post_grad_graph
        target = next((n.target for n in post_grad.graph.nodes if n.name == node), None) if post_grad else None
        shown = node, str(target).removeprefix("aten.") if target is not None else ""
    return ChainStep(shown[0], shown[1], used, getattr(provenance, "source", None))
