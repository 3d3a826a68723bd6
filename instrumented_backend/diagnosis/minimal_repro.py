"""The minimal repro of a diagnosis: the graph to minify, from the culprit, and what the minifier left."""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, Optional

import torch

from .accuracy import error_line as _error_text
from .auto_minify import MINIFY_SECONDS

__all__ = ["MinifyTarget", "MinimalRepro", "minimal_repro", "ops_with_lines"]


@dataclass
class MinifyTarget:
    """The graph to minify: the Dynamo graph of the culprit (or the post-grad graph it is in), the
    arguments of its first call, and the nodes to start from. ``instead``: the post-AOT graph to
    minify when a worker cannot load ``graph`` (a Dynamo graph whose code FX cannot re-trace: a
    ``torch.func`` transform's)."""

    graph: torch.fx.GraphModule
    args: list[Any]
    hints: list[str] = field(default_factory=list)
    instead: Optional["MinifyTarget"] = None


class MinimalRepro(NamedTuple):
    """What the minifier left: the repro's path, its one-line summary, and each op it holds with
    its source line (``aten.slice_scatter at model.py:12: y = x[1:]``)."""

    path: str
    summary: str
    ops: list[str]


def minimal_repro(target: MinifyTarget, check: Any, directory: Path, patches: dict[str, Any], *,
                  train: bool = False, max_seconds: Optional[float] = MINIFY_SECONDS) -> MinimalRepro:
    """The minifier's repro of ``target`` failing ``check``, its summary and the ops it holds; no
    path, and why, when it could not shrink the graph.
    ``train``: a Dynamo graph's candidates compile as training graphs, its inputs that require
    grad requiring it (a failure only a training compile shows), else as inference graphs, as
    the diagnosis compiled them, whatever its parameters say. ``max_seconds``: the search's time
    budget (the summary says when it stopped the search)."""
    from minifier import AccuracyFailure, UnbuildableGraph, minify

    note = ""
    # The diagnosis compiled the whole graph and saw it fail: for a wrong result whose culprit it
    # found, the minifier starts from that node when it fails alone, and never compiles the whole
    # graph again (seconds on a model compiled with dynamic=True). A compile error is pinned to the
    # whole graph's message, which the node alone might not give.
    vouched = isinstance(check, AccuracyFailure) and bool(target.hints)
    try:
        try:
            result = minify(target.graph, list(target.args), check=check, hint_nodes=list(target.hints),
                            repro_dir=str(directory), config=dict(patches) or None, echo=lambda line: None,
                            assume_failing=vouched, requires_grad=None if train else [], max_seconds=max_seconds)
        except UnbuildableGraph as exc:
            instead = target.instead
            if instead is None:
                raise
            reason = exc.reason.split("\n")[0][:200]
            note = f"a worker cannot load the Dynamo graph ({reason}); minified the post-AOT graph instead: "
            result = minify(instead.graph, list(instead.args), check=check, hint_nodes=instead.hints,
                            repro_dir=str(directory), config=dict(patches) or None, echo=lambda line: None,
                            assume_failing=vouched, max_seconds=max_seconds)
    except Exception as exc:  # noqa: BLE001 - the diagnosis stands without a repro
        return MinimalRepro("", f"{note}the minifier could not shrink the graph: {_error_text(exc)}", [])
    return MinimalRepro(str(result.repro_path or ""), note + result.summary(),
                        ops_with_lines(result.graph_module) if result.reproduced else [])


def ops_with_lines(graph: torch.fx.GraphModule) -> list[str]:
    """Each op of ``graph`` (a minimal repro's) with the user's source line it was traced from."""
    from ..provenance.node_map import parse_stack_trace

    ops = []
    for node in graph.graph.nodes:
        if node.op not in ("call_function", "call_method", "call_module") or node.target is operator.getitem:
            continue
        source = parse_stack_trace(node.meta.get("stack_trace"))
        where = f" at {Path(source.file).name}:{source.line}: {source.code}" if source is not None else ""
        ops.append(f"{getattr(node.target, '__name__', node.target)}{where}")
    return ops
