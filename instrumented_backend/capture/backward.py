"""The backward half of a profiled training step: gradients of a call's outputs, computed and dropped.

``ib.profile(..., backward=True)`` times and profiles forward *and* backward, the way a training
step runs them, without touching the user's ``.grad``: after each call, :class:`BackwardStep`
asks autograd for the gradients of the outputs that require grad (seeded with ones, as
``out.sum().backward()`` would) with respect to the leaf tensors they came from (the parameters
and the inputs that require grad), and drops them. Autograd runs the compiled backward graph
(or eager's backward ops) exactly as ``backward()`` would; only the final accumulation into
``.grad`` is left out.
"""

from __future__ import annotations

from typing import Any, Optional

import torch
import torch.utils._pytree as pytree

__all__ = ["BackwardStep", "grad_roots"]


def grad_roots(outputs: Any) -> list[torch.Tensor]:
    """The tensors in ``outputs`` (nested lists, tuples, dicts, dataclass-like model outputs) that require grad."""
    if hasattr(outputs, "to_tuple") and callable(outputs.to_tuple):  # a Hugging Face ModelOutput
        outputs = outputs.to_tuple()
    return [t for t in pytree.tree_leaves(outputs) if isinstance(t, torch.Tensor) and t.requires_grad]


def _leaf_tensors(roots: list[torch.Tensor]) -> list[torch.Tensor]:
    """The leaf tensors requiring grad that ``roots`` were computed from (their AccumulateGrad nodes)."""
    leaves = {id(r): r for r in roots if r.grad_fn is None}  # a root that is a leaf itself
    stack = [r.grad_fn for r in roots if r.grad_fn is not None]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        variable = getattr(node, "variable", None)
        if isinstance(variable, torch.Tensor):
            leaves[id(variable)] = variable
        stack.extend(next_node for next_node, _ in node.next_functions)
    return list(leaves.values())


class BackwardStep:
    """Run the backward of one call's outputs; the leaves are found on the first call and reused."""

    def __init__(self, label: str) -> None:
        self.label = label
        self._leaves: Optional[list[torch.Tensor]] = None

    def __call__(self, outputs: Any) -> None:
        roots = grad_roots(outputs)
        if not roots:
            raise ValueError(f"ib.profile: backward=True, but no output of the {self.label} call requires grad "
                             "(are the parameters frozen, or the call made under no_grad?)")
        if self._leaves is None:
            self._leaves = _leaf_tensors(roots)
        torch.autograd.grad(roots, self._leaves, grad_outputs=[torch.ones_like(r) for r in roots],
                            allow_unused=True)
