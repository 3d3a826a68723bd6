"""The culprit of a bug and the graph to minify from it: one function per verdict.

Each reads the graphs a diagnosis compiled (or their Python-wrapper build, :class:`SearchScope`),
fills the diagnosis's :class:`~.divergence.DivergenceReport` and returns the
:class:`~.minimal_repro.MinifyTarget` the minimal repro starts from (None when there is none):

* :func:`culprit_of_inaccurate` - the first buffer of a forward that differs from eager;
* :func:`culprit_of_wrong_gradient` - the forward's saved tensors, then the backward's buffers;
* :func:`culprit_of_compile_error` - the graph that failed to compile and the nodes of its failing lines;
* :func:`culprit_inside` - a call that passed judged blind: the first buffer inside that differs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from ..capture.redirect import autocast_now
from .accuracy import error_line as _error_text
from .aoti_package import outcome
from .divergence import DivergenceReport, divergence_in_graph, dynamo_target_name, python_wrapper_note, user_op_chain
from .error_origin import dynamo_nodes_of_line
from .judged_compile import GraphCall, JudgedCompile, first_call, inputs_like_placeholders
from .minimal_repro import MinifyTarget
from .verdict import Diagnosis

if TYPE_CHECKING:
    from ..graphs import GraphCapture

__all__ = ["SearchScope", "python_wrapper_scope", "culprit_of_inaccurate", "culprit_of_wrong_gradient",
           "culprit_of_compile_error", "culprit_inside"]


@dataclass
class SearchScope:
    """The graphs the first-divergence search reads: those judged, or their Python-wrapper build."""

    graphs: list["GraphCapture"]
    calls: list[GraphCall]
    options: dict[str, Any]  # the Inductor options the culprit probes compile with
    build: str = ""  # which build is searched, when not the one judged
    extra_graphs: list["GraphCapture"] = field(default_factory=list)  # compiled for the search, reported too
    wrapper_only: Optional[DivergenceReport] = None  # only the C++ wrapper's build fails: nothing to search


def python_wrapper_scope(verdict: str, wrapped: "GraphCapture", calls: list[GraphCall],
                         judge: Callable[[dict[str, Any]], JudgedCompile], options: dict[str, Any]) -> SearchScope:
    """The search reads buffers through a Python wrapper: graphs built with ``cpp_wrapper`` (the
    first of them ``wrapped``) are searched in their Python-wrapper build (``judge`` run with
    ``cpp_wrapper=False``; its kernels are generated alike) when it fails alike (the same
    ``verdict``); when it does not, the bug is in what ``cpp_wrapper`` changes, and there is
    nothing to search."""
    python_options = {**options, "cpp_wrapper": False}  # the culprit probes too: faster builds
    twin = judge(python_options)
    if twin.verdict == verdict:
        return SearchScope(twin.graphs, twin.calls, python_options, extra_graphs=twin.graphs,
                           build=python_wrapper_note([g.label for g in twin.graphs], fails_alike=True))
    fared = outcome(twin.verdict, verdict)  # not alike here: "matches eager" or "fails otherwise (...)"
    return SearchScope([], calls, options, extra_graphs=twin.graphs, wrapper_only=DivergenceReport(
        graph=wrapped.label, note=(
            f"only the C++ wrapper's build fails: the Python-wrapper build (cpp_wrapper=False) of the same graphs "
            f"{fared}, so the bug is in what cpp_wrapper changes (the C++ wrapper's code, inductor_entry_impl in "
            "the output code, or code generated only for it), not in a kernel both builds share")))


def wrapper_only_target(result: Diagnosis, wrapped: "GraphCapture", calls: Sequence[GraphCall]
                        ) -> Optional[MinifyTarget]:
    """Only the C++ wrapper's build fails: a wrong result is minified from the whole Dynamo graph."""
    args = first_call(wrapped, calls)
    if result.verdict == "inaccurate" and args and not autocast_now():
        return MinifyTarget(wrapped.dynamo_graph, args)
    return None


def culprit_of_inaccurate(result: Diagnosis, scope: SearchScope, *, seed: int, tol: Optional[float],
                          recompiled: Callable[[], DivergenceReport]) -> Optional[MinifyTarget]:
    """Wrong outputs: the first diverging buffer of a forward graph, replayed on the compiled graph's
    own arguments, and the graph to minify from its culprit (the Dynamo graph, the post-grad graph
    when a worker cannot load that, or a ``torch.cond`` branch's subgraph). Every buffer matching:
    the graph Inductor was given is wrong. No graph's arguments kept: ``recompiled()`` compiles
    again and searches, keeping the Dynamo call's."""
    result.divergence = DivergenceReport(build=scope.build)
    replayable = [g for g in scope.graphs if g.kind in ("inference", "forward") and g.call_args is not None]
    target: Optional[MinifyTarget] = None
    for graph in replayable:
        if divergence_in_graph(graph, graph.call_args, result.divergence, seed=seed, tol=tol,
                               narrow_options=scope.options):
            target = _from_forward_culprit(result.divergence, graph, first_call(graph, scope.calls))
            break
    else:  # every buffer matches its graph run eagerly: the graph Inductor was given is wrong
        target = _graph_given_wrong(result.divergence, replayable, scope.calls, seed, tol)
    if not replayable:  # no graph's own arguments were kept: compile again, keeping the Dynamo call's
        try:
            result.divergence = recompiled()
        except Exception as exc:  # noqa: BLE001 - a step running its own backward cannot run under no_grad
            report = result.divergence
            report.note = "; ".join(filter(None, [report.note, "compiling it again to keep each graph's "
                                                  f"arguments failed: {_error_text(exc)}"]))
    return target


def _from_forward_culprit(report: DivergenceReport, graph: "GraphCapture", args: list[Any]
                          ) -> Optional[MinifyTarget]:
    """The graph to minify from the culprit ``report`` found in ``graph`` (its Dynamo graph's first
    call's arguments ``args``)."""
    culprit = report.culprit
    hints = list(graph.nodes[culprit].dynamo_nodes) if culprit in graph.nodes else []
    post_grad = (MinifyTarget(graph.post_grad_graph, graph.call_args, [culprit] if culprit else [])
                 if graph.post_grad_graph is not None else None)
    if report.branch is not None:  # inside a torch.cond's branch: that subgraph alone
        branch, subgraph, operands = report.branch
        return MinifyTarget(subgraph, operands, [culprit.removeprefix(f"{branch}.")])
    if args and not autocast_now():
        return MinifyTarget(graph.dynamo_graph, args, hints, instead=post_grad)
    return post_grad


def _graph_given_wrong(report: DivergenceReport, replayable: Sequence["GraphCapture"],
                       calls: Sequence[GraphCall], seed: int, tol: Optional[float]) -> Optional[MinifyTarget]:
    """For outputs that differ while every buffer the compiled code writes matches its post-grad
    graph run eagerly: say that the bug is in that graph (a decomposition, or a graph pass before
    code generation; the failing layer says which) and name the first of the user's ops it gets
    wrong (:func:`~.divergence.user_op_chain`), and return the Dynamo graph to minify with the
    arguments of its first call (None when none was kept)."""
    if report.checked:
        report.note = "; ".join(filter(None, [report.note, (
            "the compiled code computes the post-grad graph it was given, yet the outputs differ: the bug is in "
            "that graph, made by a decomposition or a graph pass before code generation (the failing layer says "
            "which); the minimal repro holds the ops")]))
    for graph in replayable:
        wrong = next((step for step in user_op_chain(graph, first_call(graph, calls), seed=seed, tol=tol)
                      if step[2] > 1.0), None)
        if wrong is not None:
            node, held, _ = wrong
            report.graph, report.given_wrong, report.given_wrong_held_by = graph.label, node, held
            report.given_wrong_op = dynamo_target_name(graph, node)
            provenance = graph.nodes.get(held)
            report.given_wrong_source = provenance.source if provenance is not None else None
            break
    for graph in replayable:
        args = first_call(graph, calls)
        if args and not autocast_now() and graph.dynamo_graph is not None:
            return MinifyTarget(graph.dynamo_graph, args)
    return None


def culprit_of_wrong_gradient(result: Diagnosis, scope: SearchScope, *, seed: int, tol: Optional[float]
                              ) -> Optional[MinifyTarget]:
    """Wrong gradients: the forwards first, then the backwards, each replayed on the arguments it
    received. A wrong tensor a forward saves for the backward (a GELU's output behind a 1e-6 layer
    scale) leaves the outputs within tolerance and makes a right backward, replayed on that same
    saved tensor, compute wrong gradients with every buffer matching."""
    result.divergence = DivergenceReport(build=scope.build)
    replayed = [g for g in scope.graphs if g.kind == "forward"] + [g for g in scope.graphs if g.kind == "backward"]
    for graph in (g for g in replayed if g.call_args is not None):
        if divergence_in_graph(graph, graph.call_args, result.divergence, seed=seed, tol=tol,
                               narrow_options=scope.options):
            culprit = result.divergence.culprit
            return MinifyTarget(graph.post_grad_graph, graph.call_args, [culprit] if culprit else [])
    return None


def culprit_of_compile_error(result: Diagnosis, graphs: Sequence["GraphCapture"], calls: Sequence[GraphCall],
                             lowered_line: Optional[tuple[str, int]]) -> Optional[MinifyTarget]:
    """A compile error: the graph that failed, from the nodes of its failing kernel lines (or, when
    lowering failed before any kernel line, of the user's line the node being lowered came from).
    Only a backward failing: its post-grad graph, on inputs like its placeholders."""
    failed = next((g for g in graphs if g.failed), None)
    backward_args = (inputs_like_placeholders(failed.post_grad_graph)
                     if failed is not None and failed.kind == "backward" and failed.post_grad_graph is not None
                     else None)
    hints: list[str] = []
    if backward_args is not None:  # only the backward fails to compile: the Dynamo graph's would not
        for line in result.culprit_lines:
            hints.extend(n for n in line.fx_nodes if n not in hints)
        return MinifyTarget(failed.post_grad_graph, backward_args, hints)
    if failed is not None and calls:
        for line in result.culprit_lines:
            hints.extend(n for n in line.dynamo_nodes if n not in hints)
        if not hints:  # lowering itself failed, before any kernel line: the ops of the node's line
            hints = dynamo_nodes_of_line(failed.dynamo_graph, lowered_line)
        return MinifyTarget(failed.dynamo_graph, calls[-1].example_inputs, hints)
    return None


def culprit_inside(result: Diagnosis, graphs: Sequence["GraphCapture"], *, seed: int, tol: Optional[float],
                   options: dict[str, Any]) -> Optional[MinifyTarget]:
    """For a call that passed judged blind (outputs under their absolute tolerance, which passes any
    error in them: a MobileViT built from a config with random weights pools its features to exact
    zeros): the first buffer that differs inside its graphs (inference or forward, then a training
    step's backward, replayed on its saved tensors and incoming gradients), and its culprit. On
    one, ``result`` becomes inaccurate with that divergence, and keeps the blind line said of its
    outputs; returns the post-grad graph to minify from the culprit (None when every buffer matches,
    or the graph has no culprit to start from)."""
    blind = result.below_tolerance()
    report = DivergenceReport()
    ordered = [g for g in graphs if g.kind in ("inference", "forward")] + [g for g in graphs if g.kind == "backward"]
    for graph in (g for g in ordered if g.call_args is not None):
        if divergence_in_graph(graph, graph.call_args, report, seed=seed, tol=tol, narrow_options=options):
            result.verdict, result.divergence, result.blind_outputs = "inaccurate", report, blind
            if graph.post_grad_graph is None or not report.culprit:
                return None
            return MinifyTarget(graph.post_grad_graph, graph.call_args, [report.culprit])
    return None
