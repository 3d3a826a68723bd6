"""Shrinking strategies, registered by name with :func:`strategy`.

Each strategy gets the :class:`~minifier.search.MinifyState`, tries candidates through
``state.fails(candidate)`` (which compiles, pins and caches) and returns a smaller failing
candidate, or None. *Opening* strategies run once, before the loop (they jump straight to a
suspected node); the others run in order, again and again, until none makes progress.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional

from .graph import Candidate, GraphSlicer, InvalidCandidate
from .judge import ACCURACY

if TYPE_CHECKING:
    from .checks import Failure
    from .search import MinifyState

__all__ = ["strategy", "STRATEGIES", "OPENING", "CLOSING", "Strategy", "FIRST_DIVERGENCE", "divergence_probe"]

Strategy = Callable[["MinifyState"], Optional[Candidate]]
STRATEGIES: dict[str, Strategy] = {}
OPENING: list[str] = []
CLOSING: list[str] = []


def strategy(name: str, *, opening: bool = False, closing: bool = False) -> Callable[[Strategy], Strategy]:
    """Register a strategy under ``name`` (the name its log lines show). ``opening``: run once
    before the loop; ``closing``: once after it (a strategy that trades nodes for inputs)."""

    def register(fn: Strategy) -> Strategy:
        STRATEGIES[name] = fn
        if opening:
            OPENING.append(name)
        if closing:
            CLOSING.append(name)
        return fn

    return register


def _make(state: "MinifyState", nodes: set[str], **make_kwargs: object) -> Optional[Candidate]:
    """The candidate keeping ``nodes``, or None when it is invalid or no change."""
    try:
        candidate = state.slicer.make(nodes, **make_kwargs)
    except InvalidCandidate:
        return None
    return None if candidate == state.current else candidate


def _try(state: "MinifyState", nodes: set[str], **make_kwargs: object) -> Optional[Candidate]:
    candidate = _make(state, nodes, **make_kwargs)
    return candidate if candidate is not None and state.fails(candidate) else None


def _first(state: "MinifyState", candidates: list[Optional[Candidate]]) -> Optional[Candidate]:
    """The first of ``candidates`` that fails the same way (judged ``state.parallel`` at a time)."""
    index = state.first_failing(candidates)
    return None if index is None else candidates[index]


@strategy("Isolate suspected nodes", opening=True)
def isolate_suspects(state: "MinifyState") -> Optional[Candidate]:
    """The nodes the caller already suspects (e.g. the first diverging kernel's FX nodes), alone."""
    suspects = {n for n in state.hint_nodes if n in state.current.nodes}
    if not suspects or suspects == set(state.current.nodes):  # none, or the search started from them
        return None
    state.announce("Isolate suspected nodes", None)
    return _try(state, suspects)


FIRST_DIVERGENCE = "Isolate first diverging node"


def divergence_probe(slicer: GraphSlicer, check: "Failure", current: Candidate) -> Optional[Candidate]:
    """The diagnostic candidate :func:`isolate_first_divergence` compiles: ``current`` with every
    node as an output (None when the check is not about accuracy or there is nothing to split)."""
    if check.want != ACCURACY or len(current.nodes) < 2:
        return None
    try:
        return slicer.make(current.nodes, outputs=slicer.sort(current.nodes))
    except InvalidCandidate:
        return None


@strategy(FIRST_DIVERGENCE, opening=True)
def isolate_first_divergence(state: "MinifyState") -> Optional[Candidate]:
    """Accuracy only: one compile returning every node's value names the nodes that diverge;
    each diverging node (earliest first) is then tried alone, its inputs frozen to eager values."""
    probe = divergence_probe(state.slicer, state.check, state.current)
    if probe is None:
        return None
    state.announce(FIRST_DIVERGENCE, None)
    result = state.probe(probe)
    if not result.is_accuracy:
        return None
    diverging = [probe.outputs[i] for i in result.failing if i < len(probe.outputs)]
    diverging = [n for n in state.slicer.sort(diverging) if n in state.related]
    return _first(state, [_make(state, {name}) for name in diverging[:3]])


def _smallest_failing(
    state: "MinifyState", label: str, count: int, make: Callable[[int], set[str]]
) -> Optional[Candidate]:
    """Search for the smallest ``k`` in [1, count) whose candidate ``make(k)`` fails: a binary
    search, or with ``state.parallel`` workers a (parallel + 1)-ary one judging that many cut
    points side by side per round."""
    low, high, best = 1, count, None
    pieces = state.parallel + 1
    while low < high:
        span = high - low
        points = sorted({low + span * (j + 1) // (state.parallel + 1) for j in range(state.parallel)})
        state.announce(label, pieces)
        candidates = [_make(state, make(k), inputs=state.current.inputs) for k in points]
        first = state.first_failing(candidates)
        if first is not None:
            high, best = points[first], candidates[first]
            low = points[first - 1] + 1 if first > 0 else low
        else:
            low = points[-1] + 1
        pieces *= state.parallel + 1
    return best


@strategy("Truncate suffix")
def truncate_suffix(state: "MinifyState") -> Optional[Candidate]:
    """Keep the shortest prefix of the graph that still fails (binary search over cut points)."""
    order = state.slicer.sort(state.current.nodes)
    return _smallest_failing(state, "Truncate suffix", len(order), lambda k: set(order[:k]))


@strategy("Truncate prefix")
def truncate_prefix(state: "MinifyState") -> Optional[Candidate]:
    """Freeze the longest head of the graph into inputs (their eager values) that still fails."""
    order = state.slicer.sort(state.current.nodes)
    return _smallest_failing(state, "Truncate prefix", len(order), lambda k: set(order[len(order) - k:]))


@strategy("Delta debugging")
def delta_debugging(state: "MinifyState") -> Optional[Candidate]:
    """ddmin: remove chunks of nodes at granularity 2, 4, 8...; removed producers become inputs."""
    best: Optional[Candidate] = None
    granularity = 2
    while True:
        order = state.slicer.sort((best or state.current).nodes)
        if len(order) < 2:
            return best
        granularity = min(granularity, len(order))
        state.announce("Delta debugging", granularity)
        size = -(-len(order) // granularity)
        chunks = [order[i:i + size] for i in range(0, len(order), size)]
        inputs = (best or state.current).inputs
        removed = _first(state, [_make(state, set(order) - set(chunk), inputs=inputs) for chunk in chunks])
        if removed is not None:
            best = removed
            granularity = max(granularity - 1, 2)
        elif granularity >= len(order):
            return best  # single nodes tried: 1-minimal
        else:
            granularity *= 2


@strategy("Eliminate dead code")
def eliminate_dead_code(state: "MinifyState") -> Optional[Candidate]:
    """Keep only what the failing outputs need: their ancestors (one output at a time for errors)."""
    current = state.current
    if state.current_outcome.is_accuracy:
        failing = [current.outputs[i] for i in state.current_outcome.failing if i < len(current.outputs)]
        groups = [failing] if failing else []
    else:
        groups = [[o] for o in current.outputs] if 1 < len(current.outputs) <= 8 else []
    for group in groups:
        keep = state.slicer.ancestors(group) & set(current.nodes)
        if keep == set(current.nodes):
            continue
        state.announce("Eliminate dead code", None)
        found = _try(state, keep, inputs=current.inputs, outputs=group)
        if found is not None:
            return found
    return None


@strategy("Remove unused inputs")
def remove_unused_inputs(state: "MinifyState") -> Optional[Candidate]:
    """Drop graph inputs no kept node reads."""
    needed = state.slicer.needed_inputs(state.current.nodes)
    if len(needed) == len(state.current.inputs):
        return None
    state.announce("Remove unused inputs", None)
    return _try(state, set(state.current.nodes), outputs=state.current.outputs)


@strategy("Consolidate inputs", closing=True)
def consolidate_inputs(state: "MinifyState") -> Optional[Candidate]:
    """Recompute a frozen input from inputs the graph already has, when that means fewer inputs
    (a smaller repro: fewer saved tensors) without more than one extra node per input removed."""
    current = state.current
    have = set(current.inputs)
    extra = set()
    for name in current.inputs:
        producer = state.slicer.nodes[name]
        if name in state.slicer.placeholders or producer.op == "get_attr":
            continue
        sources = {p.name for p in producer.all_input_nodes}
        if sources and sources <= have and len(sources) <= 1:
            extra.add(name)
    if not extra:
        return None
    try:
        candidate = state.slicer.make(set(current.nodes) | extra, outputs=current.outputs)
    except InvalidCandidate:
        return None
    if len(candidate.inputs) >= len(current.inputs):
        return None
    state.announce("Consolidate inputs", None)
    return candidate if state.fails(candidate) else None
