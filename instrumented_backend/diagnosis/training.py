"""A training step, judged: outputs and the gradients of every trainable parameter and input.

:func:`training_step` runs one (a fixed random weighting of the outputs, or the step's own
``loss.backward()``); :func:`judge_training` judges a compiled step against eager's with fp64 as
referee; :func:`training_layers` finds the first failing layer of a whole step.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Callable, NamedTuple, Optional, Sequence

import torch
import torch.utils._pytree as pytree

from minifier.judge import RandomDraws, RoundedScalars, replaying

from ..capture.as_written import running_eagerly
from .accuracy import AccuracyReport, clone_inputs, compare_outputs, to_fp64
from .accuracy import error_line as _error_text
from .layers import LayerReport, LayerResult, judge_layers, same_random_numbers
from .optimizer_updates import judge_updates
from .settings import DiagnoseSettings
from .step_state import StepState
from .widened_casts import WidenedCasts

__all__ = ["TRAINING_LAYERS", "training_step", "requiring_grad", "training_is_nondeterministic", "judge_training",
           "training_layers"]

TRAINING_LAYERS = ("eager", "aot_eager", "aot_eager_decomp_partition", "inductor")


def _float_leaves(value: Any) -> list[torch.Tensor]:
    return [t for t in pytree.tree_leaves(value) if isinstance(t, torch.Tensor) and t.is_floating_point()]


class _Step(NamedTuple):
    """One training step's outputs, gradients by name (parameters, then inputs requiring grad), and
    whether the step ran its own backward (``loss.backward()`` inside the function)."""

    outputs: Any
    grads: dict[str, Optional[torch.Tensor]]
    own_backward: bool
    starts: dict[str, torch.Tensor] = {}  # a step running its optimizer: each weight before it, by name


def _gradient_names(state: StepState, inputs: Sequence[Any]) -> list[str]:
    """A name for each gradient :func:`training_step` takes: each parameter's (``fc.weight``),
    then ``input i`` for each input requiring grad; made unique."""
    from .effects import parameter_labels

    names = parameter_labels(state) + [f"input {i}" for i, v in enumerate(inputs)
                                       if isinstance(v, torch.Tensor) and v.requires_grad]
    seen: dict[str, int] = {}
    unique = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        unique.append(name if seen[name] == 1 else f"{name} ({seen[name]})")
    return unique


def training_step(fn: Callable[..., Any], inputs: Sequence[Any], seed: int,
                   state: Optional[StepState] = None) -> _Step:
    """Outputs, and gradients with respect to every trainable parameter (a module's, or those of
    the modules, optimizers and tensors ``fn`` names: ``state``, by default ``StepState.of(fn)``;
    and of the modules among ``inputs``) and input requiring grad, in that order, by name.

    The gradients are those of a fixed random weighting of the outputs, unless ``fn`` runs its own
    backward (a training step: ``loss.backward(); optimizer.step()``): then the gradients it leaves.
    ``state`` is put back afterwards, so each run starts from the same weights."""
    inputs = clone_inputs(inputs)  # requiring grad as given (diagnose's input_gradients made its floating ones)
    state = (state if state is not None else StepState.of(fn)).with_arguments(inputs)
    params = state.parameters()
    leaves = params + [v for v in inputs if isinstance(v, torch.Tensor) and v.requires_grad]
    names = _gradient_names(state, inputs)
    with state.kept():
        for param in params:
            param.grad = None
        starts = _named_weights(state) if state.optimizers else {}  # the weights it starts from
        torch.manual_seed(seed)
        with torch.enable_grad():
            with state.gradients_reached() as reached:  # seen even when the step drops them (zero_grad last)
                out = fn(*inputs)
            own_backward = reached[0] or any(leaf.grad is not None for leaf in leaves)
            if own_backward:
                grads = [None if leaf.grad is None else leaf.grad.detach().clone() for leaf in leaves]
                if state.optimizers:  # the update it made is judged too: the weights after the step
                    out = {"output": out, "updated": _named_weights(state)}
            else:
                outs = _float_leaves(out)
                generator = torch.Generator().manual_seed(seed + 1)
                loss = sum((o * torch.randn(o.shape, generator=generator).to(o.dtype).to(o.device)).sum()
                           for o in outs)
                grads = list(torch.autograd.grad(loss, leaves, allow_unused=True)) if leaves and outs else []
    return _Step(pytree.tree_map(lambda t: t.detach() if isinstance(t, torch.Tensor) else t, out),
                 dict(zip(names, grads)), own_backward, starts)


def _named_weights(state: StepState) -> dict[str, torch.Tensor]:
    """A copy of each parameter's value, by name: the weights a step starts from, or leaves."""
    from .effects import parameter_labels

    return {name: p.detach().clone() for name, p in zip(parameter_labels(state), state.parameters())}


def requiring_grad(inputs: Sequence[Any]) -> list[Any]:
    """``inputs`` with each floating tensor among them requiring grad (a detached alias: the
    caller's tensor is left as it is)."""
    return [v.detach().requires_grad_(True) if isinstance(v, torch.Tensor) and v.is_floating_point()
            and not v.requires_grad else v for v in inputs]


def training_is_nondeterministic(fn: Callable[..., Any], inputs: Sequence[Any], seed: int,
                                  tol: Optional[float]) -> tuple[bool, bool]:
    """(Do two eager training steps from the same state and seed disagree, in outputs or
    gradients? Does the step run its own backward?)"""
    with running_eagerly():
        first, second = (training_step(fn, inputs, seed) for _ in range(2))
    same = (compare_outputs(second.outputs, first.outputs, tol=tol).passed
            and compare_outputs(second.grads, first.grads, tol=tol).passed)
    return not same, first.own_backward


def judge_training(fn: Callable[..., Any], compiled: Callable[..., Any], inputs: Sequence[Any], seed: int,
                   tol: Optional[float], calls_before: Sequence[Sequence[Any]] = ()
                   ) -> tuple[AccuracyReport, AccuracyReport]:
    """(outputs, gradients) of one ``compiled`` training step, after the steps ``calls_before``,
    each judged against ``fn``'s eager step with a float64 run of it as referee."""
    # The float64 run draws the random numbers eager drew (a drop path's masks): RandomDraws; and
    # takes the Python floats eager rounds to a low-precision op's dtype rounded: RoundedScalars.
    named = None if isinstance(fn, torch.nn.Module) else StepState.of(fn)
    with running_eagerly():
        with RandomDraws() as drawn, RoundedScalars() as rounded:
            eager = training_step(fn, inputs, seed, named)
        # A module's float64 run is a float64 copy; a function's widens the state it names in place,
        # put back after (its optimizer holds those very parameters). Both cast to float64 where
        # their code casts lower (``mask.float()``).
        with WidenedCasts(), named.widened() if named is not None else contextlib.nullcontext():
            reference = replaying(drawn.draws, lambda: training_step(to_fp64(fn), [to_fp64(v) for v in inputs],
                                                                      seed, named), rounded.rounded)
        ref_out, ref_grads = (None, None) if reference is None else (reference.outputs, reference.grads)
    for before in calls_before:  # steps the script took first: Dynamo recompiles for these inputs as it did
        training_step(compiled, before, seed, named)
    compiled_step = training_step(compiled, inputs, seed, named)  # an OptimizedModule: the module's
    outputs = compare_outputs(compiled_step.outputs, eager.outputs, ref_out, tol=tol)
    if outputs.passed and eager.starts:  # the weights after pass: is the update itself right?
        updated = eager.outputs["updated"]
        outputs = judge_updates(outputs, eager.starts, _named_as(compiled_step.outputs["updated"], updated), updated,
                                None if reference is None else _named_as(reference.outputs["updated"], updated), tol)
    return (outputs,
            compare_outputs(_named_as(compiled_step.grads, eager.grads), eager.grads,
                            None if ref_grads is None else _named_as(ref_grads, eager.grads), tol=tol))


def _named_as(grads: dict[str, Any], names: dict[str, Any]) -> dict[str, Any]:
    """``grads`` under the names of ``names``, in order: a compiled module's parameters are its
    ``_orig_mod``'s (``_orig_mod.fc.weight``), the same parameters in the same order."""
    return dict(zip(names, grads.values())) if len(grads) == len(names) else grads


def training_layers(fn: Callable[..., Any], inputs: Sequence[Any], settings: DiagnoseSettings,
                    calls_before: Sequence[Sequence[Any]] = ()) -> LayerReport:
    """The first layer (eager, aot_eager, ... inductor) whose whole training step fails: its
    compile, its outputs or its gradients, judged as :func:`judge_training` judges them."""
    seed, tol, compiled_as = settings.seed, settings.tol, settings.compile

    def judge(backend: str) -> LayerResult:
        torch.compiler.reset()
        started = time.perf_counter()
        options = {"options": compiled_as.inductor_options} if backend == "inductor" else {}
        try:
            with same_random_numbers():
                compiled = torch.compile(fn, backend=backend, dynamic=compiled_as.dynamic,
                                         fullgraph=compiled_as.fullgraph, **options)
                outputs, grads = judge_training(fn, compiled, inputs, seed, tol, calls_before)
        except Exception as exc:  # noqa: BLE001 - a failing layer is a finding
            return LayerResult(backend, "error", _error_text(exc), time.perf_counter() - started)
        failing = [o.path for o in grads.failing] + [f"output {o.path}" for o in outputs.failing]
        status = "ok" if not failing else "inaccurate"
        detail = "outputs and gradients match eager" if not failing else f"differs: {', '.join(failing)[:100]}"
        return LayerResult(backend, status, detail, time.perf_counter() - started, grads)

    report = LayerReport(layers=judge_layers(TRAINING_LAYERS, judge, top_down=True))
    torch.compiler.reset()
    return report
