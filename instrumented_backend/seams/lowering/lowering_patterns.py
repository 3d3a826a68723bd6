"""Seam: post-grad nodes only Inductor's lowering can run.

Some post-grad passes replace a matched subgraph with a call of a *lowering* function
(``register_lowering_pattern``): the fusions of ``mkldnn_fusion`` that freezing enables (a
convolution or linear with its ReLU, SiLU or add folded into one oneDNN call), B2B GEMM. Such a
node's target takes Inductor IR, not tensors; ``GraphLowering.call_function`` calls it while it
lowers the graph, and an eager replay of the post-grad graph cannot. Inductor marks these
functions with ``_inductor_lowering_function``; :func:`lowered_only` reads that mark.
The target is the pattern's handler bound to its ``Match``, whose ``nodes`` are the nodes it
replaced (erased from the graph, their metadata kept), the computation first: a oneDNN
convolution, then the ReLU fused into it. :func:`matched_nodes` reads them, so the node is known
by what it computes (``F.conv2d(...)``, ``Conv2d``) as well as by the epilogue whose metadata
Inductor copied onto it. ``check()`` fails when the pattern matcher no longer sets the mark, binds
the match so, or the lowering no longer reads it.
"""

from __future__ import annotations

from typing import Any

from .. import SeamMoved, names_used

__all__ = ["lowered_only", "matched_nodes", "MARK", "check"]

MARK = "_inductor_lowering_function"


def lowered_only(node: Any) -> bool:
    """Whether ``node`` (an FX node) calls a function only Inductor's lowering can run."""
    return getattr(node, "op", None) == "call_function" and bool(getattr(node.target, MARK, False))


def matched_nodes(node: Any) -> list[Any]:
    """The nodes the pattern that made ``node`` (:func:`lowered_only`) matched and replaced, the
    computation first; [] for any other node, or a handler not bound to its match."""
    import functools

    import torch.fx

    target = getattr(node, "target", None)
    if not lowered_only(node) or not isinstance(target, functools.partial) or not target.args:
        return []
    nodes = getattr(target.args[0], "nodes", None)
    return [n for n in nodes if isinstance(n, torch.fx.Node)] if isinstance(nodes, list) else []


def check() -> None:
    """Raise SeamMoved unless the pattern matcher marks lowering replacements with MARK and
    GraphLowering.call_function runs a target so marked."""
    from torch._inductor import pattern_matcher
    from torch._inductor.graph import GraphLowering

    register = getattr(pattern_matcher, "register_lowering_pattern", None)
    if register is None or MARK not in names_used(register):
        raise SeamMoved(f"lowering_patterns: the pattern matcher's register_lowering_pattern no longer marks its "
                        f"handlers with {MARK}")
    if MARK not in names_used(GraphLowering.call_function):
        raise SeamMoved(f"lowering_patterns: GraphLowering.call_function no longer runs targets marked {MARK}")
    entry = getattr(pattern_matcher, "LoweringPatternEntry", None)
    if entry is None or not {"partial", "handler"} <= names_used(getattr(entry, "apply", None) or (lambda: None)):
        raise SeamMoved("lowering_patterns: LoweringPatternEntry.apply no longer binds its handler to the match "
                        "(functools.partial(self.handler, match))")
    if "nodes" not in names_used(pattern_matcher.Match):
        raise SeamMoved("lowering_patterns: a pattern Match no longer lists the nodes it matched (Match.nodes)")
