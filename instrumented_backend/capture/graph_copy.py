"""Cheap structural copies of FX GraphModules.

``compile_fx`` and ``compile_fx_inner`` take ownership of the graph they are given and mutate
it (pre-grad and post-grad passes). We keep a copy of the graph structure, sharing parameters
and buffers with the original, both as the record of what Dynamo/AOTAutograd produced and as
the input of a plain-Inductor retry when instrumentation fails.

Most copies are never read, so a compile takes only a :class:`GraphSnapshot`: each node's
fields by reference and a shallow copy of its ``meta`` (:mod:`..seams.dynamo.graph_structure`), which is
what ``copy.deepcopy(graph)`` copies, at a tenth of its cost. The GraphModule is built from it on first
use, and generates its Python code on first use after that (see :mod:`.seams.dynamo.lazy_graph`).
"""

from __future__ import annotations

from typing import Any, Optional

import torch.fx

from ..deferred import Deferred
from ..fail_soft import warn_once
from ..seams.dynamo import graph_structure
from ..seams.dynamo.dynamo_sources import carry_sources
from ..seams.dynamo.lazy_graph import lazy_graph_module

__all__ = ["GraphSnapshot", "count_nodes", "printed_later"]

# The nodes whose targets GraphModule(root, graph) copies from the root module.
_ATTRIBUTE_OPS = ("get_attr", "call_module")


class GraphSnapshot:
    """An FX GraphModule as it is now, made into a GraphModule (:meth:`module`) on first use.

    The module's attributes (what ``get_attr``/``call_module`` nodes name) are copied from the
    original now, so later changes to the original module do not reach the copy either.
    """

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        graph = gm.graph
        self._structure: Optional[graph_structure.GraphStructure] = graph_structure.take(graph)
        attributes = torch.fx.Graph(tracer_cls=self._structure.tracer_cls)  # only the nodes naming attributes
        for node in graph.nodes:
            if node.op in _ATTRIBUTE_OPS:
                attributes.create_node(node.op, node.target, (), {}, node.name)
        self._module: Optional[torch.fx.GraphModule] = lazy_graph_module(
            gm, attributes, class_name=type(gm).__name__)
        self._module.meta = dict(getattr(gm, "meta", {}) or {})
        self._module.shape_env = getattr(gm, "shape_env", None)
        carry_sources(gm, self._module)  # the program's names for its attributes (optimizer state)
        self._built = Deferred(self._build, fallback=None, on_error=self._failed)

    def module(self) -> torch.fx.GraphModule:
        """The copy (built on the first call; the same object on every call)."""
        module = self._built.get()
        if module is None:
            raise RuntimeError("the graph copy could not be built (see the warning)")
        return module

    def deferred(self) -> Deferred[Any]:
        """The copy as a :class:`Deferred` (None, with one warning, if it cannot be built)."""
        return self._built

    def _build(self) -> torch.fx.GraphModule:
        graph = graph_structure.rebuild(self._structure)  # type: ignore[arg-type]
        module, self._module, self._structure = self._module, None, None
        module.graph = graph  # type: ignore[union-attr]
        return module  # type: ignore[return-value]

    @staticmethod
    def _failed(exc: BaseException) -> None:
        warn_once("graph_copy", f"could not build the copy of a graph ({exc!r}); it reads as None")


def count_nodes(gm: torch.fx.GraphModule) -> int:
    """Number of nodes in the graph, placeholders and output included (the minifier's count)."""
    return len(gm.graph.nodes)


def printed_later(gm: "torch.fx.GraphModule | Deferred[Any]", part: str) -> Deferred[str]:
    """``gm.print_readable(print_output=False)``, printed on first read (see :mod:`.deferred`).

    ``gm`` (or what the Deferred gives) must no longer change. If printing fails, the text is
    empty and one warning names ``part``; the compiled program is not affected.
    """
    def failed(exc: BaseException) -> None:
        warn_once(f"part:{part}", f"could not print the {part} ({exc!r}); its text is empty")

    def printed() -> str:
        module = gm.get() if isinstance(gm, Deferred) else gm
        return module.print_readable(print_output=False)

    return Deferred(printed, fallback="", on_error=failed)
