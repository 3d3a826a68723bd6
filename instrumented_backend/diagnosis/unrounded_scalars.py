"""Python scalars that eager rounds to float16 or bfloat16 and compiled code keeps as written.

``torch.remainder(x, 3.14)`` on a float16 ``x``: eager on CPU rounds 3.14 to float16 (3.140625)
before computing, as it does for add, sub, fmod and comparisons; Inductor's kernels compute with
3.14 in float32. The results differ wherever the rounding matters (3.140625 % 3.14 is 6.2e-4, and
0 in eager), a remainder by a whole period past a sign correction. PyTorch's maintainers treat
each such op as a compiler bug (pytorch#185517, #183083, #186875) and fix it op by op.

The diagnosis records which ops eager rounds a scalar for, in a run at the program's own precision
(:class:`~minifier.judge.RoundedScalars`), and compiles the call again with those scalars rounded
as eager rounds them (:func:`~instrumented_backend.seams.lowering.scalar_constants.scalars_rounded`).
When that compile matches eager where the first did not, the difference is these scalars: the
verdict is ``inaccurate``, the culprit each op with its scalar, as written and as eager rounds it,
and its source line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

import torch

from minifier.judge import LOW_PRECISION, RoundedScalars

from ..capture.as_written import running_eagerly
from ..records import SourceLocation
from ..seams.aot.caches import compile_caches_disabled
from ..seams.lowering.scalar_constants import scalars_rounded
from .accuracy import run_seeded
from .by_design import elements_unequal, largest_difference, undoes

if TYPE_CHECKING:
    from ..graphs import GraphCapture
    from .accuracy import AccuracyReport

__all__ = ["UnroundedScalar", "UnroundedScalars", "rounded_by_eager", "unrounded_scalars"]


@dataclass
class UnroundedScalar:
    """One op of a compiled graph given a Python float that eager rounds and compiled code does not."""

    node: str
    op: str
    graph: str
    written: float
    rounded: float
    dtype: str
    source: Optional[SourceLocation] = None

    def render(self) -> str:
        where = f" at {self.source.cited()}" if self.source is not None else ""
        return (f"{self.node} ({self.op}) in graph {self.graph}: {self.written!r} as written, "
                f"{self.rounded!r} in {self.dtype} as eager rounds it{where}")


@dataclass
class UnroundedScalars:
    """The ops whose scalars explain the difference, and the difference compiled as the program
    compiled it and with those scalars rounded as eager rounds them."""

    ops: list[UnroundedScalar] = field(default_factory=list)
    max_abs_error: float = 0.0
    unequal: int = 0
    rounded_error: float = 0.0  # compiled with the scalars rounded
    rounded_unequal: int = 0

    def render(self) -> str:
        out = [f"compiled differs from eager in {self.unequal} element(s), by at most {self.max_abs_error:.3g}, "
               "because its kernels compute with Python floats as written, where eager rounds them to the "
               "tensors' dtype first:"]
        out += [f"  {op.render()}" for op in self.ops[:5]]
        if len(self.ops) > 5:
            out.append(f"  ... and {len(self.ops) - 5} more")
        out.append(f"compiled with these floats rounded as eager rounds them: {self.rounded_unequal} element(s) "
                   f"still differ, max |err| {self.rounded_error:.3g}")
        out.append("no Inductor option rounds them: write the float rounded "
                   "(torch.tensor(value, dtype=x.dtype).item()) or pass it as a tensor of the dtype")
        return "\n".join(out)


def rounded_by_eager(fn: Callable[..., Any], inputs: Sequence[Any], seed: int) -> dict[str, dict[str, float]]:
    """{op name (``aten::remainder.Scalar``): {argument place: the float as eager rounds it}} for
    each op ``fn`` calls with a Python float that eager rounds to its float16 or bfloat16 dtype."""
    with running_eagerly():
        try:
            with RoundedScalars() as recording:
                run_seeded(fn, inputs, seed)
        except Exception:  # noqa: BLE001 - nothing known rounded
            return {}
    return {name: values for name, values in recording.rounded if values}


def _float_nodes(graphs: Sequence["GraphCapture"]) -> list[tuple["GraphCapture", torch.fx.Node, list[float]]]:
    """(graph, node, its Python floats) for each post-grad op computing a float16 or bfloat16
    tensor from a Python float."""
    found = []
    for graph in graphs:
        post_grad = graph.post_grad_graph
        for node in post_grad.graph.nodes if post_grad is not None else ():
            value = node.meta.get("val")
            named = callable(getattr(node.target, "name", None)) and hasattr(node.target, "_schema")  # an OpOverload
            if not named or not isinstance(value, torch.Tensor) or value.dtype not in LOW_PRECISION:
                continue
            floats = [arg for arg in [*node.args, *node.kwargs.values()] if type(arg) is float]
            if floats:
                found.append((graph, node, floats))
    return found


def _ops(candidates: list[tuple["GraphCapture", torch.fx.Node, list[float]]],
         rounded: dict[str, dict[str, float]]) -> list[UnroundedScalar]:
    found = []
    for graph, node, floats in candidates:
        if node.target.name() not in rounded:
            continue
        value = node.meta["val"]
        provenance = graph.nodes.get(node.name)
        for written in floats:
            as_rounded = float(torch.tensor(written, dtype=value.dtype).item())
            if as_rounded != written:
                found.append(UnroundedScalar(node.name, str(node.target).removeprefix("aten."), graph.label,
                                             written, as_rounded, str(value.dtype).removeprefix("torch."),
                                             getattr(provenance, "source", None)))
    return found


def unrounded_scalars(fn: Callable[..., Any], inputs: Sequence[Any], seed: int, graphs: Sequence["GraphCapture"],
                      outputs: Optional["AccuracyReport"], judge: Callable[[], Optional["AccuracyReport"]],
                      say: Callable[[str], None]) -> Optional[UnroundedScalars]:
    """The scalars that explain ``outputs`` (a call's, compiled as the program compiled it): ops of
    ``graphs`` given a Python float eager rounds, whose compile with them rounded (``judge()``, run
    with them rounded) explains the difference (:func:`~.by_design.undoes`). None when no such op,
    or when rounding them explains nothing."""
    if outputs is None or outputs.error or outputs.passed is None:
        return None
    candidates = _float_nodes(graphs) if elements_unequal(outputs) else []
    rounded = rounded_by_eager(fn, inputs, seed) if candidates else {}
    ops = _ops(candidates, rounded) if rounded else []
    if not ops:
        return None
    say("it computes with Python floats eager rounds to lower precision: judging a compile that rounds them")
    with compile_caches_disabled(), scalars_rounded(frozenset(rounded)):
        again = judge()
    if not undoes(outputs, again):
        return None
    return UnroundedScalars(ops, largest_difference(outputs), elements_unequal(outputs), largest_difference(again),
                            elements_unequal(again))
