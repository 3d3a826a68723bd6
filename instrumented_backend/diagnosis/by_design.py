"""Differences from eager that Inductor makes by design, each undone by one config option.

- ``precision_casts``: a program that casts to float16 or bfloat16 and back rounds at each cast in
  eager; Inductor fuses the casts into one kernel, computes in float32 and rounds once. Its result
  is as accurate or more, and differs. ``emulate_precision_casts=True`` rounds at every cast.
- ``random_draws``: compiled code draws random numbers from Inductor's own generator, seeded from
  eager's, so ``dropout``, ``rand`` and ``bernoulli`` give other values than eager's under the same
  seed. ``fallback_random=True`` draws them as eager does.

PyTorch's maintainers answer both kinds of report "intended behaviour". The diagnosis finds the
ops in the graphs compiled, with their source lines (:func:`rounding_casts`, :func:`random_ops`),
and judges the call compiled with and without the option (:func:`explained_by`).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

import torch

from minifier.judge import LOW_PRECISION

from ..records import SourceLocation

if TYPE_CHECKING:
    from ..graphs import GraphCapture
    from .accuracy import AccuracyReport

__all__ = ["DesignedOp", "DesignedDifference", "rounding_casts", "random_ops", "explained_by", "designed_difference",
           "undoes", "elements_unequal", "largest_difference", "OPTIONS", "EXPLAINED_FACTOR"]

# With the option on (or the one thing changed, :func:`undoes`), the largest difference from eager
# must be at least this many times smaller for it to explain the difference.
EXPLAINED_FACTOR = 10.0
# The option that undoes each verdict's difference
OPTIONS = {"precision_casts": "emulate_precision_casts", "random_draws": "fallback_random"}
_WHAT_IT_DOES = {
    "precision_casts": ("it computes in float32 across these casts to lower precision (or ops computed in it) "
                        "inside one kernel and rounds once, where eager rounds after each", "it rounds as eager does"),
    "random_draws": ("it draws these ops' random numbers from Inductor's own generator, not eager's",
                     "it draws as eager does"),
}


@dataclass
class DesignedOp:
    """One op of a compiled graph that makes a difference by design: a cast, a random draw."""

    node: str
    op: str
    graph: str
    source: Optional[SourceLocation] = None

    def render(self) -> str:
        where = f" at {self.source.cited()}" if self.source is not None else ""
        return f"{self.node} ({self.op}) in graph {self.graph}{where}"


@dataclass
class DesignedDifference:
    """The verdict ``precision_casts`` or ``random_draws``: the ops, and the difference from eager
    compiled as by default (as the program compiled it) and with the option on."""

    verdict: str
    ops: list[DesignedOp] = field(default_factory=list)
    max_abs_error: float = 0.0
    unequal: int = 0  # elements not exactly eager's
    option_error: float = 0.0  # with the option on
    option_unequal: int = 0

    @property
    def option(self) -> str:
        return OPTIONS[self.verdict]

    def render(self) -> str:
        does, undone = _WHAT_IT_DOES[self.verdict]
        shown = self.ops[:5]
        out = [f"compiled differs from eager in {self.unequal} element(s), by at most {self.max_abs_error:.3g}, "
               f"because {does}:"]
        out += [f"  {op.render()}" for op in shown]
        if len(self.ops) > len(shown):
            out.append(f"  ... and {len(self.ops) - len(shown)} more")
        out.append(f"compiled with {self.option}=True (torch.compile(..., options={{'{self.option}': True}}) or "
                   f"TORCHINDUCTOR_{self.option.upper()}=1), {undone}: {self.option_unequal} element(s) still "
                   f"differ, max |err| {self.option_error:.3g}")
        return "\n".join(out)


def _ops(graphs: Sequence["GraphCapture"], keep: Callable[[torch.fx.Node], str]) -> list[DesignedOp]:
    found = []
    for graph in graphs:
        post_grad = graph.post_grad_graph
        for node in post_grad.graph.nodes if post_grad is not None else ():
            op = keep(node) if node.op == "call_function" else ""
            if op:
                provenance = graph.nodes.get(node.name)
                found.append(DesignedOp(node.name, op, graph.label, getattr(provenance, "source", None)))
    return found


def _rounding_cast(node: torch.fx.Node) -> str:
    if node.target is torch.ops.prims.convert_element_type.default and len(node.args) > 1:
        if node.args[1] in LOW_PRECISION:
            return f"to {str(node.args[1]).replace('torch.', '')}"
    return ""


def _random_draw(node: torch.fx.Node) -> str:
    if torch.Tag.nondeterministic_seeded in getattr(node.target, "tags", ()):
        return str(node.target).removeprefix("aten.")
    return ""


def _low_precision_result(node: torch.fx.Node) -> str:
    value = node.meta.get("val")
    if isinstance(value, torch.Tensor) and value.dtype in LOW_PRECISION and node.target is not operator.getitem:
        schema = getattr(node.target, "_schema", None)
        aliases = schema is not None and schema.returns and schema.returns[0].alias_info is not None
        if not aliases:  # a view rounds nothing
            return f"{str(node.target).removeprefix('aten.')} in {str(value.dtype).replace('torch.', '')}"
    return ""


def rounding_casts(graphs: Sequence["GraphCapture"]) -> list[DesignedOp]:
    """Where ``graphs`` round to float16 or bfloat16, with the source lines: every explicit cast
    in their post-grad graphs or, with none, every op computing a float16 or bfloat16 result
    (Inductor computes those in float32 inside a kernel and rounds once, at its store)."""
    return _ops(graphs, _rounding_cast) or _ops(graphs, _low_precision_result)


def random_ops(graphs: Sequence["GraphCapture"]) -> list[DesignedOp]:
    """Every op drawing random numbers in the post-grad graphs of ``graphs`` (compiled with
    ``fallback_random``, as a diagnosis compiles: eager's random ops), with its source line."""
    return _ops(graphs, _random_draw)


def elements_unequal(report: "AccuracyReport") -> int:
    """How many elements of the outputs judged in ``report`` are not exactly eager's."""
    return sum(output.unequal for output in report.outputs)


def _used(report: "AccuracyReport") -> float:
    return max((output.tolerance_used for output in report.outputs), default=0.0)


def largest_difference(report: "AccuracyReport") -> float:
    """The largest |compiled - eager| over the outputs judged in ``report``."""
    return max((output.max_abs_error for output in report.outputs), default=0.0)


def undoes(default: Optional["AccuracyReport"], changed: Optional["AccuracyReport"], *,
           any_difference: bool = False) -> bool:
    """Whether a compile with one thing changed (an option on, floats rounded as eager rounds
    them), judged ``changed``, explains the outputs judged ``default``: it passes where ``default``
    failed, or, ``default`` passing but unequal to eager, it makes the largest difference (in units
    of its tolerance) :data:`EXPLAINED_FACTOR` times smaller. With ``any_difference``, passing
    explains any ``default`` judged (random draws)."""
    if default is None or changed is None or changed.passed is not True or changed.error:
        return False
    if default.error or default.passed is None:
        return False
    return any_difference or default.passed is False or (
        elements_unequal(default) > 0 and _used(changed) * EXPLAINED_FACTOR <= _used(default))


def explained_by(verdict: str, ops: list[DesignedOp], default: Optional["AccuracyReport"],
                 with_option: Optional["AccuracyReport"]) -> Optional[DesignedDifference]:
    """The difference ``verdict`` when it explains the outputs judged ``default`` (compiled without
    the option) given ``with_option`` (with it), by :func:`undoes`; None otherwise. What the option
    leaves is summation order (a mean after the casts); an RMSNorm whose largest difference stays
    the same with its casts emulated differs by more than its casts. Random draws explain any
    difference of a call whose judgement with eager's draws passed: Inductor's differ from eager's
    by design, whether or not this call's outputs happen to show it (a dropout that drops the same
    few elements)."""
    if not undoes(default, with_option, any_difference=verdict == "random_draws"):
        return None
    return DesignedDifference(verdict, ops, largest_difference(default), elements_unequal(default),
                              largest_difference(with_option), elements_unequal(with_option))


def designed_difference(graphs: Sequence["GraphCapture"], verdict: str, outputs: Optional["AccuracyReport"],
                        program_options: dict[str, Any], judge: Callable[[dict[str, Any]], Optional["AccuracyReport"]],
                        options: dict[str, Any], say: Callable[[str], None]) -> Optional[DesignedDifference]:
    """The difference Inductor makes by design that explains ``outputs`` (a call's, judged
    ``verdict``, compiled with ``options``, ``fallback_random`` among them): casts it rounds at once,
    or random numbers it draws from its own generator (unless the program's own
    ``program_options`` set ``fallback_random``); each judged again (``judge(options)``) with its
    option switched. None when neither explains them."""
    casts = rounding_casts(graphs)
    if casts:
        say("it casts to lower precision: judging a compile that rounds at each cast as eager does")
        designed = explained_by("precision_casts", casts, outputs, judge({**options, OPTIONS["precision_casts"]: True}))
        if designed is not None:
            return designed
    draws = random_ops(graphs) if verdict == "passed" and not program_options.get("fallback_random") else []
    if draws:
        say("it draws random numbers: judging it compiled as the program compiled it, with Inductor's generator")
        return explained_by("random_draws", draws, judge({**options, OPTIONS["random_draws"]: False}), outputs)
    return None
