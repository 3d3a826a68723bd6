"""``minify``: shrink a failing FX graph to the smallest graph that fails the same way."""

from __future__ import annotations

import dataclasses
import operator
import os
import re
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence

import torch
import torch.fx

from ._seams import (
    decomposes_when_traced,
    inside_compile,
    is_aten_op,
    op_defining_module,
    propagate_symbolic_sizes,
    symbolic_hint,
)
from .checks import AccuracyFailure, Failure
from .context import CarriedContext, current_context
from .errors import MinifierError, NotFailingError, SubgraphCalls, UnbuildableGraph
from .graph import (
    Candidate,
    GraphSlicer,
    InvalidCandidate,
    attribute,
    inline_subgraph_calls,
    record_values,
    sizes_as_tuples,
)
from .judge import ACCURACY, CRASH, INVALID, NONDETERMINISTIC, PASS, TIMEOUT, UNLOADABLE, autocast_off, judge
from .outcome import Outcome
from .settings import MinifySettings
from .speculation import SPECULATE_UP_TO, Pending, cancel, first_half_guesses, single_nodes, speculate
from .strategies import CLOSING, FIRST_DIVERGENCE, OPENING, STRATEGIES, divergence_probe
from .updates import attributes_as_inputs, expose_updates, updates_in_place
from .workers import WorkerSetup, pool

__all__ = ["minify", "symbolic_inputs", "MinifyResult", "MinifyState", "MinifierError", "NotFailingError",
           "UnbuildableGraph", "detect_level", "default_workers"]


@dataclasses.dataclass
class MinifyResult:
    """What a minification found (read by the CLI, the backend's reports and the tests)."""

    status: str  # "minified", "not confirmed" (the re-check differed) or "nondeterministic"
    graph_module: torch.fx.GraphModule  # the smallest failing graph
    inputs: list[Any]  # its inputs
    repro_path: Optional[Path]
    log: list[str]
    original: Outcome  # the original graph's judgement (the suspects' when the search started from them)
    final: Outcome  # the final graph's, re-checked from scratch
    level: str  # "aten" or "torch"
    start_nodes: int
    final_nodes: int
    candidates_checked: int = 0  # candidates judged (cache hits excluded)
    compiles: int = 0  # judgements that compiled, probes and re-check included
    cache_hits: int = 0
    crashes: int = 0  # workers a candidate crashed or hung
    seconds: float = 0.0
    stopped_early: str = ""  # why the search ended before it could shrink no further, or ""

    @property
    def reproduced(self) -> bool:
        """Did the final graph, re-checked from scratch, still fail the same way?"""
        return self.status == "minified"

    def summary(self) -> str:
        """One line: status, nodes before and after, time, compiles, repro."""
        where = f"; repro: {self.repro_path}" if self.repro_path else ""
        stopped = f" (search stopped: {self.stopped_early})" if self.stopped_early else ""
        return (f"minifier: {self.status}: {self.start_nodes} -> {self.final_nodes} nodes in "
                f"{self.seconds:.1f} s, {self.compiles} compiles{stopped}{where}")


MAX_DEFAULT_WORKERS = 4


def default_workers() -> int:
    """Worker processes judging candidates side by side by default: one per core this process may
    use, at most :data:`MAX_DEFAULT_WORKERS` (a candidate's compile is mostly one core's work)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(MAX_DEFAULT_WORKERS, cores))


def detect_level(module: torch.fx.GraphModule) -> str:
    """``"aten"`` for a post-AOT graph (ATen op overloads only, none that AOT would have
    decomposed), else ``"torch"``."""
    for node in module.graph.nodes:
        if node.op == "call_function":
            target = node.target
            if (is_aten_op(target) and not decomposes_when_traced(target)) or target is operator.getitem:
                continue
            return "torch"
        if node.op in ("call_module", "call_method"):
            return "torch"
    return "aten"


def _symbolic(value: Any) -> tuple[list[int], bool]:
    """(dims with a symbolic size, is a symbolic int) of a node's meta value."""
    if isinstance(value, torch.SymInt):
        return [], True
    if isinstance(value, torch.Tensor):
        return [d for d, size in enumerate(value.shape) if isinstance(size, torch.SymInt)], False
    return [], False


def _requiring_grad(module: torch.fx.GraphModule, requires_grad: Sequence[int]) -> set[str]:
    """The nodes of ``module`` whose values require grad when it is compiled as a training graph:
    the inputs ``requires_grad`` names, and each node that depends on one of them, unless its meta
    value (Dynamo's trace) says it does not (computed under ``no_grad``, or by an op that is not
    differentiable)."""
    placeholders = [n for n in module.graph.nodes if n.op == "placeholder"]
    names = {placeholders[int(i)].name for i in requires_grad if int(i) < len(placeholders)}
    if not names:
        return set()
    for node in module.graph.nodes:
        if node.op in ("placeholder", "output") or node.name in names:
            continue
        value = node.meta.get("val", node.meta.get("example_value"))
        if isinstance(value, torch.Tensor):
            if value.requires_grad:
                names.add(node.name)
        elif value is None and any(arg.name in names for arg in node.all_input_nodes):
            names.add(node.name)  # no meta value (a saved repro's graph): by data flow
    return names


def symbolic_inputs(module: torch.fx.GraphModule) -> tuple[dict[int, list[int]], list[int]]:
    """``({input index: [dims with a symbolic size]}, [indices of symbolic ints])`` of ``module``'s
    placeholders, read from their meta values (a graph compiled with dynamic shapes)."""
    placeholders = [n for n in module.graph.nodes if n.op == "placeholder"]
    read = [_symbolic(n.meta.get("val", n.meta.get("example_value"))) for n in placeholders]
    return {i: dims for i, (dims, _) in enumerate(read) if dims}, [i for i, (_, is_int) in enumerate(read) if is_int]


@dataclasses.dataclass
class MinifyState:
    """The search: current best candidate, judging (pinned, cached, counted) and the log."""

    slicer: GraphSlicer
    check: Failure
    original: Outcome
    current: Candidate
    current_outcome: Outcome
    related: set[str]  # nodes an accuracy failure may move to (the failing outputs' ancestors)
    hint_nodes: tuple[str, ...]
    run: Callable[[Candidate, int], Outcome]  # judges a candidate in a worker slot
    emit: Callable[[str], None]
    progress: Callable[[str], None]
    cache: dict[str, Outcome] = dataclasses.field(default_factory=dict)
    candidates_checked: int = 0
    compiles: int = 0
    cache_hits: int = 0
    max_candidates: int = 500
    deadline: Optional[float] = None  # time.perf_counter() past which no candidate is judged
    max_seconds: Optional[float] = None  # the time budget that deadline ends (for the log)
    stopped_early: str = ""  # which budget ended the search, once one has
    parallel: int = 1  # candidates judged side by side (worker processes)
    cancel: Callable[[int], None] = lambda slot: None  # stop the judgement running in a worker slot
    running: dict[int, "Future[Outcome]"] = dataclasses.field(default_factory=dict)
    pending: Pending = dataclasses.field(default_factory=dict)  # judged speculatively, by candidate key

    def announce(self, name: str, granularity: Optional[int]) -> None:
        g = f" (G: {granularity})" if granularity else ""
        self.emit(f"Strategy: {name}{g} {self.current.describe()}")

    def _cached(self, candidate: Candidate, scheduled: int = 0) -> Optional[Outcome]:
        """The outcome already known for ``candidate`` (judged, or over budget counting the
        ``scheduled`` candidates of its batch before it), or None."""
        key = self.slicer.key(candidate)
        if key in self.cache:
            self.cache_hits += 1
            return self.cache[key]
        if self.candidates_checked + scheduled >= self.max_candidates:
            self.stopped_early = self.stopped_early or f"its budget of {self.max_candidates} candidates was spent"
            return Outcome.invalid("candidate budget spent")
        if self.deadline is not None and time.perf_counter() >= self.deadline:
            self.stopped_early = self.stopped_early or f"its time budget of {self.max_seconds:g} s was spent"
            return Outcome.invalid("time budget spent")
        return None

    def _record(self, candidate: Candidate, result: Outcome) -> Outcome:
        if result.killed_the_worker:
            self.emit(f"  candidate {candidate.describe()}: {result.kind} ({result.signature}); worker restarted")
        self.cache[self.slicer.key(candidate)] = result
        self.progress(f"{self.candidates_checked} candidates, best {len(self.current.nodes)} nodes")
        return result

    def _start_batch(self, candidates: Sequence[Candidate]) -> list[Callable[[], Outcome]]:
        """Start judging ``candidates`` (at most ``parallel`` of them) side by side, one worker
        slot each; returns, per candidate, a function waiting for its outcome (and recording it).
        Known outcomes come from the cache, and speculative ones from :attr:`pending`; the other
        speculative judgements are settled only when this batch compiles something (a guess still
        running then gives up its CPU; a batch of known answers leaves it running)."""
        waits: dict[str, Callable[[], Outcome]] = {}
        fresh: list[tuple[str, Candidate]] = []
        for candidate in candidates:
            key = self.slicer.key(candidate)
            if key in waits:
                continue
            if key in self.pending:  # judged (or being judged) speculatively: read, not judged again
                slot, future = self.pending.pop(key)
                self.running.setdefault(slot, future)
                waits[key] = self._recording(candidate, future.result)
                continue
            known = self._cached(candidate, scheduled=len(fresh))
            if known is not None:
                waits[key] = lambda known=known: known
                continue
            fresh.append((key, candidate))
        if fresh:
            self.settle_pending(keep={self.slicer.key(c) for c in candidates})
        if len(fresh) == 1:  # judged here, when asked for (never, if an earlier one fails)
            key, candidate = fresh[0]
            waits[key] = self._recording(candidate, lambda: self._count_and_run(candidate, 0))
        elif fresh:
            executor = ThreadPoolExecutor(len(fresh), thread_name_prefix="minifier-batch")
            for slot, (key, candidate) in enumerate(fresh):
                self._count()
                future = executor.submit(self.run, candidate, slot)
                self.running[slot] = future
                waits[key] = self._recording(candidate, future.result)
            executor.shutdown(wait=False)
        return [waits[self.slicer.key(c)] for c in candidates]

    def settle_pending(self, keep: set[str] = frozenset()) -> None:
        """Speculative judgements not in ``keep``: a finished one's answer joins the cache, a
        running one is cancelled (its worker slot is about to be needed)."""
        for key in [k for k in self.pending if k not in keep]:
            slot, future = self.pending.pop(key)
            if not future.done():
                self.cancel(slot)
            elif future.exception() is None:
                self.cache.setdefault(key, future.result())

    def _count(self) -> None:
        """One more candidate judged (and compiled): counted when its judgement starts."""
        self.candidates_checked += 1
        self.compiles += 1

    def _count_and_run(self, candidate: Candidate, slot: int) -> Outcome:
        self._count()
        return self.run(candidate, slot)

    def _recording(self, candidate: Candidate, wait: Callable[[], Outcome]) -> Callable[[], Outcome]:
        done: list[Outcome] = []

        def outcome() -> Outcome:
            if not done:
                done.append(self._record(candidate, wait()))
            return done[0]

        return outcome

    def _abandon_running(self) -> None:
        """Stop the side-by-side judgements still running (their answers are no longer wanted):
        their workers are killed and replaced on next use. No answer of theirs is recorded."""
        for slot, future in list(self.running.items()):
            if not future.done():
                self.cancel(slot)
        self.running.clear()

    def _judge(self, candidate: Candidate) -> Outcome:
        return self._start_batch([candidate])[0]()

    def probe(self, candidate: Candidate) -> Outcome:
        """Judge without pinning (a diagnostic compile, e.g. every node as an output)."""
        return self._judge(candidate)

    def _same_failure(self, candidate: Candidate, result: Outcome) -> bool:
        def related(i: int) -> bool:
            return i < len(candidate.outputs) and candidate.outputs[i] in self.related

        return self.check.same_failure(self.original, result, related)

    def fails(self, candidate: Candidate) -> bool:
        """Does ``candidate`` fail the same way as the original? Remembers it as the outcome if so."""
        return self.first_failing([candidate]) == 0

    def first_failing(self, candidates: Sequence[Optional[Candidate]]) -> Optional[int]:
        """The index of the first of ``candidates`` (None entries skipped) that fails the same way
        as the original, remembering its outcome; None when none does.

        Judged ``parallel`` at a time and read in order: once a candidate fails, the later ones of
        its batch still being judged are abandoned. The answer is the one judging them one by one
        would give, whatever ``parallel`` is.
        """
        for start in range(0, len(candidates), self.parallel):
            batch = [(i, c) for i, c in enumerate(candidates[start:start + self.parallel], start) if c is not None]
            if not batch:
                continue
            for (index, candidate), outcome in zip(batch, self._start_batch([c for _, c in batch])):
                result = outcome()  # in order: a later candidate's answer is not waited for
                if self._same_failure(candidate, result):
                    self.current_outcome = result
                    self._abandon_running()
                    return index
            self.running.clear()
        return None

    def accept(self, candidate: Candidate) -> None:
        """Make ``candidate`` (which fails the same way) the current best, and log the step."""
        before = self.current
        self.current = candidate
        if len(candidate.nodes) != len(before.nodes):
            self.emit(f"SUCCESS: Went from {len(before.nodes)} to {len(candidate.nodes)} nodes")
        else:
            self.emit(f"SUCCESS: Went from {len(before.inputs)} to {len(candidate.inputs)} inputs")


class _Progress:
    """A live line on stderr (only on a terminal, or when asked)."""

    def __init__(self, enabled: Optional[bool], start: float) -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.start = start
        self.shown = False

    def __call__(self, text: str) -> None:
        if self.enabled:
            sys.stderr.write(f"\r[minifier {time.perf_counter() - self.start:6.1f} s] {text}\033[K")
            sys.stderr.flush()
            self.shown = True

    def close(self) -> None:
        if self.shown:
            sys.stderr.write("\n")
            self.shown = False


def _undecomposed_hint(outcome: Outcome) -> str:
    """Explain Inductor's CI-only refusal to fall back for an op that has a decomposition."""
    if "a decomposition exists, we should switch to it" not in outcome.message:
        return ""
    return ("\n(Inductor raises this only while the CI environment variable is set. The ATen graph holds an op "
            "that AOT autograd would have decomposed for Inductor: pass the graph Inductor received, or trace "
            "it with make_fx(torch.func.functionalize(fn), decomposition_table="
            "torch._inductor.decomposition.select_decomp_table()).)")


_OUTPUT_INDEX = re.compile(r"^out\[\d+\]")


def _original_seen_in_probe(full: Candidate, probe: Candidate, result: Outcome) -> Optional[Outcome]:
    """The original graph's accuracy failure as the every-node probe saw it, or None.

    The probe is the original graph with every node's value an output, its own outputs included:
    when those disagree with eager in the probe, that is the original's failure (the outputs that
    disagree, renumbered as the original's) and the original need not be compiled on its own.
    """
    if not result.is_accuracy:
        return None
    position = {name: index for index, name in enumerate(probe.outputs)}
    seen = dict(zip(result.failing, result.details))
    failing, details = [], []
    for index, name in enumerate(full.outputs):
        detail = seen.get(position.get(name, -1))
        if detail is not None:
            failing.append(index)
            details.append(_OUTPUT_INDEX.sub(f"out[{index}]", detail))
    if not failing:
        return None
    return Outcome(ACCURACY, "accuracy", "; ".join(details), failing=tuple(failing), details=tuple(details),
                   seconds=result.seconds)


@dataclasses.dataclass
class _Run:
    """One minification's fixed parts: the graph sliced, how a candidate is judged, the log."""

    module: torch.fx.GraphModule
    inputs: list[Any]
    check: Failure
    level: str
    isolate: bool
    slicer: GraphSlicer
    context: Any  # the CarriedContext: fault and Inductor config carried into workers and repros
    setup: WorkerSetup
    symbolic: dict[str, tuple[list[int], bool]]  # node -> (symbolic dims, is a symbolic int)
    requiring_grad: set[str]  # nodes whose values require grad (a training graph's), for torch-level candidates
    base_spec: dict[str, Any]
    emit: Callable[[str], None]
    live: _Progress
    log: list[str]
    started: float
    timeout: Optional[float]
    crashes_before: int
    workers: int  # candidates judged side by side
    spawned_because: Optional[str] = None  # why this call's new zygote was not a fork of this process
    assume_failing: bool = False  # the caller saw the whole graph fail as the check says

    def spec_for(self, candidate: Candidate, args: Sequence[Any]) -> dict[str, Any]:
        """The judge's spec for ``candidate``: its dynamic dims and ints, and the inputs that require
        grad (a training graph), on top of the base spec."""
        dims = {i: [d for d in self.symbolic[name][0] if isinstance(args[i], torch.Tensor) and args[i].shape[d] > 1]
                for i, name in enumerate(candidate.inputs)}
        spec = {**self.base_spec, "dynamic": {i: d for i, d in dims.items() if d},
                "dynamic_ints": [i for i, name in enumerate(candidate.inputs) if self.symbolic[name][1]]}
        if self.requiring_grad and self.level == "torch":
            spec["requires_grad"] = [i for i, name in enumerate(candidate.inputs) if name in self.requiring_grad
                                     and isinstance(args[i], torch.Tensor)
                                     and (args[i].is_floating_point() or args[i].is_complex())]
        return spec

    def judge(self, candidate: Candidate, slot: int = 0) -> Outcome:
        """Compile and run ``candidate`` (in a worker when isolated) and classify what happened."""
        gm, args = self.slicer.build(candidate)
        spec = self.spec_for(candidate, args)
        if slot >= self.workers:  # a speculative slot: its worker runs at the lowest CPU priority
            spec["nice"] = 19
        if not self.isolate:
            return Outcome.from_wire(judge(gm, args, spec))
        return Outcome.from_wire(pool.judge(self.setup, gm, args, spec, self.timeout or 600.0, slot=slot))

    def speculative_slots(self) -> range:
        """Worker slots for speculative judgements: one per worker beyond the first (the probe's),
        numbered after the search's own slots so a search batch never waits behind one."""
        return range(self.workers, 2 * self.workers - 1) if self.isolate else range(0)

    def discard(self, slot: int) -> None:
        """Kill the worker judging in ``slot`` (its answer is no longer wanted); not a crash."""
        if self.isolate:
            pool.discard(self.setup, slot)

    def result(self, status: str, current: Candidate, original: Outcome, final: Outcome, *,
               repro_path: Optional[Path] = None, state: Optional[MinifyState] = None) -> MinifyResult:
        module, inputs = (self.module, list(self.inputs)) if state is None else self.slicer.build(current)
        return MinifyResult(
            status=status, graph_module=module, inputs=inputs, repro_path=repro_path, log=self.log,
            original=original, final=final, level=self.level, start_nodes=len(self.slicer.full().nodes),
            final_nodes=len(current.nodes), candidates_checked=state.candidates_checked if state else 1,
            compiles=state.compiles if state else 1, cache_hits=state.cache_hits if state else 0,
            crashes=pool.crashes - self.crashes_before, seconds=time.perf_counter() - self.started,
            stopped_early=state.stopped_early if state else "")


def _validate(module: Any, inputs: Sequence[Any], check: Any, settings: MinifySettings) -> str:
    """Phase 1: refuse what cannot be minified, with the reason; returns the graph's level."""
    level, strategies, isolate = settings.level, settings.strategies, settings.isolate
    if not isinstance(module, torch.fx.GraphModule):
        raise MinifierError(f"minify: expected a torch.fx.GraphModule, got {type(module).__name__}")
    if not isinstance(check, Failure):
        raise MinifierError(
            f"minify: check must be AccuracyFailure(), CompileFailure() or RuntimeFailure(), got {check!r}"
        )
    placeholders = [n for n in module.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(inputs):
        raise MinifierError(f"minify: the graph has {len(placeholders)} inputs but {len(inputs)} values were given")
    unknown = [s for s in (strategies or ()) if s not in STRATEGIES]
    if unknown:
        raise MinifierError(f"minify: unknown strategies {unknown}; known: {list(STRATEGIES)}")
    subgraphs = [n.target for n in module.graph.nodes if n.op == "get_attr"
                 and isinstance(attribute(module, str(n.target)), torch.fx.GraphModule)]
    if subgraphs:  # an FX GraphModule is rebuilt by re-tracing its code, which a higher-order op refuses
        users = sorted({str(user.target) for n in module.graph.nodes if n.op == "get_attr" and n.target in subgraphs
                        for user in n.users})
        raise SubgraphCalls(subgraphs, users)
    if not isolate and inside_compile():
        raise MinifierError("minify: isolate=False inside a torch.compile trace would judge every candidate under "
                            "the trace's fake mode; use isolate=True (worker processes)")
    level = detect_level(module) if level == "auto" else level
    if level not in ("aten", "torch"):
        raise MinifierError(f"minify: level must be 'aten', 'torch' or 'auto', got {level!r}")
    return level


def _concrete_inputs(inputs: Sequence[Any]) -> list[Any]:
    """``inputs`` with each symbolic int, float or bool replaced by the value it was traced with.

    A Dynamo backend compiling under ``dynamic=True`` receives a ``SymInt`` for each size its graph
    takes as an input; the graph keeps the size symbolic (its placeholders' meta values), the
    candidates are judged on the concrete value. Raises :class:`MinifierError` for one with no such
    value (an unbacked size, data-dependent)."""
    concrete = []
    for index, value in enumerate(inputs):
        if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            hint = symbolic_hint(value)
            if hint is None:
                raise MinifierError(f"minify: input {index} is the symbolic {value} with no concrete value to run "
                                    "the candidates on (an unbacked, data-dependent size): pass its value instead")
            value = hint
        concrete.append(value)
    return concrete


def _modules_defining_ops(module: torch.fx.GraphModule, isolate: bool) -> tuple[str, ...]:
    """Modules that define the custom ops ``module`` calls (``torch.library.custom_op``, a library
    of the user's or of a package such as transformers'): every worker and repro imports them, or
    it could not even unpickle the graph. A script's own ops (``__main__``) cannot be imported."""
    modules: dict[str, str] = {}
    for node in module.graph.nodes:
        name = op_defining_module(node.target) if node.op == "call_function" else None
        if name is not None:
            modules.setdefault(name, str(node.target).rsplit(".", 1)[0].replace(".", "::", 1))
    if isolate and "__main__" in modules:
        raise MinifierError(
            f"minify: the graph calls {modules['__main__']}, a custom op defined in the script being run "
            "(__main__), which worker processes and repros cannot import. Define the op in a module of its "
            "own and import it, or minify with isolate=False")
    return tuple(name for name in modules if name != "__main__")


def _open(module: torch.fx.GraphModule, inputs: Sequence[Any], check: Failure, level: str,
          settings: MinifySettings, started: float) -> _Run:
    """Record the graph's values, slice it, and start a warm worker (while the values are recorded)."""
    isolate, seed = settings.isolate, settings.seed
    dynamic, dynamic_ints = settings.dynamic, settings.dynamic_ints
    log: list[str] = []
    say = settings.echo or (lambda line: print(line, file=sys.stderr))
    live = _Progress(settings.progress, started)

    def emit(line: str) -> None:
        log.append(line)
        live.close()  # end the live line before a log line
        say(line)

    context = current_context(settings.config).merged(CarriedContext(imports=_modules_defining_ops(module, isolate)))
    setup = WorkerSetup.for_context(context, warm=False)  # needed at once: no warm-up
    crashes_before = pool.crashes
    spawned_because = None
    if isolate:
        pool.caller_fork_refusal = None
        pool.get(setup, fork_caller=True)  # this process has torch loaded: a fork of it needs no imports
        spawned_because = pool.caller_fork_refusal
    placeholders = [n for n in module.graph.nodes if n.op == "placeholder"]
    if (dynamic or dynamic_ints) and not all("val" in n.meta or "example_value" in n.meta for n in module.graph.nodes
                                             if n.op != "output"):
        try:  # a saved repro's graph: give the nodes inside it the symbolic sizes of a dynamic trace
            propagate_symbolic_sizes(module, list(inputs), dict(dynamic or {}), list(dynamic_ints or []))
        except Exception as exc:  # noqa: BLE001 - the inputs keep their symbolic sizes either way
            emit(f"symbolic sizes not propagated through the graph ({type(exc).__name__}: {exc}); "
                 "only its inputs are compiled dynamic")
    slicer = GraphSlicer(module, record_values(module, inputs, seed))
    symbolic = {name: _symbolic(node.meta.get("val", node.meta.get("example_value")))
                for name, node in slicer.nodes.items()}
    if dynamic is not None:
        symbolic.update({placeholders[int(i)].name: (list(dims), False) for i, dims in dynamic.items()})
    if dynamic_ints is not None:
        symbolic.update({placeholders[int(i)].name: ([], True) for i in dynamic_ints})
    base_spec = {"level": level, "want": check.want, "seed": seed, "tol": getattr(check, "tol", None),
                 "config": {**dict(context.config), **({"fallback_random": True} if check.want == ACCURACY else {})}}
    requiring_grad = _requiring_grad(module, settings.requires_grad or ()) if level == "torch" else set()
    if requiring_grad:
        emit(f"Compiled as a training graph (its forward run): {len(requiring_grad)} values require grad")
    return _Run(module=module, inputs=list(inputs), check=check, level=level, isolate=isolate, slicer=slicer,
                context=context, setup=setup, symbolic=symbolic, requiring_grad=requiring_grad,
                base_spec=base_spec, emit=emit, live=live,
                log=log, started=started, timeout=settings.timeout, crashes_before=crashes_before,
                workers=settings.workers if isolate else 1, spawned_because=spawned_because,
                assume_failing=settings.assume_failing)


def _single_nodes(slicer: GraphSlicer, full: Candidate) -> list[Candidate]:
    """Each node of ``full`` alone (its inputs frozen), in graph order: what the first-divergence
    strategy isolates after the probe."""
    singles = []
    for name in slicer.sort(full.nodes):
        try:
            candidate = slicer.make({name})
        except InvalidCandidate:
            continue
        if candidate != full:
            singles.append(candidate)
    return singles


def _judge_suspects(run: _Run, hint_nodes: tuple[str, ...]) -> Optional[tuple[Candidate, Outcome]]:
    """The suspected nodes alone and their judgement (None when they make no smaller valid graph)."""
    suspects = {name for name in hint_nodes if name in run.slicer.nodes}
    try:
        candidate = run.slicer.make(suspects) if suspects else None
    except InvalidCandidate:
        return None
    if candidate is None or candidate == run.slicer.full():
        return None
    try:
        return candidate, run.judge(candidate)
    except Exception as exc:  # noqa: BLE001 - e.g. values a worker cannot take (vmap's wrapped tensors)
        run.emit(f"The suspected nodes alone could not be judged ({type(exc).__name__}: {str(exc)[:200]}): "
                 "confirming the whole graph")
        return None


# How far downstream of suspects that match eager alone the search looks, in steps along the data flow.
_GROWTH_STEPS = (1, 2, 4)


def _grown_suspects(run: _Run, suspects: Candidate, known: dict[str, Outcome]) -> Optional[tuple[Candidate, Outcome]]:
    """The suspects with the nodes their values flow into, one, two, then four steps downstream,
    judged in turn until one fails as the check says; None when none does, or when growing them
    reaches half the graph (the search from the whole graph costs no more then).

    For an accuracy check whose suspects alone pass: an error too small for the tolerance where a
    suspect computes it shows once a later op scales it up (a Gemma-2 softcapping's tanh, wrong by
    1% on values of 1e-5, fails only with the ``* 50`` after it): two compiles, where the search
    from the whole 274-node training graph took 50.
    """
    full = run.slicer.full()
    grown, edge, previous = set(suspects.nodes), set(suspects.nodes), suspects.nodes
    for steps in range(1, _GROWTH_STEPS[-1] + 1):
        edge = {after for name in edge for after in run.slicer.flow.successors(name)} - grown
        grown |= edge
        if steps not in _GROWTH_STEPS:
            continue
        try:
            candidate = run.slicer.make(grown)
        except InvalidCandidate:
            continue
        if candidate == full or 2 * len(candidate.nodes) > len(full.nodes):
            return None
        if candidate.nodes == previous:
            continue
        previous = candidate.nodes
        known[run.slicer.key(candidate)] = outcome = run.judge(candidate)
        if run.check.accepts_original(outcome):
            return candidate, outcome
        if outcome.kind != PASS:
            return None
    return None


def _confirm(run: _Run, chosen: Sequence[str],
             hint_nodes: tuple[str, ...]) -> tuple[Candidate, Outcome, dict[str, Outcome], Pending]:
    """Phase 2: confirm that the original fails as the check says.

    For an accuracy search that opens with the first-divergence probe, the probe is compiled first:
    it computes every value of the original graph, the original's outputs included, so when those
    disagree with eager it confirms the failure and names the diverging nodes in one compile (the
    original alone is compiled only when it does not). Meanwhile a spare worker guesses what the
    search will isolate next: single nodes on a small graph, else what the probe of the graph's first
    half finds diverging (:mod:`.speculation`). With ``assume_failing`` the suspected nodes are
    judged first, and when they fail as the check says the search starts from them and the
    original is never compiled; when they match eager under an accuracy check, so do the suspects
    grown downstream (:func:`_grown_suspects`) that fail. Returns the candidate the search starts
    from (the original, or the suspects), its outcome, the judgements made (for the search's
    cache) and the speculative ones; raises NotFailingError when the original does not fail as the
    check says.
    """
    full = run.slicer.full()
    run.emit(f"Started off with {len(full.nodes)} nodes ({len(full.inputs)} inputs, {run.level} level, "
             f"check {run.check.describe()})")
    if run.context.description or run.context.config:
        run.emit(f"Carried into every candidate and the repro: {run.context.description or 'no fault'}; "
                 f"Inductor config {dict(run.context.config) or '{}'}")
    if run.spawned_because:
        run.emit(f"Workers: a fresh process, which imports torch and Inductor first (seconds), not a fork of this "
                 f"one: {run.spawned_because}")
    known: dict[str, Outcome] = {}
    pending: Pending = {}
    original = None
    suspects = _judge_suspects(run, hint_nodes) if run.assume_failing and hint_nodes else None
    if suspects is not None:  # the caller vouches for the whole graph: start from the suspects when they fail
        known[run.slicer.key(suspects[0])] = suspects[1]
        accepted = run.check.accepts_original(suspects[1])
        grown = (_grown_suspects(run, suspects[0], known)
                 if not accepted and suspects[1].kind == PASS and run.check.want == ACCURACY else None)
        if accepted:
            full, original = suspects
            run.emit(f"Started from the suspected nodes alone ({len(full.nodes)} of {len(run.slicer.full().nodes)} "
                     "nodes), which fail as the check says: the caller saw the whole graph fail, so it is not "
                     "compiled here")
        elif grown is not None:
            full, original = grown
            run.emit(f"The suspected nodes alone match eager; with the nodes their values flow into ({len(full.nodes)} "
                     f"of {len(run.slicer.full().nodes)} nodes) they fail as the check says: the search starts there, "
                     "and the whole graph, which the caller saw fail, is not compiled here")
        else:
            run.emit(f"The suspected nodes alone give {suspects[1].kind!r}: confirming the whole graph")
    small = len(full.nodes) <= SPECULATE_UP_TO  # guess single nodes; else follow the first half's probe
    probe = (divergence_probe(run.slicer, run.check, full)
             if FIRST_DIVERGENCE in chosen and not hint_nodes and original is None else None)
    if probe is not None:
        spare = run.speculative_slots()
        if small:
            guesses = single_nodes(_single_nodes(run.slicer, full))
        else:  # one slot: each guess follows from the answer before it
            spare = spare[:1]
            guesses = first_half_guesses(run.slicer, run.check, full, isolated=run.workers)
        speculation = speculate(guesses, slots=spare, judge=run.judge, key=run.slicer.key)
        try:
            known[run.slicer.key(probe)] = seen = run.judge(probe)
        finally:
            pending = speculation.stop() if speculation is not None else {}
        original = _original_seen_in_probe(full, probe, seen)
        if original is not None:
            run.emit("Confirmed by the every-node probe (the original graph with every value an output), "
                     "which also names the diverging nodes")
    if original is None:
        cancel(pending, run.discard)  # the probe did not show the failure: its guesses are moot
        pending = {}
        known[run.slicer.key(full)] = original = run.judge(full)
    if run.timeout is None:
        run.timeout = max(60.0, 5 * original.seconds)
    if original.kind == NONDETERMINISTIC:
        cancel(pending, run.discard)  # nothing will be searched
        run.emit("The graph is nondeterministic: two seeded eager runs differ, so an accuracy failure cannot be "
                 "pinned. Not minified.")
        return full, original, known, {}
    if original.kind == INVALID and original.signature.endswith(UNLOADABLE):
        cancel(pending, run.discard)
        raise UnbuildableGraph(original.message)
    if not run.check.accepts_original(original):
        cancel(pending, run.discard)
        # A timeout or crash: where it hung or how it died (the worker's stacks, its log), in full.
        detail = (original.message[:6000] if original.kind in (TIMEOUT, CRASH)
                  else original.signature or original.message[:300])
        raise NotFailingError(f"minify: the graph does not fail as {run.check.describe()} expects: it gives "
                              f"{original.kind!r}{': ' + detail if detail else ''}{_undecomposed_hint(original)}")
    detail = "; ".join(original.details) if original.is_accuracy else original.signature
    run.emit(f"{'Original' if full == run.slicer.full() else 'Suspects'} failure: {original.kind}: {detail}")
    if pending:
        plan = "single nodes" if small else "the first half probed, then single nodes"
        run.emit(f"Judged alongside the probe, in case the search needs them: {len(pending)} candidates ({plan})")
    return full, original, known, pending


def _search(run: _Run, full: Candidate, original: Outcome, known: dict[str, Outcome], pending: Pending,
            settings: MinifySettings) -> MinifyState:
    """Phase 3, from ``full`` (the whole graph, or the suspects that failed alone): the opening
    strategies once, the loop strategies until none helps, the closing ones once. Past
    ``max_seconds`` from the call (or ``max_candidates``) no candidate is judged: every strategy
    then ends at the smallest failing graph found so far."""
    slicer = run.slicer
    chosen = settings.strategies  # every strategy when the caller named none (_minify)
    max_seconds = settings.max_seconds
    failing_names = {full.outputs[i] for i in original.failing if i < len(full.outputs)}
    related = slicer.ancestors(failing_names) if original.is_accuracy else set(slicer.order)
    state = MinifyState(slicer=slicer, check=run.check, original=original, current=full, current_outcome=original,
                        related=related, hint_nodes=settings.hint_nodes, run=run.judge, emit=run.emit,
                        progress=run.live, max_candidates=settings.max_candidates, parallel=run.workers,
                        cancel=run.discard, max_seconds=max_seconds,
                        deadline=None if max_seconds is None else run.started + max_seconds)
    state.cache.update(known)
    state.cache[slicer.key(full)] = original  # judged, or seen in the probe
    state.pending = pending
    state.compiles = state.candidates_checked = len(known) + len(pending)

    def apply(names: Sequence[str]) -> bool:
        improved = False
        for name in names:
            found = STRATEGIES[name](state)
            if found is not None:
                state.accept(found)
                improved = True
        return improved

    apply([s for s in OPENING if s in chosen])
    state.settle_pending()  # the opening strategies were the ones speculation worked for
    for slot in run.speculative_slots():
        run.discard(slot)  # idle, low-priority workers: not needed again
    while apply([s for s in chosen if s not in OPENING and s not in CLOSING]):
        pass
    apply([s for s in CLOSING if s in chosen])
    if state.stopped_early:
        run.emit(f"Search stopped: {state.stopped_early}; the smallest failing graph found so far is kept "
                 f"({len(state.current.nodes)} of {len(slicer.full().nodes)} nodes)")
    return state


def _finish(run: _Run, state: MinifyState, repro_dir: "str | Path | None") -> MinifyResult:
    """Phase 4: re-check the smallest graph from scratch and write its repro."""
    from .repro import write_repro

    final_module, final_inputs = run.slicer.build(state.current)
    final = run.judge(state.current)  # re-checked from scratch, not from the cache
    state.compiles += 1
    confirmed = run.check.same_failure(state.original, final, lambda i: True)
    run.emit(f"Final graph: {len(state.current.nodes)} nodes, {len(state.current.inputs)} inputs; re-checked: "
             f"{'fails the same way' if confirmed else 'DOES NOT fail the same way (' + final.kind + ')'}")
    final_spec = {**run.spec_for(state.current, final_inputs), "timeout": run.timeout}
    expected = {**state.original.to_wire(), "failing": list(final.failing) if final.is_accuracy else []}
    repro_path = write_repro(final_module, final_inputs, spec=final_spec, expected=expected,
                             pattern=run.check.pattern, context=run.context, directory=repro_dir,
                             header={"start_nodes": len(run.slicer.full().nodes),
                                     "final_nodes": len(state.current.nodes)})
    result = run.result("minified" if confirmed else "not confirmed", state.current, state.original, final,
                        repro_path=repro_path, state=state)
    run.emit(f"Minified repro written to {repro_path} ({result.compiles} compiles, {result.seconds:.1f} s): "
             f"python {repro_path}")
    return result


def minify(
    module: torch.fx.GraphModule,
    inputs: Sequence[Any],
    *,
    check: Failure,
    level: str = "auto",
    hint_nodes: Iterable[str] = (),
    strategies: Optional[Sequence[str]] = None,
    isolate: bool = True,
    timeout: Optional[float] = None,
    repro_dir: "str | Path | None" = None,
    config: Optional[dict[str, Any]] = None,
    dynamic: Optional[dict[int, list[int]]] = None,
    dynamic_ints: Optional[Sequence[int]] = None,
    requires_grad: Optional[Sequence[int]] = None,
    seed: int = 0,
    max_candidates: int = 500,
    max_seconds: Optional[float] = None,
    workers: Optional[int] = None,
    progress: Optional[bool] = None,
    echo: Optional[Callable[[str], None]] = None,
    assume_failing: bool = False,
) -> MinifyResult:
    """Shrink ``module`` to the smallest graph that still fails as ``check`` describes.

    ``module`` is either a graph a Dynamo backend receives (torch level) or a post-AOT ATen
    graph (``level="auto"`` tells them apart); candidates are compiled the way Inductor
    compiles that level, with the Inductor config and any injected fault in effect now (plus
    ``config``). ``hint_nodes`` names suspected nodes to try first. ``isolate`` judges each
    candidate in a warm worker process (a crash or hang costs a candidate, not this process);
    ``timeout`` bounds one candidate (default: 5x the original's time, at least 60 s).
    ``dynamic`` ({input index: [dims]}) overrides the symbolic dimensions read from the graph, and
    ``dynamic_ints`` (input indices) the symbolic ints: for a graph without meta values, such as a
    saved repro's (:func:`symbolic_inputs` reads them off the graph they were saved from).
    ``requires_grad`` (input indices) are the inputs of a torch-level graph that require grad: its
    candidates are then compiled as a training graph and their forward run, as ``torch.compile``
    compiles a graph whose inputs require grad while grad is enabled (AOT autograd's joint graph,
    partitioned: other decompositions and fusions than an inference graph's, and failures of their
    own). Default: the ``inputs`` that require grad if grad is enabled at this call (a Dynamo
    backend's example inputs, in the grad mode it compiles under); pass ``[]`` for an inference graph.
    ``max_candidates`` and ``max_seconds`` (from this call, default: none) bound the search: once
    either is spent no candidate is judged, the search keeps the smallest failing graph found so far,
    re-checks it and writes its repro as usual, and ``MinifyResult.stopped_early`` says which budget
    ended it (a dynamic-shape graph's every compile can take minutes of symbolic reasoning).
    ``workers`` candidates are judged side by side, each in its own worker process (default:
    :func:`default_workers`, one per core up to four; always one with ``isolate=False``): the
    bisections judge that many cut points per round and delta debugging that many chunks, so
    the search takes fewer rounds and ends at the same graph the one-worker search would. On a
    graph of at most 8 nodes the workers beyond the first also judge single nodes, at the lowest CPU
    priority, while the first compiles the every-node probe (:mod:`minifier.speculation`).
    The log is echoed through ``echo`` (default: stderr). Writes a repro script to
    ``repro_dir`` (default ``./minifier_repros``) and names it in the last log line.
    ``assume_failing``: the caller has seen the whole graph fail as ``check`` says (it compiled it
    itself); when ``hint_nodes`` alone fail that way too, the search starts from them and the whole
    graph, which can take seconds to compile, is never compiled here (the repro is then pinned to
    the suspects' failure); else the original is confirmed as usual.

    Grad mode, inference mode, autocast and the default dtype are a fresh process's in every
    worker, whatever the caller set; autocast is off for this call's own recording and judging
    too (:func:`~minifier.judge.autocast_off`): pass a graph traced under ``torch.autocast`` as
    its post-AOT graph, whose casts are explicit.

    Four phases: validate the arguments, confirm the original fails, search, re-check and write
    the repro. Raises :class:`NotFailingError` when the original does not fail the way ``check`` says,
    :class:`UnbuildableGraph` when a worker cannot load it. Inductor's ordering wrappers in a
    post-grad graph (``control_deps``), activation checkpoints and other higher-order ops that only
    call a subgraph are inlined first (:func:`~minifier.graph.inline_subgraph_calls`); a hint may name
    a node of such a subgraph as ``subgraph.node``."""
    settings = MinifySettings(
        level=level, config=config, dynamic=dynamic, dynamic_ints=dynamic_ints, requires_grad=requires_grad,
        seed=seed, hint_nodes=tuple(hint_nodes), strategies=strategies, isolate=isolate, timeout=timeout,
        workers=workers, max_candidates=max_candidates, max_seconds=max_seconds, assume_failing=assume_failing,
        repro_dir=repro_dir, progress=progress, echo=echo)
    return _minify(module, inputs, check, settings)


def _minify(module: torch.fx.GraphModule, inputs: Sequence[Any], check: Failure,
            settings: MinifySettings) -> MinifyResult:
    """:func:`minify`'s four phases, over its settings."""
    started = time.perf_counter()
    inlined: dict[str, str] = {}
    if isinstance(module, torch.fx.GraphModule):
        module = sizes_as_tuples(inline_subgraph_calls(module, inlined))
    level = _validate(module, inputs, check, settings)
    inputs = _concrete_inputs(inputs)
    settings = dataclasses.replace(settings.checked(inputs, default_workers),
                                   hint_nodes=tuple(inlined.get(name, name) for name in settings.hint_nodes),
                                   strategies=tuple(STRATEGIES if settings.strategies is None else settings.strategies))
    with autocast_off():  # as in every worker: what this process records and judges, a worker computes
        exposed = None
        if isinstance(check, AccuracyFailure) and isinstance(module, torch.fx.GraphModule):
            exposed = expose_updates(module, inputs, seed=settings.seed)  # in-place updates of inputs become outputs
            module, inputs = exposed.module, exposed.inputs
        elif isinstance(module, torch.fx.GraphModule) and updates_in_place(module):
            module, inputs = attributes_as_inputs(module, inputs)  # the eager runs here never change the caller's
        run = _open(module, inputs, check, level, settings, started)
        if exposed is not None and exposed.updated:
            run.emit(f"Inputs updated in place, returned as outputs: {len(exposed.updated)} "
                     f"({', '.join(exposed.updated[:4])}{' ...' if len(exposed.updated) > 4 else ''})")
        elif exposed is not None and exposed.note:
            run.emit(f"Note: {exposed.note}")
        try:
            start, original, known, pending = _confirm(run, settings.strategies, settings.hint_nodes)
            if original.kind == NONDETERMINISTIC:
                return run.result("nondeterministic", run.slicer.full(), original, original)
            state = _search(run, start, original, known, pending, settings)
            return _finish(run, state, settings.repro_dir)
        finally:
            run.live.close()
