"""``ib.diagnose``: one call from a failing function to the culprit line and a minimal repro.

In order, stopping at what is known:

1. eager twice with one seed: a nondeterministic function is reported as such, never as a bug;
2. compile with the instrumented backend and run it: a compile error is explained through the
   line map; outputs (and, with ``train=True``, the gradients of every parameter and floating
   input, against a fixed random weighting of the outputs) are judged with the package's one
   accuracy rule, fp64 as referee;
3. which layer fails (eager / aot_eager / decomp / inductor), forward or training step;
4. the first diverging buffer, the kernel that wrote it, the culprit FX node, its kernel lines
   and the user's source line: in the forward graph, or, for a wrong gradient, in the backward
   graph replayed on the saved tensors and gradients it received (its lines point to the
   forward source line they came from);
5. a minimal repro from the minifier, starting from the culprit;
6. a report on disk: ``diagnosis.txt``, ``diagnosis.json`` and the HTML report.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import operator
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, NamedTuple, Optional, Sequence

import torch
import torch.utils._pytree as pytree

from minifier.judge import RMSE_MULTIPLIER, RandomDraws, RoundedScalars, replaying

from ..capture.as_written import as_written, running_eagerly, settings_as_written
from ..capture.call_state import INFERENCE, CallState, judged_state, judging_in
from ..capture.redirect import autocast_now, target_name
from ..capture.skipped_frames import (
    NothingCompiled,
    SkippedFrame,
    explain_nothing_compiled,
    failed_frames,
    failed_frames_lines,
)
from ..records import KernelLine, to_plain
from ..seams.dynamo_skips import skipped_frames
from ..seams.fake_tensor_log import meta_failures_unlogged
from .accuracy import (
    AccuracyReport,
    OutputComparison,
    clone_inputs,
    compare_outputs,
    eager_is_nondeterministic,
    to_fp64,
)
from .accuracy import error_line as _error_text
from .aoti_package import (
    PackageJudgement,
    cpp_wrapper_verdict,
    is_exported_program,
    judge_package,
    outcome,
    package_settings,
)
from .auto_minify import MINIFY_SECONDS, prewarm_worker, release_worker
from .by_design import DesignedDifference, designed_difference
from .compile_error import CompileErrorReport, find_cpp_compile_error
from .custom_ops import CustomOpCheck, check_custom_ops, render_custom_op_checks
from .divergence import (
    DivergenceReport,
    divergence_in_graph,
    find_first_divergence,
    has_cpp_wrapper,
    less_accurate_op,
    python_wrapper_note,
)
from .eager_raises import returns_where_eager_raises
from .faults import active_faults, lowering_uses, patchable_ops
from .keyword_call import KeywordCall, keyword_call
from .layers import LayerReport, LayerResult, find_failing_layer, judge_layers, run_calls_before, same_random_numbers
from .step_state import StepState
from .updates import judge_effect_updates, judge_updates
from .widened_casts import WidenedCasts

if TYPE_CHECKING:
    from ..graphs import GraphCapture

__all__ = ["Diagnosis", "DiagnosisStep", "ScriptNotDiagnosed", "diagnose", "diagnose_script", "keyword_call",
           "KeywordCall", "VERDICTS", "NOT_FOUND"]

_ORDINALS = {2: "second", 3: "third", 4: "fourth", 5: "fifth"}


def _which_recompile(which: int, before: Sequence[int]) -> tuple[str, str]:
    """("the first" or "the second call", "its first call" or "calls 1 and 2"): the ``which``-th
    later call that compiled a graph, replayed after the script's calls ``before``."""
    nth = "the first" if which == 1 else f"the {_ORDINALS.get(which, f'{which}th')} call"
    after = ("its first call" if list(before) in ([], [1])
             else f"calls {', '.join(map(str, before[:-1]))} and {before[-1]}")
    return nth, after


VERDICTS = ("passed", "nondeterministic", "compile_error", "runtime_error", "inaccurate", "wrong_gradient",
            "eager_error", "skipped_error", "precision_casts", "random_draws")
# Verdicts that are no compiler bug: nothing to minify, exit 0
NOT_FOUND = ("passed", "nondeterministic", "eager_error", "precision_casts", "random_draws")
_TRAINING_LAYERS = ("eager", "aot_eager", "aot_eager_decomp_partition", "inductor")


def _output_name(title: str, path: str) -> str:
    """An output or gradient (``title``) named in a sentence: ``the output``, ``gradients['fc1.weight']``."""
    if path == "output":
        return "the output"
    return f"{title}{path}" if path.startswith(("[", ".")) else f"{title} {path}"


@dataclass
class DiagnosisStep:
    """One step and how long it took."""

    name: str
    seconds: float
    summary: str = ""


@dataclass
class Diagnosis:
    """What ``diagnose`` found: the verdict, and each step's record."""

    target: str
    verdict: str = "passed"
    train: bool = False
    graphs: list[str] = field(default_factory=list)  # the graphs compiled and checked
    outputs: Optional[AccuracyReport] = None
    gradients: Optional[AccuracyReport] = None
    error: str = ""
    compile_error: Optional[CompileErrorReport] = None
    layers: Optional[LayerReport] = None
    divergence: Optional[DivergenceReport] = None
    repro_path: str = ""
    minifier: str = ""  # the minifier's one-line summary
    repro_ops: list[str] = field(default_factory=list)  # the ops the minimal repro holds, with their source lines
    reports: dict[str, str] = field(default_factory=dict)  # "text" / "json" / "html" -> path
    steps: list[DiagnosisStep] = field(default_factory=list)
    seconds: float = 0.0
    compile_seconds: float = 0.0  # the instrumented compile of the target alone
    compiled_with: dict[str, Any] = field(default_factory=dict)  # torch.compile's dynamic/mode/options/fullgraph
    fault_notes: list[str] = field(default_factory=list)  # injected faults in effect that found no bug: why
    judged_in: str = ""  # the call state judged in, when not no_grad: "grad on", "inference_mode"
    # inaccurate: an op alone is less accurate than eager's, which the outputs, ill-conditioned there, hide
    hidden_by_conditioning: bool = False
    by_design: Optional[DesignedDifference] = None  # verdicts precision_casts, random_draws: the ops and figures
    # in effect at the target's first call, off when the script ended, and on again for this diagnosis
    reapplied: list[str] = field(default_factory=list)
    replayed_call: int = 0  # the script's call replayed when not its first: the first later call that raised
    # ... or, when the first call passed, a later call that compiled a graph (a recompile): which
    # one (1: the first), replayed after the first call and the recompiling calls before it
    replayed_recompile: int = 0
    replayed_before: list[int] = field(default_factory=list)  # the script's calls replayed before it, in order
    as_written: list[str] = field(default_factory=list)  # the torch.compile already on the target, taken off
    eager_error_at: str = ""  # verdict eager_error: the line that raised ("file:line: code")
    # An error Dynamo raised while tracing: its explanation, and the user's line it traced then
    error_detail: str = ""
    error_at: str = ""
    # A compile error Inductor raised while lowering a node: the node, its op and the user's line
    lowering_at: str = ""
    # The custom ops the target calls, checked with torch.library.opcheck when a bug was found
    custom_ops: list[CustomOpCheck] = field(default_factory=list)
    effects: str = ""  # the tensors the call updates in place, judged with its outputs (an optimizer step's)
    nothing_compiled: Optional[NothingCompiled] = None  # verdict passed, no graph: the frames Dynamo skipped
    # Graphs compiled, yet these frames' compiles failed and they ran eagerly, unjudged (a module
    # Dynamo does not trace): a bug in their code is not in compiled code
    failed_frames: list[SkippedFrame] = field(default_factory=list)
    # A value inside found wrong where every output passed judged blind: what was said of the outputs
    blind_outputs: str = ""
    # An exported program's AOTInductor package, judged first (the steps after it ran on its
    # Python-wrapper build when that fails alike)
    package: Optional[PackageJudgement] = None
    # in memory only: the captures the HTML report was drawn from, to draw it again (write_reports)
    captures: list["GraphCapture"] = field(default_factory=list, repr=False, compare=False)

    @property
    def found(self) -> bool:
        """True when a bug was found (a nondeterministic function is not one)."""
        return self.verdict not in NOT_FOUND

    @property
    def culprit_lines(self) -> list[KernelLine]:
        """The culprit's kernel lines (first divergence) or the failing line (compile error)."""
        if self.divergence is not None and self.divergence.found:
            return self.divergence.key_lines
        if self.compile_error is not None:
            return [item.line for item in self.compile_error.lines if item.role == "error"]
        return []

    @property
    def repro_command(self) -> str:
        return f"python {self.repro_path}" if self.repro_path else ""

    @property
    def headline(self) -> str:
        """The verdict in words ("the compiled outputs are wrong")."""
        return {"passed": "no bug found", "nondeterministic": "eager itself is nondeterministic: not judged",
                "eager_error": ("eager itself raises on these arguments, and so does the compiled code: the "
                                "program's error, not the compiler's"),
                "skipped_error": ("eager raises on these arguments, the compiled code returns a value: it skips a "
                                  "check eager makes"),
                "precision_casts": ("compiled differs from eager only because it rounds to lower precision once where "
                                    "eager rounds at each cast or op, as Inductor does by design: no compiler bug"),
                "random_draws": ("compiled differs from eager only in its random numbers, which Inductor draws from "
                                 "its own generator by design: no compiler bug"),
                "compile_error": "the compile fails", "runtime_error": "the compiled code raises",
                "inaccurate": ("a value inside the compiled code is wrong, which the outputs are too small to show"
                               if self.blind_outputs else
                               "an op of the compiled code is less accurate than eager's, which the outputs, as far "
                               "off fp64 in eager where they differ, do not show" if self.hidden_by_conditioning
                               else "the compiled outputs are wrong"),
                "wrong_gradient": "the compiled gradients are wrong"}[self.verdict]

    def _judged_passing(self) -> list[tuple[str, OutputComparison]]:
        """(``outputs`` or ``gradients``, a floating comparison) of every report of a passed call."""
        if self.verdict != "passed":
            return []
        return [(title, output) for title, report in (("outputs", self.outputs), ("gradients", self.gradients))
                if report is not None and report.passed for output in report.outputs if output.tolerance is not None]

    def closest_to_failing(self) -> str:
        """For a call judged and passed: its output or gradient nearest its tolerance, in words ("" if none)."""
        judged = self._judged_passing()
        if not judged:
            return ""
        title, output = max(judged, key=lambda item: item[1].tolerance_used)
        if output.tolerance_used == 0.0:
            return "closest to failing: none; every output and gradient judged equals eager's exactly"
        head = (f"closest to failing: {_output_name(title, output.path)} ({output.dtype}), "
                f"max |err| {output.max_abs_error:.2g}")
        if output.tolerance_used <= 1.0:
            return (f"{head}: {output.tolerance_used * 100:.2g}% of the tolerance (atol = rtol = "
                    f"{output.tolerance:g}); a smaller tol judges closer (--tol, or tol= in Python)")
        return (f"{head}: past allclose at atol = rtol = {output.tolerance:g}, passed because its error against "
                f"the fp64 reference (RMSE {output.rmse_compiled:.2g}) is within {RMSE_MULTIPLIER:g}x eager's own "
                f"(RMSE {output.rmse_eager:.2g})")

    def below_tolerance(self) -> str:
        """For a call judged and passed: the outputs and gradients whose every value is smaller than
        their absolute tolerance, which no relative error up to 100% can fail, in words ("" if none)."""
        judged = self._judged_passing()
        blind = [(title, output) for title, output in judged if output.below_tolerance]
        if not blind:
            return ""
        shown = ", ".join(f"{_output_name(title, o.path)} (largest |value| {o.largest_value:.2g})"
                          for title, o in blind[:3])
        more = f" and {len(blind) - 3} more" if len(blind) > 3 else ""
        tolerances = ", ".join(f"{t:g}" for t in sorted({o.tolerance for _, o in blind}))
        return (f"judged blind: {len(blind)} of the {len(judged)} outputs and gradients judged are smaller than their "
                f"absolute tolerance (atol = {tolerances}), so an error in them of up to 100% passes: {shown}{more}. "
                "Values that small are zero by construction (a bias's gradient before a batch norm) or have "
                "collapsed (random weights, a degenerate config), and hide bugs; a smaller tol judges them (--tol, "
                "or tol= in Python)")

    def render(self, *, divergence: bool = True) -> str:
        """The diagnosis as text, in the order it was found (``divergence=False``: without the
        first diverging buffer's part, which the HTML report shows beside its kernel lines)."""
        out = [f"diagnose {self.target}{' (training step)' if self.train else ''}: {self.headline}",
               f"graphs checked: {', '.join(self.graphs) or 'none'}"]
        if self.verdict == "passed" and not self.graphs:
            out.append("nothing was compiled: the call ran eagerly, so no compiled code was judged")
            out += self.nothing_compiled.lines() if self.nothing_compiled is not None else []
        if self.failed_frames:
            out += failed_frames_lines(self.failed_frames,
                                       "they ran eagerly, not judged (only the frames they call compiled)")
        if self.replayed_call and self.replayed_recompile:
            which, before = _which_recompile(self.replayed_recompile, self.replayed_before)
            out.append(f"replayed its call {self.replayed_call}, {which} that compiled a new graph in the script (a "
                       f"recompile), after {before}, on which it passed, as the script made them")
        elif self.replayed_call:
            out.append(f"replayed its call {self.replayed_call}, the first that raised in the script "
                       "(the calls before it ran through)")
        if self.package is not None:
            out.append(self.package.render())
        out += [f"note: {note}" for note in self.as_written]
        if self.reapplied:
            out.append(f"re-applied as at its first call (off when the script ended): {'; '.join(self.reapplied)}")
        if self.effects:
            out.append(self.effects)
        out += [f"note: {note}" for note in self.fault_notes]
        out.append(self.closest_to_failing() or None)
        out.append(self.below_tolerance() or None)
        if self.blind_outputs:
            out.append(f"{self.blind_outputs}\nso the buffers inside were compared with eager's, each at its own scale "
                       "when its values are small too")
        if self.compiled_with:
            settings = ", ".join(f"{k}={v!r}" for k, v in self.compiled_with.items())
            out.append(f"every step compiles as torch.compile(..., {settings}) did")
        if self.judged_in and any(label.endswith(" forward") for label in self.graphs):
            out.append(f"judged as the program called it: {self.judged_in}")
        if self.error:
            out.append(f"error: {self.error}")
        if self.eager_error_at:
            out.append(f"  raised at: {self.eager_error_at}")
        if self.error_detail:
            out.append(f"  {self.error_detail}")
        if self.error_at:
            out.append(f"  while tracing: {self.error_at}")
        if self.lowering_at:
            out.append(f"  while lowering: {self.lowering_at}")
        if self.custom_ops:
            out += ["", "== custom ops it calls, checked with torch.library.opcheck ==",
                    render_custom_op_checks(self.custom_ops)]
        if self.by_design is not None:
            out += ["", f"== what differs by design, and the option that undoes it ({self.by_design.option}) ==",
                    self.by_design.render()]
        if self.compile_error is not None:
            out += ["", "== the compile error, explained ==", self.compile_error.render()]
        for title, report in (("outputs", self.outputs), ("gradients", self.gradients)):
            if report is not None and report.passed is False:
                out += ["", f"== {title} against eager (fp64 referee) ==", report.render()]
        if self.layers is not None:
            out += ["", "== 1. which layer fails ==", self.layers.render()]
        if self.divergence is not None and divergence:
            out += ["", "== 2. the first diverging buffer, its kernel, the culprit and its lines ==",
                    self.divergence.render()]
        elif self.divergence is not None:
            out += ["", "== 2. the first diverging buffer: in its own section, beside its kernel lines =="]
        sources = dict.fromkeys(f"{line.source}: {line.source.code}" for line in self.culprit_lines
                                if line.source is not None)
        out.extend(f"  culprit source line: {source}" for source in list(sources)[:3])
        if self.repro_path or self.minifier:
            out += ["", "== 3. minimal repro ==", self.minifier]
            out += [f"  it holds: {op}" for op in self.repro_ops[:8]]
            if len(self.repro_ops) > 8:
                out.append(f"  ... and {len(self.repro_ops) - 8} more ops")
            if self.repro_path:
                out.append(f"run it: {self.repro_command}")
        if self.reports:
            out += ["", "== 4. reports ==", *(f"{kind}: {path}" for kind, path in self.reports.items())]
        timing = ", ".join(f"{s.name} {s.seconds:.1f}s" for s in self.steps)
        compiled = f"one instrumented compile: {self.compile_seconds:.1f} s; " if self.compile_seconds else ""
        took = "time to root cause" if self.found else "time to a verdict"
        out += ["", f"{took}: {self.seconds:.1f} s ({compiled}{timing})"]
        return "\n".join(line for line in out if line is not None)

    def __str__(self) -> str:
        return self.render()

    def to_dict(self) -> dict[str, Any]:
        data = to_plain(self)
        data["found"], data["repro_command"] = self.found, self.repro_command
        return data


class _Progress:
    """One line per step on stderr: on a terminal, or when asked; quiet when piped."""

    def __init__(self, enabled: Optional[bool], started: float) -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.started = started

    def __call__(self, text: str) -> None:
        if self.enabled:
            print(f"[diagnose {time.perf_counter() - self.started:6.1f} s] {text}", file=sys.stderr, flush=True)


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
    """A name for each gradient :func:`_training_step` takes: each parameter's (``fc.weight``),
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


def _training_step(fn: Callable[..., Any], inputs: Sequence[Any], seed: int,
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


def _requiring_grad(inputs: Sequence[Any]) -> list[Any]:
    """``inputs`` with each floating tensor among them requiring grad (a detached alias: the
    caller's tensor is left as it is)."""
    return [v.detach().requires_grad_(True) if isinstance(v, torch.Tensor) and v.is_floating_point()
            and not v.requires_grad else v for v in inputs]


def _training_is_nondeterministic(fn: Callable[..., Any], inputs: Sequence[Any], seed: int,
                                  tol: Optional[float]) -> tuple[bool, bool]:
    """(Do two eager training steps from the same state and seed disagree, in outputs or
    gradients? Does the step run its own backward?)"""
    with running_eagerly():
        first, second = (_training_step(fn, inputs, seed) for _ in range(2))
    same = (compare_outputs(second.outputs, first.outputs, tol=tol).passed
            and compare_outputs(second.grads, first.grads, tol=tol).passed)
    return not same, first.own_backward


def _judge_training(fn: Callable[..., Any], compiled: Callable[..., Any], inputs: Sequence[Any], seed: int,
                    tol: Optional[float], calls_before: Sequence[Sequence[Any]] = ()) -> tuple[AccuracyReport,
                                                                                          AccuracyReport]:
    # The float64 run draws the random numbers eager drew (a drop path's masks): RandomDraws; and
    # takes the Python floats eager rounds to a low-precision op's dtype rounded: RoundedScalars.
    named = None if isinstance(fn, torch.nn.Module) else StepState.of(fn)
    with running_eagerly():
        with RandomDraws() as drawn, RoundedScalars() as rounded:
            eager = _training_step(fn, inputs, seed, named)
        # A module's float64 run is a float64 copy; a function's widens the state it names in place,
        # put back after (its optimizer holds those very parameters). Both cast to float64 where
        # their code casts lower (``mask.float()``).
        with WidenedCasts(), named.widened() if named is not None else contextlib.nullcontext():
            reference = replaying(drawn.draws, lambda: _training_step(to_fp64(fn), [to_fp64(v) for v in inputs],
                                                                      seed, named), rounded.rounded)
        ref_out, ref_grads = (None, None) if reference is None else (reference.outputs, reference.grads)
    for before in calls_before:  # steps the script took first: Dynamo recompiles for these inputs as it did
        _training_step(compiled, before, seed, named)
    compiled_step = _training_step(compiled, inputs, seed, named)  # an OptimizedModule: the module's
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




_TRACED_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in \S+\s*$')


def _traced_error(exc: BaseException) -> tuple[str, str]:
    """(Dynamo's explanation, "file:line: code" of the innermost user frame it was tracing) of an
    error Dynamo raised while tracing ("from user code:" in its message); ("", "") for others."""
    lines = str(exc).splitlines()
    explanation = next((line.strip().removeprefix("Explanation:").strip() for line in lines
                        if line.strip().startswith("Explanation:")), "")
    frames: list[tuple[str, str]] = []  # (file, "file:line[: code]"), outermost first
    if "from user code:" in lines:
        for number, line in enumerate(lines[lines.index("from user code:") + 1:], lines.index("from user code:") + 1):
            frame = _TRACED_FRAME.match(line)
            if frame is None:
                continue
            following = lines[number + 1].strip() if number + 1 < len(lines) else ""
            code = "" if _TRACED_FRAME.match(following) or not following else f": {following}"
            frames.append((frame["file"], f"{frame['file']}:{frame['line']}{code}"))
    # the innermost frame outside torch (a custom op's __call__ is torch's): the user's line
    outside = [at for file, at in frames if not _inside_torch_or_here(file)]
    return explanation[:600], (outside or [at for _, at in frames] or [""])[-1]


def _lowering_at(exc: BaseException) -> tuple[str, Optional[tuple[str, int]]]:
    """("post-grad node NAME (OP), from FILE:LINE: CODE", (FILE, LINE)) of the node Inductor was
    lowering when ``exc`` was raised (("", None) when it was not raised while lowering; no line
    when the node has no trace)."""
    from ..provenance.node_map import parse_stack_trace
    from ..seams.lowering_node import node_being_lowered

    node = node_being_lowered(exc)
    if node is None:
        return "", None
    source = parse_stack_trace(node.meta.get("stack_trace"))
    where = f", from {source}: {source.code}" if source is not None else ""
    return f"post-grad node {node.name} ({node.target}){where}", (source.file, source.line) if source else None


def _dynamo_nodes_of_line(graph: Optional[torch.fx.GraphModule], line: Optional[tuple[str, int]]) -> list[str]:
    """The ops of Dynamo graph ``graph`` traced from source ``line`` ((file, line)): where a search
    for a compile error that lowering raised starts, since no kernel line names a culprit then."""
    from ..provenance.node_map import parse_stack_trace

    if graph is None or line is None:
        return []
    found = []
    for node in graph.graph.nodes:
        if node.op in ("call_function", "call_method", "call_module"):
            source = parse_stack_trace(node.meta.get("stack_trace"))
            if source is not None and (source.file, source.line) == line:
                found.append(node.name)
    return found


def _inside_torch_or_here(filename: str) -> bool:
    """Whether ``filename`` is torch's, this package's or the minifier's (not a user's or a model library's)."""
    package = Path(__file__).parents[1]
    return any(filename.startswith(d) for d in (str(Path(torch.__file__).parent), str(package),
                                                 str(package.parent / "minifier")))


def _raising_line(exc: BaseException) -> str:
    """``file:line: code`` of the innermost frame of ``exc``'s traceback outside torch and this
    package (the user's or a model library's line), or "" when every frame is inside them."""
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not _inside_torch_or_here(f.filename)]
    return f"{frames[-1].filename}:{frames[-1].lineno}: {(frames[-1].line or '').strip()}" if frames else ""


def _compile_error_report(exc: BaseException) -> Optional[CompileErrorReport]:
    inner = find_cpp_compile_error(exc)
    return getattr(inner, "report", None)


def _compile_settings(
    compile_kwargs: Optional[dict[str, Any]],
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(the settings given, their Inductor config patches, Dynamo's torch.compile keywords) for
    ``compile_kwargs``, the arguments the target was compiled with; ValueError names an argument
    diagnose cannot repeat."""
    from ..capture.options import parse_options
    from ..capture.redirect import COMPILE_SETTINGS

    given = {k: v for k, v in (compile_kwargs or {}).items() if v is not None}
    unknown = sorted(set(given) - set(COMPILE_SETTINGS))
    if unknown:
        raise ValueError(f"diagnose: compile_kwargs takes {list(COMPILE_SETTINGS)}, not {unknown}")
    patches = parse_options(given.get("mode"), given.get("options")).inductor_patches
    return given, patches, {k: given[k] for k in ("dynamic", "fullgraph") if k in given}


def _training_layers(fn: Callable[..., Any], inputs: Sequence[Any], seed: int, tol: Optional[float],
                     patches: dict[str, Any], dynamic: Optional[bool], fullgraph: bool,
                     calls_before: Sequence[Sequence[Any]] = ()) -> LayerReport:
    def judge(backend: str) -> LayerResult:
        torch.compiler.reset()
        started = time.perf_counter()
        options = {"options": {**patches, "fallback_random": True}} if backend == "inductor" else {}
        try:
            with same_random_numbers():
                compiled = torch.compile(fn, backend=backend, dynamic=dynamic, fullgraph=fullgraph, **options)
                outputs, grads = _judge_training(fn, compiled, inputs, seed, tol, calls_before)
        except Exception as exc:  # noqa: BLE001 - a failing layer is a finding
            return LayerResult(backend, "error", _error_text(exc), time.perf_counter() - started)
        failing = [o.path for o in grads.failing] + [f"output {o.path}" for o in outputs.failing]
        status = "ok" if not failing else "inaccurate"
        detail = "outputs and gradients match eager" if not failing else f"differs: {', '.join(failing)[:100]}"
        return LayerResult(backend, status, detail, time.perf_counter() - started, grads)

    report = LayerReport(layers=judge_layers(_TRAINING_LAYERS, judge, top_down=True))
    torch.compiler.reset()
    return report


def _minify_budget(minify: "bool | float") -> Optional[float]:
    """The minifier's time budget ``minify`` asks for: :data:`~.auto_minify.MINIFY_SECONDS` for True,
    None for False (no search), else the number of seconds given. Raises ValueError naming a value
    that is none of these."""
    if isinstance(minify, bool):
        return MINIFY_SECONDS if minify else None
    if isinstance(minify, (int, float)) and minify > 0:
        return float(minify)
    raise ValueError(f"diagnose: minify must be True, False or a positive number of seconds, got {minify!r}")


def _minify(graph: torch.fx.GraphModule, args: Sequence[Any], check: Any, hints: Sequence[str],
            directory: Path, patches: dict[str, Any],
            instead: Optional[tuple[torch.fx.GraphModule, list[Any], list[str]]] = None, *,
            train: bool = False, max_seconds: Optional[float] = MINIFY_SECONDS) -> "_MinimalRepro":
    """The minifier's repro, its summary and the ops it holds; no path, and why, when it could not
    shrink the graph.
    ``instead`` (graph, arguments, hints): the post-AOT graph to minify when a worker cannot load
    ``graph`` (a Dynamo graph whose code FX cannot re-trace: a ``torch.func`` transform's).
    ``train``: a Dynamo graph's candidates compile as training graphs, its inputs that require
    grad requiring it (a failure only a training compile shows), else as inference graphs, as
    the diagnosis compiled them, whatever its parameters say. ``max_seconds``: the search's time
    budget (the summary says when it stopped the search)."""
    from minifier import AccuracyFailure, UnbuildableGraph, minify

    note = ""
    # The diagnosis compiled the whole graph and saw it fail: for a wrong result whose culprit it
    # found, the minifier starts from that node when it fails alone, and never compiles the whole
    # graph again (seconds on a model compiled with dynamic=True). A compile error is pinned to the
    # whole graph's message, which the node alone might not give.
    vouched = isinstance(check, AccuracyFailure) and bool(hints)
    try:
        try:
            result = minify(graph, list(args), check=check, hint_nodes=list(hints), repro_dir=str(directory),
                            config=dict(patches) or None, echo=lambda line: None, assume_failing=vouched,
                            requires_grad=None if train else [], max_seconds=max_seconds)
        except UnbuildableGraph as exc:
            if instead is None:
                raise
            reason = exc.reason.split("\n")[0][:200]
            note = f"a worker cannot load the Dynamo graph ({reason}); minified the post-AOT graph instead: "
            result = minify(instead[0], list(instead[1]), check=check, hint_nodes=instead[2],
                            repro_dir=str(directory), config=dict(patches) or None, echo=lambda line: None,
                            assume_failing=vouched, max_seconds=max_seconds)
    except Exception as exc:  # noqa: BLE001 - the diagnosis stands without a repro
        return _MinimalRepro("", f"{note}the minifier could not shrink the graph: {_error_text(exc)}", [])
    return _MinimalRepro(str(result.repro_path or ""), note + result.summary(),
                         _ops_with_lines(result.graph_module) if result.reproduced else [])


class _MinimalRepro(NamedTuple):
    """What the minifier left: the repro's path, its one-line summary, and each op it holds with
    its source line (``aten.slice_scatter at model.py:12: y = x[1:]``)."""

    path: str
    summary: str
    ops: list[str]


def _ops_with_lines(graph: torch.fx.GraphModule) -> list[str]:
    """Each op of ``graph`` (a minimal repro's) with the user's source line it was traced from."""
    from ..provenance.node_map import parse_stack_trace

    ops = []
    for node in graph.graph.nodes:
        if node.op not in ("call_function", "call_method", "call_module") or node.target is operator.getitem:
            continue
        source = parse_stack_trace(node.meta.get("stack_trace"))
        where = f" at {Path(source.file).name}:{source.line}: {source.code}" if source is not None else ""
        ops.append(f"{getattr(node.target, '__name__', node.target)}{where}")
    return ops


# (example inputs, first call's arguments, the graph's code) of one Dynamo graph compiled
_GraphCall = tuple[list[Any], list[Any], str]


@dataclass
class _Judged:
    """One compile of the target with the instrumented backend, run and judged against eager."""

    graphs: list["GraphCapture"]
    calls: list[_GraphCall]  # per Dynamo graph compiled, in compile order
    skipped: Any  # the frames Dynamo skipped
    verdict: str = "passed"
    outputs: Optional[AccuracyReport] = None
    gradients: Optional[AccuracyReport] = None
    error: str = ""
    compile_error: Optional[CompileErrorReport] = None
    error_detail: str = ""
    error_at: str = ""
    lowering_at: str = ""
    lowered_line: Optional[tuple[str, int]] = None  # (file, line) of the node being lowered when the compile failed


def _compile_and_judge(fn: Callable[..., Any], inputs: Sequence[Any], *, options: dict[str, Any],
                       dynamo_kwargs: dict[str, Any], train: bool, eager: Any, seed: int, tol: Optional[float],
                       before: Sequence[Sequence[Any]]) -> _Judged:
    """Compile ``fn`` with the instrumented backend (Inductor ``options``), run it on ``inputs``
    (a training step when ``train``) after the calls ``before``, and judge it against ``eager``
    (its outputs, kept; a training step runs eager itself), keeping each graph's capture and
    call arguments."""
    from ..capture.backend import compiles_instrumented, instrumented, keep_call_args
    from ..capture.registry import capture

    calls: list[_GraphCall] = []

    @compiles_instrumented
    def backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        record: _GraphCall = (clone_inputs(example_inputs), [], gm.code)
        calls.append(record)  # before compiling: a graph whose compile fails is minified from these
        compiled = instrumented(gm, example_inputs, options=options)

        def run(*args: Any) -> Any:
            if not record[1]:
                record[1].extend(clone_inputs(args))
            return compiled(*args)

        return run

    outputs = gradients = compile_error = None
    error, verdict, error_detail, error_at, lowering_at = "", "passed", "", "", ""
    lowered_line: Optional[tuple[str, int]] = None
    torch.compiler.reset()
    with capture() as session, keep_call_args(), skipped_frames() as skipped:
        compiled_fn = torch.compile(fn, backend=backend, **dynamo_kwargs)
        try:
            if train:
                outputs, gradients = _judge_training(fn, compiled_fn, inputs, seed, tol, before)
            else:
                from .accuracy import fp64_reference, run_seeded

                run_calls_before(compiled_fn, fn, before, seed)
                compiled_out, reference = run_seeded(compiled_fn, inputs, seed), fp64_reference(fn, inputs, seed)
                outputs = compare_outputs(compiled_out, eager, reference, tol=tol)
                # an optimizer step's weights pass: its update, at its own scale
                outputs = judge_effect_updates(outputs, fn, compiled_out, eager, reference, tol)
        except Exception as exc:  # noqa: BLE001 - a finding
            error = _error_text(exc)
            error_detail, error_at = _traced_error(exc)
            lowering_at, lowered_line = _lowering_at(exc)
            compile_error = _compile_error_report(exc)
            verdict = "compile_error" if compile_error is not None or not session.graphs or any(
                g.failed for g in session) else "runtime_error"
    if verdict == "passed":
        if outputs is not None and outputs.passed is False:
            verdict = "inaccurate"
        elif gradients is not None and gradients.passed is False:
            verdict = "wrong_gradient"
    return _Judged(list(session), calls, skipped, verdict, outputs, gradients, error, compile_error, error_detail,
                   error_at, lowering_at, lowered_line)


def _passed_by_the_referee(result: Diagnosis) -> bool:
    """Whether a passing call has a floating output past allclose that passed only because its error
    against fp64 is within eager's own (an ill-conditioned output, or compiled more accurate)."""
    return any(output.tolerance is not None and output.tolerance_used > 1.0 for _, output in result._judged_passing())


def _graph_given_wrong(report: DivergenceReport, replayable: Sequence["GraphCapture"],
                       calls: Sequence[_GraphCall]) -> tuple[Optional[torch.fx.GraphModule], list[Any]]:
    """For outputs that differ while every buffer the compiled code writes matches its post-grad
    graph run eagerly: say that the bug is in that graph (a decomposition, or a graph pass before
    code generation; the failing layer says which), and return the Dynamo graph to minify and the
    arguments of its first call, or (None, []) when none was kept."""
    if report.checked:
        report.note = "; ".join(filter(None, [report.note, (
            "the compiled code computes the post-grad graph it was given, yet the outputs differ: the bug is in "
            "that graph, made by a decomposition or a graph pass before code generation (the failing layer says "
            "which); the minimal repro holds the ops")]))
    for graph in replayable:
        first_call = _first_call(graph, calls)
        if first_call and not autocast_now() and graph.dynamo_graph is not None:
            return graph.dynamo_graph, first_call
    return None, []


@dataclass
class _SearchScope:
    """The graphs the first-divergence search reads: those judged, or their Python-wrapper build."""

    graphs: list["GraphCapture"]
    calls: list[_GraphCall]
    options: dict[str, Any]  # the Inductor options the culprit probes compile with
    build: str = ""  # which build is searched, when not the one judged
    extra_graphs: list["GraphCapture"] = field(default_factory=list)  # compiled for the search, reported too
    wrapper_only: Optional[DivergenceReport] = None  # only the C++ wrapper's build fails: nothing to search


def _python_wrapper_scope(verdict: str, wrapped: "GraphCapture", calls: list[_GraphCall],
                          judge: Callable[[dict[str, Any]], _Judged], options: dict[str, Any]) -> _SearchScope:
    """The search reads buffers through a Python wrapper: graphs built with ``cpp_wrapper`` (the
    first of them ``wrapped``) are
    searched in their Python-wrapper build (``judge`` run with ``cpp_wrapper=False``; its kernels
    are generated alike) when it fails alike (the same ``verdict``); when it does not, the bug is
    in what ``cpp_wrapper`` changes, and there is nothing to search."""
    python_options = {**options, "cpp_wrapper": False}  # the culprit probes too: faster builds
    twin = judge(python_options)
    if twin.verdict == verdict:
        return _SearchScope(twin.graphs, twin.calls, python_options, extra_graphs=twin.graphs,
                            build=python_wrapper_note([g.label for g in twin.graphs], fails_alike=True))
    fared = outcome(twin.verdict, verdict)  # not alike here: "matches eager" or "fails otherwise (...)"
    return _SearchScope([], calls, options, extra_graphs=twin.graphs, wrapper_only=DivergenceReport(
        graph=wrapped.label, note=(
            f"only the C++ wrapper's build fails: the Python-wrapper build (cpp_wrapper=False) of the same graphs "
            f"{fared}, so the bug is in what cpp_wrapper changes (the C++ wrapper's code, inductor_entry_impl in "
            "the output code, or code generated only for it), not in a kernel both builds share")))


def _first_call(graph: "GraphCapture", calls: Sequence[_GraphCall]) -> list[Any]:
    """The arguments of the first call of ``graph``'s Dynamo graph, found by its code: Dynamo can
    compile a graph it then discards (a GPT-2 under ``dynamic=True`` compiles two and runs the
    second), so the n-th compiled graph is not the n-th captured one."""
    code = getattr(graph.dynamo_graph, "code", None)
    return next((record[1] for record in calls if record[1] and record[2] == code), [])


def _inputs_like_placeholders(graph: torch.fx.GraphModule) -> Optional[list[Any]]:
    """Concrete inputs like ``graph``'s placeholders' fake values (:func:`.auto_minify.real_inputs`),
    for a graph that failed to compile: the values never matter to a compile error. None when an
    input is symbolic or unknown."""
    from .auto_minify import real_inputs

    values = [node.meta.get("val") for node in graph.graph.find_nodes(op="placeholder")]
    for value in values:
        if isinstance(value, torch.Tensor):
            if not all(isinstance(n, int) for n in (*value.shape, *value.stride())):
                return None
        elif not isinstance(value, (int, float, bool)):
            return None
    return real_inputs(values)


def _laid_out(fn: Callable[..., Any], calls: Sequence[tuple[Sequence[Any], dict[str, Any]]],
              kwargs: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Each call's inputs laid out as ``fn`` takes the judged call's (a :class:`KeywordCall`'s
    tensor keywords trailing); a call with other keywords, or another number of positional
    arguments, is left out."""
    laid_out = []
    for call in calls:
        if not (isinstance(call, (tuple, list)) and len(call) == 2 and isinstance(call[0], (tuple, list))
                and isinstance(call[1], dict)):
            raise TypeError(f"diagnose: each of calls_before is (args, kwargs), a tuple and a dict, got {call!r:.80}")
        args, call_kwargs = call
        if set(call_kwargs) != set(kwargs):
            continue
        if isinstance(fn, KeywordCall):
            if len(args) != fn.positional:
                continue
            laid_out.append((*args, *(call_kwargs[k] for k in fn.tensor_keys)))
        else:
            laid_out.append(tuple(args))
    return laid_out


def diagnose(fn: Callable[..., Any], *inputs: Any, kwargs: Optional[dict[str, Any]] = None, train: bool = False,
             compile_kwargs: Optional[dict[str, Any]] = None, out_dir: "str | Path" = "diagnosis",
             minify: "bool | float" = True, bisect: bool = False, tol: Optional[float] = None, seed: int = 0,
             progress: Optional[bool] = None, name: str = "",
             calls_before: Sequence[tuple[Sequence[Any], dict[str, Any]]] = (),
             input_gradients: bool = True, call_state: Optional[CallState] = None) -> Diagnosis:
    """Find what goes wrong when ``fn(*inputs, **kwargs)`` is compiled, down to the culprit line and a repro.

    ``kwargs`` are keyword arguments of the call (``model(input_ids=ids)``: ``kwargs={"input_ids":
    ids}``); those holding tensors are inputs like the positional ones. ``compile_kwargs`` are the
    ``torch.compile`` arguments the target is compiled with (``dynamic``, ``mode``, ``options``,
    ``fullgraph``): every compile of the diagnosis uses them. ``train=True`` judges a training step
    too: gradients of every trainable parameter and floating input (``input_gradients=False``: of
    the inputs that require grad as passed, as a script's call passed them, so that the graphs judged
    are the ones it compiled; a backward it never ran is not judged). Writes ``diagnosis.txt``,
    ``diagnosis.json`` and ``report.html`` under ``out_dir`` (the minifier's repro under
    ``out_dir/repros``); on one rank of several (``torchrun``), under ``out_dir/rank_<r>``, so that
    ranks do not overwrite each other's. ``minify``: True lets the minifier search for at most
    :data:`~.auto_minify.MINIFY_SECONDS`, a number for that many seconds, and the smallest failing
    graph found by then is the repro; False writes no repro. Returns a :class:`Diagnosis`; ``found`` says whether a bug
    was found. ``calls_before`` (``(args, kwargs)`` each) are calls made on every compiled ``fn``
    before the judged one, unjudged, as a script made them: a later call that recompiled (a new
    shape, another branch) is judged on the graph Dynamo made for it then (its sizes symbolic, say).
    A target already compiled (``torch.compile(model)``, a compiled function, ``block.compile()``
    inside it) is judged as written: eager runs it without that compile, which stays as it was;
    without ``compile_kwargs``, it is compiled with the ``dynamic``, ``fullgraph``, mode and options
    its own ``torch.compile`` was given.
    A ``torch.export.ExportedProgram`` is judged as its AOTInductor package (``compile_kwargs``:
    ``mode`` and ``options``, the package's ``inductor_configs``); when the package fails, the
    steps after it run on the Python-wrapper build of the same graph once it fails alike
    (:mod:`.aoti_package`).
    ``call_state`` (:class:`~instrumented_backend.capture.call_state.CallState`) is the grad mode, inference
    mode and deterministic flag the call is judged in, as the program called it: a call made with
    grad on compiles other graphs than one under ``no_grad`` (default: ``no_grad``, an inference
    call; ``train=True`` judges a training step with grad on).
    """
    from ..capture.distributed import rank_out_dir

    if kwargs is not None and not isinstance(kwargs, dict):
        raise TypeError(f"diagnose: kwargs must be a dict of keyword arguments, got {type(kwargs).__name__}")
    _minify_budget(minify)  # a bad value is refused before anything is compiled
    out_dir = rank_out_dir(out_dir)
    if is_exported_program(fn):  # its AOTInductor package is what ships: judged first
        if calls_before:
            raise ValueError("diagnose: an exported program has no earlier calls to replay (calls_before)")
        return _diagnose_exported(fn, *inputs, kwargs=kwargs, train=train, compile_kwargs=compile_kwargs,
                                  out_dir=out_dir, minify=minify, bisect=bisect, tol=tol, seed=seed,
                                  progress=progress, name=name)
    if not callable(fn):
        raise TypeError(f"diagnose needs a function or module, got {type(fn).__name__}")

    settings_notes: list[str] = []
    if compile_kwargs is None:  # what it was compiled with, when it was: read off its wrapper
        compile_kwargs, settings_notes = settings_as_written(fn)
    state = call_state if call_state is not None and not train else INFERENCE
    # the fake-tensor traceback each compile of a target whose fake raises would log again
    with as_written(fn) as (plain, notes), meta_failures_unlogged(), judging_in(state):
        return _diagnose(plain, *inputs, kwargs=kwargs, train=train, compile_kwargs=compile_kwargs,
                         out_dir=out_dir, minify=minify, bisect=bisect, tol=tol, seed=seed, progress=progress,
                         name=name or target_name(plain), calls_before=calls_before,
                         as_written_notes=[*notes, *settings_notes], input_gradients=input_gradients)


def _diagnose_exported(exported: Any, *inputs: Any, kwargs: Optional[dict[str, Any]], train: bool,
                       compile_kwargs: Optional[dict[str, Any]], out_dir: "str | Path", minify: "bool | float",
                       bisect: bool, tol: Optional[float], seed: int, progress: Optional[bool], name: str) -> Diagnosis:
    """:func:`diagnose` of an exported program: its AOTInductor package is judged; when it fails,
    the diagnosis goes on in the Python-wrapper build of the same graph (:mod:`.aoti_package`)."""
    if train:
        raise ValueError("diagnose: an AOTInductor package runs inference only, so an exported program is judged "
                         "without train=True (diagnose exported.module() with train=True for a training step)")
    options = package_settings(compile_kwargs)
    kwargs = dict(kwargs or {})
    name = name or "exported program"
    out = Path(out_dir)
    started = time.perf_counter()
    say = _Progress(progress, started)
    module = exported.module()

    def the_python_wrapper_build(**dynamic: bool) -> Diagnosis:
        settings = {**dynamic, "options": options} if options else dynamic
        return diagnose(module, *inputs, kwargs=kwargs, compile_kwargs=settings,
                        out_dir=out, minify=minify, bisect=bisect, tol=tol, seed=seed, progress=progress, name=name)

    call, args = keyword_call(module, inputs, kwargs)
    try:
        eager, nondeterministic = eager_is_nondeterministic(call, args, seed, tol)
    except Exception:  # noqa: BLE001 - eager's own error: the Python-wrapper diagnosis reports it
        return the_python_wrapper_build()
    if nondeterministic:
        return the_python_wrapper_build()
    say("building its AOTInductor package and judging it against eager (fp64 referee)")
    package, graphs = judge_package(exported, inputs, kwargs, inductor_configs={**options, "fallback_random": True},
                                    package_path=out / "package" / "model.pt2", eager_call=call, eager=eager,
                                    seed=seed, tol=tol)
    step = DiagnosisStep("AOTInductor package", package.seconds, package.verdict)
    compiled_with = {"options": options} if options else {}
    if package.verdict == "passed":
        result = Diagnosis(target=name, outputs=package.outputs, graphs=package.graphs, package=package,
                           compiled_with=compiled_with, steps=[step])
        return _finish(result, out, graphs, started, say)

    say(f"the package: {package.verdict}; judging the Python-wrapper build of the same graph")
    result = the_python_wrapper_build()
    specialised, dynamic_verdict = result, None
    if result.verdict != package.verdict and package.symbolic_sizes:
        # that build's sizes are these inputs'; the package's kernels take symbolic ones
        say(f"its Python-wrapper build: {result.verdict}; judging it built with dynamic=True (symbolic sizes)")
        result = the_python_wrapper_build(dynamic=True)
        dynamic_verdict = result.verdict
    if result.verdict == package.verdict:
        package.record_builds(specialised.verdict, dynamic_verdict=dynamic_verdict)
        if dynamic_verdict is not None:
            result.steps.insert(0, DiagnosisStep("Python-wrapper build, sizes specialised", specialised.seconds,
                                                 specialised.verdict))
    else:
        say(f"its Python-wrapper build: {result.verdict}; judging a build with cpp_wrapper=True")
        began = time.perf_counter()
        wrapper_verdict = cpp_wrapper_verdict(call, args, options, seed, tol)
        builds = [DiagnosisStep("Python-wrapper build", specialised.seconds, specialised.verdict),
                  DiagnosisStep("cpp_wrapper build", time.perf_counter() - began, wrapper_verdict)]
        if dynamic_verdict is not None:
            builds.insert(1, DiagnosisStep("Python-wrapper build, dynamic=True", result.seconds, dynamic_verdict))
        package.record_builds(specialised.verdict, wrapper_verdict, dynamic_verdict)
        twin_graphs = result.captures
        result = Diagnosis(target=name, verdict=package.verdict, outputs=package.outputs, error=package.error,
                           compile_error=package.compile_error, compiled_with=compiled_with, steps=builds,
                           divergence=DivergenceReport(graph=(package.graphs or [""])[0], note=(
                               "only the AOTInductor package fails: nothing to search in the build whose buffers "
                               "can be read")))
        result.captures = twin_graphs
    result.package = package
    result.graphs = package.graphs + [label for label in result.graphs if label not in package.graphs]
    result.steps.insert(0, step)
    result.captures = graphs + [g for g in result.captures if g not in graphs]
    result.seconds = time.perf_counter() - started
    write_reports(result, out)
    return result


def _diagnose(fn: Callable[..., Any], *inputs: Any, kwargs: Optional[dict[str, Any]] = None, train: bool = False,
              compile_kwargs: Optional[dict[str, Any]] = None, out_dir: "str | Path" = "diagnosis",
              minify: "bool | float" = True, bisect: bool = False, tol: Optional[float] = None, seed: int = 0,
              progress: Optional[bool] = None, name: str,
              calls_before: Sequence[tuple[Sequence[Any], dict[str, Any]]] = (),
              as_written_notes: Sequence[str] = (), input_gradients: bool = True) -> Diagnosis:
    compiled_with, patches, dynamo_kwargs = _compile_settings(compile_kwargs)
    inductor_options = {**patches, "fallback_random": True}
    target = fn  # as called: a keyword call wraps it
    fn, inputs = keyword_call(fn, inputs, kwargs or {})
    laid_out = fn  # a KeywordCall when kwargs were given, whatever wraps it later (effects)
    before = _laid_out(fn, calls_before, kwargs or {})
    if train and input_gradients:
        inputs, before = _requiring_grad(inputs), [tuple(_requiring_grad(call)) for call in before]

    started = time.perf_counter()
    say = _Progress(progress, started)
    out = Path(out_dir)
    judged_in = judged_state()
    result = Diagnosis(target=name, train=train, compiled_with=compiled_with, as_written=list(as_written_notes),
                       judged_in=judged_in.describe() if judged_in != INFERENCE else "")

    def step(label: str, began: float, summary: str = "") -> None:
        result.steps.append(DiagnosisStep(label, time.perf_counter() - began, summary))

    # The minifier's worker starts now, at low priority: its imports (seconds) overlap the steps
    # before the minification instead of delaying it. Closed again when no bug is found.
    worker = None
    if minify:
        worker = prewarm_worker()
    faults_before = [(fault, lowering_uses(fault)) for fault in active_faults()]
    began = time.perf_counter()
    if not train:  # a call that updates tensors in place (an optimizer step) is judged by them too
        from .effects import find_effects

        effects = find_effects(fn, inputs, seed)
        if effects is not None:
            fn, result.effects = effects, effects.describe()
    say("eager, twice with one seed")
    own_backward = False  # a training step that runs its own backward: never run under no_grad
    try:
        if train:
            eager, (nondeterministic, own_backward) = None, _training_is_nondeterministic(fn, inputs, seed, tol)
        else:
            eager, nondeterministic = eager_is_nondeterministic(fn, inputs, seed, tol)  # eager's outputs, kept
    except Exception as exc:  # noqa: BLE001 - eager's own error: does the compiled code raise too?
        step("eager", began)
        result.verdict, result.error, result.eager_error_at = "eager_error", _error_text(exc), _raising_line(exc)
        release_worker(worker)
        began = time.perf_counter()
        say("eager raises: running the compiled code on the same arguments")
        returned = returns_where_eager_raises(fn, inputs, inductor_options, dynamo_kwargs, seed, before)
        step("compiled", began, "returns" if returned else "raises too")
        if returned:
            result.verdict, result.graphs = "skipped_error", [g.label for g in returned]
            return _finish(result, out, returned, started, say)
        return _finish(result, out, [], started, say)
    step("eager", began)
    if nondeterministic:
        result.verdict = "nondeterministic"
        release_worker(worker)  # nothing will be minified
        return _finish(result, out, [], started, say)

    began = time.perf_counter()
    say("compiling with the instrumented backend and judging against eager (fp64 referee)")
    judged = _compile_and_judge(fn, inputs, options=inductor_options, dynamo_kwargs=dynamo_kwargs, train=train,
                                eager=eager, seed=seed, tol=tol, before=before)
    graphs, calls = judged.graphs, judged.calls
    result.outputs, result.gradients, result.verdict = judged.outputs, judged.gradients, judged.verdict
    result.error, result.compile_error = judged.error, judged.compile_error
    for item in result.compile_error.lines if result.compile_error is not None else ():
        item.module = _without_wrapper(item.module, laid_out)
    result.error_detail, result.error_at = judged.error_detail, judged.error_at
    result.lowering_at = judged.lowering_at
    result.graphs = [g.label for g in graphs]
    if not graphs and result.verdict == "passed":
        result.nothing_compiled = explain_nothing_compiled(target, judged.skipped)
    elif graphs:
        result.failed_frames = failed_frames(judged.skipped, target)
    result.compile_seconds = sum(g.compile_seconds for g in graphs)
    step("compile and judge", began, result.verdict)
    if graphs and not train and result.verdict in ("passed", "inaccurate"):
        began = time.perf_counter()

        def judged_with(options: dict[str, Any]) -> Optional[AccuracyReport]:
            return _compile_and_judge(fn, inputs, options=options, dynamo_kwargs=dynamo_kwargs, train=train,
                                      eager=eager, seed=seed, tol=tol, before=before).outputs

        designed = designed_difference(graphs, result.verdict, result.outputs, patches, judged_with,
                                       inductor_options, say)
        if designed is not None:
            step("by design", began, designed.verdict)
            result.verdict, result.by_design = designed.verdict, designed
            release_worker(worker)
            return _finish(result, out, graphs, started, say)
    if result.verdict == "passed" and graphs and _passed_by_the_referee(result):
        began = time.perf_counter()
        say("passed only against fp64, past allclose: judging each op alone in relative terms")
        report = DivergenceReport()
        ordered = [g for g in graphs if g.kind in ("inference", "forward") and g.call_args is not None]
        if any(less_accurate_op(g, g.call_args, report, seed=seed, tol=tol, options=inductor_options)
               for g in ordered):
            result.verdict, result.divergence, result.hidden_by_conditioning = "inaccurate", report, True
            result.divergence.culprit_module = _without_wrapper(result.divergence.culprit_module, laid_out)
        step("ops alone", began, report.culprit or "")
        if result.verdict == "inaccurate":
            release_worker(worker)
            return _finish(result, out, graphs, started, say)
    if result.verdict == "passed" and graphs and result.below_tolerance():
        began = time.perf_counter()
        say("passed, judged blind (outputs under their absolute tolerance): comparing the buffers inside")
        inside = _search_inside(result, graphs, seed=seed, tol=tol, options=inductor_options)
        step("inside", began, (result.divergence.culprit or "") if inside is not None else "")
        if inside is not None:
            result.divergence.culprit_module = _without_wrapper(result.divergence.culprit_module, laid_out)
            if minify and inside.post_grad_graph is not None and result.divergence.culprit:
                from minifier import AccuracyFailure

                began = time.perf_counter()
                say(f"minifying from the culprit ({result.divergence.culprit})")
                result.repro_path, result.minifier, result.repro_ops = _minify(
                    inside.post_grad_graph, inside.call_args, AccuracyFailure(tol=tol), [result.divergence.culprit],
                    out / "repros", patches, train=train, max_seconds=_minify_budget(minify))
                step("minify", began, result.minifier)
            release_worker(worker)
            return _finish(result, out, graphs, started, say)
    if not result.found:
        release_worker(worker)
        result.fault_notes = _unfound_faults(faults_before, graphs)
        return _finish(result, out, graphs, started, say)
    # torch.compile trusts a custom op's schema and fake implementation: a wrong one is the bug
    began = time.perf_counter()
    result.custom_ops = check_custom_ops(fn, inputs, train=train, seed=seed)
    if result.custom_ops:
        step("custom ops", began, ", ".join(c.op for c in result.custom_ops if not c.passed))
    began = time.perf_counter()
    say(f"{result.verdict}: finding the failing layer")
    dynamic, fullgraph = dynamo_kwargs.get("dynamic"), bool(dynamo_kwargs.get("fullgraph"))
    # A training step's failure may be the backward's alone (its compile, its gradients): the layers
    # run the whole step then, or every layer would pass. A step running its own backward cannot
    # run under no_grad at all.
    whole_step = result.verdict == "wrong_gradient" or (train and (own_backward or result.verdict != "inaccurate"))
    result.layers = (_training_layers(fn, inputs, seed, tol, patches, dynamic, fullgraph, before) if whole_step
                     else find_failing_layer(fn, *inputs, layers=_TRAINING_LAYERS, options=patches, dynamic=dynamic,
                                             fullgraph=fullgraph, tol=tol, seed=seed, bisect=bisect, top_down=True,
                                             calls_before=before))
    step("layer", began, result.layers.first_failing or "")

    began = time.perf_counter()
    hints: list[str] = []
    target_graph: Optional[Any] = None
    args: list[Any] = []
    instead: Optional[tuple[Any, list[Any], list[str]]] = None  # the post-AOT graph, if the Dynamo one cannot ship
    scope = _SearchScope(graphs, calls, inductor_options)
    wrapped = next((g for g in graphs if has_cpp_wrapper(g)), None)
    if result.verdict in ("inaccurate", "wrong_gradient") and wrapped is not None:
        say("its graphs have a C++ wrapper, whose buffers cannot be read: judging their Python-wrapper build")
        scope = _python_wrapper_scope(result.verdict, wrapped, calls, lambda options: _compile_and_judge(
            fn, inputs, options=options, dynamo_kwargs=dynamo_kwargs, train=train, eager=eager, seed=seed, tol=tol,
            before=before), inductor_options)
        if scope.wrapper_only is not None:  # nothing to search: the C++ wrapper's build alone fails
            result.divergence = scope.wrapper_only
            first_call = _first_call(wrapped, calls)
            if result.verdict == "inaccurate" and first_call and not autocast_now():
                target_graph, args = wrapped.dynamo_graph, first_call
    searched, searched_calls, search_options = scope.graphs, scope.calls, scope.options
    if result.verdict == "inaccurate" and searched:
        say("finding the first diverging buffer (forward, replayed on the compiled graph's own arguments)")
        result.divergence = DivergenceReport(build=scope.build)
        replayable = [g for g in searched if g.kind in ("inference", "forward") and g.call_args is not None]
        for graph in replayable:
            if divergence_in_graph(graph, graph.call_args, result.divergence, seed=seed, tol=tol,
                                   narrow_options=search_options):
                first_call = _first_call(graph, searched_calls)
                culprit = result.divergence.culprit
                hints = list(graph.nodes[culprit].dynamo_nodes) if culprit in graph.nodes else []
                if graph.post_grad_graph is not None:
                    instead = (graph.post_grad_graph, graph.call_args, [culprit] if culprit else [])
                if result.divergence.branch is not None:  # inside a torch.cond's branch: that subgraph alone
                    branch, subgraph, operands = result.divergence.branch
                    target_graph, args = subgraph, operands
                    hints, instead = [culprit.removeprefix(f"{branch}.")], None
                elif first_call and not autocast_now():
                    target_graph, args = graph.dynamo_graph, first_call
                elif instead is not None:
                    target_graph, args, hints = instead
                    instead = None
                break
        else:  # every buffer matches its graph run eagerly: the graph Inductor was given is wrong
            target_graph, args = _graph_given_wrong(result.divergence, replayable, searched_calls)
        if not replayable:  # no graph's own arguments were kept: compile again, keeping the Dynamo call's
            try:
                result.divergence = find_first_divergence(fn, *inputs, options=patches, tol=tol, seed=seed)
            except Exception as exc:  # noqa: BLE001 - a step running its own backward cannot run under no_grad
                report = result.divergence
                report.note = "; ".join(filter(None, [report.note, "compiling it again to keep each graph's "
                                                      f"arguments failed: {_error_text(exc)}"]))
    elif result.verdict == "wrong_gradient" and searched:
        # The forwards first: a wrong tensor a forward saves for the backward (a GELU's output
        # behind a 1e-6 layer scale) leaves the outputs within tolerance and makes a right backward,
        # replayed on that same saved tensor, compute wrong gradients with every buffer matching.
        say("finding the first diverging buffer (the forward's saved tensors, then the backward's buffers)")
        result.divergence = DivergenceReport(build=scope.build)
        replayed = [g for g in searched if g.kind == "forward"] + [g for g in searched if g.kind == "backward"]
        for graph in (g for g in replayed if g.call_args is not None):
            if divergence_in_graph(graph, graph.call_args, result.divergence, seed=seed, tol=tol,
                                   narrow_options=search_options):
                target_graph, args = graph.post_grad_graph, graph.call_args
                hints = [result.divergence.culprit] if result.divergence.culprit else []
                break
    elif result.verdict == "compile_error":
        failed = next((g for g in graphs if g.failed), None)
        backward_args = (_inputs_like_placeholders(failed.post_grad_graph)
                         if failed is not None and failed.kind == "backward" and failed.post_grad_graph is not None
                         else None)
        if backward_args is not None:  # only the backward fails to compile: the Dynamo graph's would not
            target_graph, args = failed.post_grad_graph, backward_args
            for line in result.culprit_lines:
                hints.extend(n for n in line.fx_nodes if n not in hints)
        elif failed is not None and calls:
            target_graph, args = failed.dynamo_graph, calls[-1][0]
            for line in result.culprit_lines:
                hints.extend(n for n in line.dynamo_nodes if n not in hints)
            if not hints:  # lowering itself failed, before any kernel line: the ops of the node's line
                hints = _dynamo_nodes_of_line(target_graph, judged.lowered_line)
    if result.divergence is not None:  # named as the user's model names it, not through our wrapper
        result.divergence.culprit_module = _without_wrapper(result.divergence.culprit_module, laid_out)
    step("divergence", began, (result.divergence.culprit or "") if result.divergence else "")

    if minify and target_graph is not None and args:
        from minifier import AccuracyFailure, CompileFailure, RuntimeFailure

        began = time.perf_counter()
        say(f"minifying from the culprit ({', '.join(hints) or 'no hint'})")
        check = {"compile_error": CompileFailure(), "runtime_error": RuntimeFailure()}.get(result.verdict,
                                                                                          AccuracyFailure(tol=tol))
        result.repro_path, result.minifier, result.repro_ops = _minify(
            target_graph, args, check, hints, out / "repros", patches, instead, train=train,
            max_seconds=_minify_budget(minify))
        step("minify", began, result.minifier)
    return _finish(result, out, graphs + scope.extra_graphs, started, say)


def _search_inside(result: Diagnosis, graphs: list["GraphCapture"], *, seed: int, tol: Optional[float],
                   options: dict[str, Any]) -> Optional["GraphCapture"]:
    """For a call that passed judged blind (outputs under their absolute tolerance, which passes any
    error in them: a MobileViT built from a config with random weights pools its features to exact
    zeros): the first buffer that differs inside its graphs (inference or forward, then a training
    step's backward, replayed on its saved tensors and incoming gradients), and its culprit. On
    one, ``result`` becomes inaccurate with that divergence, and keeps the blind line said of its
    outputs; returns the graph it is in (None when every buffer matches)."""
    blind = result.below_tolerance()
    report = DivergenceReport()
    ordered = [g for g in graphs if g.kind in ("inference", "forward")] + [g for g in graphs if g.kind == "backward"]
    for graph in (g for g in ordered if g.call_args is not None):
        if divergence_in_graph(graph, graph.call_args, report, seed=seed, tol=tol, narrow_options=options):
            result.verdict, result.divergence, result.blind_outputs = "inaccurate", report, blind
            return graph
    return None


def _generated_ops(graphs: Sequence["GraphCapture"]) -> list[str]:
    """The ops a fault can scale that the generated kernels of ``graphs`` compute, most lines first
    (``ops.exp`` on 12 lines: ``exp``), leaving out loads, stores, indexing and constants."""
    from collections import Counter

    plumbing = {"load", "store", "store_reduction", "index_expr", "constant", "masked", "to_dtype", "identity",
                "indirect_indexing", "reduction", "paren"}
    counts: Counter[str] = Counter()
    for graph in graphs:
        for kernel in graph.kernels:
            if kernel.kind == "extern":
                continue
            for line in kernel.lines:
                counts.update(op.removeprefix("ops.") for op in line.ir_ops if op.startswith("ops."))
    patchable = set(patchable_ops())
    ops = [op for op, _ in counts.most_common() if op in patchable and op not in plumbing]
    arithmetic = {"add", "sub", "mul", "truediv", "div", "neg", "maximum", "minimum", "where", "eq", "ne", "lt",
                  "le", "gt", "ge", "and_", "or_", "logical_and", "logical_or", "logical_not", "floordiv", "mod",
                  "remainder", "abs", "relu", "square", "truncdiv", "int_truediv"}
    return [op for op in ops if op not in arithmetic] + [op for op in ops if op in arithmetic]


def _unfound_faults(before: Sequence[tuple[Any, int]], graphs: Sequence["GraphCapture"] = ()) -> list[str]:
    """Why each injected fault in effect made no bug: its op never reached generated code (then
    which ops the generated kernels do compute: SiLU is lowered as ``x / (1 + exp(-x))``, so a
    scaled ``sigmoid`` never reaches a Llama's MLP), or it did and every result still matches eager."""
    notes = []
    computed: Optional[list[str]] = None  # the same for every fault: counted once, when one needs it
    for fault, uses in before:
        written = lowering_uses(fault) - uses
        if written == 0:
            if computed is None:
                computed = _generated_ops(graphs)
            shown = ", ".join(computed[:12]) + (f" (+{len(computed) - 12})" if len(computed) > 12 else "")
            fused = _fused_into_extern_calls(graphs, fault.op)
            why = (f"it runs inside {fused}, which a post-grad pass fused it into (a oneDNN convolution or linear "
                   "with its activation, under freezing)" if fused else
                   "an extern kernel computes it, such as attention's SDPA, or the graphs have no such op, or "
                   "Inductor decomposes it into others: SiLU into x / (1 + exp(-x))")
            notes.append(f"the injected fault ({fault.label}) was in effect, but no kernel compiled here computes "
                         f"{fault.op} in generated code ({why})"
                         + (f"; the generated kernels compute {shown}: inject one of those "
                            f"(--fault '{computed[0]}*1.01')" if computed else ""))
        else:
            notes.append(f"the injected fault ({fault.label}) went into {written} generated expression(s) of "
                         f"{fault.op}, yet every result matches eager (a change within tolerance, or one the ops "
                         "after it undo, as a softmax undoes a scaled exp)")
    return notes


def _fused_into_extern_calls(graphs: Sequence["GraphCapture"], op: str) -> str:
    """The extern calls of ``graphs`` that compute ``op`` (an ATen op's name, ``relu``) inside them:
    the nodes a lowering pattern made whose match replaced such an op (``the extern call fn_1
    (mkldnn._convolution_pointwise, relu) in graph #1 0/0 inference``), or "" for none."""
    from ..seams.lowering_patterns import matched_nodes

    found = []
    for graph in graphs:
        for node in graph.post_grad_graph.graph.nodes if graph.post_grad_graph is not None else ():
            matched = matched_nodes(node)  # [] for most
            if op in {getattr(getattr(m.target, "overloadpacket", None), "__name__", None) for m in matched}:
                shown = ", ".join(dict.fromkeys(str(m.target).removesuffix(".default").removeprefix("aten.")
                                                for m in matched))
                found.append(f"the extern call {node.name} ({shown}) in graph {graph.label}")
    return "; ".join(found[:3]) + (f" (+{len(found) - 3})" if len(found) > 3 else "")


def _finish(result: Diagnosis, out: Path, graphs: list["GraphCapture"], started: float,
            say: Callable[[str], None]) -> Diagnosis:
    result.seconds = time.perf_counter() - started
    result.captures = graphs
    write_reports(result, out)
    say(f"done: {result.verdict} in {result.seconds:.1f} s; report in {out}")
    return result


def _without_wrapper(label: str, judged: Any) -> str:
    """A module label (``target.encoder.block.0 (T5Block)``) as the user's model names it when the
    judged function is the wrapper a keyword call makes (:class:`~.keyword_call.KeywordCall`): its
    attribute holding the model (``target``, ``owner``) left out, with the ``__self__`` of a bound
    method it holds (``model.forward`` compiled: ``target.__self__.transformer.h.0``); "" for the
    model itself."""
    if not isinstance(judged, KeywordCall):
        return label
    for attribute in ("target.__self__", "owner.__self__", "target", "owner"):
        if label == attribute or label.startswith(f"{attribute} ("):
            return ""
        if label.startswith(f"{attribute}."):
            return label.removeprefix(f"{attribute}.")
    return label


def write_reports(result: Diagnosis, out: Path) -> None:
    """Write ``diagnosis.txt``, ``diagnosis.json`` and, when it compiled graphs, ``report.html``
    under ``out``; again after ``result`` changed (the script's replay notes), all three agree."""
    from ..report.html import html

    out.mkdir(parents=True, exist_ok=True)
    result.reports = {"text": str(out / "diagnosis.txt"), "json": str(out / "diagnosis.json")}
    if result.captures:
        try:
            result.reports["html"] = str(html(result.captures, out / "report.html", divergence=result.divergence,
                                              diagnosis=result))
        except Exception as exc:  # noqa: BLE001 - the text and JSON reports still stand
            result.reports["html"] = f"(not written: {_error_text(exc)})"
    (out / "diagnosis.txt").write_text(result.render() + "\n", encoding="utf-8")
    (out / "diagnosis.json").write_text(json.dumps(result.to_dict(), indent=1, default=str), encoding="utf-8")


@contextlib.contextmanager
def _as_at_first_call(call: Any) -> Iterator[list[str]]:
    """Inside the block, what was in effect at ``call`` (a recorded first call) and is not now is
    on again: its injected faults, Inductor config values and autocast (a script that set them in
    a ``with`` block around its loop has left it by now). Yields a description of each."""
    from ..capture.redirect import autocast_at_first_call
    from ..seams.inductor_options import inductor_config_patch, plain_inductor_config
    from .faults import reapplied

    with contextlib.ExitStack() as stack:
        described = [f"fault {fault.label}" for fault in stack.enter_context(reapplied(call.faults))]
        described += stack.enter_context(autocast_at_first_call(call))
        now = plain_inductor_config()
        config = {k: v for k, v in call.inductor_config.items() if k in now and now[k] != v}
        if config:
            stack.enter_context(inductor_config_patch(config))
            described.append("Inductor config " + ", ".join(f"{k}={v!r}" for k, v in sorted(config.items())))
        yield described


def _trains(call: Any, script_finished: bool = False) -> bool:
    """Was the compiled target called for training? Grad on, and: a backward seen through the call
    (after it, through the outputs of any of its calls, or inside it: a function that names its
    model and optimizer), an input requiring grad, or a module with trainable parameters, unless
    the script ran to its end without a backward through it (inference that left grad on)."""
    if not call.grad_enabled:
        return False
    if call.backward:  # a gradient reached what the call computed, or it ran its own backward
        return True
    module = call.target if isinstance(call.target, torch.nn.Module) else getattr(call.target, "__self__", None)
    if isinstance(module, torch.nn.Module) and any(p.requires_grad for p in module.parameters()):
        return not script_finished
    leaves = pytree.tree_leaves([list(call.args), dict(call.kwargs)])
    return any(isinstance(a, torch.Tensor) and a.requires_grad for a in leaves)


def diagnose_script(script: "str | Path", argv: Sequence[str] = (), *, out_dir: "str | Path" = "diagnosis",
                    minify: "bool | float" = True, progress: Optional[bool] = None,
                    echo: Optional[Callable[[str], None]] = None, tol: Optional[float] = None) -> list[Diagnosis]:
    """Run ``script`` with every ``torch.compile`` redirected to the instrumented backend, then
    diagnose each function or module it compiled, on the arguments of its first call, until one
    fails (``train`` when it was called with gradients on and something to differentiate), at
    ``tol`` (see :func:`diagnose`). Returns the diagnoses made, the failing one last. An exception
    the compile raised inside the script is not re-raised: it is what the diagnosis explains.
    Under ``torchrun`` each rank writes under ``out_dir/rank_<r>``."""
    from ..capture.distributed import data_parallel_module, data_parallel_note, rank_out_dir
    from ..capture.redirect import CompiledCall, LaterCall, record_compiled_calls, run_as_main, state_at_first_call

    say = echo or (lambda line: print(line, file=sys.stderr))
    script = Path(script)
    if not script.is_file():
        raise FileNotFoundError(f"no such script: {script}")
    out_dir = rank_out_dir(out_dir)
    calls: list[CompiledCall] = []
    results: list[Diagnosis] = []
    with contextlib.ExitStack() as script_main:  # the script's __main__ stays until its targets are diagnosed
        undo = record_compiled_calls(calls)
        raised_at = ""  # where the script's own exception was raised
        try:
            status = run_as_main(script, argv, keep=script_main)
            raised = "" if status == 0 else f"the script exited with status {status}"
        except Exception as exc:  # noqa: BLE001 - what the diagnosis is about
            raised, raised_at = _error_text(exc), _raising_line(exc)
        finally:
            undo()
        if raised and not calls:
            where = f" at {raised_at}" if raised_at else ""
            raise ScriptNotDiagnosed(f"{script} failed before it compiled anything ({raised}{where}): "
                                     "nothing compiled, so nothing to diagnose")
        if raised:
            say(f"instrumented_backend diagnose: {raised}; diagnosing what it compiled")
        for index, call in enumerate(calls):
            train = _trains(call, script_finished=not raised)
            args, kwargs = (call.raising_args, call.raising_kwargs) if call.raising_call else (call.args, call.kwargs)
            keywords = f", keyword arguments {', '.join(kwargs)}" if kwargs else ""
            which = (f", its call {call.raising_call}: the first that raised" if call.raising_call
                     else f", on {call.arguments_from}" if call.arguments_from else "")
            if not train and _trains(call):  # only because the script ended without a backward through it
                which += ": grad was on, but no backward reached its outputs"
            say(f"instrumented_backend diagnose: [{index}] {call.name} ({len(args)} args{keywords}, "
                f"{'training step' if train else 'inference'}{which})")
            target = data_parallel_module(call.target) or call.target
            if target is not call.target:
                say(f"instrumented_backend diagnose: [{index}] {call.name}: judged as {data_parallel_note(target)}")
            target_out = Path(out_dir) if len(calls) == 1 else Path(out_dir) / f"{index}_{call.name}"
            with _as_at_first_call(call) as restored, state_at_first_call(call):
                if restored:
                    say(f"instrumented_backend diagnose: [{index}] {call.name}: on at its first call, off when the "
                        f"script ended, on again for its diagnosis: {'; '.join(restored)}")
                result = diagnose(target, *args, kwargs=kwargs, train=train, input_gradients=False,
                                  compile_kwargs=call.compile_kwargs, out_dir=target_out, minify=minify,
                                  progress=progress, name=call.name, tol=tol, call_state=call.call_state)
            if restored or call.raising_call:
                result.reapplied, result.replayed_call = restored, call.raising_call
                write_reports(result, target_out)
            results.append(result)
            if result.found:
                break
            # each later call that compiled a graph (a recompile), after the calls that compiled before it
            replayed: list[LaterCall] = [LaterCall(1, call.args, call.kwargs)]
            for which, later in enumerate(call.recompiles if not call.raising_call else [], 1):
                if result.found or result.verdict != "passed":
                    break
                nth, after = _which_recompile(which, [c.number for c in replayed])
                say(f"instrumented_backend diagnose: [{index}] {call.name}, its call {later.number}: {nth} that "
                    f"compiled a new graph (a recompile), replayed after {after}")
                with _as_at_first_call(call) as restored, state_at_first_call(call):
                    result = diagnose(target, *later.args, kwargs=later.kwargs, train=train, input_gradients=False,
                                      compile_kwargs=call.compile_kwargs, out_dir=target_out, minify=minify,
                                      progress=progress, name=call.name, tol=tol,
                                      call_state=dataclasses.replace(call.call_state, grad_enabled=later.grad_enabled),
                                      calls_before=[(c.args, c.kwargs) for c in replayed])
                result.reapplied, result.replayed_call, result.replayed_recompile = restored, later.number, which
                result.replayed_before = [c.number for c in replayed]
                write_reports(result, target_out)
                results.append(result)
                replayed.append(later)
            if result.found:
                break
    if not calls:
        say(f"instrumented_backend diagnose: {script} compiled nothing with torch.compile; nothing to diagnose")
    elif raised and not any(result.found or result.verdict == "eager_error" for result in results):
        say(f"instrumented_backend diagnose: {_unexplained_error(raised, raised_at, calls)}")
    return results


def _unexplained_error(raised: str, raised_at: str, calls: Sequence[Any]) -> str:
    """Why the script's error (``raised``, at ``raised_at``) is not what the diagnoses found: it was
    raised outside every compiled call, or inside one and did not recur when that was judged."""
    where = f" at {raised_at}" if raised_at else ""
    if not any(call.raised for call in calls):
        return (f"the script's error ({raised}{where}) came from outside the functions it compiled; what they "
                "computed was judged, and the error is the script's own, not the compiler's")
    return (f"the script's error did not recur when what it compiled was compiled and run again ({raised}{where}): "
            "it depends on something on only while the script ran (a fault or config set around the call, "
            "state built by earlier steps)")


class ScriptNotDiagnosed(RuntimeError):
    """``diagnose_script``: the script failed (raised, exited non-zero) before it compiled anything."""
