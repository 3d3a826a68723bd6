"""Seam: ``torch.fx._lazy_graph_module._LazyGraphModule``, a GraphModule that generates its code on first use.

A plain ``GraphModule(root, graph)`` generates and ``exec``-compiles the graph's Python code as it
is built: for the copies we keep of each Dynamo and AOT graph, that was a fifth of an
instrumented compile's overhead, for code most captures never run. The lazy class (what Inductor
uses for its own pattern graphs) does that on the first ``forward``, ``.code`` or ``str()``.
"""

from __future__ import annotations

from typing import Any

import torch.fx

from .. import SeamMoved

__all__ = ["lazy_graph_module", "check"]


def lazy_graph_module(root: Any, graph: torch.fx.Graph, class_name: str) -> torch.fx.GraphModule:
    """A GraphModule over ``graph`` (attributes from ``root``) whose code is generated on first use."""
    try:
        from torch.fx._lazy_graph_module import _LazyGraphModule
    except ImportError:  # pragma: no cover - only on a moved torch; check() reports it
        return torch.fx.GraphModule(root, graph, class_name=class_name)
    return _LazyGraphModule(root, graph, class_name=class_name)


def check() -> None:
    """Raise SeamMoved unless the lazy GraphModule class is there and defers code generation."""
    try:
        from torch.fx._lazy_graph_module import _LazyGraphModule
    except ImportError as exc:
        raise SeamMoved(f"lazy_graph: torch.fx._lazy_graph_module._LazyGraphModule is gone: {exc}") from exc
    if not issubclass(_LazyGraphModule, torch.fx.GraphModule):
        raise SeamMoved("lazy_graph: _LazyGraphModule is no longer a GraphModule")
    for method in ("real_recompile", "_needs_recompile"):
        if not callable(getattr(_LazyGraphModule, method, None)):
            raise SeamMoved(f"lazy_graph: _LazyGraphModule.{method} is gone")
