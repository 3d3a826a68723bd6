"""Seam: post-grad nodes only Inductor's lowering can run.

Some post-grad passes replace a matched subgraph with a call of a *lowering* function
(``register_lowering_pattern``): the fusions of ``mkldnn_fusion`` that freezing enables (a
convolution or linear with its ReLU, SiLU or add folded into one oneDNN call), B2B GEMM. Such a
node's target takes Inductor IR, not tensors; ``GraphLowering.call_function`` calls it while it
lowers the graph, and an eager replay of the post-grad graph cannot. Inductor marks these
functions with ``_inductor_lowering_function``; :func:`lowered_only` reads that mark.
``check()`` fails when the pattern matcher no longer sets it or the lowering no longer reads it.
"""

from __future__ import annotations

from typing import Any

from . import SeamMoved, names_used

__all__ = ["lowered_only", "MARK", "check"]

MARK = "_inductor_lowering_function"


def lowered_only(node: Any) -> bool:
    """Whether ``node`` (an FX node) calls a function only Inductor's lowering can run."""
    return getattr(node, "op", None) == "call_function" and bool(getattr(node.target, MARK, False))


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
