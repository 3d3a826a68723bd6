"""Compare what the ranks of a torch.distributed run compiled, and name where they first differ.

Per rank: the graphs in the order it compiled them, a content hash of each layer (Dynamo graph,
post-grad graph, output code) and the collectives each graph issues. Ranks are compared graph by
graph, in order: the first graph where they differ is named with its first differing layer, a
unified diff of that layer and the source lines behind the differing nodes. Separately, every
graph whose sequence of collectives differs across ranks is named: ranks that issue different
collectives, or the same in another order, hang or exchange the wrong tensors, even when
everything else about the graph is equal.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Optional, Union

if TYPE_CHECKING:
    from ..graphs import CaptureSession, GraphCapture

__all__ = ["Collective", "GraphDigest", "RankDivergence", "CollectiveDivergence", "RankComparison",
           "compare_ranks", "collectives", "LAYERS"]

# GraphCapture field -> layer name, in pipeline order: the first that differs is the one named.
LAYERS = {"dynamo_graph_code": "Dynamo graph", "post_grad_graph_code": "post-grad graph", "output_code": "output code"}
_COLLECTIVE = re.compile(r'^\s*(?P<name>\w+): "(?P<shape>[^"]*)" = torch\.ops\._c10d_functional\.(?P<op>\w+)\.default'
                         r"\((?P<args>.*)\)")
_NOT_COLLECTIVES = {"wait_tensor"}
_ASSIGNED = re.compile(r"^\s*(?P<name>[A-Za-z_]\w*)(?:\s*:\s*\"[^\"]*\")?\s*=\s")
_PARAMETER = re.compile(r'(?P<name>\w+): "(?P<kind>[^"]*)"')
_SOURCE_LINES_SHOWN = 12  # the render's cap; RankDivergence.source_lines keeps them all
# Text that differs between processes for reasons other than what they compiled.
_NOISE = (re.compile(r"/[^\s'\"]*torchinductor[^\s'\"]*"), re.compile(r"# AOT ID: \S+"))


@dataclass
class Collective:
    """One collective a graph issues, from its post-grad graph."""

    op: str  # e.g. "all_reduce", "all_gather_into_tensor"
    group: str  # the process group's name as the graph passes it
    shape: str  # the result's dtype and shape, e.g. "f32[8, 16]"
    node: str  # the post-grad node
    source: str = ""  # the user's line that issued it ("file.py:12"), when known
    code: str = ""  # that line's text: what tells two collectives apart across ranks (line numbers may not)

    def __str__(self) -> str:
        issued = f" from `{self.code}`" if self.code else ""
        return f"{self.op}({self.shape}, group {self.group}){issued}"


@dataclass
class GraphDigest:
    """What one rank compiled as one graph."""

    rank: Optional[int]
    position: int  # its place in the rank's compile order
    compile_id: str
    kind: str
    recompile_reason: str
    hashes: dict[str, str]  # layer -> sha256 of its text (paths and ids that differ per process masked)
    collectives: list[Collective] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.compile_id} {self.kind}"


@dataclass
class RankDivergence:
    """The first graph whose content differs between two ranks."""

    position: int
    graph: str  # "compile id kind" on the reference rank
    ranks: tuple[Optional[int], Optional[int]]
    layer: str  # "compiled graphs" when the ranks compiled different sequences of graphs
    diff: str
    source_lines: list[str] = field(default_factory=list)  # "file:line: code" behind the differing nodes
    # The graph inputs whose size or dtype differs ("input_ids: i64[2, 16] on rank 0, i64[2, 12] on
    # rank 1"): uneven batches or sequence lengths, behind every shape in the diff after them.
    input_differences: list[str] = field(default_factory=list)


@dataclass
class CollectiveDivergence:
    """A graph whose collectives differ across ranks (the hang risk)."""

    position: int
    graph: str
    sequences: dict[Optional[int], list[str]]


@dataclass
class RankComparison:
    """``compare_ranks``'s answer: per-rank digests, the first divergence, collective divergences."""

    ranks: dict[Optional[int], list[GraphDigest]]
    first_divergence: Optional[RankDivergence] = None
    collective_divergences: list[CollectiveDivergence] = field(default_factory=list)

    @property
    def equal(self) -> bool:
        return self.first_divergence is None and not self.collective_divergences

    def render(self) -> str:
        """The comparison as text: per rank its graphs, then the verdicts."""
        out = []
        for rank, digests in self.ranks.items():
            out.append(f"rank {rank}: {len(digests)} graph(s)")
            for d in digests:
                hashes = " ".join(f"{name.split()[0]}:{d.hashes[key][:8]}" for key, name in LAYERS.items())
                why = f"  recompiled: {d.recompile_reason.splitlines()[0]}" if d.recompile_reason else ""
                colls = ", ".join(str(c) for c in d.collectives) or "no collectives"
                out.append(f"  [{d.position}] {d.key:<18} {hashes}  {colls}{why}")
        if self.equal:
            out.append(f"\nall {len(self.ranks)} ranks compiled the same graphs with the same collectives")
            return "\n".join(out)
        if self.first_divergence is not None:
            div = self.first_divergence
            out.append(f"\nFIRST DIVERGENCE: graph [{div.position}] {div.graph}: ranks {div.ranks[0]} and "
                       f"{div.ranks[1]} differ first in the {div.layer}")
            if div.input_differences:
                out.append("the graph's inputs differ in size or dtype: the ranks compiled it for other data "
                           "(uneven batches or sequence lengths), and every shape after them follows:")
                out.extend(f"  {line}" for line in div.input_differences)
                out.append("  (each rank recompiles whenever its own sizes change, and the others wait for it at "
                           "the next collective; for one graph on every rank give them the same sizes, pad to one "
                           "length, or mark the dimension dynamic with torch._dynamo.mark_dynamic)")
            if div.source_lines:
                shown = div.source_lines[:_SOURCE_LINES_SHOWN]
                more = len(div.source_lines) - len(shown)
                out.append("source lines behind the differing nodes" + (f" (the first {len(shown)} of "
                                                                        f"{len(div.source_lines)}):" if more else ":"))
                out.extend(f"  {line}" for line in shown)
            out.append(div.diff.rstrip())
        for cd in self.collective_divergences:
            out.append(f"\nCOLLECTIVES DIFFER (hang risk): graph [{cd.position}] {cd.graph}:")
            out.extend(f"  rank {rank}: {', '.join(seq) or 'none'}" for rank, seq in cd.sequences.items())
        return "\n".join(out)

    def __str__(self) -> str:
        return self.render()


def collectives(graph: "GraphCapture") -> list[Collective]:
    """The collectives ``graph`` issues, in order (from its post-grad graph; waits left out)."""
    found = []
    for line in (graph.post_grad_graph_code or "").splitlines():
        match = _COLLECTIVE.match(line)
        if match and match["op"].rstrip("_") not in _NOT_COLLECTIVES:
            groups = re.findall(r"'([^']*)'", match["args"])
            node = graph.nodes.get(match["name"])
            location = node.source if node is not None else None
            op = match["op"].rstrip("_")  # all_reduce_ is all_reduce, reinplaced
            found.append(Collective(op, groups[-1] if groups else "?", match["shape"], match["name"],
                                    str(location) if location else "", location.code if location else ""))
    return found


def _normalized(text: str) -> str:
    for pattern in _NOISE:
        text = pattern.sub("<masked>", text)
    return text


def _digest(graph: "GraphCapture", position: int) -> GraphDigest:
    hashes = {key: hashlib.sha256(_normalized(getattr(graph, key) or "").encode()).hexdigest() for key in LAYERS}
    return GraphDigest(graph.rank, position, graph.compile_id, graph.kind, graph.recompile_reason, hashes,
                       collectives(graph))


def _source_lines(graph: "GraphCapture", changed: Iterable[str], layer: str) -> list[str]:
    """The user's source lines behind the nodes assigned on ``changed`` lines of ``layer``."""
    names = {m["name"] for line in changed if (m := _ASSIGNED.match(line))}
    found = []
    for node in graph.nodes.values():
        hit = node.name in names if layer == "post_grad_graph_code" else bool(names & set(node.dynamo_nodes))
        location = node.source
        if hit and location is not None:
            text = f"{location}: {location.code}".rstrip(": ")
            if text not in found:
                found.append(text)
    return found


def _diff(a: "GraphCapture", b: "GraphCapture", key: str) -> tuple[str, list[str], list[str]]:
    left, right = (getattr(a, key) or "").splitlines(), (getattr(b, key) or "").splitlines()
    lines = list(difflib.unified_diff(left, right, f"rank {a.rank}: {a.label} {LAYERS[key]}",
                                      f"rank {b.rank}: {b.label} {LAYERS[key]}", lineterm="", n=2))
    removed = [line[1:] for line in lines if line.startswith("-") and not line.startswith("---")]
    added = [line[1:] for line in lines if line.startswith("+") and not line.startswith("+++")]
    return "\n".join(lines), removed, added


Source = Union["CaptureSession", Iterable["GraphCapture"], str, Path]


def compare_ranks(source: Source) -> RankComparison:
    """Compare the ranks of a distributed run: a dump folder with ``rank_<r>/`` dumps (what
    ``dump_dir`` and ``run --dump`` write under torch.distributed), or captures from several ranks."""
    from ..capture.load import load

    graphs = list(load(source)) if isinstance(source, (str, Path)) else list(source)
    by_rank: dict[Optional[int], list[GraphCapture]] = {}
    for graph in graphs:
        by_rank.setdefault(graph.rank, []).append(graph)
    if len(by_rank) > 2 or (len(by_rank) == 2 and None not in by_rank):
        by_rank.pop(None, None)  # graphs compiled outside the distributed run take no part
    if len(by_rank) < 2:
        raise ValueError(f"compare_ranks: need captures from at least two ranks, found ranks {sorted(by_rank, key=str)}"
                         " (dump each rank with dump_dir= or `run --dump DIR` under torch.distributed)")
    digests = {rank: [_digest(g, i) for i, g in enumerate(gs)] for rank, gs in sorted(by_rank.items(), key=str)}
    comparison = RankComparison(digests)
    reference_rank, *others = list(digests)
    reference = by_rank[reference_rank]
    for position in range(max(len(gs) for gs in by_rank.values())):
        for rank in others:
            mine, theirs = _at(reference, position), _at(by_rank[rank], position)
            if comparison.first_divergence is None:
                comparison.first_divergence = _first_difference(mine, theirs, position, reference_rank, rank)
        sequences = {rank: [str(c) for c in collectives(gs[position])] for rank, gs in by_rank.items()
                     if position < len(gs)}
        if len({tuple(seq) for seq in sequences.values()}) > 1:
            label = reference[position].label if position < len(reference) else f"#{position}"
            comparison.collective_divergences.append(CollectiveDivergence(position, label, sequences))
    return comparison


def _at(graphs: list["GraphCapture"], position: int) -> Optional["GraphCapture"]:
    return graphs[position] if position < len(graphs) else None


def _first_difference(mine: Optional["GraphCapture"], theirs: Optional["GraphCapture"], position: int,
                      my_rank: Optional[int], their_rank: Optional[int]) -> Optional[RankDivergence]:
    if mine is None or theirs is None or (mine.compile_id, mine.kind) != (theirs.compile_id, theirs.kind):
        describe = [g.label if g is not None else "nothing" for g in (mine, theirs)]
        return RankDivergence(position, describe[0], (my_rank, their_rank), "compiled graphs",
                              f"rank {my_rank} compiled {describe[0]}, rank {their_rank} compiled {describe[1]}")
    for key in LAYERS:
        if _normalized(getattr(mine, key) or "") != _normalized(getattr(theirs, key) or ""):
            diff, removed, added = _diff(mine, theirs, key)
            sources = _source_lines(mine, removed, key) + [s for s in _source_lines(theirs, added, key)
                                                          if s not in _source_lines(mine, removed, key)]
            return RankDivergence(position, f"{mine.compile_id} {mine.kind}", (my_rank, their_rank), LAYERS[key],
                                  diff, sources, _input_differences(mine, theirs, key, my_rank, their_rank))
    return None


def _graph_inputs(code: str) -> dict[str, str]:
    """``{placeholder: "dtype[sizes]"}`` from a printed graph's ``def forward(self, ...)`` line."""
    for line in code.splitlines():
        stripped = line.strip()
        if stripped.startswith("def forward(self"):
            return {m["name"]: m["kind"] for m in _PARAMETER.finditer(stripped)}
    return {}


def _input_name(placeholder: str) -> str:
    """A Dynamo placeholder as the program names it: ``L_input_ids_`` -> ``input_ids``,
    ``L_self_modules_wte_parameters_weight_`` -> ``self.wte.weight``; others as they are."""
    match = re.fullmatch(r"[LG]_(\w+)_", placeholder)
    if match is None:
        return placeholder
    name = match.group(1)
    for part in ("_modules_", "_parameters_", "_buffers_"):
        name = name.replace(part, ".")
    return re.sub(r"^self_", "self.", name)


def _input_differences(mine: "GraphCapture", theirs: "GraphCapture", key: str, my_rank: Optional[int],
                       their_rank: Optional[int]) -> list[str]:
    """The inputs of ``key``'s graph whose size or dtype differs between the two ranks."""
    left, right = _graph_inputs(getattr(mine, key) or ""), _graph_inputs(getattr(theirs, key) or "")
    differences = []
    for name in [*left, *(n for n in right if n not in left)]:
        if left.get(name) != right.get(name):
            differences.append(f"{_input_name(name)}: {left.get(name, 'absent')} on rank {my_rank}, "
                               f"{right.get(name, 'absent')} on rank {their_rank}")
    return differences
