"""``ib.profile``: time eager and compiled side by side, profile both, join, diagnose."""

from __future__ import annotations

import collections
import contextlib
import functools
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Optional, Sequence

import torch
import torch.utils._pytree as pytree

from ..capture.as_written import as_written, running_eagerly, settings_as_written
from ..capture.backward import BackwardStep
from ..capture.left_out import LeftOut
from ..capture.object_arguments import copy_object_arguments, is_object_argument
from ..seams.dynamo.dynamo_skips import skipped_frames
from ..seams.runtime.kernel_profile import KERNEL_PROFILE_OPTION, call_event_name
from .collect import run_profiled
from .findings import diagnose
from .join import eager_op_sources, join_compiled, join_eager, module_names, ops_outside_graphs, source_code
from .report import ProfileReport
from .roofline import apply_roofline, measure_copy_bandwidth
from .sources import SourceTagging, interpreted_with_node_sources
from .timing import time_side_by_side

__all__ = ["profile", "ProfileSettings", "KERNEL_PROFILE_OPTION"]


class _Arguments:
    """The arguments of each call: the same ones every time, or, when an object argument is among
    them (a model's cache, which each call fills in place: a cache growing call after call makes
    every call recompile and measure a longer sequence), a copy per call, made before the calls a
    phase times or profiles (:meth:`reserve`)."""

    def __init__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.args, self.kwargs = args, kwargs
        self.copied = any(is_object_argument(leaf) for leaf in pytree.tree_leaves([list(args), kwargs]))
        self.ready: collections.deque[tuple[tuple[Any, ...], dict[str, Any]]] = collections.deque()

    def reserve(self, calls: int) -> None:
        """Make the copies of the next ``calls`` calls now, outside what is timed."""
        while self.copied and len(self.ready) < calls:
            self.ready.append(copy_object_arguments((self.args, self.kwargs)))

    def take(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        if not self.copied:
            return self.args, self.kwargs
        return self.ready.popleft() if self.ready else copy_object_arguments((self.args, self.kwargs))


def _own_backend() -> Callable[..., Any]:
    """The instrumented backend as a callable no other ``torch.compile`` shares. Dynamo reuses what
    an equal backend compiled for the same code (``backend="instrumented"`` with equal options is
    equal), so a second profile of a model in one process found every graph cached: it compiled,
    captured and joined nothing, and said "nothing was compiled". Each profile compiles its own."""
    from ..capture.backend import instrumented

    return functools.partial(instrumented)


def _device_of(args: Any, kwargs: Mapping[str, Any], model: Any) -> str:
    tensors = [a for a in list(args) + list(kwargs.values()) if isinstance(a, torch.Tensor)]
    if isinstance(model, torch.nn.Module):
        tensors += list(model.parameters())[:1]
    return "cuda" if any(t.is_cuda for t in tensors) else "cpu"


def _check(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"ib.profile: {name} must be an int >= {minimum}, got {value!r}")


@dataclass(frozen=True)
class ProfileSettings:
    """What the caller of one :func:`profile` chose (see it for each)."""

    warmup: int = 10
    iters: int = 50
    active: int = 5
    no_grad: bool = True
    backward: bool = False
    options: Optional[Mapping[str, Any]] = None
    bandwidth: bool = True
    calls_before: Sequence[tuple[Sequence[Any], Mapping[str, Any]]] = ()

    def check(self) -> None:
        """Raise ValueError naming the first setting that cannot be profiled with."""
        _check("warmup", self.warmup, 0)
        _check("iters", self.iters, 1)
        _check("active", self.active, 1)
        if self.backward and self.no_grad:
            raise ValueError("ib.profile: backward=True needs no_grad=False (no gradient is recorded under no_grad)")
        if not all(isinstance(c, (tuple, list)) and len(c) == 2 and isinstance(c[0], (tuple, list))
                   and isinstance(c[1], Mapping) for c in self.calls_before):
            raise ValueError("ib.profile: each of calls_before is (args, kwargs), a tuple and a dict")
        self.check_options()

    def check_options(self) -> None:
        if self.options is not None and not isinstance(self.options, Mapping):
            raise ValueError(f"ib.profile: options must be a dict, got {type(self.options).__name__}")


def profile(model: Callable[..., Any], *args: Any, warmup: int = 10, iters: int = 50, active: int = 5,
            no_grad: bool = True, backward: bool = False, options: Optional[Mapping[str, Any]] = None,
            bandwidth: bool = True, calls_before: Sequence[tuple[Sequence[Any], Mapping[str, Any]]] = (),
            **kwargs: Any) -> ProfileReport:
    """Profile ``model(*args, **kwargs)`` eager and compiled (``backend="instrumented"``) on the same inputs.

    Timing: ``warmup`` calls of each, then ``iters`` calls alternating eager and compiled
    (median and spread). Profiling: torch.profiler with a wait/warm-up/``active`` schedule; the
    compiled code is built with Inductor's per-kernel profiling (``cpp.enable_kernel_profile``)
    so every C++ kernel is an event, joined with Triton and extern kernel events to the
    capture's kernels, FX nodes and source lines. ``no_grad`` runs both under ``torch.no_grad()``
    like the tutorial's benchmark. ``backward`` (with ``no_grad=False``) makes each call a training
    step's forward and backward: after the call, autograd computes the gradients of its outputs
    that require grad (seeded with ones) with respect to the parameters and inputs they came from,
    running the compiled backward graph, and drops them (the ``.grad`` of the model is left as it
    was). ``options`` are extra backend options. ``bandwidth`` measures
    the machine's copy bandwidth for the roofline. ``calls_before`` (``(args, kwargs)`` each) are
    made on the compiled side first, unprofiled: the calls a script made before this one, so that
    Dynamo compiles what it compiled then (a generate loop's decode step, recompiled with symbolic
    sizes after the prefill). A model already compiled (``torch.compile(model)``, a compiled
    function, ``block.compile()`` inside it) is profiled as written: the eager side runs it
    without that compile, which stays as it was; without ``options``, the compiled side takes the
    mode and options its ``torch.compile`` was given. Returns a :class:`ProfileReport`.
    """
    from ..diagnosis.aoti_package import is_exported_program

    settings = ProfileSettings(warmup, iters, active, no_grad, backward, options, bandwidth, calls_before)
    if is_exported_program(model):  # its AOTInductor package is the compiled side
        return _profile_package(model, args, kwargs, settings)
    if not callable(model):
        raise TypeError(f"ib.profile: model must be callable (an nn.Module or a function), got {type(model).__name__}")
    settings_notes: list[str] = []
    if options is None:  # what it was compiled with, when it was: its mode and options (Inductor config)
        written, settings_notes = settings_as_written(model, keys=("options",))
        settings = replace(settings, options=written.get("options"))
    with as_written(model) as (plain, notes):
        report = _profile(plain, args, kwargs, settings)
    report.as_written = [*notes, *settings_notes]
    return report


def _profile_package(exported: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                     settings: ProfileSettings) -> ProfileReport:
    """:func:`profile` of an exported program: its AOTInductor package (built with per-kernel
    profiling, captured, loaded) against ``exported.module()`` run eagerly."""
    import tempfile
    from pathlib import Path

    from ..capture.aoti import aoti_compile_and_package
    from ..capture.registry import capture
    from ..seams.runtime import aot_compile

    if settings.backward or not settings.no_grad or settings.calls_before:
        raise ValueError("ib.profile: an AOTInductor package runs inference only: profile an exported program "
                         "without backward, no_grad=False or calls_before")
    settings.check_options()
    options = settings.options
    with tempfile.TemporaryDirectory(prefix="ib-profile-package-") as folder, capture() as session:
        path = aoti_compile_and_package(exported, package_path=str(Path(folder) / "model.pt2"),
                                        inductor_configs={KERNEL_PROFILE_OPTION: True, **(options or {})})
        loaded = aot_compile.load_package(path)
    graphs = list(session)
    event = call_event_name(graphs[0].label if graphs else "aoti")

    def package_call(*call_args: Any, **call_kwargs: Any) -> Any:  # its kernels' events, under one call's
        with torch.profiler.record_function(event):
            return loaded(*call_args, **call_kwargs)

    module = exported.module()
    return _profile(module, args, kwargs, settings, built=(package_call, graphs),
                    # its eager ops are tagged with the lines its nodes were traced from
                    tagged_model=interpreted_with_node_sources(module))


def _profile(model: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], settings: ProfileSettings,
             built: Optional[tuple[Callable[..., Any], list[Any]]] = None,
             tagged_model: Optional[Callable[..., Any]] = None) -> ProfileReport:
    """Time, profile, join and diagnose ``model`` eager against compiled. ``built``: the compiled
    side already built (a loaded AOTInductor package) and its captures; ``tagged_model``: what the
    untimed source-tagging run calls instead of ``model``."""
    settings.check()
    device = _device_of(args, kwargs, model)
    # its own backend and recompile region: it compiles its own graphs, and as often as it is
    # called, without spending the recompiles torch.compile allows the script's own calls
    compiled = built[0] if built is not None else torch.compile(
        model, backend=_own_backend(), options={KERNEL_PROFILE_OPTION: True, **(settings.options or {})},
        isolate_recompiles=True)
    sides = _Sides(model, compiled, tagged_model or model, _Arguments(args, kwargs), settings)
    if settings.backward:
        sides.check_backward()
    runs = _measure(sides, settings, device)
    return _report(model, runs, (built[1] if built is not None else []) + runs.graphs, device, settings)


class _Sides:
    """The calls compared: eager, compiled and the untimed source-tagging run, each on its own
    copy of the arguments, each a training step's forward and backward under ``backward``."""

    def __init__(self, model: Callable[..., Any], compiled: Callable[..., Any], tagged: Callable[..., Any],
                 arguments: _Arguments, settings: ProfileSettings) -> None:
        self.model, self.compiled, self.tagged, self.arguments = model, compiled, tagged, arguments
        self.grad = torch.no_grad if settings.no_grad else contextlib.nullcontext
        self.backward = settings.backward
        self.eager_backward, self.compiled_backward = BackwardStep("eager"), BackwardStep("compiled")

    def eager(self) -> Any:
        return self._step(self.model, self.eager_backward)

    def compiled_call(self) -> Any:
        return self._step(self.compiled, self.compiled_backward)

    def _step(self, fn: Callable[..., Any], backward: BackwardStep) -> Any:
        """One call of ``fn`` on the next arguments, and its backward under ``backward=True``."""
        call_args, call_kwargs = self.arguments.take()
        with self.grad():
            out = fn(*call_args, **call_kwargs)
            if self.backward:
                backward(out)
            return out

    def tagged_call(self) -> Any:
        call_args, call_kwargs = self.arguments.take()
        with self.grad(), SourceTagging():
            out = self.tagged(*call_args, **call_kwargs)
        if self.backward:
            with self.grad():
                self.eager_backward(out)
        return out

    def check_backward(self) -> None:
        """A call with no output that requires grad fails here, before anything is compiled."""
        try:
            self.eager()
        except RuntimeError as exc:
            if "backward through the graph a second time" not in str(exc):
                raise
            raise ValueError("ib.profile: backward=True differentiates the call's outputs, but the call ran its "
                             "own backward on them already (loss.backward() inside it); profile it with "
                             "backward=False: its backward is profiled as part of the call") from exc


@dataclass
class _Runs:
    """What the measured calls gave: the timings, the three profiled runs, the graphs compiled."""

    timings: dict[str, Any]
    compiled: Any
    eager: Any
    tagged: Any
    graphs: list[Any]
    skipped: Any  # the frames Dynamo skipped


def _measure(sides: _Sides, settings: ProfileSettings, device: str) -> _Runs:
    """Compile (every graph, the backward too, before anything is timed), time side by side, then
    profile compiled, eager and the source-tagging run."""
    from ..capture.registry import capture

    sync = torch.cuda.synchronize if device == "cuda" else None
    arguments = sides.arguments
    with capture() as session:
        with skipped_frames() as skipped:
            for before_args, before_kwargs in settings.calls_before:  # Dynamo recompiles for this call as it did
                call_args, call_kwargs = _Arguments(tuple(before_args), dict(before_kwargs)).take()
                with sides.grad():
                    sides.compiled(*call_args, **call_kwargs)
            sides.compiled_call()
        arguments.reserve(2 * (settings.warmup + settings.iters))
        # eager stays eager past code compiled where no wrapper shows (a @torch.compile helper it
        # calls): the force_eager stance, entered outside each timed call and each profiled run
        timings = time_side_by_side({"eager": sides.eager, "compiled": sides.compiled_call}, warmup=settings.warmup,
                                    iters=settings.iters, sync=sync, around={"eager": running_eagerly})
        arguments.reserve(2 + settings.active)
        compiled_run = run_profiled(sides.compiled_call, active=settings.active, device=device, sync=sync)
        arguments.reserve(2 + settings.active)
        with running_eagerly():
            eager_run = run_profiled(sides.eager, active=settings.active, device=device, sync=sync)
            arguments.reserve(2)
            tagged_run = run_profiled(sides.tagged_call, active=1, wait=0, warmup=1, device=device, sync=sync)
    return _Runs(timings, compiled_run, eager_run, tagged_run, list(session), skipped)


def _report(model: Callable[..., Any], runs: _Runs, graphs: list[Any], device: str,
            settings: ProfileSettings) -> ProfileReport:
    """The runs joined to ``graphs`` (kernels, eager ops, their source lines), with the roofline,
    each row's share of its step, and the findings."""
    kernels, unmatched = join_compiled(runs.compiled, graphs)
    known_sources = {str(n.source) for g in graphs for n in g.nodes.values() if n.source is not None}
    eager_ops = join_eager(runs.eager, eager_op_sources(runs.tagged), known_sources, module_names(graphs))
    bandwidth_gbps = measure_copy_bandwidth(device) if settings.bandwidth else None
    apply_roofline(kernels, bandwidth_gbps)
    sources = {s for k in kernels for s in k.source_lines} | {s for o in eager_ops for s in o.source_lines}
    report = ProfileReport(
        device=device, eager=runs.timings["eager"], compiled=runs.timings["compiled"], kernels=kernels,
        eager_ops=eager_ops, eager_step_us=runs.eager.step_us, compiled_step_us=runs.compiled.step_us,
        copy_bandwidth_gbps=bandwidth_gbps, graphs=[g.label for g in graphs], unmatched_events=unmatched,
        source_code=source_code(sources, graphs), compiled_trace=runs.compiled.trace, eager_trace=runs.eager.trace,
        captures=graphs, backward=settings.backward,
        left_out=LeftOut.of_run(model, runs.skipped, compiled=bool(graphs)),
        ops_outside_graphs=ops_outside_graphs(runs.compiled))
    for row in [*kernels, *report.ops_outside_graphs]:  # of one total: the two tables' shares add up
        row.share = row.busy_us / report.share_total_us if report.share_total_us else 0.0
    for op in eager_ops:
        op.share = op.busy_us / report.eager_step_median_us if report.eager_step_median_us else 0.0
    report.findings = diagnose(report)
    return report
