"""Which layer of torch.compile breaks a function: the tutorial's backend-by-backend table, automated.

``eager`` (Dynamo only) -> ``aot_eager`` (+ AOTAutograd) -> ``aot_eager_decomp_partition``
(+ decompositions and partitioning) -> ``inductor`` (+ lowering and codegen) -> ``instrumented``.
Each layer is compiled fresh, run, and judged against eager with the accuracy rule of
:mod:`.accuracy`. The first failing layer names the culprit; ``bisect=True`` then asks
Inductor's own ``CompilerBisector`` for the subsystem (and the application of it) that breaks.
"""

from __future__ import annotations

import contextlib
import io
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import torch

from ..capture.as_written import judged_as_written
from .accuracy import (
    AccuracyReport,
    compare_outputs,
    eager_is_nondeterministic,
    fp64_reference,
    run_seeded,
)
from .compile_error import find_cpp_compile_error, parse_compiler_output
from .optimizer_updates import judge_effect_updates

__all__ = ["LAYERS", "SKIPPED", "LayerResult", "LayerReport", "find_failing_layer", "judge_layers",
           "run_calls_before", "same_random_numbers"]

LAYERS = ("eager", "aot_eager", "aot_eager_decomp_partition", "inductor", "instrumented")

_WHAT_IT_ADDS = {
    "eager": "Dynamo graph capture",
    "aot_eager": "AOTAutograd tracing (functionalization, joint graph)",
    "aot_eager_decomp_partition": "decompositions and the min-cut partitioner",
    "inductor": "Inductor: post-grad passes, lowering, fusion, code generation",
    "instrumented": "this package's instrumentation around Inductor",
}


@dataclass
class LayerResult:
    """One backend's outcome: ``status`` is ``ok``, ``error``, ``inaccurate`` or ``skipped`` (not
    run: a later layer, which runs this one's part too, passes)."""

    backend: str
    status: str
    detail: str = ""
    seconds: float = 0.0
    accuracy: Optional[AccuracyReport] = None


@dataclass
class LayerReport:
    """The table of layers, the first failing one, and (optionally) Inductor's bisection."""

    layers: list[LayerResult] = field(default_factory=list)
    nondeterministic: bool = False
    bisection: Optional[dict[str, Any]] = None

    @property
    def first_failing(self) -> Optional[str]:
        for layer in self.layers:
            if layer.status not in ("ok", SKIPPED):
                return layer.backend
        return None

    def render(self) -> str:
        from tabulate import tabulate

        rows = [[layer.backend, layer.status.upper() if layer.status not in ("ok", SKIPPED) else layer.status,
                 f"{layer.seconds:.1f}s" if layer.status != SKIPPED else "",
                 layer.detail[:110]] for layer in self.layers]
        out = [tabulate(rows, headers=["backend", "result", "time", "detail"])]
        if self.nondeterministic:
            out.append("eager is nondeterministic: accuracy was not judged")
        failing = self.first_failing
        if failing is None:
            out.append("every layer passes")
        else:
            out.append(f"first failing layer: {failing} - the bug is in what it adds: {_WHAT_IT_ADDS[failing]}")
        if self.bisection:
            parts = ", ".join(f"{k}={v}" for k, v in self.bisection.items() if v is not None and k != "log")
            out.append(f"Inductor's compiler bisector: {parts}")
        return "\n".join(out)

    def __str__(self) -> str:
        return self.render()


SKIPPED = "skipped"


def judge_layers(layers: Sequence[str], judge: Callable[[str], LayerResult], *, top_down: bool = False,
                 stop_at_first: bool = False) -> list[LayerResult]:
    """Each layer's result, in the order of ``layers`` (each runs the parts of those before it).

    In order by default (``stop_at_first``: none after the first failure). ``top_down`` judges the
    last layer first, then each one below it until one passes; the layers below a passing one are
    not run (``skipped``): where the bug is in a late layer (Inductor's), the first failing layer
    is found in two runs instead of one per layer. When the last layer passes, every layer runs."""
    if not top_down:
        results: list[LayerResult] = []
        for backend in layers:
            results.append(judge(backend))
            if stop_at_first and results[-1].status != "ok":
                break
        return results
    found = {layers[-1]: judge(layers[-1])}
    if found[layers[-1]].status == "ok":
        found.update((backend, judge(backend)) for backend in layers[:-1])
    else:
        for index in range(len(layers) - 2, -1, -1):
            found[layers[index]] = judge(layers[index])
            if found[layers[index]].status == "ok":
                found.update((below, LayerResult(below, SKIPPED, f"not run: {layers[index]} passes, and it runs "
                                                 "this layer's part too")) for below in layers[:index])
                break
    return [found[backend] for backend in layers]


def _error_summary(exc: BaseException) -> str:
    """One line: the exception type and, for a C++ compile error, the compiler's first error."""
    text = f"{type(exc).__name__}: {exc}"
    first = next((line for line in text.splitlines() if line.strip()), text)
    cpp_error = find_cpp_compile_error(exc)
    if cpp_error is not None:
        errors = [m for m in parse_compiler_output(cpp_error.output) if m.severity.endswith("error")]
        if errors:
            first = f"{type(cpp_error).__name__}: {errors[0].text}"
    return first


def same_random_numbers() -> contextlib.AbstractContextManager[None]:
    """Inductor's ``fallback_random`` for every layer, so random ops draw what eager draws.

    Inductor's decompositions replace ``native_dropout``, ``rand_like`` and friends with faster
    random code unless ``fallback_random`` is set, and ``aot_eager_decomp_partition`` uses those
    same decompositions: without the switch a dropout there draws other numbers than eager's
    and the layer looks broken when nothing is."""
    from ..seams.aot.inductor_options import inductor_config_patch

    return inductor_config_patch({"fallback_random": True})


def run_calls_before(compiled: Callable[..., Any], fn: Callable[..., Any], calls_before: Sequence[Sequence[Any]],
                     seed: int) -> None:
    """Call ``compiled`` on each of ``calls_before`` (copies, under ``no_grad``; results dropped,
    ``fn``'s weights and buffers put back): the calls a script made before the one judged, which
    shape what Dynamo compiles for it (a recompile for a new shape compiles its sizes symbolically)."""
    from .step_state import StepState

    with StepState.of(fn).kept():
        for inputs in calls_before:
            run_seeded(compiled, inputs, seed)


@dataclass(frozen=True)
class _LayerCall:
    """The call :func:`find_failing_layer` judges under each layer: the function and its inputs,
    what eager and the float64 reference give for them, how each layer compiles it, and the
    calls made on it before the judged one."""

    fn: Callable[..., Any]
    inputs: tuple[Any, ...]
    eager: Any
    fp64: Any
    tol: Optional[float]
    seed: int
    options: Optional[dict[str, Any]]
    dynamic: Optional[bool]
    fullgraph: bool
    calls_before: Sequence[Sequence[Any]]

    def judged(self, result: Any, backend: Optional[str] = None) -> Any:
        """``result`` against eager and float64 (an optimizer step: its update at its own scale too)."""
        report = compare_outputs(result, self.eager, self.fp64, tol=self.tol, backend=backend)
        return judge_effect_updates(report, self.fn, result, self.eager, self.fp64, self.tol)

    def judge(self, backend: str) -> LayerResult:
        """Compile the function with ``backend`` and judge its call."""
        torch.compiler.reset()
        started = time.perf_counter()
        kwargs: dict[str, Any] = {}
        if backend in ("inductor", "instrumented"):
            kwargs["options"] = {"fallback_random": True, **(self.options or {})}
        try:
            with same_random_numbers():
                compiled = torch.compile(self.fn, backend=backend, dynamic=self.dynamic, fullgraph=self.fullgraph,
                                         **kwargs)
                run_calls_before(compiled, self.fn, self.calls_before, self.seed)
                result = run_seeded(compiled, self.inputs, self.seed)
        except Exception as exc:  # noqa: BLE001 - a failing layer is a finding, not a crash
            return LayerResult(backend, "error", _error_summary(exc), time.perf_counter() - started)
        report = self.judged(result, backend)
        seconds = time.perf_counter() - started
        if report.passed:
            return LayerResult(backend, "ok", "matches eager", seconds, report)
        worst = report.failing[0]
        detail = (f"{worst.path}: max abs err {worst.max_abs_error:.3g}, {worst.mismatched} element(s) differ"
                  + (f", first at {worst.first_bad_index}" if worst.first_bad_index is not None else "")
                  + (f" ({worst.note})" if worst.note else ""))
        return LayerResult(backend, "inaccurate", detail, seconds, report)

    def bisect(self) -> Optional[dict[str, Any]]:
        """Inductor's ``CompilerBisector`` on the call: the first subsystem whose change makes it fail."""
        from ..seams.aot.bisector import bisect

        def passes() -> bool:
            torch.compiler.reset()
            try:
                # fallback_random as a config patch, not options=: the bisector swaps in the eager and
                # aot_eager backends, which warn about (and ignore) options.
                with same_random_numbers():
                    result = run_seeded(torch.compile(self.fn, backend="inductor"), self.inputs, self.seed)
            except Exception:  # noqa: BLE001
                return False
            return bool(self.judged(result).passed)

        log = io.StringIO()
        with contextlib.redirect_stdout(log):  # the bisector narrates on stdout; keep it in the report
            found = bisect(passes)
        torch.compiler.reset()
        if found is None:
            return None
        return {"backend": found.backend, "subsystem": found.subsystem, "bisect_number": found.bisect_number,
                "debug_info": found.debug_info, "log": log.getvalue()}


@judged_as_written
def find_failing_layer(fn: Callable[..., Any], *inputs: Any, layers: tuple[str, ...] = LAYERS,
                       options: Optional[dict[str, Any]] = None, dynamic: Optional[bool] = None,
                       fullgraph: bool = False, tol: Optional[float] = None, seed: int = 0, bisect: bool = False,
                       stop_at_first: bool = False, top_down: bool = False,
                       calls_before: Sequence[Sequence[Any]] = ()) -> LayerReport:
    """Run ``fn`` under each layer of torch.compile and report the first that errors or is inaccurate.

    ``options`` go to the Inductor-based layers, ``dynamic`` and ``fullgraph`` to every ``torch.compile``
    (with ``fullgraph=True`` a graph break fails the first layer, Dynamo's, as it failed the user).
    ``bisect=True`` runs Inductor's ``CompilerBisector`` when a layer fails (many compiles: seconds to minutes).
    ``stop_at_first`` skips the layers after the first failure; ``top_down`` starts from the last
    layer and skips those below the first that passes (:func:`judge_layers`). ``calls_before``
    (each a tuple of inputs) are made on each compiled ``fn`` before the judged call, unjudged: the
    calls that made Dynamo recompile for these inputs as it did (with symbolic sizes, say).
    """
    unknown = [name for name in layers if name not in LAYERS]
    if unknown:
        raise ValueError(f"unknown layer(s) {unknown}; layers are {list(LAYERS)}")
    eager, nondeterministic = eager_is_nondeterministic(fn, inputs, seed, tol)
    report = LayerReport(nondeterministic=nondeterministic)
    call = _LayerCall(fn, inputs, eager, fp64_reference(fn, inputs, seed), tol, seed, options, dynamic, fullgraph,
                      calls_before)

    def judge(backend: str) -> LayerResult:
        result = call.judge(backend)
        if nondeterministic and result.status == "inaccurate":
            result.status, result.detail = "ok", "not judged: eager is nondeterministic"
        return result

    report.layers = judge_layers(layers, judge, top_down=top_down, stop_at_first=stop_at_first)
    torch.compiler.reset()
    if bisect and report.first_failing is not None and not nondeterministic:
        report.bisection = call.bisect()
    return report
