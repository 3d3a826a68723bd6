"""One compile of the target with the instrumented backend, run and judged against eager, keeping
each Dynamo graph's capture and the arguments of its first call (what the later steps search)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

import torch

from ..fail_soft import warn_once
from ..seams.dynamo.dynamo_skips import skipped_frames
from .accuracy import AccuracyReport, clone_inputs, compare_outputs
from .accuracy import error_line as _error_text
from .compile_error import CompileErrorReport, explain_kernel_error
from .error_origin import compile_error_report, lowering_at, traced_error
from .layers import run_calls_before
from .optimizer_updates import judge_effect_updates
from .settings import DiagnoseSettings
from .training import judge_training

if TYPE_CHECKING:
    from ..graphs import GraphCapture

__all__ = ["GraphCall", "JudgedCompile", "compile_and_judge", "first_call", "inputs_like_placeholders"]


@dataclass
class GraphCall:
    """One Dynamo graph compiled: its example inputs, the arguments of its first call (empty until
    it is called) and its code (which graph it is, when Dynamo discards one)."""

    example_inputs: list[Any]
    first_args: list[Any] = field(default_factory=list)
    code: str = ""


@dataclass
class JudgedCompile:
    """One compile of the target with the instrumented backend, run and judged against eager."""

    graphs: list["GraphCapture"]
    calls: list[GraphCall]  # per Dynamo graph compiled, in compile order
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


def compile_and_judge(fn: Callable[..., Any], inputs: Sequence[Any], settings: DiagnoseSettings, *, eager: Any,
                      before: Sequence[Sequence[Any]], options: Optional[dict[str, Any]] = None) -> JudgedCompile:
    """Compile ``fn`` with the instrumented backend (Inductor ``options``, by default the settings'),
    run it on ``inputs`` (a training step when ``settings.train``) after the calls ``before``, and
    judge it against ``eager`` (its outputs, kept; a training step runs eager itself), keeping each
    graph's capture and call arguments."""
    from ..capture.backend import compiles_instrumented, instrumented, keep_call_args
    from ..capture.registry import capture

    options = settings.compile.inductor_options if options is None else options
    seed, tol = settings.seed, settings.tol
    calls: list[GraphCall] = []

    @compiles_instrumented
    def backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        record = GraphCall(clone_inputs(example_inputs), [], gm.code)
        calls.append(record)  # before compiling: a graph whose compile fails is minified from these
        compiled = instrumented(gm, example_inputs, options=options)

        def run(*args: Any) -> Any:
            if not record.first_args:
                record.first_args.extend(clone_inputs(args))
            return compiled(*args)

        return run

    judged = JudgedCompile([], calls, None)
    torch.compiler.reset()
    with capture() as session, keep_call_args(), skipped_frames() as skipped:
        compiled_fn = torch.compile(fn, backend=backend, **settings.compile.dynamo_kwargs)
        try:
            if settings.train:
                judged.outputs, judged.gradients = judge_training(fn, compiled_fn, inputs, seed, tol, before)
            else:
                from .accuracy import fp64_reference, run_seeded

                run_calls_before(compiled_fn, fn, before, seed)
                compiled_out, reference = run_seeded(compiled_fn, inputs, seed), fp64_reference(fn, inputs, seed)
                judged.outputs = compare_outputs(compiled_out, eager, reference, tol=tol)
                # an optimizer step's weights pass: its update, at its own scale
                judged.outputs = judge_effect_updates(judged.outputs, fn, compiled_out, eager, reference, tol)
        except Exception as exc:  # noqa: BLE001 - a finding
            judged.error = _error_text(exc)
            judged.error_detail, judged.error_at = traced_error(exc)
            judged.lowering_at, judged.lowered_line = lowering_at(exc)
            judged.compile_error = compile_error_report(exc)
            judged.verdict = "compile_error" if judged.compile_error is not None or not session.graphs or any(
                g.failed for g in session) else "runtime_error"
            if judged.compile_error is None:  # a Triton kernel: its line, failing to load, compile or run
                try:
                    judged.compile_error = explain_kernel_error(list(session), exc)
                except Exception as unexplained:  # noqa: BLE001 - the verdict stands without the explanation
                    warn_once("kernel_error", f"could not explain the kernel's error ({unexplained!r})")
    if judged.verdict == "passed":
        if judged.outputs is not None and judged.outputs.passed is False:
            judged.verdict = "inaccurate"
        elif judged.gradients is not None and judged.gradients.passed is False:
            judged.verdict = "wrong_gradient"
    judged.graphs, judged.skipped = list(session), skipped
    return judged


def first_call(graph: "GraphCapture", calls: Sequence[GraphCall]) -> list[Any]:
    """The arguments of the first call of ``graph``'s Dynamo graph, found by its code: Dynamo can
    compile a graph it then discards (a GPT-2 under ``dynamic=True`` compiles two and runs the
    second), so the n-th compiled graph is not the n-th captured one."""
    code = getattr(graph.dynamo_graph, "code", None)
    return next((record.first_args for record in calls if record.first_args and record.code == code), [])


def inputs_like_placeholders(graph: torch.fx.GraphModule) -> Optional[list[Any]]:
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
