"""The diagnosis sections of the HTML report: the explained compile error, the accuracy report,
the first diverging kernel, the minifier's result and the profile, each as title + text + the
output-code lines it points at."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from minifier import MinifyResult

    from ..capture.left_out import LeftOut
    from ..diagnosis.divergence import DivergenceReport
    from ..diagnosis.verdict import Diagnosis
    from ..graphs import GraphCapture
    from ..profiling.report import ProfileReport

__all__ = ["error_lines", "graph_sections", "run_sections", "kernel_shares"]


def error_lines(graph: "GraphCapture") -> set[int]:
    """The output-code lines the C++ compiler's error points at (explained compile errors)."""
    report = graph.compile_error_report
    if report is None:
        return set()
    return {item.line.number for item in report.lines if item.role == "error"}


def _section(title: str, text: str, kind: str, *, graph: Optional[int] = None,
             lines: Optional[list[int]] = None) -> dict[str, Any]:
    return {"title": title, "text": text, "kind": kind, "graph": graph, "lines": lines or []}


def graph_sections(graph: "GraphCapture") -> list[dict[str, Any]]:
    """What the capture itself says went wrong: the compile error, the accuracy check, problems."""
    sections = []
    if graph.compile_error_report is not None:
        sections.append(_section("Compile error, explained", graph.compile_error_report.render(), "error",
                                 graph=graph.index, lines=sorted(error_lines(graph))))
    elif graph.compile_error:
        sections.append(_section("Compile error", graph.compile_error, "error", graph=graph.index))
    if graph.accuracy is not None:
        kind = "ok" if graph.accuracy.passed else "error"
        sections.append(_section("Accuracy against eager (fp64 referee)", graph.accuracy.render(), kind,
                                 graph=graph.index))
    return sections


def run_sections(graphs: list["GraphCapture"], *, profile: Optional["ProfileReport"] = None,
                 divergence: Optional["DivergenceReport"] = None,
                 minified: Optional["MinifyResult"] = None,
                 diagnosis: Optional["Diagnosis"] = None, left_out: Optional["LeftOut"] = None) -> list[dict[str, Any]]:
    """Sections about the run as a whole (shown above the graphs)."""
    by_label = {g.label: g.index for g in graphs}
    sections = _left_out_sections(left_out) if left_out else []
    if diagnosis is not None:  # first: the verdict, the tables against eager, the layer, the repro
        kind = "error" if diagnosis.found else "ok" if diagnosis.verdict == "passed" else "info"
        sections.append(_section(f"Diagnosis: {diagnosis.headline}", diagnosis.render(divergence=False), kind))
    if divergence is not None:
        lines = sorted({line.number for line in divergence.lines})
        sections.append(_section("First diverging kernel", divergence.render(), "error" if divergence.found else "ok",
                                 graph=by_label.get(divergence.graph), lines=lines))
    if minified is not None:
        text = "\n".join([minified.summary(), *minified.log[-3:]])
        if minified.repro_path:
            text += f"\nrun it: python {minified.repro_path}"
        sections.append(_section("Minified repro", text, "info"))
    if profile is not None:
        sections.append(_section("Profile: eager vs compiled", profile.render(), "info"))
    return sections


def _left_out_sections(left_out: "LeftOut") -> list[dict[str, Any]]:
    """What the graphs below leave out of the program, first."""
    from ..capture.skipped_frames import failed_frames_lines

    sections = []
    if left_out.nothing_compiled is not None:  # the figures and graphs below are then about nothing compiled
        sections.append(_section("Nothing was compiled", "\n".join(
            ["Dynamo handed no graph to Inductor: the compiled code was never called, or it ran eagerly.",
             *left_out.nothing_compiled.lines()]), "error"))
    if left_out.failed_frames:  # the graphs below are the frames these call, not these
        sections.append(_section("Frames that ran eagerly", "\n".join(
            failed_frames_lines(left_out.failed_frames, "they ran eagerly, so no graph below is theirs (only the "
                                "frames they call compiled)")), "error"))
    if left_out.recompiles:  # the graphs below include each recompile's
        sections.append(_section("Recompiles", "\n".join(frame.summary() for frame in left_out.recompiles), "info"))
    return sections


def kernel_shares(profile: Optional["ProfileReport"]) -> dict[str, float]:
    """Kernel name -> its share of the profiled compiled step."""
    if profile is None:
        return {}
    return {row.kernel: row.share for row in profile.kernels}


def source_shares(profile: Optional["ProfileReport"]) -> dict[str, float]:
    """``s:<file>:<line>`` -> share of compiled kernel time spent on that source line."""
    if profile is None or not profile.share_total_us:
        return {}
    return {f"s:{row.source}": row.compiled_us / profile.share_total_us for row in profile.by_source_line()}
