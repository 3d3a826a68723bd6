"""The backend's own checks, which capture asks the diagnosis for (:mod:`..capture.hooks`): a failed
C++ kernel compile explained through the line map, and a compiled graph's accuracy judged at its
first call (``options={"check_accuracy": True}``), each minified on failure when asked
(``options={"minify": True}``). Registered when this package is imported."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional

from ..capture.hooks import DiagnosisHooks, register_diagnosis_hooks
from ..fail_soft import warn_once

if TYPE_CHECKING:
    from ..capture.backend import CompileJob
    from ..graphs import GraphCapture

__all__ = ["explained_compile_error", "accuracy_checked", "register"]


def explained_compile_error(graph: "GraphCapture", error: BaseException) -> Optional[BaseException]:
    """Inductor's error with a C++ compile failure explained through the line map, or None.

    Keeps the type Inductor raised (``InductorError`` around a ``CppCompileError``): the inner
    error becomes a :class:`KernelCompileError` (a CppCompileError subclass) whose message starts
    with the explanation, and the original is its ``__cause__``.
    """
    if graph is None:
        return None
    try:
        from ..seams.runtime.errors import inductor_error_type

        InductorError = inductor_error_type()
        from .compile_error import (
            KernelCompileError,
            explain_compile_error,
            find_cpp_compile_error,
        )

        original = find_cpp_compile_error(error)
        if original is None:
            return None
        report = explain_compile_error(graph, original.output)
        graph.compile_error_report = report
        inner = KernelCompileError(original.cmd, original.output, report)
        inner.__cause__ = original
        if isinstance(error, InductorError):
            wrapped = InductorError(inner, None)
            wrapped.__traceback__ = error.__traceback__
            return wrapped
        return inner.with_traceback(error.__traceback__)
    except Exception as exc:  # noqa: BLE001 - never hide the user's real error behind ours
        warn_once("compile_error", f"could not explain the compile error ({exc!r})")
        return None


def accuracy_checked(compiled: Callable[..., Any], job: "CompileJob", raise_on_failure: bool) -> Callable[..., Any]:
    """``compiled``, judged against the Dynamo graph run eagerly on its first call."""
    from ..capture.registry import captures as all_captures
    from .accuracy import AccuracyError, check_graph_call, clone_inputs
    from .graph_state import GraphState

    checked = False

    def run(*args: Any) -> Any:
        nonlocal checked
        if checked:
            return compiled(*args)
        checked = True
        try:
            saved = clone_inputs(args)
            state = GraphState.of(job.dynamo_graph)  # what the compiled call may update: never run eagerly
        except Exception as exc:  # noqa: BLE001
            warn_once("accuracy", f"could not copy the inputs for the accuracy check ({exc!r}); not checked")
            return compiled(*args)
        result = compiled(*args)
        try:
            report = check_graph_call(job.dynamo_graph, saved, result, state=state, args_after=args)
        except Exception as exc:  # noqa: BLE001
            warn_once("accuracy", f"the accuracy check failed to run ({exc!r}); not checked")
            return result
        for graph in all_captures():
            if graph.compile_id == job.compile_id:
                graph.accuracy = report
        if report.passed is False:
            error = AccuracyError(report, where=f"graph {job.compile_id}")
            if job.options.minify:
                from .auto_minify import minify_accuracy_failure

                # from the state before the call (the compiled call has updated the graph's own)
                minify_accuracy_failure(error, state.module(job.dynamo_graph), saved)
            if raise_on_failure:
                raise error
            warn_once(f"accuracy:{job.compile_id}", str(error))
        return result

    return run


def _step_state(target: Any, args: Any) -> Any:
    from .step_state import StepState

    return StepState.of(target).with_arguments(args)


def register() -> None:
    """Answer capture's questions (:class:`~..capture.hooks.DiagnosisHooks`) with the diagnosis."""
    from .auto_minify import minify_compile_failure
    from .faults import active_faults

    register_diagnosis_hooks(DiagnosisHooks(
        explained_compile_error=explained_compile_error, minify_compile_failure=minify_compile_failure,
        accuracy_checked=accuracy_checked, step_state=_step_state, active_faults=active_faults))
