"""Seam: the FX node Inductor was lowering when its compile raised.

Inductor lowers a post-grad graph node by node in ``GraphLowering.run_node(self, n)``; an error
raised there (a lowering that cannot decide a symbolic comparison, "cannot determine truth value
of Relational", an assertion on a layout) leaves that frame in the traceback, its local ``n`` the
node. :func:`node_being_lowered` reads it off the exception (or the error it wraps: Inductor
re-raises as ``InductorError``), so a compile error that is not a C++ compiler's names the node,
its op and the user's line it came from. ``check()`` fails when ``run_node`` is gone or no
longer takes the node as ``n``.
"""

from __future__ import annotations

import inspect
from typing import Any, Optional

import torch.fx

from .. import SeamMoved
from ..runtime.errors import exception_chain

__all__ = ["node_being_lowered", "check"]


def _run_node_code() -> Any:
    from torch._inductor.graph import GraphLowering

    return GraphLowering.run_node.__code__


def node_being_lowered(exc: BaseException) -> Optional[torch.fx.Node]:
    """The innermost node ``GraphLowering.run_node`` was lowering when ``exc`` (or an exception it
    was raised from or during) was raised; None when it was not raised while lowering."""
    code = _run_node_code()
    for error in exception_chain(exc):
        found: Optional[torch.fx.Node] = None
        trace = error.__traceback__
        while trace is not None:
            if trace.tb_frame.f_code is code:
                node = trace.tb_frame.f_locals.get("n")
                if isinstance(node, torch.fx.Node):
                    found = node  # the innermost: a subgraph's node lowered inside its caller's
            trace = trace.tb_next
        if found is not None:
            return found
    return None


def check() -> None:
    """Raise SeamMoved unless ``GraphLowering.run_node(self, n)`` lowers one node, named ``n``."""
    from torch._inductor.graph import GraphLowering

    run_node = getattr(GraphLowering, "run_node", None)
    if run_node is None or not hasattr(run_node, "__code__"):
        raise SeamMoved("lowering_node: torch._inductor.graph.GraphLowering.run_node is gone")
    parameters = list(inspect.signature(run_node).parameters)
    if parameters[:2] != ["self", "n"]:
        raise SeamMoved(f"lowering_node: GraphLowering.run_node takes {parameters}, not (self, n): the node "
                        "being lowered is no longer its local n")
