"""``diagnose`` as a pipeline of stages, run top to bottom until one ends the diagnosis.

Each stage reads what the stages before it left on the :class:`DiagnosisRun` and either ends the
diagnosis (returns True: the verdict is known and nothing after it applies) or passes on:

1. :func:`judge_eager` - eager twice with one seed: nondeterministic, or eager's own error;
2. :func:`judge_compiled` - compile with the instrumented backend, run, judge against eager (fp64 referee);
3. :func:`differs_by_design` - a difference Inductor makes by design (precision casts, random draws);
4. :func:`keeps_scalars_unrounded` - Python floats eager rounds to float16 or bfloat16, compiled code not;
5. :func:`hidden_by_conditioning` - passed only against fp64: each op alone, in relative terms;
6. :func:`judged_blind` - passed with outputs under their tolerance: the buffers inside;
7. :func:`amplified_by_the_program` - passed only against fp64, no op alone worse: rounding amplified;
8. :func:`no_bug_found` - nothing found: why an injected fault made none;
9. :func:`judge_custom_ops` - a custom op's schema or fake implementation;
10. :func:`find_layer` - the failing layer (eager / aot_eager / decomp / inductor);
11. :func:`find_culprit` - the first diverging buffer and its culprit, one function per verdict
    (:mod:`.culprit`), and the graph to minify from it;
12. :func:`minify_from_culprit` - the minimal repro.

A new step is a function of the run that goes into :data:`STAGES` where it belongs.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from ..capture.as_written import as_written
from ..capture.call_state import INFERENCE, CallState, judged_state, judging_in
from ..capture.left_out import LeftOut
from ..capture.redirect import target_name
from ..seams.aot.fake_tensor_log import meta_failures_unlogged
from .accuracy import eager_is_nondeterministic
from .accuracy import error_line as _error_text
from .amplified import amplified_rounding
from .auto_minify import prewarm_worker, release_worker
from .by_design import designed_difference
from .culprit import (
    SearchScope,
    culprit_inside,
    culprit_of_compile_error,
    culprit_of_inaccurate,
    culprit_of_wrong_gradient,
    python_wrapper_scope,
    wrapper_only_target,
)
from .custom_ops import check_custom_ops as opcheck_custom_ops
from .divergence import DivergenceReport, find_first_divergence, has_cpp_wrapper, less_accurate_op
from .eager_raises import returns_where_eager_raises
from .error_origin import raising_line
from .fault_notes import unfound_faults
from .faults import active_faults, lowering_uses
from .judged_compile import JudgedCompile, compile_and_judge
from .keyword_call import keyword_call, laid_out_calls, without_wrapper
from .layers import find_failing_layer
from .minimal_repro import MinifyTarget, minimal_repro
from .settings import DiagnoseSettings
from .training import TRAINING_LAYERS, requiring_grad, training_is_nondeterministic, training_layers
from .unrounded_scalars import unrounded_scalars
from .verdict import Diagnosis, DiagnosisStep
from .written import finish

if TYPE_CHECKING:
    from ..graphs import GraphCapture

__all__ = ["DiagnosisRun", "Progress", "STAGES", "diagnose_callable", "run_stages"]


class Progress:
    """One line per step on stderr: on a terminal, or when asked; quiet when piped."""

    def __init__(self, enabled: Optional[bool], started: float) -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.started = started

    def __call__(self, text: str) -> None:
        if self.enabled:
            print(f"[diagnose {time.perf_counter() - self.started:6.1f} s] {text}", file=sys.stderr, flush=True)


@dataclass
class DiagnosisRun:
    """One diagnosis under way: what it judges, what the stages found so far, and its clock."""

    settings: DiagnoseSettings
    target: Callable[..., Any]  # as the caller passed it
    fn: Callable[..., Any]  # as judged: a keyword call wraps it, a call updating tensors is judged by them too
    laid_out: Callable[..., Any]  # the keyword call, to name modules as the user's model names them
    inputs: Sequence[Any]
    before: list[tuple[Any, ...]]  # the calls made before the judged one, laid out as ``fn`` takes them
    result: Diagnosis
    say: Progress
    started: float
    worker: Any = None  # the minifier's worker, started early; closed when nothing will be minified
    faults_before: list[tuple[Any, int]] = field(default_factory=list)  # injected faults, their uses so far
    eager: Any = None  # eager's outputs (an inference call)
    own_backward: bool = False  # a training step that runs its own backward: never run under no_grad
    judged: Optional[JudgedCompile] = None
    captures: list["GraphCapture"] = field(default_factory=list)  # what the HTML report is drawn from
    minify_from: Optional[MinifyTarget] = None

    @property
    def graphs(self) -> list["GraphCapture"]:
        """The graphs the judged compile captured."""
        return self.judged.graphs if self.judged is not None else []

    def step(self, label: str, began: float, summary: str = "") -> None:
        """Record a step that began at ``began``."""
        self.result.steps.append(DiagnosisStep(label, time.perf_counter() - began, summary))

    def judge_with(self, options: Optional[dict[str, Any]] = None) -> JudgedCompile:
        """Compile the target again with Inductor ``options`` (the settings' by default), run and judge it."""
        return compile_and_judge(self.fn, self.inputs, self.settings, eager=self.eager, before=self.before,
                                 options=options)

    def release_worker(self) -> None:
        """Close the minifier's worker: nothing will be minified."""
        worker, self.worker = self.worker, None
        if worker is not None:
            release_worker(worker)

    def named(self, label: str) -> str:
        """A module label as the user's model names it, not through the keyword call's wrapper."""
        return without_wrapper(label, self.laid_out)


def judge_eager(run: DiagnosisRun) -> bool:
    """Eager twice with one seed: a nondeterministic function is reported as such, never as a bug;
    eager's own error is the program's, unless the compiled code returns a value there."""
    settings, result = run.settings, run.result
    began = time.perf_counter()
    if not settings.train:  # a call that updates tensors in place (an optimizer step) is judged by them too
        from .effects import find_effects

        effects = find_effects(run.fn, run.inputs, settings.seed)
        if effects is not None:
            run.fn, result.effects = effects, effects.describe()
    run.say("eager, twice with one seed")
    try:
        if settings.train:
            nondeterministic, run.own_backward = training_is_nondeterministic(run.fn, run.inputs, settings.seed,
                                                                              settings.tol)
        else:  # eager's outputs, kept
            run.eager, nondeterministic = eager_is_nondeterministic(run.fn, run.inputs, settings.seed, settings.tol)
    except Exception as exc:  # noqa: BLE001 - eager's own error: does the compiled code raise too?
        run.step("eager", began)
        result.verdict, result.error, result.eager_error_at = "eager_error", _error_text(exc), raising_line(exc)
        run.release_worker()
        began = time.perf_counter()
        run.say("eager raises: running the compiled code on the same arguments")
        returned = returns_where_eager_raises(run.fn, run.inputs, settings.compile.inductor_options,
                                              settings.compile.dynamo_kwargs, settings.seed, run.before)
        run.step("compiled", began, "returns" if returned else "raises too")
        if returned:
            result.verdict, result.graphs, run.captures = "skipped_error", [g.label for g in returned], returned
        return True
    run.step("eager", began)
    if nondeterministic:
        result.verdict = "nondeterministic"
    return nondeterministic


def judge_compiled(run: DiagnosisRun) -> bool:
    """Compile with the instrumented backend, run it and judge it against eager, fp64 as referee:
    the verdict, a compile error explained through the line map, the graphs captured."""
    result = run.result
    began = time.perf_counter()
    run.say("compiling with the instrumented backend and judging against eager (fp64 referee)")
    judged = run.judged = run.judge_with()
    graphs = run.captures = judged.graphs
    result.outputs, result.gradients, result.verdict = judged.outputs, judged.gradients, judged.verdict
    result.error, result.compile_error = judged.error, judged.compile_error
    for item in result.compile_error.lines if result.compile_error is not None else ():
        item.module = run.named(item.module)
    result.error_detail, result.error_at, result.lowering_at = judged.error_detail, judged.error_at, judged.lowering_at
    result.graphs = [g.label for g in graphs]
    if graphs or result.verdict == "passed":
        result.left_out = LeftOut.of_run(run.target, judged.skipped, compiled=bool(graphs))
    result.compile_seconds = sum(g.compile_seconds for g in graphs)
    run.step("compile and judge", began, result.verdict)
    return False


def differs_by_design(run: DiagnosisRun) -> bool:
    """A difference Inductor makes by design: precision casts it skips, random numbers it draws
    from its own generator; the option that undoes it must undo it (:mod:`.by_design`)."""
    result, compiled_as = run.result, run.settings.compile
    if not run.graphs or run.settings.train or result.verdict not in ("passed", "inaccurate"):
        return False
    began = time.perf_counter()
    designed = designed_difference(run.graphs, result.verdict, result.outputs, compiled_as.patches,
                                   lambda options: run.judge_with(options).outputs, compiled_as.inductor_options,
                                   run.say)
    if designed is None:
        return False
    run.step("by design", began, designed.verdict)
    result.verdict, result.by_design = designed.verdict, designed
    return True


def keeps_scalars_unrounded(run: DiagnosisRun) -> bool:
    """Python floats that eager rounds to float16 or bfloat16 and compiled code computes with as
    written: a compile with them rounded must match eager (:mod:`.unrounded_scalars`)."""
    result, settings = run.result, run.settings
    if not run.graphs or settings.train or result.verdict not in ("passed", "inaccurate"):
        return False
    began = time.perf_counter()
    found = unrounded_scalars(run.fn, run.inputs, settings.seed, run.graphs, result.outputs,
                              lambda: run.judge_with().outputs, run.say)
    if found is None:
        return False
    run.step("scalars", began, ", ".join(op.node for op in found.ops))
    result.verdict, result.unrounded_scalars = "inaccurate", found
    return True


def hidden_by_conditioning(run: DiagnosisRun) -> bool:
    """A passing output past allclose that passed only against fp64 (ill-conditioned there): each op
    alone, judged in relative terms, may still be less accurate than eager's."""
    result, settings = run.result, run.settings
    if result.verdict != "passed" or not run.graphs or not result.passed_by_the_referee():
        return False
    began = time.perf_counter()
    run.say("passed only against fp64, past allclose: judging each op alone in relative terms")
    report = DivergenceReport()
    ordered = [g for g in run.graphs if g.kind in ("inference", "forward") and g.call_args is not None]
    if any(less_accurate_op(g, g.call_args, report, seed=settings.seed, tol=settings.tol,
                            options=settings.compile.inductor_options) for g in ordered):
        result.verdict, result.divergence, result.hidden_by_conditioning = "inaccurate", report, True
        result.divergence.culprit_module = run.named(result.divergence.culprit_module)
    run.step("ops alone", began, report.culprit or "")
    return result.verdict == "inaccurate"


def judged_blind(run: DiagnosisRun) -> bool:
    """Passed with outputs under their absolute tolerance, which pass any error: the first buffer
    inside that differs, its culprit, and a repro from it."""
    result, settings = run.result, run.settings
    if result.verdict != "passed" or not run.graphs or not result.below_tolerance():
        return False
    began = time.perf_counter()
    run.say("passed, judged blind (outputs under their absolute tolerance): comparing the buffers inside")
    target = culprit_inside(result, run.graphs, seed=settings.seed, tol=settings.tol,
                            options=settings.compile.inductor_options)
    found = result.verdict == "inaccurate"
    run.step("inside", began, (result.divergence.culprit or "") if found else "")
    if not found:
        return False
    result.divergence.culprit_module = run.named(result.divergence.culprit_module)
    run.minify_from = target
    if settings.minify and target is not None:  # its post-grad graph, on the arguments it was called with
        _minify(run, target)
    return True


def amplified_by_the_program(run: DiagnosisRun) -> bool:
    """Passed past allclose only against fp64, with no op alone less accurate than eager's:
    rounding the program amplifies (:mod:`.amplified`), with where compiled and eager part."""
    result, settings = run.result, run.settings
    past = result.past_allclose() if result.verdict == "passed" and run.graphs else None
    if past is None:
        return False
    began = time.perf_counter()
    run.say("past allclose, passed against fp64: where compiled and eager part, and what amplifies it")
    result.amplified = amplified_rounding(past, run.graphs, run.judged.calls, seed=settings.seed, tol=settings.tol,
                                          options=settings.compile.inductor_options)
    result.verdict = "amplified_rounding"
    amplifier = result.amplified.amplifier
    run.step("amplified", began, amplifier.node if amplifier is not None else "")
    return False


def no_bug_found(run: DiagnosisRun) -> bool:
    """No bug: the diagnosis ends; an injected fault in effect says why it made none."""
    if run.result.found:
        return False
    run.release_worker()  # nothing will be minified
    run.result.fault_notes = unfound_faults(run.faults_before, run.graphs)
    return True


def judge_custom_ops(run: DiagnosisRun) -> bool:
    """torch.compile trusts a custom op's schema and fake implementation: a wrong one is the bug."""
    began = time.perf_counter()
    run.result.custom_ops = opcheck_custom_ops(run.fn, run.inputs, train=run.settings.train, seed=run.settings.seed)
    if run.result.custom_ops:
        run.step("custom ops", began, ", ".join(c.op for c in run.result.custom_ops if not c.passed))
    return False


def find_layer(run: DiagnosisRun) -> bool:
    """The first layer (eager, aot_eager, aot_eager_decomp_partition, inductor) that fails alike."""
    result, settings = run.result, run.settings
    began = time.perf_counter()
    run.say(f"{result.verdict}: finding the failing layer")
    # A training step's failure may be the backward's alone (its compile, its gradients): the layers
    # run the whole step then, or every layer would pass. A step running its own backward cannot
    # run under no_grad at all.
    whole_step = result.verdict == "wrong_gradient" or (
        settings.train and (run.own_backward or result.verdict != "inaccurate"))
    result.layers = (training_layers(run.fn, run.inputs, settings, run.before) if whole_step
                     else find_failing_layer(run.fn, *run.inputs, layers=TRAINING_LAYERS,
                                             options=settings.compile.patches, dynamic=settings.compile.dynamic,
                                             fullgraph=settings.compile.fullgraph, tol=settings.tol,
                                             seed=settings.seed, bisect=settings.bisect, top_down=True,
                                             calls_before=run.before))
    run.step("layer", began, result.layers.first_failing or "")
    return False


def find_culprit(run: DiagnosisRun) -> bool:
    """The first diverging buffer, its kernel, the culprit and its lines, through a Python wrapper
    (a ``cpp_wrapper`` build is searched in its Python-wrapper twin), and the graph to minify."""
    result, settings, judged = run.result, run.settings, run.judged
    began = time.perf_counter()
    scope = SearchScope(judged.graphs, judged.calls, settings.compile.inductor_options)
    wrapped = next((g for g in judged.graphs if has_cpp_wrapper(g)), None)
    if result.verdict in ("inaccurate", "wrong_gradient") and wrapped is not None:
        run.say("its graphs have a C++ wrapper, whose buffers cannot be read: judging their Python-wrapper build")
        scope = python_wrapper_scope(result.verdict, wrapped, judged.calls, run.judge_with,
                                     settings.compile.inductor_options)
        run.captures = run.captures + scope.extra_graphs
        if scope.wrapper_only is not None:  # nothing to search: the C++ wrapper's build alone fails
            result.divergence = scope.wrapper_only
            run.minify_from = wrapper_only_target(result, wrapped, judged.calls)
    if result.verdict == "inaccurate" and scope.graphs:
        run.say("finding the first diverging buffer (forward, replayed on the compiled graph's own arguments)")
        run.minify_from = culprit_of_inaccurate(
            result, scope, seed=settings.seed, tol=settings.tol,
            recompiled=lambda: find_first_divergence(run.fn, *run.inputs, options=settings.compile.patches,
                                                     tol=settings.tol, seed=settings.seed))
    elif result.verdict == "wrong_gradient" and scope.graphs:
        run.say("finding the first diverging buffer (the forward's saved tensors, then the backward's buffers)")
        run.minify_from = culprit_of_wrong_gradient(result, scope, seed=settings.seed, tol=settings.tol)
    elif result.verdict == "compile_error":
        run.minify_from = culprit_of_compile_error(result, judged.graphs, judged.calls, judged.lowered_line)
    if result.divergence is not None:  # named as the user's model names it, not through our wrapper
        result.divergence.culprit_module = run.named(result.divergence.culprit_module)
    run.step("divergence", began, (result.divergence.culprit or "") if result.divergence else "")
    return False


def minify_from_culprit(run: DiagnosisRun) -> bool:
    """The minifier's repro, from the culprit, within the settings' time budget."""
    target = run.minify_from
    if run.settings.minify and target is not None and target.graph is not None and target.args:
        _minify(run, target)
    return False


def _minify(run: DiagnosisRun, target: MinifyTarget) -> None:
    """Minify ``target`` with the check the verdict calls for; the repro and its ops go on the result."""
    from minifier import AccuracyFailure, CompileFailure, RuntimeFailure

    result, settings = run.result, run.settings
    began = time.perf_counter()
    run.say(f"minifying from the culprit ({', '.join(target.hints) or 'no hint'})")
    check = {"compile_error": CompileFailure(), "runtime_error": RuntimeFailure()}.get(
        result.verdict, AccuracyFailure(tol=settings.tol))
    result.repro_path, result.minifier, result.repro_ops = minimal_repro(
        target, check, settings.out_dir / "repros", settings.compile.patches, train=settings.train,
        max_seconds=settings.minify_seconds)
    run.step("minify", began, result.minifier)


STAGES: tuple[Callable[[DiagnosisRun], bool], ...] = (
    judge_eager, judge_compiled, differs_by_design, keeps_scalars_unrounded, hidden_by_conditioning, judged_blind,
    amplified_by_the_program, no_bug_found,
    judge_custom_ops, find_layer, find_culprit, minify_from_culprit)


def run_stages(run: DiagnosisRun) -> Diagnosis:
    """Run :data:`STAGES` in order until one ends the diagnosis; write its reports."""
    for stage in STAGES:
        if stage(run):
            run.release_worker()  # nothing more will be minified
            break
    return finish(run.result, run.settings.out_dir, run.captures, run.started, run.say)


def diagnose_callable(fn: Callable[..., Any], inputs: Sequence[Any], kwargs: dict[str, Any],
                      settings: DiagnoseSettings, *, calls_before: Sequence[tuple[Sequence[Any], dict[str, Any]]] = (),
                      call_state: Optional[CallState] = None) -> Diagnosis:
    """Diagnose ``fn(*inputs, **kwargs)`` as written (a ``torch.compile`` already on it taken off),
    judged in ``call_state`` (an inference call under ``no_grad`` by default; a training step with
    grad on), after the calls ``calls_before``."""
    state = call_state if call_state is not None and not settings.train else INFERENCE
    # the fake-tensor traceback each compile of a target whose fake raises would log again
    with as_written(fn) as (plain, notes), meta_failures_unlogged(), judging_in(state):
        settings = replace(settings, name=settings.name or target_name(plain),
                           as_written=(*notes, *settings.as_written))
        return run_stages(_start(plain, inputs, kwargs, calls_before, settings))


def _start(target: Callable[..., Any], inputs: Sequence[Any], kwargs: dict[str, Any],
           calls_before: Sequence[tuple[Sequence[Any], dict[str, Any]]], settings: DiagnoseSettings) -> DiagnosisRun:
    """The run's state before its first stage: the call laid out, its clock, and the minifier's
    worker started at low priority (its imports, seconds, overlap the steps before minifying)."""
    fn, inputs = keyword_call(target, inputs, kwargs)
    before = laid_out_calls(fn, calls_before, kwargs)
    if settings.train and settings.input_gradients:
        inputs, before = requiring_grad(inputs), [tuple(requiring_grad(call)) for call in before]
    started = time.perf_counter()
    judged_in = judged_state()
    result = Diagnosis(target=settings.name, train=settings.train, compiled_with=settings.compile.given,
                       as_written=list(settings.as_written),
                       judged_in=judged_in.describe() if judged_in != INFERENCE else "")
    worker = prewarm_worker() if settings.minify else None
    faults_before = [(fault, lowering_uses(fault)) for fault in active_faults()]
    return DiagnosisRun(settings, target, fn, fn, inputs, before, result, Progress(settings.progress, started),
                        started, worker, faults_before)
