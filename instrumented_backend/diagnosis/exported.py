"""``diagnose`` of a ``torch.export.ExportedProgram``: its AOTInductor package is what ships, so it
is judged first; when it fails, the diagnosis goes on in the Python-wrapper build of the same graph
(:mod:`.aoti_package`), whose buffers can be read."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Optional, Sequence

from .accuracy import eager_is_nondeterministic
from .aoti_package import cpp_wrapper_verdict, judge_package, package_settings
from .divergence import DivergenceReport
from .keyword_call import keyword_call
from .pipeline import Progress, diagnose_callable
from .settings import CompileSettings, DiagnoseSettings
from .verdict import Diagnosis, DiagnosisStep
from .written import finish, write_reports

__all__ = ["diagnose_exported"]


def diagnose_exported(exported: Any, inputs: Sequence[Any], kwargs: dict[str, Any],
                      compile_kwargs: Optional[dict[str, Any]], settings: DiagnoseSettings) -> Diagnosis:
    """:func:`~.diagnose.diagnose` of an exported program: its AOTInductor package is judged
    (``compile_kwargs``: ``mode`` and ``options``, the package's ``inductor_configs``); when it
    fails, the diagnosis goes on in the Python-wrapper build of the same graph."""
    if settings.train:
        raise ValueError("diagnose: an AOTInductor package runs inference only, so an exported program is judged "
                         "without train=True (diagnose exported.module() with train=True for a training step)")
    options = package_settings(compile_kwargs)
    settings = replace(settings, name=settings.name or "exported program")
    name, out, seed, tol = settings.name, settings.out_dir, settings.seed, settings.tol
    started = time.perf_counter()
    say = Progress(settings.progress, started)
    module = exported.module()

    def the_python_wrapper_build(**dynamic: bool) -> Diagnosis:
        given = {**dynamic, "options": options} if options else dynamic
        return diagnose_callable(module, inputs, kwargs, replace(settings, compile=CompileSettings.of(given)))

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
        return finish(result, out, graphs, started, say)

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
