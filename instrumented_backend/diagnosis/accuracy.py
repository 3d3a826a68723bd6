"""Accuracy of compiled code against eager, judged against an fp64 reference.

The rule is the package's one accuracy rule, :func:`minifier.judge.compare_tensor`, per output:
the minifier's judge applies the same one, so a check and a minification never disagree about a
graph. An output passes when it is ``allclose`` to eager at its dtype's tolerance, or when its
RMSE against the fp64 reference is at most ``RMSE_MULTIPLIER`` times eager's own (plus tol/10)
and no element is catastrophic (far past the tolerance, and many times eager's worst error).
Integer and bool outputs must be equal. Eager runs twice first: a function whose two eager runs
disagree is reported as nondeterministic, never as a compiler bug.
"""

from __future__ import annotations

import copy
import functools
import types
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

import torch
import torch.utils._pytree as pytree

from minifier.judge import (
    RandomDraws,
    RoundedScalars,
    absolute_difference,
    compare_tensor,
    replaying,
    tolerance_for,
    widened,
    widened_graphs,
)

from ..capture.as_written import judged_as_written, running_eagerly
from ..capture.call_state import judged_state
from ..capture.object_arguments import OBJECT_DEPTH, PLAIN, copy_object_argument, is_object_argument
from .copies import clone_inputs
from .reached_names import is_user_function, is_user_object
from .undefined import run_twice
from .widened_casts import WidenedCasts

if TYPE_CHECKING:
    from .graph_state import GraphState

__all__ = ["OutputComparison", "AccuracyReport", "AccuracyError", "compare_outputs", "check_accuracy",
           "default_tolerance", "clone_inputs", "to_fp64", "check_graph_call",
           "run_seeded", "fp64_reference", "fp64_function", "fp64_callable", "eager_is_nondeterministic",
           "wrong_at_its_own_scale", "relative_error_beyond_eager"]

default_tolerance = tolerance_for  # the tolerance of one floating dtype, as the rule applies it


@dataclass
class OutputComparison:
    """One output (``path`` in the output pytree) of compiled vs eager vs fp64."""

    path: str
    dtype: str
    shape: list[int]
    passed: bool
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0
    rmse_compiled: Optional[float] = None  # against fp64
    rmse_eager: Optional[float] = None  # against fp64
    first_bad_index: Optional[list[int]] = None
    compiled_value: Optional[complex] = None  # at first_bad_index (a float unless the output is complex)
    eager_value: Optional[complex] = None
    mismatched: int = 0
    note: str = ""
    tolerance: Optional[float] = None  # allclose's atol and rtol (a floating output)
    tolerance_used: float = 0.0  # the largest |compiled - eager| / (atol + rtol * |eager|): above 1 allclose fails
    largest_value: Optional[float] = None  # the largest finite |eager| (a floating output)
    catastrophic: int = 0  # elements far past the tolerance against fp64, and many times eager's worst error
    unequal: int = 0  # elements not exactly eager's, within tolerance or not

    @property
    def below_tolerance(self) -> bool:
        """A floating output whose every value is smaller than its absolute tolerance: no error in
        it of relative size up to 1 can fail it (collapsed activations, all zeros)."""
        return self.tolerance is not None and self.largest_value is not None and self.largest_value < self.tolerance


@dataclass
class AccuracyReport:
    """The verdict over every output; ``passed`` is None when eager itself is nondeterministic."""

    passed: Optional[bool]
    outputs: list[OutputComparison] = field(default_factory=list)
    nondeterministic: bool = False
    backend: str = ""
    error: str = ""  # when the compiled function raised instead of returning

    @property
    def failing(self) -> list[OutputComparison]:
        return [o for o in self.outputs if not o.passed]

    def render(self) -> str:
        from tabulate import tabulate

        if self.error:
            return f"accuracy: compiled function raised: {self.error}"
        if self.nondeterministic:
            head = "accuracy: NOT CHECKED - two eager runs disagree (nondeterministic function, not a compiler bug)"
        else:
            head = f"accuracy ({self.backend or 'compiled'} vs eager, fp64 reference): " + (
                "PASS" if self.passed else f"FAIL ({len(self.failing)} of {len(self.outputs)} outputs)")
        rows = [[o.path, o.dtype, "x".join(map(str, o.shape)) or "scalar", "ok" if o.passed else "FAIL",
                 f"{o.max_abs_error:.3g}", f"{o.max_rel_error:.3g}",
                 "-" if o.rmse_compiled is None else f"{o.rmse_compiled:.3g}",
                 "-" if o.rmse_eager is None else f"{o.rmse_eager:.3g}",
                 "-" if o.first_bad_index is None else
                 f"{o.first_bad_index}: {o.compiled_value:.6g} vs {o.eager_value:.6g}",
                 o.mismatched] for o in self.outputs]
        table = tabulate(rows, headers=["output", "dtype", "shape", "verdict", "max abs err", "max rel err",
                                        "RMSE compiled", "RMSE eager", "first difference (compiled vs eager)",
                                        "# differing"])
        notes = [f"{o.path}: {o.note}" for o in self.outputs if o.note and not o.passed]
        return "\n".join([head, table, *notes])

    def __str__(self) -> str:
        return self.render()


class AccuracyError(AssertionError):
    """Compiled results disagree with eager beyond what eager's own error explains (``.report``)."""

    def __init__(self, report: AccuracyReport, where: str = "") -> None:
        self.report = report
        super().__init__((f"{where}: " if where else "") + report.render())


def _widenable(value: Any) -> bool:
    """A module or a floating (or complex) tensor: what :func:`to_fp64` gives a float64 copy of."""
    return isinstance(value, torch.nn.Module) or (
        isinstance(value, torch.Tensor) and (value.is_floating_point() or value.is_complex()))


def _global_names(code: types.CodeType) -> set[str]:
    """The names ``code`` (and the code of the functions, lambdas and comprehensions in it) may
    read as globals."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def fp64_function(fn: types.FunctionType, _copies: Optional[dict[int, Any]] = None) -> types.FunctionType:
    """``fn`` reading float64 copies of the modules and floating tensors it reaches through its
    globals and closure cells (``def fn(x): return model(x)`` with a global ``model``), and calling
    such copies of the user functions it calls that reach any (``encode(x)`` reading the model):
    run as it is on float64 inputs, it met float32 weights, raised on the dtype mismatch, and was
    judged with no referee. ``fn`` itself when it reaches none; the user's objects are never
    changed. A module two functions read is copied once, as is each function (``_copies``, by the
    original's ``id``)."""
    copies: dict[int, Any] = {} if _copies is None else _copies
    if id(fn) in copies:
        return copies[id(fn)]
    copies[id(fn)] = fn  # while it is built: a function calling itself calls this copy (set below)

    def widen(value: Any) -> Any:
        if id(value) not in copies and is_user_function(value):
            fp64_function(value, copies)
            return copies[id(value)]
        return _fp64_value(value, copies)  # a global ``runner`` whose ``self.model`` it calls too

    module_globals = fn.__globals__
    own = [name for name in _global_names(fn.__code__) if name in module_globals]
    replaced = {name: copied for name in own if (copied := widen(module_globals[name])) is not module_globals[name]}
    cells = fn.__closure__ or ()
    widened_cells = []
    for cell in cells:
        try:
            value = cell.cell_contents
        except ValueError:  # a cell not filled yet
            widened_cells.append(cell)
            continue
        copied = widen(value)
        widened_cells.append(cell if copied is value else types.CellType(copied))
    if not replaced and all(a is b for a, b in zip(widened_cells, cells)):
        return fn
    namespace = {**module_globals, **replaced} if replaced else module_globals
    copy_ = types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__, tuple(widened_cells) or None)
    copy_.__kwdefaults__ = fn.__kwdefaults__
    copy_.__dict__.update(fn.__dict__)
    copies[id(fn)] = copy_
    if replaced:  # its recursive calls by global name reach the copy
        namespace.update({name: copy_ for name in own if module_globals[name] is fn})
    return copy_


def _fp64_holder(holder: Any, _copies: Optional[dict[int, Any]] = None) -> Any:
    """A shallow copy of ``holder`` (an object whose ``__call__`` or method is judged: a pipeline
    holding a model) whose module and floating tensor attributes are float64 copies, as are the
    user's objects it holds (:func:`~.reached_names.is_user_object`); ``holder`` itself when it
    holds none. Each copy is made once (``_copies``, by the original's ``id``)."""
    copies: dict[int, Any] = {} if _copies is None else _copies
    if id(holder) in copies:
        return copies[id(holder)]
    copies[id(holder)] = holder  # while it is built: an object holding itself holds the original
    attributes = getattr(holder, "__dict__", None)
    if not isinstance(attributes, dict):
        return holder
    widened: dict[str, Any] = {}
    for name, value in list(attributes.items()):
        copied = _fp64_value(value, copies)
        if copied is not value:
            widened[name] = copied
    if not widened:
        return holder
    copied_holder = copy.copy(holder)
    copied_holder.__dict__.update(widened)
    copies[id(holder)] = copied_holder
    return copied_holder


def _fp64_value(value: Any, copies: dict[int, Any]) -> Any:
    """``value`` as the fp64 referee's copies hold it: a float64 copy of a module or floating
    tensor (:func:`to_fp64`), a copy of the user's object holding such copies
    (:func:`_fp64_holder`), else ``value`` itself; each copy made once (``copies``, by ``id``)."""
    if id(value) in copies:
        return copies[id(value)]
    if _widenable(value):
        copies[id(value)] = to_fp64(value)
        return copies[id(value)]
    return _fp64_holder(value, copies) if is_user_object(value) else value


def fp64_callable(fn: Callable[..., Any]) -> Callable[..., Any]:
    """What the fp64 referee of a call whose outputs alone are judged runs: a function's
    :func:`fp64_function` (a ``functools.partial``'s, binding float64 copies of what it binds); a
    method of an object holding a model, or the object's own ``__call__``, on a copy holding
    float64 copies (:func:`_fp64_holder`); else :func:`to_fp64`."""
    if isinstance(fn, types.FunctionType):
        return fp64_function(fn)
    if isinstance(fn, functools.partial):  # ``partial(predict, model)``: what it binds widened too
        copies: dict[int, Any] = {}
        return functools.partial(fp64_callable(fn.func), *(_fp64_value(value, copies) for value in fn.args),
                                 **{key: _fp64_value(value, copies) for key, value in fn.keywords.items()})
    if isinstance(fn, types.MethodType) and not isinstance(fn.__self__, torch.nn.Module):
        return types.MethodType(fn.__func__, _fp64_holder(fn.__self__))
    if isinstance(fn, torch.nn.Module) or callable(getattr(type(fn), "to_fp64", None)):
        return to_fp64(fn)
    return _fp64_holder(fn)


def to_fp64(value: Any) -> Any:
    """Floating tensors (and modules' floating parameters, and the dtypes their FX graphs cast to:
    :func:`~minifier.judge.widen_graph`) converted to float64, complex ones to complex128; an object
    with its own ``to_fp64()`` (a call judged with its effects) converts itself. A function is
    itself: a training step's float64 run must leave its gradients on the parameters it names
    (see :func:`fp64_reference` for a function whose outputs alone are judged)."""
    own = getattr(type(value), "to_fp64", None)
    if callable(own):
        return own(value)
    if isinstance(value, torch.nn.Module):  # its FX graphs' low-precision casts widened too
        return widened_graphs(copy.deepcopy(value).double())
    if isinstance(value, types.MethodType) and isinstance(value.__self__, torch.nn.Module):
        return types.MethodType(value.__func__, to_fp64(value.__self__))  # a compiled ``model.forward``
    if isinstance(value, torch.Tensor) and (value.is_floating_point() or value.is_complex()):
        return widened(value.detach()).requires_grad_(value.requires_grad)
    if is_object_argument(value):  # a model's cache: its keys and values widened like the model
        return copy_object_argument(value, lambda t: to_fp64(t).detach())
    return value


def _compare_tensor(path: str, compiled: torch.Tensor, eager: torch.Tensor, fp64: Optional[torch.Tensor],
                    tol: Optional[float]) -> OutputComparison:
    verdict = compare_tensor(compiled, eager, fp64, tol)
    return OutputComparison(path=path, dtype=str(eager.dtype).replace("torch.", ""), shape=list(eager.shape),
                            **verdict.as_dict())


# How much further from the fp64 reference than eager a small tensor must be to count as wrong at its
# own scale: well past what reordered float arithmetic gives (compiled within a few times eager's error).
SCALED_RMSE_MULTIPLIER = 10.0


def wrong_at_its_own_scale(compiled: torch.Tensor, eager: torch.Tensor, fp64: Optional[torch.Tensor],
                           tol: Optional[float] = None) -> bool:
    """Whether a floating tensor the accuracy rule passes only because its values are small is wrong
    at their scale.

    The rule's absolute tolerance (1e-4 for float32) dominates for values under 1, and values under
    it pass any error up to 100%: a Gemma-2 attention's softcapping computes ``tanh(logits / 50)``,
    values of 1e-5, so a tanh 1% off matched eager there and diverged only after the ``* 50``.
    Judged with the absolute tolerance scaled by the tensor's largest ``|eager|`` (the relative one
    unchanged), such a tensor is wrong when it fails that and is more than
    ``SCALED_RMSE_MULTIPLIER`` times as far from the fp64 reference as eager (plus a tenth of the
    scaled tolerance): a value that is small by cancellation (a sum of terms that nearly cancel,
    zero by construction) is as far from fp64 in eager as compiled, and stays right. Without a
    reference, or at a scale of 1 and above, where the rule is relative already, it is never wrong
    here. For the search for the first wrong value (:mod:`.divergence`), not for a verdict on outputs.
    """
    if (not isinstance(fp64, torch.Tensor) or fp64.shape != eager.shape or compiled.shape != eager.shape
            or compiled.dtype != eager.dtype or not (eager.is_floating_point() or eager.is_complex())):
        return False
    magnitude = widened(eager.detach().cpu()).abs()
    magnitude = magnitude[torch.isfinite(magnitude)]
    scale = float(magnitude.max().item()) if magnitude.numel() else 0.0
    if not 0.0 < scale < 1.0:
        return False
    rtol = tol if tol is not None else tolerance_for(eager.dtype)
    return not compare_tensor(compiled, eager, fp64, rtol, atol=rtol * scale,
                              rmse_multiplier=SCALED_RMSE_MULTIPLIER).passed


# How many times eager's worst relative error an op's compiled value must exceed, past the
# relative tolerance, to be less accurate than eager's (:func:`relative_error_beyond_eager`).
RELATIVE_MULTIPLIER = 10.0


def relative_error_beyond_eager(compiled: torch.Tensor, eager: torch.Tensor, fp64: Optional[torch.Tensor],
                                tol: Optional[float] = None) -> Optional[tuple[float, float]]:
    """(compiled's worst relative error against fp64, eager's) when compiled's is past the relative
    tolerance and more than :data:`RELATIVE_MULTIPLIER` times eager's worst, or None.

    For one op judged alone, where no ill-conditioning downstream hides a loss of relative accuracy:
    ``expm1`` computed as ``exp(x) - 1`` is 1% off for |x| near 1e-6, an error the absolute tolerance
    passes and a reciprocal downstream amplifies only where eager is as far off. Elements whose fp64
    value is zero or not finite are left out; eager's worst over the rest is the scale an op's own
    rounding gives."""
    if (not isinstance(fp64, torch.Tensor) or fp64.shape != eager.shape or compiled.shape != eager.shape
            or compiled.dtype != eager.dtype or not eager.is_floating_point()):
        return None
    reference = fp64.detach().cpu().to(torch.float64)
    judged = torch.isfinite(reference) & (reference != 0) & torch.isfinite(widened(eager.detach().cpu()))
    if not judged.any():
        return None
    magnitude = reference[judged].abs()
    worst_compiled = float((absolute_difference(compiled.detach().cpu()[judged], reference[judged])
                            / magnitude).max().item())
    worst_eager = float((absolute_difference(eager.detach().cpu()[judged], reference[judged]) / magnitude).max().item())
    rtol = tol if tol is not None else tolerance_for(eager.dtype)
    if worst_compiled > rtol and worst_compiled > RELATIVE_MULTIPLIER * worst_eager:
        return worst_compiled, worst_eager
    return None


def _leaves(value: Any, prefix: str = "", depth: int = 0) -> list[tuple[str, Any]]:
    """``(path, leaf)`` of every leaf of an output: pytree containers are flattened, and an object
    that is neither a container nor a plain value (a Hugging Face ``DynamicCache``, whose tensors
    sit in its layers' attributes) is compared through the tensors in its public attributes, or,
    holding none, by its type: never by identity, which no two runs share."""
    leaves, _ = pytree.tree_flatten_with_path(value)
    result: list[tuple[str, Any]] = []
    for path, leaf in leaves:
        where = prefix + pytree.keystr(path) or "output"
        attributes = getattr(leaf, "__dict__", None)
        if isinstance(leaf, PLAIN) or not isinstance(attributes, dict):
            result.append((where, leaf))
            continue
        tensors = [] if depth >= OBJECT_DEPTH else [
            item for name, attribute in sorted(attributes.items()) if not name.startswith("_")
            for item in _leaves(attribute, f"{where}.{name}", depth + 1) if isinstance(item[1], torch.Tensor)]
        result.extend(tensors or [(where, f"<{type(leaf).__qualname__}>")])
    return result


def compare_outputs(compiled: Any, eager: Any, fp64: Any = None, *, tol: Optional[float] = None,
                    backend: str = "") -> AccuracyReport:
    """Compare two output pytrees leaf by leaf (fp64 reference optional); non-tensors must be equal."""
    compiled_leaves, eager_leaves = _leaves(compiled), _leaves(eager)
    fp64_leaves = _leaves(fp64) if fp64 is not None else [(p, None) for p, _ in eager_leaves]
    if [p for p, _ in compiled_leaves] != [p for p, _ in eager_leaves]:
        return AccuracyReport(passed=False, backend=backend, outputs=[OutputComparison(
            path="output", dtype="?", shape=[], passed=False,
            note=f"structure differs: {len(compiled_leaves)} compiled vs {len(eager_leaves)} eager outputs")])
    outputs = []
    for (path, c), (_, e), (_, r) in zip(compiled_leaves, eager_leaves, fp64_leaves):
        if isinstance(e, torch.Tensor) and isinstance(c, torch.Tensor):
            outputs.append(_compare_tensor(path, c, e, r if isinstance(r, torch.Tensor) else None, tol))
        else:
            outputs.append(OutputComparison(path=path, dtype=type(e).__name__, shape=[], passed=c == e,
                                            note="" if c == e else f"{c!r} vs {e!r}"))
    return AccuracyReport(passed=all(o.passed for o in outputs), outputs=outputs, backend=backend)


def error_line(exc: BaseException) -> str:
    """``Type: message``, its first line, at most 300 characters."""
    return f"{type(exc).__name__}: {exc}".split("\n")[0][:300]


def run_seeded(fn: Callable[..., Any], inputs: Sequence[Any], seed: int) -> Any:
    """``fn`` on copies of ``inputs``, with the RNG seeded to ``seed``, in the judged call state
    (:func:`~instrumented_backend.capture.call_state.judged_state`: ``no_grad`` unless the script called
    it with grad on, or under ``inference_mode``)."""
    torch.manual_seed(seed)
    with judged_state().applied():
        return fn(*clone_inputs(inputs))


def fp64_reference(fn: Callable[..., Any], inputs: Sequence[Any], seed: int) -> Any:
    """``fn`` (and its parameters) run in float64 on float64 copies of ``inputs``, with the random
    numbers a run at their own precision draws (:class:`~minifier.judge.RandomDraws`); None when
    an op has no float64 kernel or the float64 run draws differently (the comparison then goes on
    without the referee). A Python float that eager rounds to a float16 or bfloat16 op's dtype is
    handed to the float64 run rounded (:class:`~minifier.judge.RoundedScalars`). A function reads
    float64 copies of the modules and tensors it names, an object holding a model a copy holding
    float64 ones (:func:`fp64_callable`), and their own casts to float32 or lower are to float64
    (:class:`~.widened_casts.WidenedCasts`)."""
    with running_eagerly():
        try:
            with RandomDraws() as drawn, RoundedScalars() as rounded:
                run_seeded(fn, inputs, seed)
        except Exception:  # noqa: BLE001 - judged without the referee
            return None
        with WidenedCasts():  # a copy that cannot be made (a oneDNN weight) is no referee, as a raise is
            return replaying(drawn.draws, lambda: run_seeded(fp64_callable(fn), [to_fp64(v) for v in inputs], seed),
                             rounded.rounded)


def eager_is_nondeterministic(fn: Callable[..., Any], inputs: Sequence[Any], seed: int = 0,
                              tol: Optional[float] = None) -> tuple[Any, bool]:
    """Run eager twice with the same seed; return (first result, whether the two disagree).
    Eager all the way: code ``fn`` calls that was compiled (``@torch.compile``) runs eagerly too.
    The two runs fill what ``empty``-family ops return with two patterns (:mod:`.undefined`): an
    output that reads memory no op wrote differs between them, as it may between any two runs."""
    with running_eagerly():
        first, second = run_twice(lambda: run_seeded(fn, inputs, seed))
    return first, not compare_outputs(second, first, tol=tol).passed


@judged_as_written
def check_accuracy(fn: Callable[..., Any], *inputs: Any, backend: str = "instrumented",
                   options: Optional[dict[str, Any]] = None, tol: Optional[float] = None,
                   seed: int = 0) -> AccuracyReport:
    """Compile ``fn`` with ``backend`` and compare its outputs with eager's, fp64 as the referee.

    Random ops: the compile uses ``fallback_random`` (eager's RNG) unless ``options`` says
    otherwise, and every run starts from ``seed``. A call that updates tensors in place (an
    optimizer step, a cache write) is judged by them too, each run from the same state
    (:mod:`.effects`). Returns an :class:`AccuracyReport`; an exception in the compiled function
    is reported in ``error`` (compile errors included).
    """
    if not callable(fn):
        raise TypeError(f"check_accuracy needs a callable, got {type(fn).__name__}")
    from .effects import find_effects

    fn = find_effects(fn, inputs, seed) or fn
    eager, nondeterministic = eager_is_nondeterministic(fn, inputs, seed, tol)
    if nondeterministic:
        return AccuracyReport(passed=None, nondeterministic=True, backend=backend,
                              outputs=compare_outputs(eager, eager, tol=tol).outputs)
    fp64 = fp64_reference(fn, inputs, seed)
    compile_options = {"fallback_random": True, **(options or {})}
    torch.compiler.reset()
    compiled_fn = torch.compile(fn, backend=backend, options=compile_options)
    try:
        compiled = run_seeded(compiled_fn, inputs, seed)
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        return AccuracyReport(passed=False, backend=backend, error=error_line(exc))
    return compare_outputs(compiled, eager, fp64, tol=tol, backend=backend)


def check_graph_call(graph: torch.fx.GraphModule, args: Sequence[Any], compiled_result: Any, *,
                     tol: Optional[float] = None, backend: str = "instrumented",
                     state: Optional["GraphState"] = None,
                     args_after: Optional[Sequence[Any]] = None) -> AccuracyReport:
    """Judge one call of a compiled Dynamo graph: ``compiled_result`` against ``graph`` run eagerly.

    ``args`` are copies taken before the compiled call. Eager runs twice under two different
    seeds: if they disagree the graph is random or nondeterministic and is not judged. The
    caller's RNG state is restored afterwards, so checking never changes the program's results.

    ``state`` (:class:`~.graph_state.GraphState`, copied before the compiled call) is the state
    the graph holds as attributes (an optimizer's): each eager run starts from a fresh copy of
    it, never from the graph's own tensors, which the compiled call has updated. The attributes
    and arguments either side updates (``args_after``: the compiled call's arguments after it) are
    compared too, beside the outputs, as ``['updated'][name]``.
    """
    from minifier.graph import attribute

    from ..seams.dynamo.dynamo_sources import attribute_sources
    from .graph_state import GraphState, updated_inputs

    state = state if state is not None else GraphState.of(graph)
    rng = torch.get_rng_state()
    try:
        first, first_args, first_module = run_seeded(state.caller(graph), args, seed=0)
        second, _, _ = run_seeded(state.caller(graph), args, seed=1)
        if not compare_outputs(second, first, tol=tol).passed:
            return AccuracyReport(passed=None, nondeterministic=True, backend=backend,
                                  outputs=compare_outputs(first, first, tol=tol).outputs)
        inputs = updated_inputs(args, first_args, *([args_after] if args_after is not None else []))
        attributes = sorted(set(state.changed(first_module)) | set(state.changed(graph)))
        try:
            fp64 = run_seeded(state.caller(graph, fp64=True), [to_fp64(v) for v in args], seed=0)
        except Exception:  # noqa: BLE001 - no fp64 referee for this graph
            fp64 = None
        if not inputs and not attributes:
            return compare_outputs(compiled_result, first, fp64[0] if fp64 else None, tol=tol, backend=backend)

        names = attribute_sources(graph)  # the optimizer state as the program names it, not Dynamo's flat name

        def judged(output: Any, after: Sequence[Any], module: torch.nn.Module) -> dict[str, Any]:
            updated = {f"input {i}": after[i] for i in inputs}
            updated.update((names.get(path, path), attribute(module, path)) for path in attributes)
            return {"output": output, "updated": updated}

        compiled = judged(compiled_result, args_after if args_after is not None else first_args, graph)
        return compare_outputs(compiled, judged(first, first_args, first_module),
                               judged(*fp64) if fp64 else None, tol=tol, backend=backend)
    finally:
        torch.set_rng_state(rng)
