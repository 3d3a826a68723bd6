"""Seam: where each attribute of a Dynamo graph comes from in the user's program.

Dynamo names a graph attribute after its source flattened into an identifier
(``self___param_groups_0__params___0``) and keeps the sources on the GraphModule it hands the
backend: ``gm._param_name_to_source``, attribute name -> ``Source``, whose ``name`` is the access
path (``L['self'].param_groups[0]['params'][0]``). :func:`attribute_sources` reads those paths
as the user would write them (``self.param_groups[0]['params'][0]``), for reports that name the
optimizer state or buffers a graph updates.
"""

from __future__ import annotations

import re
from typing import Any

from .. import SeamMoved

__all__ = ["attribute_sources", "carry_sources", "readable_source", "module_name", "check"]

_FRAME_NAME = re.compile(r"\b[LG]\['([A-Za-z_][A-Za-z0-9_]*)'\]")
_KEY_BY_INDEX = re.compile(r"list\(dict\.keys\(([^()]*)\)\)\[(\d+)\]")  # a dict's n-th key, innermost first


def readable_source(name: str) -> str:
    """A Dynamo source name as written in the program: ``L['self'].x`` -> ``self.x``, and a
    dict's key by position (``list(dict.keys(self.state))[0]``, an optimizer's state keyed by its
    parameters) -> ``<key 0>``."""
    text = _FRAME_NAME.sub(r"\1", name)
    while True:
        shorter = _KEY_BY_INDEX.sub(r"<key \2>", text)
        if shorter == text:
            return text
        text = shorter


# The compiled frame's local, and the object a method is bound to when the frame is a wrapper
# calling it (``L['fn'].__self__``: ``@torch.no_grad()`` on a method compiled bound).
_FRAME_LOCAL_ROOT = re.compile(r"^L\['[A-Za-z_][A-Za-z0-9_]*'\]\.?(__self__(\.|$))?")
_CHILD_BY_KEY = re.compile(r"\._modules\['([^']+)'\]|\[(\d+)\]")  # ``._modules['0']``, ``[0]``: ``.0``


def module_name(path: str) -> str:
    """A submodule's path in ``nn_module_stack`` (``L['self'].layers.1``, under whichever name the
    compiled frame had its root module: ``self``, an argument, a wrapper's bound method's
    ``L['fn'].__self__``) as ``named_modules()`` names it
    (``layers.1``); a module reached through a global keeps the global's name (``model.layers.1``)."""
    name = readable_source(_FRAME_LOCAL_ROOT.sub("", path))
    return _CHILD_BY_KEY.sub(lambda match: "." + (match.group(1) or match.group(2)), name).lstrip(".")


def attribute_sources(graph: Any) -> dict[str, str]:
    """Graph attribute name -> the program's access path to it; {} when Dynamo kept none (a
    graph that did not come from Dynamo, or a torch that no longer keeps them)."""
    sources = getattr(graph, "_param_name_to_source", None)
    if not isinstance(sources, dict):
        return {}
    found = {}
    for attribute, source in sources.items():
        name = getattr(source, "name", None)
        name = name() if callable(name) else name
        if isinstance(attribute, str) and isinstance(name, str):
            found[attribute] = readable_source(name)
    return found


def carry_sources(original: Any, copy: Any) -> None:
    """Give ``copy`` (a copy of a Dynamo graph) the original's attribute sources (the same
    table, not copied: Dynamo never changes it after handing the graph over)."""
    sources = getattr(original, "_param_name_to_source", None)
    if isinstance(sources, dict):
        copy._param_name_to_source = sources


def check() -> None:
    """Raise SeamMoved unless Dynamo still hands the backend its graph's attribute sources."""
    import inspect

    import torch._dynamo.output_graph as output_graph
    from torch._guards import Source

    if "gm._param_name_to_source = " not in inspect.getsource(output_graph):
        raise SeamMoved("dynamo_sources: OutputGraph no longer sets gm._param_name_to_source")
    if not hasattr(Source, "name"):
        raise SeamMoved("dynamo_sources: torch._guards.Source has no name")
