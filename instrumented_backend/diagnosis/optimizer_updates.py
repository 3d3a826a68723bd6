"""A training step's optimizer update, judged at its own scale.

A step that runs its optimizer is judged on the weights it leaves, which the accuracy rule
compares with an absolute tolerance of 1e-4 (float32): an update of ``lr = 1e-4`` RMSprop moves a
weight by 1e-3, and its ``sqrt`` 1% off moves it 1e-5 less, which left every weight, the loss and
the gradients within tolerance ("no bug found"). The update itself, the weights after the step
less the weights before it (in float64, exactly), is judged here at its own scale
(:func:`~.accuracy.wrong_at_its_own_scale`): wrong when it fails a tolerance scaled to its largest
value and is over ten times as far from the float64 step's update as eager's is, and when
compiled and eager weights differ by more than their own rounding (two units in the last place of
the weight: an update computed in another order may round the weight the other way). The search
for the first diverging buffer judges an input a graph updates in place (an optimizer's weights)
the same way (:func:`update_is_wrong`).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

import torch

from minifier.judge import compare_tensor, tolerance_for, widened

from .accuracy import SCALED_RMSE_MULTIPLIER, AccuracyReport, OutputComparison, wrong_at_its_own_scale

__all__ = ["update_is_wrong", "judge_updates", "judge_effect_updates"]

_ROUNDING_ULPS = 2.0  # compiled and eager weights this many units in the last place apart are rounding


def _updates(compiled_after: torch.Tensor, eager_after: torch.Tensor, fp64_after: Any,
             before: torch.Tensor) -> Optional[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """(compiled, eager, float64) updates from ``before``, in float64; None when they cannot be
    judged: no float64 run, another shape, not floating, or compiled and eager weights within
    their own rounding of each other."""
    if (not isinstance(fp64_after, torch.Tensor) or not isinstance(before, torch.Tensor)
            or not before.is_floating_point()
            or not compiled_after.shape == eager_after.shape == fp64_after.shape == before.shape):
        return None
    compiled, eager = widened(compiled_after.detach()), widened(eager_after.detach())
    rounding = _ROUNDING_ULPS * torch.finfo(eager_after.dtype).eps * eager.abs()
    if bool(((compiled - eager).abs() <= rounding).all()):
        return None
    start = widened(before.detach())
    return compiled - start, eager - start, widened(fp64_after.detach()) - start


def update_is_wrong(compiled_after: torch.Tensor, eager_after: torch.Tensor, fp64_after: Optional[torch.Tensor],
                    before: torch.Tensor, tol: Optional[float] = None) -> bool:
    """Whether a tensor updated in place (``before`` -> ``compiled_after``; eager: ``eager_after``,
    the float64 run: ``fp64_after``) was updated wrongly at the update's own scale, where its values
    after the update pass: an update a thousand times smaller than the weight it moves."""
    updates = _updates(compiled_after, eager_after, fp64_after, before)
    if updates is None:
        return False
    rtol = tol if tol is not None else tolerance_for(before.dtype)
    return wrong_at_its_own_scale(*updates, rtol)


def judge_updates(report: AccuracyReport, starts: Mapping[str, Any], compiled: Mapping[str, Any],
                  eager: Mapping[str, Any], reference: Optional[Mapping[str, Any]],
                  tol: Optional[float] = None) -> AccuracyReport:
    """``report`` (the step's outputs, the weights after it among them) with a failing row for each
    tensor whose update (from ``starts`` to ``compiled[name]``; eager's ``eager[name]``, the float64
    run's ``reference[name]``) is wrong at its own scale (``['update'][name]``); the same report
    when there is no float64 run to judge against, or no update is wrong."""
    if not reference:
        return report
    wrong = []
    for name, eager_after in eager.items():
        before, compiled_after = starts.get(name), compiled.get(name)
        if not isinstance(eager_after, torch.Tensor) or not isinstance(compiled_after, torch.Tensor):
            continue
        updates = _updates(compiled_after, eager_after, reference.get(name), before)
        rtol = tol if tol is not None else tolerance_for(eager_after.dtype)
        if updates is None or not wrong_at_its_own_scale(*updates, rtol):
            continue
        compiled_update, eager_update, fp64_update = updates
        scale = float(eager_update.abs().max().item())
        verdict = compare_tensor(compiled_update, eager_update, fp64_update, rtol, atol=rtol * scale,
                                 rmse_multiplier=SCALED_RMSE_MULTIPLIER).as_dict()
        verdict["note"] = (f"the step's update of {name} (the weights after it less before, at most {scale:.2g}) is "
                           f"wrong at its own scale, which the weights' tolerance ({rtol:g}) cannot see")
        wrong.append(OutputComparison(path=f"['update'][{name!r}]", dtype=str(before.dtype).replace("torch.", ""),
                                      shape=list(eager_update.shape), **verdict))
    if not wrong:
        return report
    return AccuracyReport(passed=False, outputs=[*report.outputs, *wrong], nondeterministic=report.nondeterministic,
                          backend=report.backend, error=report.error)


def judge_effect_updates(report: AccuracyReport, fn: Any, compiled: Any, eager: Any, reference: Any,
                         tol: Optional[float] = None) -> AccuracyReport:
    """:func:`judge_updates` for a call judged with the tensors it updates in place (``fn`` an
    :class:`~.effects.Effects`, whose outputs are ``{"output": ..., "updated": {name: after}}``);
    ``report`` as it is for any other call, or one that failed already."""
    from .effects import Effects

    starts = fn.starts if isinstance(fn, Effects) else {}
    if not report.passed or not starts or not all(isinstance(v, dict) and isinstance(v.get("updated"), dict)
                                                  for v in (compiled, eager)):
        return report
    fp64 = reference.get("updated") if isinstance(reference, dict) else None
    return judge_updates(report, starts, compiled["updated"], eager["updated"],
                         fp64 if isinstance(fp64, dict) else None, tol)
