"""``ib.diagnose(exported_program, *args)``: an AOTInductor package judged, then searched.

The package is what the user ships, so it is what is judged: built with PyTorch's own
``aoti_compile_and_package`` (captured), loaded, run on the arguments and compared with the
exported program's module run eagerly (fp64 as referee). Its buffers cannot be read (the wrapper
is C++, inside a shared library), so when it fails, the rest of the diagnosis (layer, first
diverging buffer, culprit line, repro) runs on the Python-wrapper build of the same graph,
``torch.compile(exported.module())``, whose kernels are generated alike, once that build is
judged to fail the same way. When it does not, the bug is in what AOTInductor changes, and a
JIT build with ``cpp_wrapper=True`` tells whether the C++ wrapper's code (shared by both) is
enough to show it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence

import torch

from .accuracy import AccuracyReport, compare_outputs, eager_is_nondeterministic, fp64_reference, run_seeded
from .compile_error import CompileErrorReport
from .divergence import DivergenceReport

if TYPE_CHECKING:
    from ..graphs import GraphCapture
    from .diagnose import Diagnosis

__all__ = ["PackageJudgement", "is_exported_program", "judge_package", "diagnose_exported"]

_NOT_FOR_PACKAGES = ("dynamic", "fullgraph")  # an exported program fixed them when it was exported


def is_exported_program(target: Any) -> bool:
    """Whether ``target`` is a ``torch.export.ExportedProgram``."""
    return isinstance(target, torch.export.ExportedProgram)


@dataclass
class PackageJudgement:
    """The AOTInductor package of an exported program: built, loaded, run and judged against eager."""

    path: str  # the package written (a .pt2 file)
    verdict: str = "passed"  # passed / compile_error / runtime_error / inaccurate
    outputs: Optional[AccuracyReport] = None
    error: str = ""
    compile_error: Optional[CompileErrorReport] = None
    graphs: list[str] = field(default_factory=list)  # the captured graph(s) of the package's compile
    seconds: float = 0.0
    # how the other builds of the same graph fared, when the package failed
    python_wrapper: str = ""  # torch.compile(exported.module()): the build the search reads
    cpp_wrapper: str = ""  # the same with cpp_wrapper=True, when the Python-wrapper build did not fail alike

    def render(self) -> str:
        """One line per build judged."""
        judged = {"passed": "matches eager", "compile_error": "its compile fails",
                  "runtime_error": "it raises when run", "inaccurate": "its outputs are wrong"}[self.verdict]
        out = [f"AOTInductor package {self.path}: {judged}"]
        out += [f"  {text}" for text in (self.python_wrapper, self.cpp_wrapper) if text]
        return "\n".join(out)


def _alike(verdict: str, like: str) -> bool:
    """Whether a build's ``verdict`` is the package's ``like`` ("error": it raised, at compile or run)."""
    return verdict == like or (verdict == "error" and like in ("compile_error", "runtime_error"))


def _outcome(verdict: str, like: str) -> str:
    if _alike(verdict, like):
        return f"fails alike ({like})"
    return "matches eager" if verdict == "passed" else f"fails otherwise ({verdict})"


def judge_package(exported: Any, inputs: Sequence[Any], kwargs: dict[str, Any], *, inductor_configs: dict[str, Any],
                  package_path: Path, eager: Any, seed: int = 0,
                  tol: Optional[float] = None) -> tuple[PackageJudgement, list["GraphCapture"]]:
    """Build ``exported``'s AOTInductor package at ``package_path`` with ``inductor_configs``
    (captured, Inductor's caches bypassed), load it, run it on ``inputs``/``kwargs`` and judge it
    against ``eager`` (the exported module's outputs), fp64 as referee."""
    from ..capture.aoti import capturing_aoti
    from ..capture.registry import capture
    from ..seams import aot_compile
    from .diagnose import _compile_error_report, _error_text, keyword_call

    started = time.perf_counter()
    judgement = PackageJudgement(path=str(package_path))
    package_path.parent.mkdir(parents=True, exist_ok=True)
    with capture() as session:
        try:
            with capturing_aoti():
                written = aot_compile.compile_and_package(exported, package_path=str(package_path),
                                                          inductor_configs=dict(inductor_configs))
        except Exception as exc:  # noqa: BLE001 - a finding
            judgement.verdict, judgement.error = "compile_error", _error_text(exc)
            judgement.compile_error = _compile_error_report(exc)
    if judgement.verdict == "passed":
        try:
            loaded, args = keyword_call(aot_compile.load_package(str(written)), inputs, kwargs)
            module, _ = keyword_call(exported.module(), inputs, kwargs)
            judgement.outputs = compare_outputs(run_seeded(loaded, args, seed), eager,
                                                fp64_reference(module, args, seed), tol=tol)
        except Exception as exc:  # noqa: BLE001 - a finding
            judgement.verdict, judgement.error = "runtime_error", _error_text(exc)
        else:
            judgement.verdict = "passed" if judgement.outputs.passed is not False else "inaccurate"
    graphs = list(session)
    judgement.graphs = [g.label for g in graphs]
    judgement.seconds = time.perf_counter() - started
    return judgement, graphs


def _cpp_wrapper_verdict(module: Any, inputs: Sequence[Any], options: dict[str, Any], seed: int,
                         tol: Optional[float]) -> str:
    """The verdict of ``module`` compiled just in time with ``cpp_wrapper=True``: passed,
    inaccurate, or error (its compile or its run raised)."""
    from .accuracy import check_accuracy

    report = check_accuracy(module, *inputs, options={**options, "cpp_wrapper": True}, seed=seed, tol=tol)
    if report.error:
        return "error"
    return "passed" if report.passed is not False else "inaccurate"


def diagnose_exported(exported: Any, *inputs: Any, kwargs: Optional[dict[str, Any]] = None, train: bool = False,
                      compile_kwargs: Optional[dict[str, Any]] = None, out_dir: "str | Path" = "diagnosis",
                      minify: bool = True, bisect: bool = False, tol: Optional[float] = None, seed: int = 0,
                      progress: Optional[bool] = None, name: str = "") -> "Diagnosis":
    """:func:`~instrumented_backend.diagnose` of an exported program: its AOTInductor package is
    judged; when it fails, the diagnosis goes on in the Python-wrapper build of the same graph
    (see the module's docstring). ``compile_kwargs`` takes ``mode`` and ``options`` (the package's
    ``inductor_configs``)."""
    from ..capture.options import parse_options
    from .diagnose import Diagnosis, DiagnosisStep, _finish, _Progress, diagnose, keyword_call, write_reports

    if train:
        raise ValueError("diagnose: an AOTInductor package runs inference only, so an exported program is judged "
                         "without train=True (diagnose exported.module() with train=True for a training step)")
    given = {k: v for k, v in (compile_kwargs or {}).items() if v is not None}
    unknown = sorted(set(given) - {"mode", "options"})
    if unknown:
        raise ValueError(f"diagnose: an exported program's package takes compile_kwargs 'mode' and 'options' "
                         f"(its inductor_configs), not {unknown}"
                         + (": export fixed them" if set(unknown) <= set(_NOT_FOR_PACKAGES) else ""))
    options = {k: v for k, v in parse_options(given.get("mode"), given.get("options")).inductor_patches.items()
               if k != "cpp_wrapper"}  # a package's wrapper is C++ whatever it says
    kwargs = dict(kwargs or {})
    name = name or "exported program"
    out = Path(out_dir)
    started = time.perf_counter()
    say = _Progress(progress, started)
    module = exported.module()

    def the_python_wrapper_build() -> "Diagnosis":
        return diagnose(module, *inputs, kwargs=kwargs, compile_kwargs={"options": options} if options else {},
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
                                    package_path=out / "package" / "model.pt2", eager=eager, seed=seed, tol=tol)
    step = DiagnosisStep("AOTInductor package", package.seconds, package.verdict)
    if package.verdict == "passed":
        result = Diagnosis(target=name, outputs=package.outputs, graphs=package.graphs, package=package,
                           compiled_with={"options": options} if options else {}, steps=[step])
        return _finish(result, out, graphs, started, say)

    say(f"the package: {package.verdict}; judging the Python-wrapper build of the same graph")
    result = the_python_wrapper_build()
    if result.verdict == package.verdict:
        package.python_wrapper = ("its Python-wrapper build (torch.compile of exported.module(), the same graph and "
                                  f"kernels) {_outcome(result.verdict, package.verdict)}: the steps below ran on it")
    else:
        say(f"its Python-wrapper build: {result.verdict}; judging a build with cpp_wrapper=True")
        began = time.perf_counter()
        wrapper_verdict = _cpp_wrapper_verdict(call, args, options, seed, tol)
        builds = [DiagnosisStep("Python-wrapper build", result.seconds, result.verdict),
                  DiagnosisStep("cpp_wrapper build", time.perf_counter() - began, wrapper_verdict)]
        package.python_wrapper = (f"its Python-wrapper build (torch.compile of exported.module()) "
                                  f"{_outcome(result.verdict, package.verdict)}, so the bug is in what AOTInductor "
                                  "changes, not in a kernel both builds share")
        jit = _outcome(wrapper_verdict, package.verdict)
        package.cpp_wrapper = (f"built just in time with cpp_wrapper=True, it {jit}"
                               + (": the C++ wrapper's code, which both share, is enough to show it"
                                  if _alike(wrapper_verdict, package.verdict) else
                                  ": what only AOTInductor does (aot_mode: constants baked into the package, its "
                                  "runtime, code generated only for it)"))
        twin_graphs = result.captures
        result = Diagnosis(target=name, verdict=package.verdict, outputs=package.outputs, error=package.error,
                           compile_error=package.compile_error, graphs=package.graphs, package=package,
                           compiled_with={"options": options} if options else {},
                           divergence=DivergenceReport(graph=(package.graphs or [""])[0], note=(
                               "only the AOTInductor package fails: nothing to search in the build whose buffers "
                               "can be read")), steps=builds)
        result.captures = graphs + twin_graphs
    result.package = package
    result.graphs = package.graphs + [label for label in result.graphs if label not in package.graphs]
    result.steps.insert(0, step)
    result.captures = graphs + [g for g in result.captures if g not in graphs]
    result.seconds = time.perf_counter() - started
    write_reports(result, out)
    return result
