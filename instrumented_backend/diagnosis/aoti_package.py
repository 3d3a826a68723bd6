"""An AOTInductor package judged for ``ib.diagnose(exported_program, *args)`` (which
:mod:`.diagnose` runs: the package first, then the builds below).

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
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

import torch

from .accuracy import AccuracyReport, compare_outputs, error_line, fp64_reference, run_seeded
from .compile_error import CompileErrorReport, find_cpp_compile_error
from .keyword_call import keyword_call

if TYPE_CHECKING:
    from ..graphs import GraphCapture

__all__ = ["PackageJudgement", "is_exported_program", "judge_package", "cpp_wrapper_verdict", "package_settings"]

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
    symbolic_sizes: list[str] = field(default_factory=list)  # the sizes export left symbolic (its range constraints)
    # how the other builds of the same graph fared, when the package failed
    python_wrapper: str = ""  # torch.compile(exported.module()): the build the search reads
    cpp_wrapper: str = ""  # the same with cpp_wrapper=True, when the Python-wrapper build did not fail alike

    def record_builds(self, python_verdict: str, cpp_verdict: Optional[str] = None,
                      dynamic_verdict: Optional[str] = None) -> None:
        """Say how the Python-wrapper build of the same graph fared (``python_verdict``), and how it
        fared built again with ``dynamic=True`` (``dynamic_verdict``: the package's sizes are
        symbolic, the first build's specialised); when neither failed alike, how the just-in-time
        build with ``cpp_wrapper=True`` fared (``cpp_verdict``)."""
        if alike(python_verdict, self.verdict):
            self.python_wrapper = ("its Python-wrapper build (torch.compile of exported.module(), the same graph "
                                   f"and kernels) {outcome(python_verdict, self.verdict)}: the steps below ran on it")
            return
        sizes = ", ".join(self.symbolic_sizes)
        if dynamic_verdict is not None and alike(dynamic_verdict, self.verdict):
            self.python_wrapper = (f"its Python-wrapper build (torch.compile of exported.module()) "
                                   f"{outcome(python_verdict, self.verdict)} with sizes specialised to these inputs; "
                                   f"built again with dynamic=True (symbolic sizes, as the package's {sizes}), it "
                                   f"{outcome(dynamic_verdict, self.verdict)}: the bug needs symbolic sizes, and the "
                                   "steps below ran on that build")
            return
        self.python_wrapper = (f"its Python-wrapper build (torch.compile of exported.module()) "
                               f"{outcome(python_verdict, self.verdict)}, so the bug is in what AOTInductor changes, "
                               "not in a kernel both builds share")
        if dynamic_verdict is not None:
            self.python_wrapper += (f" (built again with dynamic=True, symbolic sizes as the package's {sizes}, it "
                                    f"{outcome(dynamic_verdict, self.verdict)} too)")
        elif self.symbolic_sizes:
            self.python_wrapper += (f" (but the package's kernels take symbolic sizes, {sizes}, where the builds "
                                    "judged beside it are specialised to these inputs' sizes: a bug only symbolic "
                                    "sizes show looks like this too)")
        if cpp_verdict is not None:
            self.cpp_wrapper = (f"built just in time with cpp_wrapper=True, it {outcome(cpp_verdict, self.verdict)}"
                                + (": the C++ wrapper's code, which both share, is enough to show it"
                                   if alike(cpp_verdict, self.verdict) else
                                   ": what only AOTInductor does (aot_mode: constants baked into the package, its "
                                   "runtime, code generated only for it)"))

    def render(self) -> str:
        """One line per build judged."""
        judged = {"passed": "matches eager", "compile_error": "its compile fails",
                  "runtime_error": "it raises when run", "inaccurate": "its outputs are wrong"}[self.verdict]
        out = [f"AOTInductor package {self.path}: {judged}"]
        out += [f"  {text}" for text in (self.python_wrapper, self.cpp_wrapper) if text]
        return "\n".join(out)


def alike(verdict: str, like: str) -> bool:
    """Whether a build's ``verdict`` is the package's ``like`` ("error": it raised, at compile or run)."""
    return verdict == like or (verdict == "error" and like in ("compile_error", "runtime_error"))


def outcome(verdict: str, like: str) -> str:
    """How a build with ``verdict`` fared beside the package's ``like``, in words."""
    if alike(verdict, like):
        return f"fails alike ({like})"
    return "matches eager" if verdict == "passed" else f"fails otherwise ({verdict})"


def judge_package(exported: Any, inputs: Sequence[Any], kwargs: dict[str, Any], *, inductor_configs: dict[str, Any],
                  package_path: Path, eager_call: Callable[..., Any], eager: Any, seed: int = 0,
                  tol: Optional[float] = None) -> tuple[PackageJudgement, list["GraphCapture"]]:
    """Build ``exported``'s AOTInductor package at ``package_path`` with ``inductor_configs``
    (captured, Inductor's caches bypassed), load it, run it on ``inputs``/``kwargs`` and judge it
    against ``eager`` (the outputs of ``eager_call``, the exported module as :func:`keyword_call`
    lays it out), ``eager_call`` run in float64 as referee."""
    from ..capture.aoti import capturing_aoti
    from ..capture.registry import capture
    from ..seams.runtime import aot_compile

    started = time.perf_counter()
    judgement = PackageJudgement(path=str(package_path),
                                 symbolic_sizes=sorted(str(size) for size in exported.range_constraints))
    package_path.parent.mkdir(parents=True, exist_ok=True)
    with capture() as session:
        try:
            with capturing_aoti():
                written = aot_compile.compile_and_package(exported, package_path=str(package_path),
                                                          inductor_configs=dict(inductor_configs))
        except Exception as exc:  # noqa: BLE001 - a finding
            judgement.verdict, judgement.error = "compile_error", error_line(exc)
            judgement.compile_error = getattr(find_cpp_compile_error(exc), "report", None)
    if judgement.verdict == "passed":
        try:
            loaded, args = keyword_call(aot_compile.load_package(str(written)), inputs, kwargs)
            judgement.outputs = compare_outputs(run_seeded(loaded, args, seed), eager,
                                                fp64_reference(eager_call, args, seed), tol=tol)
        except Exception as exc:  # noqa: BLE001 - a finding
            judgement.verdict, judgement.error = "runtime_error", error_line(exc)
        else:
            judgement.verdict = "passed" if judgement.outputs.passed is not False else "inaccurate"
    graphs = list(session)
    judgement.graphs = [g.label for g in graphs]
    judgement.seconds = time.perf_counter() - started
    return judgement, graphs


def cpp_wrapper_verdict(module: Any, inputs: Sequence[Any], options: dict[str, Any], seed: int,
                         tol: Optional[float]) -> str:
    """The verdict of ``module`` compiled just in time with ``cpp_wrapper=True``: passed,
    inaccurate, or error (its compile or its run raised)."""
    from .accuracy import check_accuracy

    report = check_accuracy(module, *inputs, options={**options, "cpp_wrapper": True}, seed=seed, tol=tol)
    if report.error:
        return "error"
    return "passed" if report.passed is not False else "inaccurate"


def package_settings(compile_kwargs: Optional[dict[str, Any]]) -> dict[str, Any]:
    """The Inductor config patches (a package's ``inductor_configs``) for ``compile_kwargs``, which
    takes ``mode`` and ``options``; ValueError names anything else."""
    from ..capture.options import parse_options

    given = {k: v for k, v in (compile_kwargs or {}).items() if v is not None}
    unknown = sorted(set(given) - {"mode", "options"})
    if unknown:
        raise ValueError(f"diagnose: an exported program's package takes compile_kwargs 'mode' and 'options' "
                         f"(its inductor_configs), not {unknown}"
                         + (": export fixed them" if set(unknown) <= set(_NOT_FOR_PACKAGES) else ""))
    return {k: v for k, v in parse_options(given.get("mode"), given.get("options")).inductor_patches.items()
            if k != "cpp_wrapper"}  # a package's wrapper is C++ whatever it says
