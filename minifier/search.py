"""``minify``: shrink a failing FX graph to the smallest graph that fails the same way."""

from __future__ import annotations

import dataclasses
import operator
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence

import torch
import torch.fx

from ._seams import inside_compile, is_aten_op
from .checks import Failure
from .context import current_context
from .graph import Candidate, GraphSlicer, record_values
from .judge import ACCURACY, CRASH, NONDETERMINISTIC, TIMEOUT, judge
from .strategies import CLOSING, FIRST_DIVERGENCE, OPENING, STRATEGIES, divergence_probe
from .workers import WorkerSetup, pool

__all__ = ["minify", "MinifyResult", "MinifyState", "MinifierError", "NotFailingError", "detect_level"]


class MinifierError(RuntimeError):
    """The minification could not start (the graph, its inputs or the check are not usable)."""


class NotFailingError(MinifierError):
    """The original graph does not fail the way the check describes."""


@dataclasses.dataclass
class MinifyResult:
    """What a minification found (read by the CLI, the backend's reports and the tests)."""

    status: str                                # "minified", "nondeterministic"
    graph_module: torch.fx.GraphModule         # the smallest failing graph
    inputs: list[Any]                          # its inputs
    repro_path: Optional[Path]
    log: list[str]
    original: dict[str, Any]                   # outcome of the original graph
    final: dict[str, Any]                      # outcome of the final graph, re-checked
    level: str
    start_nodes: int
    final_nodes: int
    candidates_checked: int = 0                # candidates judged (cache hits excluded)
    compiles: int = 0                          # judgements that compiled, probes and re-check included
    cache_hits: int = 0
    crashes: int = 0
    seconds: float = 0.0

    @property
    def reproduced(self) -> bool:
        """Did the final graph, re-checked from scratch, still fail the same way?"""
        return self.status == "minified"  # "not confirmed" when the re-check differed

    def summary(self) -> str:
        where = f"; repro: {self.repro_path}" if self.repro_path else ""
        return (f"minifier: {self.status}: {self.start_nodes} -> {self.final_nodes} nodes in "
                f"{self.seconds:.1f} s, {self.compiles} compiles{where}")


def detect_level(module: torch.fx.GraphModule) -> str:
    """``"aten"`` for a post-AOT graph (ATen op overloads only), else ``"torch"``."""
    for node in module.graph.nodes:
        if node.op == "call_function":
            target = node.target
            if is_aten_op(target) or target is operator.getitem:
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


@dataclasses.dataclass
class MinifyState:
    """The search: current best candidate, judging (pinned, cached, counted) and the log."""

    slicer: GraphSlicer
    check: Failure
    original: dict[str, Any]
    current: Candidate
    current_outcome: dict[str, Any]
    related: set[str]
    hint_nodes: tuple[str, ...]
    run: Callable[[Candidate], dict[str, Any]]
    emit: Callable[[str], None]
    progress: Callable[[str], None]
    cache: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    pending: dict[str, "Future[dict[str, Any]]"] = dataclasses.field(default_factory=dict)
    candidates_checked: int = 0
    compiles: int = 0
    cache_hits: int = 0
    max_candidates: int = 500

    def announce(self, name: str, granularity: Optional[int]) -> None:
        g = f" (G: {granularity})" if granularity else ""
        self.emit(f"Strategy: {name}{g} {self.current.describe()}")

    def _judge(self, candidate: Candidate) -> dict[str, Any]:
        key = self.slicer.key(candidate)
        if key in self.cache:
            self.cache_hits += 1
            return self.cache[key]
        started = self.pending.pop(key, None)  # judged ahead, side by side with the original
        if started is None and self.candidates_checked >= self.max_candidates:
            return {"kind": "invalid", "signature": "candidate budget spent", "message": "", "failing": []}
        self.candidates_checked += 1
        self.compiles += 1
        result = started.result() if started is not None else self.run(candidate)
        if result["kind"] in (CRASH, TIMEOUT):
            self.emit(f"  candidate {candidate.describe()}: {result['kind']} ({result['signature']}); worker restarted")
        self.cache[key] = result
        self.progress(f"{self.candidates_checked} candidates, best {len(self.current.nodes)} nodes")
        return result

    def probe(self, candidate: Candidate) -> dict[str, Any]:
        """Judge without pinning (a diagnostic compile, e.g. every node as an output)."""
        return self._judge(candidate)

    def fails(self, candidate: Candidate) -> bool:
        """Does ``candidate`` fail the same way as the original? Remembers it as the outcome if so."""
        result = self._judge(candidate)
        def related(i: int) -> bool:
            return i < len(candidate.outputs) and candidate.outputs[i] in self.related

        if self.check.same_failure(self.original, result, related):
            self.current_outcome = result
            return True
        return False

    def accept(self, candidate: Candidate) -> None:
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


def _undecomposed_hint(outcome: dict[str, Any]) -> str:
    """Explain Inductor's CI-only refusal to fall back for an op that has a decomposition."""
    if "a decomposition exists, we should switch to it" not in outcome.get("message", ""):
        return ""
    return ("\n(Inductor raises this only while the CI environment variable is set. The ATen graph holds an op "
            "that AOT autograd would have decomposed for Inductor: pass the graph Inductor received, or trace "
            "it with make_fx(torch.func.functionalize(fn), decomposition_table="
            "torch._inductor.decomposition.select_decomp_table()).)")


# The worker that judges a candidate ahead of need, side by side with the original (slot 0).
_AHEAD_SLOT = 1
# Below this many nodes the every-node probe compiles in well under a second: judging it ahead
# would cost a second worker's first-compile warm-up for little gain.
PROBE_AHEAD_MIN_NODES = 24


def _judge_probe_ahead(full: Candidate, slicer: GraphSlicer, check: Failure,
                       run: Callable[[Candidate, int], dict[str, Any]], chosen: Sequence[str], *,
                       isolate: bool, hinted: bool) -> "dict[str, Future[dict[str, Any]]]":
    """Start the first-divergence probe in a second worker while the original is confirmed.

    Those are the two big compiles of an accuracy minification and neither needs the other's
    answer, so on two cores they take the time of one. Only when the probe will be wanted: an
    isolated accuracy search that opens with it (no suspects named) on a graph big enough.
    """
    if not isolate or hinted or FIRST_DIVERGENCE not in chosen or len(full.nodes) < PROBE_AHEAD_MIN_NODES:
        return {}
    probe = divergence_probe(slicer, check, full)
    if probe is None:
        return {}
    executor = ThreadPoolExecutor(1, thread_name_prefix="minifier-ahead")
    try:
        return {slicer.key(probe): executor.submit(run, probe, _AHEAD_SLOT)}
    finally:
        executor.shutdown(wait=False)


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
    seed: int = 0,
    max_candidates: int = 500,
    progress: Optional[bool] = None,
    echo: Optional[Callable[[str], None]] = None,
) -> MinifyResult:
    """Shrink ``module`` to the smallest graph that still fails as ``check`` describes.

    ``module`` is either a graph a Dynamo backend receives (torch level) or a post-AOT ATen
    graph (``level="auto"`` tells them apart); candidates are compiled the way Inductor
    compiles that level, with the Inductor config and any injected fault in effect now (plus
    ``config``). ``hint_nodes`` names suspected nodes to try first. ``isolate`` judges each
    candidate in a warm worker process (a crash or hang costs a candidate, not this process);
    ``timeout`` bounds one candidate (default: 5x the original's time, at least 60 s).
    ``dynamic`` ({input index: [dims]}) overrides the symbolic dimensions read from the graph.
    The log is echoed through ``echo`` (default: stderr). Writes a repro script to
    ``repro_dir`` (default ``./minifier_repros``) and names it in the last log line.

    Raises :class:`NotFailingError` when the original does not fail the way ``check`` says.
    """
    from .repro import write_repro

    started = time.perf_counter()
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
    if not isolate and inside_compile():
        raise MinifierError("minify: isolate=False inside a torch.compile trace would judge every candidate under "
                            "the trace's fake mode; use isolate=True (worker processes)")
    hint_nodes = tuple(hint_nodes)
    level = detect_level(module) if level == "auto" else level
    if level not in ("aten", "torch"):
        raise MinifierError(f"minify: level must be 'aten', 'torch' or 'auto', got {level!r}")

    log: list[str] = []
    say = echo or (lambda line: print(line, file=sys.stderr))

    def emit(line: str) -> None:
        log.append(line)
        live.close()  # end the live line before a log line
        say(line)

    live = _Progress(progress, started)
    context = current_context(config)
    values = record_values(module, inputs, seed)
    slicer = GraphSlicer(module, values)
    symbolic = {name: _symbolic(slicer.nodes[name].meta.get("val", slicer.nodes[name].meta.get("example_value")))
                for name in slicer.nodes}
    if dynamic is not None:
        symbolic.update({placeholders[int(i)].name: (list(dims), False) for i, dims in dynamic.items()})
    base_spec = {"level": level, "want": check.want, "seed": seed, "tol": getattr(check, "tol", None),
                 "config": {**dict(context.config), **({"fallback_random": True} if check.want == ACCURACY else {})}}
    setup = WorkerSetup.for_context(context, warm=False)  # needed at once: no warm-up

    def spec_for(candidate: Candidate, args: Sequence[Any]) -> dict[str, Any]:
        dims = {i: [d for d in symbolic[name][0] if isinstance(args[i], torch.Tensor) and args[i].shape[d] > 1]
                for i, name in enumerate(candidate.inputs)}
        return {**base_spec, "dynamic": {i: d for i, d in dims.items() if d},
                "dynamic_ints": [i for i, name in enumerate(candidate.inputs) if symbolic[name][1]]}

    limit = {"timeout": timeout}

    def run(candidate: Candidate, slot: int = 0) -> dict[str, Any]:
        gm, args = slicer.build(candidate)
        spec = spec_for(candidate, args)
        if not isolate:
            return judge(gm, args, spec)
        return pool.judge(setup, gm, args, spec, limit["timeout"] or 600.0, slot=slot)

    crashes_before = pool.crashes
    if isolate:
        pool.get(setup)  # starts while the original's values are recorded
    full = slicer.full()
    say_start = (
        f"Started off with {len(full.nodes)} nodes ({len(full.inputs)} inputs, {level} level, check {check.describe()})"
    )
    emit(say_start)
    if context.description or context.config:
        emit(f"Carried into every candidate and the repro: {context.description or 'no fault'}; "
             f"Inductor config {dict(context.config) or '{}'}")
    chosen = list(strategies) if strategies is not None else list(STRATEGIES)
    ahead = _judge_probe_ahead(full, slicer, check, run, chosen, isolate=isolate, hinted=bool(hint_nodes))
    original = run(full)
    if original["kind"] == NONDETERMINISTIC or not check.accepts_original(original):
        if ahead:
            pool.discard(setup, _AHEAD_SLOT)  # its answer is not wanted: stop its compile
    if timeout is None:
        limit["timeout"] = max(60.0, 5 * original.get("seconds", 0.0))
    if original["kind"] == NONDETERMINISTIC:
        emit("The graph is nondeterministic: two seeded eager runs differ, so an accuracy failure cannot be "
             "pinned. Not minified.")
        live.close()
        return MinifyResult("nondeterministic", module, list(inputs), None, log, original, original, level,
                            len(full.nodes), len(full.nodes), 1, 1, 0, 0, time.perf_counter() - started)
    if not check.accepts_original(original):
        detail = original.get("signature") or original.get("message", "")[:300]
        raise NotFailingError(f"minify: the graph does not fail as {check.describe()} expects: it gives "
                              f"{original['kind']!r}{': ' + detail if detail else ''}{_undecomposed_hint(original)}")
    detail = original["signature"] if original["kind"] != ACCURACY else "; ".join(original["details"])
    emit(f"Original failure: {original['kind']}: {detail}")
    failing_names = {full.outputs[i] for i in original["failing"] if i < len(full.outputs)}
    related = slicer.ancestors(failing_names) if original["kind"] == ACCURACY else set(slicer.order)
    state = MinifyState(slicer=slicer, check=check, original=original, current=full, current_outcome=original,
                        related=related, hint_nodes=hint_nodes, run=run, emit=emit, progress=live,
                        max_candidates=max_candidates)
    state.cache[slicer.key(full)] = original
    state.pending.update(ahead)
    state.compiles = state.candidates_checked = 1

    for name in [s for s in OPENING if s in chosen]:
        found = STRATEGIES[name](state)
        if found is not None:
            state.accept(found)
    loop = [s for s in chosen if s not in OPENING and s not in CLOSING]
    progress_made = True
    while progress_made:
        progress_made = False
        for name in loop:
            found = STRATEGIES[name](state)
            if found is not None:
                state.accept(found)
                progress_made = True
    for name in [s for s in CLOSING if s in chosen]:
        found = STRATEGIES[name](state)
        if found is not None:
            state.accept(found)

    if state.pending:  # judged ahead but never asked for
        pool.discard(setup, _AHEAD_SLOT)
        state.pending.clear()
    final_module, final_inputs = slicer.build(state.current)
    final = run(state.current)  # re-checked from scratch, not from the cache
    state.compiles += 1
    confirmed = check.same_failure(original, final, lambda i: True)
    emit(f"Final graph: {len(state.current.nodes)} nodes, {len(state.current.inputs)} inputs; "
         f"re-checked: {'fails the same way' if confirmed else 'DOES NOT fail the same way (' + final['kind'] + ')'}")
    final_spec = {**spec_for(state.current, final_inputs), "timeout": limit["timeout"]}
    expected = {**original, "failing": list(final["failing"]) if final["kind"] == ACCURACY else []}
    repro_path = write_repro(final_module, final_inputs, spec=final_spec, expected=expected, pattern=check.pattern,
                             context=context, directory=repro_dir,
                             header={"start_nodes": len(full.nodes), "final_nodes": len(state.current.nodes)})
    result = MinifyResult("minified", final_module, final_inputs, repro_path, log, original, final, level,
                          len(full.nodes), len(state.current.nodes), state.candidates_checked, state.compiles,
                          state.cache_hits, pool.crashes - crashes_before, time.perf_counter() - started)
    if not confirmed:
        result.status = "not confirmed"
    emit(f"Minified repro written to {repro_path} ({result.compiles} compiles, {result.seconds:.1f} s): "
         f"python {repro_path}")
    live.close()
    return result

