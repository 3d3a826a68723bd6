"""A profile's findings: the trace-reading cheatsheet of "Profiling in PyTorch" applied to the report.

Each rule reads the joined tables and states one conclusion in plain words with its numbers:
speed-up, overhead-bound vs compute-bound, the hotspot (with the FX nodes and source lines it
computes), events called many times per step, a first step much wider than the rest (cold
start), ops whose CPU total is mostly their children, where memory-bound kernels stand
against the measured copy bandwidth, the graph breaks that split the compiled code, and the
time a compiled step spends in ops run eagerly outside every compiled graph.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Callable

from ..capture.skipped_frames import failed_frames_heading
from ..seams.runtime.kernel_profile import CALL_EVENT
from .records import Finding, format_us

if TYPE_CHECKING:
    from .report import ProfileReport

__all__ = ["diagnose", "RULES", "rule", "THRESHOLDS"]

RULES: dict[str, Callable[["ProfileReport"], list[Finding]]] = {}

THRESHOLDS = {
    "overhead_bound_busy": 0.5,   # kernels busy less than half the step: overhead-bound
    "hotspot_share": 0.2,         # one kernel with at least this share of kernel time
    "many_calls": 50,             # calls per step that make an event worth batching or fusing
    "cold_start_ratio": 3.0,      # first active step this much wider than the median of the rest
    "distortion_ratio": 2.0,      # a side's profiled step this many times its timed median (or 1/x)
    "children_ratio": 3.0,        # CPU total / self above this: the cost lives in children
    "children_share": 0.1,        # ... for ops with at least this share of the eager step
    "roofline_low": 0.3,          # memory-bound kernel below this share of copy bandwidth
    "roofline_high": 0.7,         # ... at or above: at the memory roofline
    "roofline_min_share": 0.05,   # only kernels with at least this share of kernel time
    "outside_graphs_share": 0.1,  # eager ops outside the compiled graphs with this share of the compiled step
}


def rule(
    name: str,
) -> Callable[[Callable[["ProfileReport"], list[Finding]]], Callable[["ProfileReport"], list[Finding]]]:
    """Register a diagnosis rule under ``name``."""
    def register(function: Callable[["ProfileReport"], list[Finding]]) -> Callable[["ProfileReport"], list[Finding]]:
        RULES[name] = function
        return function
    return register


def diagnose(report: "ProfileReport") -> list[Finding]:
    """Every registered rule's findings, in registration order."""
    findings: list[Finding] = []
    for function in RULES.values():
        findings.extend(function(report))
    return findings


@rule("nothing-compiled")
def _nothing_compiled(report: "ProfileReport") -> list[Finding]:
    nothing = report.left_out.nothing_compiled
    if nothing is None:  # set by ib.profile when no graph was compiled
        return []
    why = nothing.summary()
    return [Finding("nothing-compiled", (
        "Nothing was compiled: the compiled side ran eagerly, so these figures compare eager with itself "
        f"(plus torch.compile's frame check).{' ' + why if why else ''}"),
        {"skipped_frames": [f.render() for f in nothing.frames]})]


@rule("failed-frames")
def _failed_frames(report: "ProfileReport") -> list[Finding]:
    frames = report.left_out.failed_frames
    if not frames:
        return []
    shown = "; ".join(frame.render() for frame in frames[:3]) + (f"; and {len(frames) - 3} more" if len(frames) > 3
                                                                 else "")
    heading = failed_frames_heading(len(frames), "each ran eagerly, its ops unfused (what compiled are the frames "
                                    "it calls)")
    return [Finding("failed-frames", (
        f"{heading}: {shown}. Make the frame traceable (the error says how), or compile the parts of it Dynamo can "
        "trace."), {"frames": [frame.render() for frame in frames]})]


@rule("recompiles")
def _recompiles(report: "ProfileReport") -> list[Finding]:
    """The script's calls compiled the target's frame again and again (``profile script.py``)."""
    return [Finding("recompiles", f"Recompiles in the script: {frames.summary()}", {
        "frame": frames.frame, "compiles": frames.compiles, "guards": frames.guards, "limit_hit": frames.limit_hit})
        for frames in report.left_out.recompiles]


@rule("eager-ran-compiled")
def _eager_ran_compiled(report: "ProfileReport") -> list[Finding]:
    """The eager side ran a graph Inductor compiled, called directly rather than through
    ``torch.compile`` (a wrapper is taken off, and a ``@torch.compile`` helper runs eagerly there
    under the ``force_eager`` stance; a compiled graph called as a function is not switched off)."""
    events = report.eager_trace.get("traceEvents", []) if isinstance(report.eager_trace, dict) else []
    calls = sum(1 for e in events if isinstance(e, dict) and CALL_EVENT.match(str(e.get("name", ""))))
    if not calls:
        return []
    return [Finding("eager-ran-compiled", (
        f"The eager side ran compiled code ({calls} call(s) of a graph Inductor compiled, in its profiled steps): "
        "something it calls is a compiled graph called directly (torch._inductor.compile's result, say), which "
        "running torch.compile eagerly does not switch off, so 'eager' here is partly compiled and the speed-up "
        "understates compiling. Profile with the eager version of that call."), {"compiled_calls": calls})]


def _profiled_against_timed(report: "ProfileReport") -> tuple[list[tuple[str, float, float, float]],
                                                               list[tuple[str, float, float, float]]]:
    """(every side, the sides whose profiled step is far from its timed median): each as (side,
    profiled step in us, timed median in us, their ratio)."""
    limit = THRESHOLDS["distortion_ratio"]
    sides = []
    for side, steps, timing in (("eager", report.eager_step_us, report.eager),
                                ("compiled", report.compiled_step_us, report.compiled)):
        if steps and timing.samples_ms and timing.median_ms > 0:
            profiled, timed = statistics.median(steps), timing.median_ms * 1000.0
            sides.append((side, profiled, timed, profiled / timed))
    return sides, [s for s in sides if not 1 / limit <= s[3] <= limit]


@rule("speedup")
def _speedup(report: "ProfileReport") -> list[Finding]:
    ratio = report.speedup
    verdict = "faster" if ratio >= 1 else "slower"
    factor = ratio if ratio >= 1 else (1 / ratio if ratio else float("inf"))
    _, distorted = _profiled_against_timed(report)
    doubt = (" The profiled steps disagree with these timed calls (below): the machine was busy while they ran, "
             "so time it again on a quiet machine before trusting this figure." if distorted else "")
    return [Finding("speedup", f"Compiled is {factor:.2f}x {verdict} than eager in the timed calls "
                    f"({report.compiled.median_ms:.3f} vs {report.eager.median_ms:.3f} ms per call, medians).{doubt}",
                    {"speedup": ratio, "verdict": verdict, "disturbed": bool(distorted)})]


@rule("profiled-vs-timed")
def _profiled_vs_timed(report: "ProfileReport") -> list[Finding]:
    """The tables come from the profiled steps, the speed-up from the timed calls: when a side's
    profiled step is far from its timed median, the run was disturbed and the two disagree."""
    sides, distorted = _profiled_against_timed(report)
    if not distorted:
        return []
    said = "; ".join(f"{side}'s profiled step takes {format_us(profiled)}, {ratio:.1f}x its timed median "
                     f"({format_us(timed)})" for side, profiled, timed, ratio in distorted)
    evidence: dict[str, object] = {f"{side}_ratio": ratio for side, _, _, ratio in sides}
    compared = ""
    if report.eager_step_median_us and report.compiled_step_median_us:
        profiled_speedup = report.eager_step_median_us / report.compiled_step_median_us
        evidence["profiled_speedup"] = profiled_speedup
        compared = f" The profiled speed-up is {profiled_speedup:.2f}x against {report.speedup:.2f}x timed."
    return [Finding("profiled-vs-timed", (
        f"The profiled steps are not the timed ones: {said}.{compared} The tables (kernels, lines, categories, "
        "the time saved) come from the profiled steps, the speed-up from the timed calls, and the two disagree: "
        "a busy machine (an op's threads waiting for a core) or the profiler's own cost on many small ops does "
        "this. Profile again on a quiet machine, or with more active steps, before trusting either."), evidence)]


@rule("bound")
def _bound(report: "ProfileReport") -> list[Finding]:
    if not report.compiled_step_us or report.left_out.nothing_compiled is not None:  # no kernel: no overhead figure
        return []
    step = report.compiled_step_median_us
    work = report.kernel_us + report.outside_graphs_us  # an op run eagerly between graphs is work, not overhead
    busy = min(work, step) / step if step else 0.0
    evidence = {"kernel_us": report.kernel_us, "outside_graphs_us": report.outside_graphs_us, "step_us": step,
                "busy": busy}
    kernels = "the GPU" if report.device == "cuda" else "kernels"
    if report.ops_outside_graphs:
        kernels += " and the ops run eagerly outside the graphs"
    if busy < THRESHOLDS["overhead_bound_busy"]:
        return [Finding("overhead-bound", (
            f"Overhead-bound: {kernels} are busy only {busy:.0%} of each compiled step "
            f"({format_us(work)} of {format_us(step)}); the rest is Dynamo's guard check, the AOT wrapper "
            "and launching kernels. Make the work bigger (batch more), put more of the program in one graph, "
            "or cut launch cost (mode='reduce-overhead' uses CUDA graphs on GPU)."), evidence)]
    return [Finding("compute-bound", (
        f"Compute-bound: {kernels} are busy {busy:.0%} of each compiled step "
        f"({format_us(work)} of {format_us(step)}); "
        "speed now comes from the kernels themselves (see the hotspot and the roofline)."), evidence)]


def _graph_breaks(report: "ProfileReport") -> list[str]:
    """The graph breaks that ended the compiled Dynamo graphs, each once, in compile order."""
    return list(dict.fromkeys(g.graph_break_reason for g in report.captures if g.graph_break_reason))


# why a graph count can be no more than the breaks: Dynamo compiles no graph for an empty part
_EMPTY_PARTS = " (a part between breaks with no tensor op compiles none)"


@rule("graph-breaks")
def _graph_breaks_found(report: "ProfileReport") -> list[Finding]:
    breaks = _graph_breaks(report)
    if not breaks:
        return []
    graphs = len({g.compile_id for g in report.captures})
    shown = "; ".join(breaks[:3]) + (f"; and {len(breaks) - 3} more" if len(breaks) > 3 else "")
    compiled = f"{graphs} graph{'s' if graphs != 1 else ''}{_EMPTY_PARTS if graphs <= len(breaks) else ''}"
    return [Finding("graph-breaks", (
        f"Graph breaks: Dynamo split the compiled code at {len(breaks)} break(s), compiling {compiled}: "
        f"{shown}. At each break the step returns to Python and runs the code there eagerly, and no "
        "kernel fuses across it. Remove them where you can: fullgraph=True raises at the first, "
        "torch._dynamo.explain lists them all."), {"graph_breaks": breaks, "graphs": graphs})]


@rule("outside-graphs")
def _outside_graphs(report: "ProfileReport") -> list[Finding]:
    step = report.compiled_step_median_us
    ops = report.ops_outside_graphs
    if not ops or not step:
        return []
    share = min(report.outside_graphs_us, step) / step
    if share < THRESHOLDS["outside_graphs_share"]:
        return []
    top = ", ".join(f"{op.name} {format_us(op.busy_us)}" for op in ops[:3])
    more = f" and {len(ops) - 3} more" if len(ops) > 3 else ""
    if report.left_out.nothing_compiled is not None:
        where = "nothing was compiled (above)"
    elif report.left_out.failed_frames:
        where = "a frame whose compile failed ran eagerly (above)"
    elif _graph_breaks(report):
        where = "the code between the graph breaks runs as eager code"
    else:
        where = "code the compiled graphs do not hold ran eagerly (a frame Dynamo skipped, or a call outside them)"
    return [Finding("outside-graphs", (
        f"Outside the compiled graphs: {format_us(report.outside_graphs_us)} of each compiled step ({share:.0%}) is "
        f"ops run eagerly, one at a time and unfused: {top}{more}. That is because {where}; this time is not "
        "Inductor's to speed up."), {"outside_graphs_us": report.outside_graphs_us, "share": share,
                                     "ops": [op.name for op in ops]})]


@rule("hotspot")
def _hotspot(report: "ProfileReport") -> list[Finding]:
    if not report.kernels:
        return []
    top = max(report.kernels, key=lambda k: k.busy_us)
    share = top.busy_us / report.kernel_us if report.kernel_us else 0.0
    if share < THRESHOLDS["hotspot_share"]:
        return [Finding("no-hotspot", f"No single kernel dominates: the largest, {top.kernel}, takes {share:.0%} "
                        "of kernel time.", {"kernel": top.kernel, "share": share})]
    where = f" from {', '.join(top.source_lines[:3])}" if top.source_lines else ""
    modules = [m for m in sorted(top.module_weights, key=lambda m: -top.module_weights[m]) if m]
    if modules:
        where += f" in module {', '.join(modules[:2])}{' ...' if len(modules) > 2 else ''}"
    nodes = (
        f" It computes {', '.join(top.fx_nodes[:6])}{'...' if len(top.fx_nodes) > 6 else ''}{where}."
        if top.fx_nodes
        else ""
    )
    return [Finding("hotspot", f"Hotspot: {top.kernel} ({top.kind}) takes {share:.0%} of kernel time "
                    f"({format_us(top.busy_us)} per step, {top.calls:g} call(s)).{nodes} Start there.",
                    {"kernel": top.kernel, "share": share, "fx_nodes": top.fx_nodes, "source_lines": top.source_lines,
                     "modules": modules})]


@rule("many-calls")
def _many_calls(report: "ProfileReport") -> list[Finding]:
    findings = []
    for side, rows in (("eager", [(o.name, o.calls) for o in report.eager_ops]),
                       ("compiled", [(k.event, k.calls) for k in report.kernels])):
        calls: dict[str, float] = {}
        for name, count in rows:
            calls[name] = calls.get(name, 0.0) + count
        for name, count in sorted(calls.items(), key=lambda i: -i[1]):
            if count < THRESHOLDS["many_calls"]:
                break
            findings.append(Finding("many-calls", f"{side}: {name} runs {count:g} times per step; cheap calls add up, "
                                    "check whether they can be fused or batched.", {"side": side, "event": name,
                                                                                     "calls": count}))
    return findings


@rule("cold-start")
def _cold_start(report: "ProfileReport") -> list[Finding]:
    findings = []
    for side, steps in (("eager", report.eager_step_us), ("compiled", report.compiled_step_us)):
        if len(steps) < 3:
            continue
        rest = statistics.median(steps[1:])
        if rest and steps[0] > THRESHOLDS["cold_start_ratio"] * rest:
            findings.append(Finding("cold-start", (
                f"{side}: the first profiled step is {steps[0] / rest:.1f}x wider than the rest "
                f"({format_us(steps[0])} vs {format_us(rest)}): one-time cost (allocation, lazy loading, "
                "autotuning) was profiled. Add warm-up iterations or the schedule's warmup steps."),
                {"side": side, "first_us": steps[0], "rest_us": rest}))
    return findings


@rule("children")
def _children(report: "ProfileReport") -> list[Finding]:
    step = report.eager_step_median_us
    findings = []
    totals: dict[str, list[float]] = {}
    for op in report.eager_ops:
        total, own = totals.setdefault(op.name, [0.0, 0.0])
        totals[op.name] = [total + op.total_us, own + op.self_us]
    for name, (total, own) in sorted(totals.items(), key=lambda i: -i[1][0]):
        if (
            step
            and total >= THRESHOLDS["children_share"] * step
            and total > THRESHOLDS["children_ratio"] * max(own, 1e-9)
        ):
            findings.append(Finding("children", (
                f"eager: {name}'s CPU total ({format_us(total)}) is {total / max(own, 1e-9):.0f}x its self time: "
                "the cost lives in the ops it calls; read those rows, not this one."),
                {"event": name, "total_us": total, "self_us": own}))
    return findings[:3]


@rule("roofline")
def _roofline(report: "ProfileReport") -> list[Finding]:
    if not report.copy_bandwidth_gbps:
        return []
    findings = []
    for row in report.kernels:
        if row.bandwidth_share is None or not report.kernel_us:
            continue
        if row.busy_us / report.kernel_us < THRESHOLDS["roofline_min_share"]:
            continue
        numbers = (
            f"{row.kernel} moves at least {row.bytes / 1e6:.2f} MB per call in {format_us(row.per_call_us)}: "
            f"{row.achieved_gbps:.1f} GB/s, {row.bandwidth_share:.2f}x the {report.copy_bandwidth_gbps:.1f} GB/s "
            "this machine copies large buffers at" + (" (its data stays in cache)" if row.bandwidth_share > 1 else "")
        )
        if row.bandwidth_share >= THRESHOLDS["roofline_high"]:
            message = (
                numbers
                + ". It is at the memory roofline: only moving fewer bytes (more fusion, smaller dtypes)"
                " makes it faster."
            )
        elif row.bandwidth_share < THRESHOLDS["roofline_low"]:
            message = numbers + (
                ". Far below the roofline: it is bound by compute per element (transcendentals, "
                "divisions), by poor vectorization, or by too little work per call to amortize its start."
            )
        else:
            message = numbers + "."
        findings.append(Finding("roofline", message, {"kernel": row.kernel, "bytes": row.bytes,
                                                      "achieved_gbps": row.achieved_gbps,
                                                      "bandwidth_share": row.bandwidth_share}))
    return findings


@rule("gemm-share")
def _gemm_share(report: "ProfileReport") -> list[Finding]:
    comparison = report.compare()
    saved = sum(c.eager_us - c.compiled_us for c in comparison.categories)
    eager_total = sum(c.eager_us for c in comparison.categories)
    deltas = {c.category: c.eager_us - c.compiled_us for c in comparison.categories}
    parts = ", ".join(
        f"{name} {'saves' if delta >= 0 else 'costs'} {format_us(abs(delta))}" for name, delta in deltas.items()
    )
    if eager_total and saved > 0.05 * eager_total:
        if all(c.share_of_saving is not None for c in comparison.categories):
            shares = ", ".join(f"{c.category} {c.share_of_saving:.0%}" for c in comparison.categories)
            return [Finding("saving", f"Where the time saved per step ({format_us(saved)}, profiled) comes from: "
                                      f"{shares}.",
                            {"saved_us": saved, **{c.category: c.share_of_saving for c in comparison.categories}})]
        return [Finding("saving", f"Compiling saves {format_us(saved)} per step (profiled), net: {parts}.",
                        {"saved_us": saved, **deltas})]
    return [Finding("saving", f"Compiling saves little or nothing per step (profiled): {parts}.",
                    {"saved_us": saved, **deltas})]
