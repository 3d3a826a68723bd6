"""The record a diagnosis leaves: its verdict, what each step found, and how it reads as text.

:class:`Diagnosis` is filled in by the stages of :mod:`.pipeline`, in the order they run; its
:meth:`~Diagnosis.render` is ``diagnosis.txt``, its :meth:`~Diagnosis.to_dict` ``diagnosis.json``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Sequence

from minifier.judge import RMSE_MULTIPLIER

from ..capture.left_out import LeftOut
from ..capture.skipped_frames import failed_frames_lines
from ..records import KernelLine, to_plain
from .accuracy import AccuracyReport, OutputComparison
from .amplified import AmplifiedRounding
from .aoti_package import PackageJudgement
from .by_design import DesignedDifference
from .compile_error import CompileErrorReport
from .custom_ops import CustomOpCheck, render_custom_op_checks
from .divergence import DivergenceReport
from .layers import LayerReport
from .unrounded_scalars import UnroundedScalars

if TYPE_CHECKING:
    from ..graphs import GraphCapture

__all__ = ["Diagnosis", "DiagnosisStep", "VERDICTS", "NOT_FOUND", "which_recompile"]

_ORDINALS = {2: "second", 3: "third", 4: "fourth", 5: "fifth"}

VERDICTS = ("passed", "nondeterministic", "compile_error", "runtime_error", "inaccurate", "wrong_gradient",
            "eager_error", "skipped_error", "precision_casts", "random_draws", "amplified_rounding", "crashed")
# Verdicts that are no compiler bug: nothing to minify, exit 0
NOT_FOUND = ("passed", "nondeterministic", "eager_error", "precision_casts", "random_draws", "amplified_rounding")


def which_recompile(which: int, before: Sequence[int]) -> tuple[str, str]:
    """("the first" or "the second call", "its first call" or "calls 1 and 2"): the ``which``-th
    later call that compiled a graph, replayed after the script's calls ``before``."""
    nth = "the first" if which == 1 else f"the {_ORDINALS.get(which, f'{which}th')} call"
    after = ("its first call" if list(before) in ([], [1])
             else f"calls {', '.join(map(str, before[:-1]))} and {before[-1]}")
    return nth, after


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
    # inaccurate: Python floats eager rounds to float16 or bfloat16 and compiled code keeps as written
    unrounded_scalars: Optional[UnroundedScalars] = None
    # amplified_rounding: the output past allclose, its figures, where compiled and eager part
    amplified: Optional[AmplifiedRounding] = None
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
    # What the graphs judged leave out: no graph (verdict passed; the frames Dynamo skipped), or
    # frames whose compile failed and ran eagerly, unjudged (a bug in their code is not in compiled code)
    left_out: LeftOut = field(default_factory=LeftOut)
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
                "amplified_rounding": ("compiled differs from eager past the tolerance only by rounding the program "
                                       "amplifies: float64 finds it no further off than eager, no compiler bug"),
                "compile_error": "the compile fails", "runtime_error": "the compiled code raises",
                "inaccurate": ("the compiled code computes with Python floats as written, where eager rounds them "
                               "to the tensors' dtype first" if self.unrounded_scalars is not None else
                               "a value inside the compiled code is wrong, which the outputs are too small to show"
                               if self.blind_outputs else
                               "an op of the compiled code is less accurate than eager's, which the outputs, as far "
                               "off fp64 in eager where they differ, do not show" if self.hidden_by_conditioning
                               else "the compiled outputs are wrong"),
                "wrong_gradient": "the compiled gradients are wrong"}[self.verdict]

    def _judged_passing(self) -> list[tuple[str, OutputComparison]]:
        """(``outputs`` or ``gradients``, a floating comparison) of every report of a passed call."""
        if self.verdict not in ("passed", "amplified_rounding"):
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

    def passed_by_the_referee(self) -> bool:
        """Whether a passing call has a floating output past allclose that passed only because its
        error against fp64 is within eager's own (an ill-conditioned output, or compiled more accurate)."""
        return self.past_allclose() is not None

    def past_allclose(self) -> Optional[tuple[str, OutputComparison]]:
        """For a passing call: the output or gradient (named in words) furthest past allclose that
        passed against the fp64 reference; None when every one is within allclose."""
        judged = [(title, output) for title, output in self._judged_passing() if output.tolerance_used > 1.0]
        if not judged:
            return None
        title, output = max(judged, key=lambda item: item[1].tolerance_used)
        return _output_name(title, output.path), output

    def render(self, *, divergence: bool = True) -> str:
        """The diagnosis as text, in the order it was found (``divergence=False``: without the
        first diverging buffer's part, which the HTML report shows beside its kernel lines)."""
        out = [*self._what_was_judged(), *self._the_error(), *self._findings(divergence), *self._repro_and_reports()]
        return "\n".join(line for line in out if line is not None)

    def _what_was_judged(self) -> list[Optional[str]]:
        """The verdict, the graphs checked, and how the call was replayed and judged."""
        out: list[Optional[str]] = [
            f"diagnose {self.target}{' (training step)' if self.train else ''}: {self.headline}",
            f"graphs checked: {', '.join(self.graphs) or 'none'}"]
        if self.verdict == "passed" and not self.graphs:
            out.append("nothing was compiled: the call ran eagerly, so no compiled code was judged")
            out += self.left_out.nothing_compiled.lines() if self.left_out.nothing_compiled is not None else []
        if self.left_out.failed_frames:
            out += failed_frames_lines(self.left_out.failed_frames,
                                       "they ran eagerly, not judged (only the frames they call compiled)")
        if self.replayed_call and self.replayed_recompile:
            which, before = which_recompile(self.replayed_recompile, self.replayed_before)
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
        return out

    def _the_error(self) -> list[str]:
        """The error raised, where, and while tracing or lowering what."""
        out = []
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
        return out

    def _findings(self, divergence: bool) -> list[str]:
        """Each section a step found: custom ops, what differs by design, the error explained, the
        outputs and gradients that failed, the failing layer, the first divergence, the culprit's lines."""
        out: list[str] = []
        if self.custom_ops:
            out += ["", "== custom ops it calls, checked with torch.library.opcheck ==",
                    render_custom_op_checks(self.custom_ops)]
        if self.by_design is not None:
            out += ["", f"== what differs by design, and the option that undoes it ({self.by_design.option}) ==",
                    self.by_design.render()]
        if self.amplified is not None:
            out += ["", "== rounding the program amplifies ==", self.amplified.render()]
        if self.unrounded_scalars is not None:
            out += ["", "== Python floats eager rounds and compiled code does not ==", self.unrounded_scalars.render()]
        if self.compile_error is not None:
            out += ["", f"== the {self.compile_error.stage} error, explained ==", self.compile_error.render()]
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
        sources = dict.fromkeys(line.source.cited() for line in self.culprit_lines
                                if line.source is not None)
        out.extend(f"  culprit source line: {source}" for source in list(sources)[:3])
        return out

    def _repro_and_reports(self) -> list[str]:
        """The minimal repro, the reports written, and the time each step took."""
        out: list[str] = []
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
        return out + ["", f"{took}: {self.seconds:.1f} s ({compiled}{timing})"]

    def __str__(self) -> str:
        return self.render()

    def to_dict(self) -> dict[str, Any]:
        data = to_plain(self)
        data["found"], data["repro_command"] = self.found, self.repro_command
        return data
