"""Seam: the Python scalars Inductor's lowering makes into constants.

A pointwise op given a Python float and float16 or bfloat16 tensors (``torch.remainder(x, 3.14)``):
eager on CPU rounds the float to the tensors' dtype for some ops (add, sub, remainder, fmod,
comparisons: 3.14 becomes 3.140625) and not for others (mul and div compute with it in float32).
Inductor's ``promote_constants`` makes an ``ir.Constant`` of the tensors' dtype that holds the
value as written, and its kernels load that value in float32, unrounded; it rounds only for
comparisons.

:func:`scalars_rounded` is the counterfactual a diagnosis compiles with: while it is active, the
Python floats of the nodes whose targets it is given are rounded to the tensors' dtype before
``promote_constants`` sees them, as eager rounds them. ``check()`` fails when ``promote_constants``
is gone or takes other parameters, when the pointwise lowering no longer calls it by its module
name, or when the graph lowering no longer sets ``current_node`` (the node being lowered).
"""

from __future__ import annotations

import contextlib
import inspect
from typing import Any, Iterator, Optional

from .. import SeamMoved, names_used

__all__ = ["scalars_rounded", "check"]

_PARAMETERS = ["inputs", "override_return_dtype", "type_promotion_kind"]


def _target_name(node: Any) -> str:
    target = getattr(node, "target", None)
    name = getattr(target, "name", None)
    return name() if callable(name) else ""


def _low_precision_dtype(inputs: list[Any]) -> Optional[Any]:
    import torch

    for value in inputs:
        if isinstance(value, (int, float)):
            continue
        get_dtype = getattr(value, "get_dtype", None)
        if get_dtype is not None:
            dtype = get_dtype()
            return dtype if dtype in (torch.float16, torch.bfloat16) else None
    return None


@contextlib.contextmanager
def scalars_rounded(targets: frozenset[str]) -> Iterator[None]:
    """While active, the Python floats that nodes calling one of ``targets`` (op names as
    ``OpOverload.name()`` gives them: ``aten::remainder.Scalar``) pass to a pointwise lowering with
    float16 or bfloat16 tensors are rounded to that dtype first."""
    import torch
    from torch._inductor import lowering
    from torch._inductor.virtualized import V

    original = lowering.promote_constants

    def rounding(inputs: Any, override_return_dtype: Any = None, type_promotion_kind: Any = None) -> Any:
        node = getattr(V.graph, "current_node", None) if V.graph is not None else None
        dtype = _low_precision_dtype(list(inputs)) if _target_name(node) in targets else None
        if dtype is not None:
            inputs = [float(torch.tensor(value, dtype=dtype).item()) if type(value) is float else value
                      for value in inputs]
        return original(inputs, override_return_dtype, type_promotion_kind)

    lowering.promote_constants = rounding
    try:
        yield
    finally:
        lowering.promote_constants = original


def check() -> None:
    """Raise SeamMoved unless ``promote_constants`` takes (inputs, override_return_dtype,
    type_promotion_kind), the pointwise lowering calls it by name, and the graph lowering sets
    ``current_node`` on each node it lowers."""
    from torch._inductor import lowering
    from torch._inductor.graph import GraphLowering

    promote = getattr(lowering, "promote_constants", None)
    if promote is None or list(inspect.signature(promote).parameters) != _PARAMETERS:
        raise SeamMoved(f"scalar_constants: torch._inductor.lowering.promote_constants is gone or no longer "
                        f"takes ({', '.join(_PARAMETERS)})")
    if "promote_constants" not in names_used(lowering.make_pointwise):
        raise SeamMoved("scalar_constants: make_pointwise no longer calls promote_constants")
    if "set_current_node" not in names_used(GraphLowering.run_node) or "current_node" not in names_used(
            GraphLowering.set_current_node):
        raise SeamMoved("scalar_constants: GraphLowering.run_node no longer sets current_node")
