"""Cheap structural copies of FX GraphModules.

``compile_fx`` and ``compile_fx_inner`` take ownership of the graph they are given and mutate
it (pre-grad and post-grad passes). We keep a copy of the graph structure, sharing parameters
and buffers with the original, both as the record of what Dynamo/AOTAutograd produced and as
the input of a plain-Inductor retry when instrumentation fails. The copies generate their Python
code on first use (most are never run or printed), see :mod:`.seams.lazy_graph`.
"""

from __future__ import annotations

import copy

import torch.fx

from ..deferred import Deferred
from ..fail_soft import warn_once
from ..seams.lazy_graph import lazy_graph_module

__all__ = ["clone_graph_module", "count_nodes", "printed_later"]


def clone_graph_module(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A new GraphModule with a copied graph (node meta shallow-copied), sharing submodules and tensors.

    Its Python code is generated on first use (``forward``, ``.code``, ``print_readable``).
    """
    graph = copy.deepcopy(gm.graph)
    clone = lazy_graph_module(gm, graph, class_name=type(gm).__name__)
    clone.meta = dict(getattr(gm, "meta", {}) or {})
    clone.shape_env = getattr(gm, "shape_env", None)
    return clone


def count_nodes(gm: torch.fx.GraphModule) -> int:
    """Number of nodes in the graph, placeholders and output included (the minifier's count)."""
    return len(gm.graph.nodes)


def printed_later(gm: torch.fx.GraphModule, part: str) -> Deferred[str]:
    """``gm.print_readable(print_output=False)``, printed on first read (see :mod:`.deferred`).

    ``gm`` must no longer change. If printing fails, the text is empty and one warning names
    ``part``; the compiled program is not affected.
    """
    def failed(exc: BaseException) -> None:
        warn_once(f"part:{part}", f"could not print the {part} ({exc!r}); its text is empty")

    return Deferred(lambda: gm.print_readable(print_output=False), fallback="", on_error=failed)
