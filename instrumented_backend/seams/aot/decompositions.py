"""Seam: the ATen decompositions Inductor applies before it lowers a graph.

``torch._inductor.decomposition.select_decomp_table()`` is the table ``compile_fx`` hands
AOTAutograd: an op in it never reaches a lowering as itself (``aten.softplus`` arrives as
``exp``, ``log1p``, ``gt`` and ``where``). :func:`ops_decomposed_into` traces one op through that
table on small float tensors, which ``diagnose --fault`` uses to say which of the ops it can
patch a decomposed op becomes.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

import torch

from .. import SeamMoved

__all__ = ["decomposition_table", "ops_decomposed_into", "check"]


def decomposition_table() -> Mapping[Any, Callable[..., Any]]:
    """``{OpOverload: decomposition}`` as Inductor selects it for the current config."""
    from torch._inductor.decomposition import select_decomp_table

    return select_decomp_table()


def _sample_arguments(overload: Any) -> Optional[list[Any]]:
    """Positional arguments for ``overload`` up to its first one with a default: small float
    tensors, ``1`` / ``0.5`` / ``False`` for plain values, ``[3]`` for a shape (a tensor's last
    dimension); None when the schema asks for something else."""
    arguments: list[Any] = []
    for argument in overload._schema.arguments:
        if argument.has_default_value():
            break
        if argument.kwarg_only:
            return None
        kind = str(argument.type)
        if kind == "Tensor":
            arguments.append(torch.rand(2, 3) + 0.25)
        elif kind in ("int", "SymInt"):
            arguments.append(1)
        elif kind in ("float", "number"):
            arguments.append(0.5)
        elif kind == "bool":
            arguments.append(False)
        elif kind in ("List[int]", "List[SymInt]"):
            arguments.append([3])
        elif kind == "Optional[Tensor]":
            arguments.append(None)
        elif kind == "List[Tensor]":
            arguments.append([torch.rand(2, 3)])
        else:
            return None
    return arguments


def ops_decomposed_into(name: str) -> list[str]:
    """The ATen ops (by name, overload dropped, in graph order) Inductor's decomposition of
    ``aten.<name>`` computes, traced on small float tensors; ``[]`` when Inductor does not
    decompose it or no overload could be traced."""
    from torch.fx.experimental.proxy_tensor import make_fx

    packet = getattr(torch.ops.aten, name, None)
    if not isinstance(packet, torch._ops.OpOverloadPacket):
        return []
    table = decomposition_table()
    for overload_name in packet.overloads():
        overload = getattr(packet, overload_name)
        arguments = None if overload not in table or "out" in overload_name else _sample_arguments(overload)
        if arguments is None:
            continue
        try:
            graph = make_fx(lambda *args: overload(*args), decomposition_table=table)(*arguments).graph
        except Exception:  # noqa: BLE001 - an overload our sample cannot call: try the next
            continue
        names = [node.target._schema.name.split("::")[-1] for node in graph.nodes
                 if node.op == "call_function" and hasattr(node.target, "_schema")]
        return list(dict.fromkeys(names))
    return []


def check() -> None:
    """Raise SeamMoved unless Inductor's decomposition table is a mapping keyed by OpOverload."""
    try:
        table = decomposition_table()
    except (ImportError, AttributeError) as exc:
        raise SeamMoved(f"decompositions: torch._inductor.decomposition.select_decomp_table is gone: {exc}") from exc
    if torch.ops.aten.softplus.default not in table:
        raise SeamMoved("decompositions: Inductor's decomposition table no longer holds aten.softplus.default "
                        "(keyed by something other than OpOverload?)")
