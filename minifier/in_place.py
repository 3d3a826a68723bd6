"""In-place ops and their out-of-place twins, told apart by their schemas or names (torch only)."""

from __future__ import annotations

from typing import Any, Optional

import torch
import torch.fx

__all__ = ["UPDATES", "updates_first_argument", "out_of_place_target"]

# ``node.meta[UPDATES]``: the graph inputs a node changes in place, through whatever view (set by
# :func:`minifier.updates.expose_updates`, read by the slicer's dependency graph).
UPDATES = "minifier_updates"


def updates_first_argument(node: torch.fx.Node) -> bool:
    """``node`` updates its first argument in place (``add_``, ``_foreach_add_``, ``copy_``)."""
    if node.op not in ("call_function", "call_method") or not node.args:
        return False
    schema = getattr(node.target, "_schema", None)
    if schema is not None:
        alias = schema.arguments[0].alias_info if schema.arguments else None
        return alias is not None and alias.is_write
    name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
    return name.endswith("_") and not name.endswith("__")


def out_of_place_target(node: torch.fx.Node) -> Optional[Any]:
    """The out-of-place target of an in-place ``node``: an ATen overload's (``add_.Tensor`` ->
    ``add.Tensor``), a torch function's (``torch._foreach_add_`` -> ``torch._foreach_add``), a
    tensor method's name (``"add_"`` -> ``"add"``); None when there is none."""
    target = node.target
    if isinstance(target, str):
        return target[:-1] if callable(getattr(torch.Tensor, target[:-1], None)) else None
    packet = getattr(target, "overloadpacket", None)
    if packet is not None:
        overloads = getattr(torch.ops.aten, packet.__name__[:-1], None)
        overload = target._schema.overload_name or "default"
        functional = getattr(overloads, overload, None) if overloads is not None else None
        if functional is None or getattr(functional._schema.arguments[0].alias_info, "is_write", False):
            return None
        return functional
    name = getattr(target, "__name__", "")
    for home in (torch, torch.Tensor):
        if getattr(home, name, None) is target and callable(getattr(home, name[:-1], None)):
            return getattr(home, name[:-1])
    return None
