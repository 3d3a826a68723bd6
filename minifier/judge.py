"""Judge one candidate graph: compile it the way Inductor compiles its level, run it, classify.

This module imports nothing but torch and the standard library: the minifier's worker processes
run it, and every repro script the minifier writes embeds this file verbatim, so a repro judges
its graph exactly as the minifier did (same compile path, same comparison, same pinning).

An *outcome* is a plain dict (it crosses process boundaries)::

    {"kind": "pass" | "compile_error" | "runtime_error" | "accuracy" | "nondeterministic"
             | "crash" | "timeout" | "invalid",
     "signature": "CppCompileError: no matching function for call to 'max_propagate_nan(...)'",
     "message": "...", "failing": [output indices], "details": ["out[0]: max |err| 2.3", ...],
     "seconds": 1.2}

A *spec* says how to judge::

    {"level": "aten" | "torch", "want": "accuracy" | "compile" | "runtime",
     "dynamic": {input index: [dims]}, "dynamic_ints": [input indices], "config": {inductor key: value},
     "tol": float | None, "seed": int}
"""

from __future__ import annotations

import contextlib
import math
import re
import time
import traceback
from typing import Any, Callable, Iterator, Optional, Sequence

import torch
from torch.utils._python_dispatch import TorchDispatchMode

PASS = "pass"
COMPILE_ERROR = "compile_error"
RUNTIME_ERROR = "runtime_error"
ACCURACY = "accuracy"
NONDETERMINISTIC = "nondeterministic"
CRASH = "crash"
TIMEOUT = "timeout"
INVALID = "invalid"
# The end of an ``invalid`` outcome's signature when the worker could not unpickle the candidate: FX
# rebuilds a GraphModule by re-tracing its code, which some code refuses (see UnbuildableGraph).
UNLOADABLE = "the worker could not load the candidate"

# Parts of error messages that change as a graph shrinks but do not change what the bug is.
_NOISE = [
    (re.compile(r"(?:[A-Za-z]:)?(?:/[^\s:'\"()]+)+"), "<path>"),
    (re.compile(r"0x[0-9a-fA-F]+"), "<addr>"),
    (re.compile(r"\b(?:cpp|triton)_(?:fused|poi|red|per)\w*"), "<kernel>"),
    (re.compile(r"\b(tmp|buf|arg|x|y|in_ptr|out_ptr|in_out_ptr|primals_|tangents_)\d+(?:_\d+)?\b"), r"\1N"),
    (re.compile(r"\d+"), "N"),
    (re.compile(r"\s+"), " "),
]


def normalize(message: str) -> str:
    """The gist of an error message: its compiler ``error:`` line, or its first line, minus noise."""
    lines = [line for line in str(message).splitlines() if line.strip()]
    compiler_errors = [line.split("error:", 1)[1] for line in lines if "error:" in line]
    text = compiler_errors[0] if compiler_errors else (lines[0] if lines else "")
    for pattern, replacement in _NOISE:
        text = pattern.sub(replacement, text)
    return text.strip()[:300]


def innermost_error(exc: BaseException) -> BaseException:
    """The error under Dynamo's and Inductor's wrappers (BackendCompilerFailed, InductorError)."""
    seen = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        inner = getattr(exc, "inner_exception", None)
        if isinstance(inner, BaseException):
            exc = inner
            continue
        if type(exc).__name__ in ("BackendCompilerFailed", "InductorError") and exc.__cause__ is not None:
            exc = exc.__cause__
            continue
        break
    return exc


def describe(result: dict[str, Any]) -> str:
    """An outcome in one line: its signature, or its detail when the signature only repeats the kind
    (an accuracy failure: which outputs differ, and by how much)."""
    signature, message = result.get("signature", ""), result.get("message", "")
    if signature and signature != result.get("kind"):
        return signature
    return message[:300] or signature or "-"


def error_signature(exc: BaseException) -> str:
    """Exception type and normalised message: what must stay the same for a candidate to count."""
    inner = innermost_error(exc)
    text = getattr(inner, "output", None) or str(inner)
    return f"{type(inner).__name__}: {normalize(text)}"


def outcome(kind: str, signature: str = "", message: str = "", *, failing: Sequence[int] = (),
            details: Sequence[str] = (), seconds: float = 0.0) -> dict[str, Any]:
    return {"kind": kind, "signature": signature, "message": message[-4000:], "failing": list(failing),
            "details": list(details), "seconds": round(seconds, 3)}


def _error_outcome(kind: str, exc: BaseException, seconds: float) -> dict[str, Any]:
    inner = innermost_error(exc)
    text = getattr(inner, "output", None) or "".join(traceback.format_exception_only(type(inner), inner))
    return outcome(kind, error_signature(exc), str(text), seconds=seconds)


def matches(expected: dict[str, Any], actual: dict[str, Any], pattern: Optional[str] = None) -> bool:
    """Does ``actual`` fail the same way as ``expected``? (kind, signature; for accuracy, outputs).

    ``expected["failing"]`` for an accuracy failure lists the outputs that may fail (a repro's
    own output indices); at least one of them must. ``pattern`` (a regex) must also occur in the
    failure's message or signature when given.
    """
    if actual["kind"] != expected["kind"] or actual["kind"] in (PASS, INVALID, NONDETERMINISTIC):
        return False
    if actual["kind"] == ACCURACY:
        if expected.get("failing") and not set(actual["failing"]) & set(expected["failing"]):
            return False
    elif actual["signature"] != expected["signature"]:
        return False
    if pattern and not re.search(pattern, actual["signature"] + "\n" + actual["message"]):
        return False
    return True


# ----------------------------------------------------------------------------------- running

def clone_tensor(value: torch.Tensor) -> torch.Tensor:
    """A detached copy of ``value`` with its sizes and strides: compiled code asserts both, and
    ``clone()`` makes a view with gaps (a slice of a wider tensor) or overlaps (an expand)
    contiguous. Such a view is rebuilt over a copy of the storage span it reads."""
    value = value.detach()
    copied = value.clone(memory_format=torch.preserve_format)
    if value.layout != torch.strided or value.numel() == 0 or copied.stride() == value.stride():
        return copied
    span = 1 + sum((size - 1) * stride for size, stride in zip(value.shape, value.stride()))
    try:
        storage = value.as_strided((span,), (1,), value.storage_offset()).clone()
        return storage.as_strided(value.shape, value.stride())
    except RuntimeError:  # a tensor type that cannot be re-viewed: its values, laid out afresh
        return copied


def clone_inputs(values: Sequence[Any]) -> list[Any]:
    """Copies of ``values``: tensors by :func:`clone_tensor`, other values as they are."""
    return [clone_tensor(v) if isinstance(v, torch.Tensor) else v for v in values]


def widened(value: torch.Tensor) -> torch.Tensor:
    """``value`` in double precision (errors are measured, and the fp64 referee runs, in it):
    complex128 for a complex tensor (casting it to float64 would drop the imaginary part), else float64."""
    return value.to(torch.complex128) if value.is_complex() else value.double()


def _to_fp64(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and (value.is_floating_point() or value.is_complex()):
        return widened(value.detach())
    return value


# Ops whose dtype argument is not a precision to widen: a bitcast reads the same bits as another
# dtype, and an autocast region's dtype must stay one autocast supports (it never casts float64).
_DTYPE_KEPT = ("aten.view.dtype", "view_of_dtype", "autocast")


def _wide_dtype(value: Any) -> Any:
    if isinstance(value, torch.dtype):
        if value.is_complex:
            return torch.complex128
        if value.is_floating_point:
            return torch.float64
    return value


def _widening(node: Any) -> Optional[tuple[Any, Any, Any]]:
    """``node``'s (args, kwargs, target) computing in double precision, or None when it names no
    floating dtype to widen."""
    import torch.fx

    if node.op not in ("call_function", "call_method") or any(k in str(node.target) for k in _DTYPE_KEPT):
        return None
    if node.op == "call_method" and node.target == "view":  # ``x.view(torch.int32)``: a bitcast too
        return None
    args = torch.fx.node.map_aggregate(node.args, _wide_dtype)
    kwargs = torch.fx.node.map_aggregate(node.kwargs, _wide_dtype)
    target = "double" if node.op == "call_method" and node.target in ("half", "bfloat16", "float") else node.target
    if args == node.args and kwargs == node.kwargs and target == node.target:
        return None
    return args, kwargs, target


def widen_graph(graph: "torch.fx.Graph") -> bool:
    """Rewrite ``graph`` in place to compute in double precision: every floating dtype it names
    (``convert_element_type(x, torch.bfloat16)``, ``_to_copy(dtype=torch.float16)``, a factory's
    ``dtype=torch.float32``, ``x.to(torch.half)``, ``x.half()``) becomes float64, a complex one
    complex128. Return whether anything changed.

    The fp64 referee runs a graph on float64 copies of its inputs, but a post-grad graph of mixed
    precision (autocast, a bf16 model) casts to its low precision by name: kept, those casts round
    the referee as eager rounds, so it agreed with eager to the last bit and blamed compiled code for
    the roundings Inductor leaves out of a fused kernel (a bf16 sum accumulated in float32). An
    autocast region and a bitcast keep their dtype."""
    changed = False
    for node in graph.nodes:
        wide = _widening(node)
        if wide is not None:
            node.args, node.kwargs, node.target = wide
            changed = True
    return changed


def widened_graphs(module: torch.nn.Module) -> torch.nn.Module:
    """``module`` with every FX graph in it (its own, its submodules') widened by :func:`widen_graph`,
    in place, each changed one recompiled; returns ``module``."""
    import torch.fx

    for sub in module.modules():
        if isinstance(sub, torch.fx.GraphModule) and widen_graph(sub.graph):
            sub.recompile()
    return module


def _fp64_module(module: Any) -> Any:
    """``module`` for the fp64 referee's run: a copy with its graphs widened, or itself when no graph
    in it names a floating dtype to widen (or it is no module)."""
    import copy

    import torch.fx

    if not isinstance(module, torch.nn.Module) or not any(
            _widening(node) is not None for sub in module.modules() if isinstance(sub, torch.fx.GraphModule)
            for node in sub.graph.nodes):
        return module
    return widened_graphs(copy.deepcopy(module))


def _flat(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in _flat(item)]
    return [value]


def run_seeded(fn: Callable[..., Any], args: Sequence[Any], seed: int) -> list[Any]:
    torch.manual_seed(seed)
    with torch.no_grad():
        return _flat(fn(*clone_inputs(args)))


class RandomDraws(TorchDispatchMode):
    """The values every random ATen op (tagged ``nondeterministic_seeded``: dropout's ``bernoulli_``,
    ``rand``, ``randn``, ``randint``, ``randperm``, ...) gives under it, in call order; or, given
    ``replay``, those values handed to the same ops again.

    The fp64 referee must see the random numbers the judged run saw. Run in float64, the same
    seed draws other ones (``torch.rand`` reads 64 bits of the generator per float64, 32 per
    float32): with a drop path (stochastic depth), the referee's error against eager was that of
    two different masks, and the rule let compiled code be twice as wrong. So a run at the
    graph's own precision records (``with RandomDraws() as drawn``), and the float64 run replays them (``with
    RandomDraws(replay=drawn.draws) as replayed``): each random op's outputs, and the tensors it
    writes, take the recorded values (cast); ``native_dropout`` takes the mask and recomputes its
    output in float64. ``diverged`` says the float64 run's random ops or their shapes were not the
    recorded ones: its result is then not the same computation, and no referee.
    """

    def __init__(self, replay: Optional[list[tuple[str, list[torch.Tensor]]]] = None) -> None:
        super().__init__()
        self.recording = replay is None
        self.draws: list[tuple[str, list[torch.Tensor]]] = [] if replay is None else list(replay)
        self.position = 0
        self._diverged = False

    @property
    def diverged(self) -> bool:
        return self._diverged or (not self.recording and self.position != len(self.draws))

    def __torch_dispatch__(self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        if torch.Tag.nondeterministic_seeded not in func.tags or _no_dropout(func, args, kwargs):
            return result
        written = [value for argument, value in zip(func._schema.arguments, args)
                   if argument.alias_info is not None and argument.alias_info.is_write]
        tensors = list({id(t): t for t in [*_flat(result), *written] if isinstance(t, torch.Tensor)}.values())
        if self.recording:
            self.draws.append((func.name(), [t.detach().clone() for t in tensors]))
            return result
        if self.position >= len(self.draws):
            self._diverged = True
            return result
        name, values = self.draws[self.position]
        self.position += 1
        if name != func.name() or [v.shape for v in values] != [t.shape for t in tensors]:
            self._diverged = True
            return result
        with torch.no_grad():
            for tensor, value in zip(tensors, values):
                tensor.copy_(value)
            if func is torch.ops.aten.native_dropout.default and len(args) > 2 and args[2]:
                output, mask = tensors[0], tensors[1]
                output.copy_(args[0] * mask * (1.0 / (1.0 - args[1])) if args[1] < 1 else torch.zeros_like(output))
        return result


def _no_dropout(func: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> bool:
    """Whether ``func`` is random only by a ``dropout_p`` argument (attention's kernels) that is 0
    here: it draws nothing, and the fp64 referee must compute it, not take the value recorded at the
    graph's own precision (which rounded the referee to bfloat16 after every attention)."""
    for index, argument in enumerate(func._schema.arguments):
        if argument.name == "dropout_p":
            value = args[index] if index < len(args) else kwargs.get("dropout_p", argument.default_value)
            return isinstance(value, (int, float)) and value == 0
    return False


LOW_PRECISION = (torch.float16, torch.bfloat16)  # the dtypes eager rounds to at each op


def _low_precision_of(args: Sequence[Any], kwargs: dict[str, Any]) -> Optional[torch.dtype]:
    """The dtype of an op's floating tensor arguments when every one is float16 or bfloat16 (one dtype)."""
    dtypes = {value.dtype for value in [*args, *kwargs.values()]
              if isinstance(value, torch.Tensor) and value.is_floating_point()}
    return next(iter(dtypes)) if len(dtypes) == 1 and dtypes <= set(LOW_PRECISION) else None


def _scalars_replaced(args: Sequence[Any], kwargs: dict[str, Any], values: dict[str, float]
                      ) -> tuple[list[Any], dict[str, Any]]:
    """``args`` and ``kwargs`` with the Python floats at ``values``' places (``"3"``: positional
    argument 3; ``"alpha"``: that keyword) replaced by its values."""
    replaced = [values.get(str(index), value) for index, value in enumerate(args)]
    return replaced, {name: values.get(name, value) for name, value in kwargs.items()}


def _float_places(args: Sequence[Any], kwargs: dict[str, Any]) -> list[str]:
    return ([str(i) for i, value in enumerate(args) if type(value) is float]
            + [name for name, value in kwargs.items() if type(value) is float])


class RoundedScalars(TorchDispatchMode):
    """The Python float arguments a float16 or bfloat16 op rounds to its dtype, in call order; or,
    given ``replay``, those rounded values handed to the same ops again.

    Eager casts a Python scalar to the dtype of the tensors it meets (``margin_ranking_loss`` adds
    its ``margin=1.7`` to bfloat16 values as 1.703125); the float64 referee, left alone, computes
    with 1.7 and sides with compiled code that skips the rounding. So a run at the program's own
    precision records, for each op given a Python float with float16 or bfloat16 tensors, whether
    the op gives the same result with the float rounded to that dtype (it then rounds it, or the
    rounding changes nothing): if so the rounded value, else None. Ops that write their inputs or
    draw random numbers are not run twice and record None. The float64 run hands the recorded
    values to the same ops in the same order; at the first op that is not the recorded one it
    stops replacing (``lost``), and the referee computes with the floats as written.
    """

    def __init__(self, replay: Optional[list[tuple[str, Optional[dict[str, float]]]]] = None) -> None:
        super().__init__()
        self.recording = replay is None
        self.rounded: list[tuple[str, Optional[dict[str, float]]]] = [] if replay is None else list(replay)
        self.position = 0
        self.lost = False

    def __torch_dispatch__(self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        places = _float_places(args, kwargs)
        if not places:
            return func(*args, **kwargs)
        if self.recording:
            result = func(*args, **kwargs)
            self.rounded.append((func.name(), self._rounding(func, args, kwargs, places, result)))
            return result
        if self.lost or self.position >= len(self.rounded) or self.rounded[self.position][0] != func.name():
            self.lost = True
            return func(*args, **kwargs)
        values = self.rounded[self.position][1]
        self.position += 1
        if values:
            args, kwargs = _scalars_replaced(args, kwargs, values)
        return func(*args, **kwargs)

    @staticmethod
    def _rounding(func: Any, args: Sequence[Any], kwargs: dict[str, Any], places: list[str],
                  result: Any) -> Optional[dict[str, float]]:
        dtype = _low_precision_of(args, kwargs)
        writes = any(argument.alias_info is not None and argument.alias_info.is_write
                     for argument in func._schema.arguments)
        if dtype is None or writes or torch.Tag.nondeterministic_seeded in func.tags:
            return None
        written = {place: args[int(place)] if place.isdigit() else kwargs[place] for place in places}
        values = {place: rounded for place, value in written.items()
                  if (rounded := float(torch.tensor(value, dtype=dtype))) != value}
        if not values:
            return None
        rounded_args, rounded_kwargs = _scalars_replaced(args, kwargs, values)
        again = func(*rounded_args, **rounded_kwargs)
        first, second = _flat(result), _flat(again)
        same = len(first) == len(second) and all(
            torch.equal(a, b) if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) else a == b
            for a, b in zip(first, second))
        return values if same else None


def replaying(draws: list[tuple[str, list[torch.Tensor]]], run: Callable[[], Any],
              scalars: Optional[list[tuple[str, Optional[dict[str, float]]]]] = None) -> Optional[Any]:
    """``run()`` (a float64 referee's run) with ``draws`` (a :class:`RandomDraws` recording) replayed,
    and ``scalars`` (a :class:`RoundedScalars` recording) too when given; None when it raises (an
    op without float64) or draws otherwise: no referee then."""
    try:
        with RandomDraws(replay=draws) as replayed, (
                RoundedScalars(replay=scalars) if scalars is not None else contextlib.nullcontext()):
            result = run()
    except Exception:  # noqa: BLE001 - the judgement goes on without the referee
        return None
    return None if replayed.diverged else result


# -- the accuracy rule: one per output, used by the minifier and by instrumented_backend's checks --

RMSE_MULTIPLIER = 2.0
# An element is catastrophic when its error against fp64 is past the tolerance and more than this
# many times the worst error eager makes anywhere in the same output (both in units of the
# tolerance): an RMSE within RMSE_MULTIPLIER of eager's must not average a few of them away.
CATASTROPHIC_MULTIPLIER = 10.0


def tolerance_for(dtype: torch.dtype) -> float:
    """Absolute and relative tolerance for ``allclose`` on one floating dtype."""
    if dtype in (torch.float16, torch.bfloat16):
        return 1e-2
    if dtype == torch.float64:
        return 1e-7
    return 1e-4


class TensorVerdict:
    """One output tensor, compiled against eager (fp64 as the referee when there is one).

    A plain class, not a dataclass: repros embed this module's source and ``python -m minifier``
    runs them without a module of their own in ``sys.modules``, which dataclasses need.
    """

    FIELDS = ("passed", "max_abs_error", "max_rel_error", "rmse_compiled", "rmse_eager", "mismatched",
              "first_bad_index", "compiled_value", "eager_value", "note", "tolerance", "tolerance_used",
              "largest_value", "catastrophic", "unequal")

    def __init__(self, passed: bool, note: str = "") -> None:
        self.passed = passed
        self.max_abs_error = 0.0
        self.max_rel_error = 0.0
        self.rmse_compiled: Optional[float] = None  # against fp64
        self.rmse_eager: Optional[float] = None  # against fp64
        self.mismatched = 0
        self.first_bad_index: Optional[list[int]] = None
        self.compiled_value: Optional[complex] = None  # at first_bad_index (a float unless the tensor is complex)
        self.eager_value: Optional[complex] = None
        self.note = note
        self.tolerance: Optional[float] = None  # allclose's atol and rtol for a floating tensor
        # the largest |compiled - eager| / (atol + rtol * |eager|): above 1 allclose fails it
        self.tolerance_used = 0.0
        self.largest_value: Optional[float] = None  # the largest finite |eager| of a floating tensor
        self.catastrophic = 0  # elements far past the tolerance against fp64 where eager is not (see the rule)
        self.unequal = 0  # elements not exactly eager's (NaN equal to NaN), within tolerance or not

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.FIELDS}


def _scalar(value: torch.Tensor) -> "float | complex":
    """One element as a Python number (a complex one for a complex tensor)."""
    return complex(value.item()) if value.is_complex() else float(value.item())


def _rmse(reference: torch.Tensor, value: torch.Tensor) -> float:
    if not reference.numel():
        return 0.0
    return math.sqrt(torch.mean(torch.square(absolute_difference(reference, value))).item())


def absolute_difference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``|a - b|`` widened, elementwise, with non-finite values counted: 0 where both are the same
    infinity or both NaN, ``inf`` where only one side is non-finite or they are opposite
    infinities (an ``inf`` against a finite value is the largest error there is, never 0)."""
    wide_a, wide_b = widened(a), widened(b)
    difference = (wide_a - wide_b).abs()
    alike = (wide_a == wide_b) | (torch.isnan(wide_a) & torch.isnan(wide_b))
    difference = torch.where(alike, torch.zeros_like(difference), difference)
    return torch.where(torch.isnan(difference), torch.full_like(difference, math.inf), difference)


def _largest(values: torch.Tensor) -> float:
    return float(values.max().item()) if values.numel() else 0.0


def catastrophic_elements(compiled: torch.Tensor, eager: torch.Tensor, fp64: torch.Tensor, atol: float,
                          rtol: float) -> torch.Tensor:
    """The mask of elements whose error against ``fp64`` is past the tolerance (``atol + rtol *
    |fp64|``) and more than ``CATASTROPHIC_MULTIPLIER`` times the worst error eager makes anywhere
    in the output, both in units of that tolerance. Eager's worst bounds what reordered or fused
    float arithmetic can give on these values (an ill-conditioned output has a large one); a few
    elements far beyond it are a wrong computation, whatever the output's RMSE says."""
    reference = widened(fp64)
    allowed = atol + rtol * reference.abs().nan_to_num(posinf=0.0)
    compiled_error = absolute_difference(compiled, reference) / allowed
    eager_worst = _largest(absolute_difference(eager, reference) / allowed)
    if math.isinf(eager_worst):  # eager itself overflows or gives NaN: no scale to judge elements at
        return torch.zeros_like(compiled_error, dtype=torch.bool)
    return (compiled_error > 1.0) & (compiled_error > CATASTROPHIC_MULTIPLIER * max(eager_worst, 1e-3))


def compare_tensor(compiled: torch.Tensor, eager: torch.Tensor, fp64: Optional[torch.Tensor] = None,
                   tol: Optional[float] = None, *, atol: Optional[float] = None,
                   rmse_multiplier: float = RMSE_MULTIPLIER) -> TensorVerdict:
    """The accuracy rule for one output.

    Shape and dtype must match. Integer and bool outputs must be equal. A floating output passes
    when it is ``allclose`` to eager at ``tol`` (default: :func:`tolerance_for` its dtype), or,
    given an fp64 reference, when its RMSE against it is at most ``RMSE_MULTIPLIER`` times eager's
    own (plus tol/10) and no element is catastrophic (:func:`catastrophic_elements`): compiled
    code may be as wrong as eager is, not much more, on average or anywhere. The RMSE half is the
    rule of ``torch._dynamo.utils.same``, applied per output. An ``inf`` or NaN against a finite
    value is an error of ``inf`` in every figure. ``atol`` (default ``tol``) and
    ``rmse_multiplier`` set the absolute tolerance and the multiplier apart, for a judgement at a
    tensor's own scale (``instrumented_backend``'s first-divergence search).
    """
    if compiled.shape != eager.shape or compiled.dtype != eager.dtype:
        return TensorVerdict(False, note=f"compiled gave {compiled.dtype} {list(compiled.shape)}")
    compiled, eager = compiled.detach().cpu(), eager.detach().cpu()
    verdict = TensorVerdict(True)
    if not eager.is_floating_point() and not eager.is_complex():
        bad = compiled != eager
        difference = (compiled.long() - eager.long()).abs() if eager.dtype != torch.bool else bad.long()
        verdict.max_abs_error = float(difference.max().item()) if difference.numel() else 0.0
        verdict.passed = not bool(bad.any())
        verdict.unequal = int(bad.sum().item())
    else:
        rtol = tol if tol is not None else tolerance_for(eager.dtype)
        atol = rtol if atol is None else atol
        difference = absolute_difference(compiled, eager)
        verdict.unequal = int((difference != 0).sum().item())
        verdict.max_abs_error = _largest(difference)
        magnitude = widened(eager).abs().nan_to_num(posinf=0.0)
        verdict.max_rel_error = _largest(difference / magnitude.clamp_min(1e-12))
        verdict.tolerance = atol
        verdict.tolerance_used = _largest(difference / (atol + rtol * magnitude))
        verdict.largest_value = _largest(magnitude)
        bad = ~torch.isclose(compiled, eager, atol=atol, rtol=rtol, equal_nan=True)
        fp64_ok = isinstance(fp64, torch.Tensor) and fp64.shape == eager.shape
        if bad.any() and fp64_ok:
            reference = fp64.detach().cpu()
            verdict.rmse_compiled = _rmse(reference, compiled)
            verdict.rmse_eager = _rmse(reference, eager)
            verdict.catastrophic = int(catastrophic_elements(compiled, eager, reference, atol, rtol).sum().item())
            rmse_passes = verdict.rmse_compiled <= rmse_multiplier * verdict.rmse_eager + atol / 10.0
            verdict.passed = rmse_passes and not verdict.catastrophic
            if rmse_passes and verdict.catastrophic:
                verdict.note = (f"{verdict.catastrophic} element(s) past the tolerance against fp64 and more than "
                                f"{CATASTROPHIC_MULTIPLIER:g}x eager's worst error, though the RMSE is within "
                                f"{rmse_multiplier:g}x eager's")
        else:
            verdict.passed = not bool(bad.any())
    verdict.mismatched = int(bad.sum().item())
    if bad.any():
        first = [int(i) for i in torch.nonzero(bad)[0].tolist()] if bad.dim() else []
        verdict.first_bad_index = first
        verdict.compiled_value = _scalar(compiled[tuple(first)])
        verdict.eager_value = _scalar(eager[tuple(first)])
    return verdict


def _same(ref: Any, res: Any, fp64: Any, tol: Optional[float]) -> bool:
    """One output of a graph: tensors by :func:`compare_tensor`, other values equal (floats close)."""
    if isinstance(ref, torch.Tensor) and isinstance(res, torch.Tensor):
        return compare_tensor(res, ref, fp64 if isinstance(fp64, torch.Tensor) else None, tol).passed
    if isinstance(ref, float) and isinstance(res, float):
        limit = tol if tol is not None else tolerance_for(torch.float32)
        return abs(ref - res) <= limit * max(1.0, abs(ref))
    return ref == res


def _detail(index: int, ref: Any, res: Any) -> str:
    if isinstance(ref, torch.Tensor) and isinstance(res, torch.Tensor) and ref.shape == res.shape:
        if ref.dtype != res.dtype:
            return f"out[{index}]: dtype {res.dtype}, eager {ref.dtype}"
        diff = (widened(res) - widened(ref)).abs()
        diff = torch.where(torch.isnan(diff), torch.full_like(diff, float("inf")), diff)
        return f"out[{index}]: max |compiled - eager| = {diff.max().item():.4g}" if diff.numel() else f"out[{index}]"
    shape = getattr(res, "shape", None)
    found = tuple(shape) if shape is not None else res
    return f"out[{index}]: {type(res).__name__} {found!r}, eager {getattr(ref, 'shape', ref)!r}"


@contextlib.contextmanager
def autocast_off() -> Iterator[None]:
    """Autocast off in the block for every device it was on for, as in a worker (a fresh process,
    or a copy of one reset to a fresh process's state): what the caller records for candidates'
    inputs, and judges itself, is then what a worker computes. A post-AOT graph holds autocast's
    casts already, and Inductor compiles and runs one with autocast off: replayed under a caller's
    ``torch.autocast``, its float32 ops would run in bfloat16 (a softmax's ``exp`` recorded in
    bfloat16 and judged at bfloat16's tolerance passes where the worker's float32 one fails; an
    ``aten.bmm`` of float32 inputs gives bfloat16 where the compiled code gives float32)."""
    with contextlib.ExitStack() as stack:
        for device in ("cpu", "cuda"):
            if torch.is_autocast_enabled(device):
                stack.enter_context(torch.autocast(device_type=device, enabled=False))
        yield


@contextlib.contextmanager
def caches_off(config: dict[str, Any]):
    """Inductor config patches in effect, with the FX-graph and AOTAutograd caches off.

    The caches' keys cannot see in-memory patches (an injected fault, a local edit): a cached
    build could "reproduce" a fixed bug, or hide a new one.
    """
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    patches = {"fx_graph_cache": False, "fx_graph_remote_cache": False, **config}
    with inductor_config.patch(patches), functorch_config.patch(enable_autograd_cache=False):
        yield


def _marked(args: Sequence[Any], dynamic: dict[Any, Sequence[int]]) -> list[Any]:
    """Copies of ``args`` whose tensors have the dimensions ``dynamic`` names marked dynamic and
    every other dimension marked static: the graph is re-traced with exactly its own symbolic
    sizes. Under ``dynamic=True`` (a graph taking symbolic ints) an unmarked dimension would be made
    symbolic too, each weight's included, and Dynamo's symbolic reasoning about sizes that were
    static grows without bound (a dynamic-shape SegFormer's re-trace ran for minutes in sympy)."""
    args = clone_inputs(args)
    for index, value in enumerate(args):
        if not isinstance(value, torch.Tensor):
            continue
        dims = {int(dim) for dim in dynamic.get(index, dynamic.get(str(index), ()))}
        for dim in range(value.dim()):
            if dim in dims:
                torch._dynamo.maybe_mark_dynamic(value, dim)
            else:
                torch._dynamo.mark_static(value, dim)
    return args


def _made_to_require_grad(args: list[Any], spec: dict[str, Any]) -> list[Any]:
    """``args`` (copies) with the inputs ``spec["requires_grad"]`` names made leaves that require grad."""
    for index in spec.get("requires_grad") or ():
        value = args[int(index)]
        if isinstance(value, torch.Tensor) and not value.requires_grad:
            value.requires_grad_()
    return args


def _detached(values: list[Any]) -> list[Any]:
    return [v.detach() if isinstance(v, torch.Tensor) else v for v in values]


def compile_and_run(module: torch.nn.Module, args: Sequence[Any], spec: dict[str, Any]) -> tuple[str, Any]:
    """Compile ``module`` as Inductor compiles its level and run it once: ``("ok", outputs)``,
    ``("compile", exception)`` or ``("run", exception)``.

    Static shapes: a post-AOT ATen graph goes straight to ``compile_fx_inner`` (as after AOT
    autograd), a torch-level graph to ``compile_fx`` (as a Dynamo backend). Symbolic shapes:
    Dynamo re-traces the graph with the originally symbolic dimensions marked dynamic, so the
    candidate is compiled with symbolic sizes, not specialised to the example's. A torch-level
    graph with inputs that require grad (``spec["requires_grad"]``) is compiled with grad enabled,
    as a training graph, and its forward run so.
    """
    from torch._inductor.compile_fx import compile_fx, compile_fx_inner

    dynamic = spec.get("dynamic") or {}
    dynamic_ints = spec.get("dynamic_ints") or []
    training = bool(spec.get("requires_grad")) and spec["level"] == "torch"
    with caches_off(spec.get("config") or {}), torch.set_grad_enabled(training or torch.is_grad_enabled()):
        if not dynamic and not dynamic_ints:
            try:
                if spec["level"] == "aten":
                    compiled_inner = compile_fx_inner(module, clone_inputs(args))

                    def compiled(*call_args: Any) -> Any:
                        return compiled_inner(list(call_args))
                else:
                    compiled = compile_fx(module, _made_to_require_grad(clone_inputs(args), spec))
            except Exception as exc:  # noqa: BLE001 - the candidate's failure is the result
                return "compile", exc
            if training:
                try:
                    torch.manual_seed(spec.get("seed", 0))
                    return "ok", _detached(_flat(compiled(*_made_to_require_grad(clone_inputs(args), spec))))
                except Exception as exc:  # noqa: BLE001
                    return "run", exc
        else:
            failures: list[BaseException] = []

            def backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Any:
                try:
                    return compile_fx(gm, example_inputs)
                except Exception as exc:
                    failures.append(exc)
                    raise

            torch.compiler.reset()
            compiled = torch.compile(module, backend=backend, fullgraph=True,
                                     dynamic=True if dynamic_ints else None)
            try:
                torch.manual_seed(spec.get("seed", 0))
                with torch.set_grad_enabled(training):
                    first = _detached(_flat(compiled(*_made_to_require_grad(_marked(args, dynamic), spec))))
            except Exception as exc:  # noqa: BLE001
                return ("compile" if failures else "run"), (failures[0] if failures else exc)
            return "ok", first
        try:
            return "ok", run_seeded(compiled, args, spec.get("seed", 0))
        except Exception as exc:  # noqa: BLE001
            return "run", exc


def judge(module: torch.nn.Module, args: Sequence[Any], spec: dict[str, Any]) -> dict[str, Any]:
    """Compile and run one candidate and say how it fails (see the module docstring)."""
    start = time.perf_counter()
    seed = spec.get("seed", 0)
    want = spec.get("want", ACCURACY)
    reference = fp64 = None
    if want == ACCURACY:
        try:
            with RandomDraws() as drawn:
                reference = run_seeded(module, args, seed)
            again = run_seeded(module, args, seed)
        except Exception as exc:  # noqa: BLE001 - a graph eager cannot run is not a candidate
            return _error_outcome(INVALID, exc, time.perf_counter() - start)
        tol = spec.get("tol")  # None: each output's dtype sets its own
        if len(again) != len(reference) or not all(_same(a, b, None, tol) for a, b in zip(reference, again)):
            return outcome(NONDETERMINISTIC, "eager results differ between two seeded runs",
                           seconds=time.perf_counter() - start)
        fp64 = replaying(drawn.draws, lambda: run_seeded(_fp64_module(module), [_to_fp64(a) for a in args], seed))
    status, value = compile_and_run(module, args, spec)
    seconds = time.perf_counter() - start
    if status == "compile":
        return _error_outcome(COMPILE_ERROR, value, seconds)
    if status == "run":
        return _error_outcome(RUNTIME_ERROR, value, seconds)
    if want != ACCURACY:
        return outcome(PASS, seconds=seconds)
    failing, details = [], []
    for index, (ref, res) in enumerate(zip(reference, value)):
        ref64 = fp64[index] if fp64 is not None and len(fp64) == len(reference) else None
        if not _same(ref, res, ref64, tol):
            failing.append(index)
            details.append(_detail(index, ref, res))
    if len(value) != len(reference):
        failing.append(len(reference))
        details.append(f"{len(value)} outputs, eager has {len(reference)}")
    if failing:
        return outcome(ACCURACY, "accuracy", "; ".join(details), failing=failing, details=details, seconds=seconds)
    return outcome(PASS, seconds=seconds)
