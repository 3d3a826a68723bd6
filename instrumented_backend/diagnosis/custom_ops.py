"""Check the custom ops a target calls, as ``torch.compile`` relies on them being registered.

``torch.compile`` never runs a custom op while it traces: it runs the op's fake implementation
(``register_fake``) to learn the shapes, strides and dtypes of its outputs, and trusts the schema's
``mutates_args`` to know which inputs the op changes. A fake that returns the wrong shape makes
the compile fail far from the op (a broadcast error in the next line, raised by Dynamo), and an
undeclared mutation lets functionalization reorder or drop the update (wrong results, no error).
Neither is Inductor's bug, and neither shows in the compiled code.

:func:`check_custom_ops` runs the target once eagerly, records the first call of every op outside
PyTorch's own namespaces, and checks each with :func:`torch.library.opcheck` on those arguments.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from ..capture.as_written import running_eagerly
from .accuracy import clone_inputs

__all__ = ["CustomOpCheck", "check_custom_ops", "render_custom_op_checks", "BUILTIN_NAMESPACES"]

# Namespaces of PyTorch's own ops: the ops checked are everyone else's.
BUILTIN_NAMESPACES = frozenset({
    "aten", "prims", "profiler", "debugprims", "rngprims", "inductor", "higher_order", "_c10d_functional",
    "_c10d_functional_autograd", "c10d", "_dtensor", "quantized", "quantized_decomposed", "_quantized", "mkldnn",
    "onednn", "mkl", "_inductor_test", "fbgemm", "_prims", "_test",
})
# What each opcheck test means for torch.compile, said beside its failure.
_MEANING = {
    "test_schema": "the schema's mutates_args must name every input the op changes (functionalization trusts it)",
    "test_faketensor": "its fake implementation (register_fake) must return what the op returns: torch.compile "
                       "traces with it",
    "test_autograd_registration": "its backward must be registered with torch.library.register_autograd",
}


@dataclass
class CustomOpCheck:
    """One custom op the target called: how often in one call, and what ``opcheck`` said of it."""

    op: str  # "mylib::rowsum" (an overload other than the default: "mylib::rowsum.out")
    calls: int
    failures: dict[str, str] = field(default_factory=dict)  # opcheck test -> its error
    error: str = ""  # the check itself could not run (arguments that cannot be copied, say)

    @property
    def passed(self) -> bool:
        return not self.failures

    def render(self) -> str:
        head = f"{self.op} ({self.calls} call{'s' if self.calls != 1 else ''})"
        if self.error:
            return f"{head}: not checked ({self.error})"
        if self.passed:
            return f"{head}: ok"
        lines = [f"{head}: FAIL"]
        for test, error in self.failures.items():
            lines.append(f"  {test}: {error}")
            if test in _MEANING:
                lines.append(f"    ({_MEANING[test]})")
        return "\n".join(lines)


class _CustomOpCalls(TorchDispatchMode):
    """Records each non-builtin op's call count and the arguments of its first call (copied before it ran)."""

    def __init__(self) -> None:
        super().__init__()
        self.first: dict[Any, tuple[tuple[Any, ...], dict[str, Any]]] = {}
        self.counts: dict[Any, int] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        namespace = getattr(func, "namespace", "aten")
        if namespace not in BUILTIN_NAMESPACES:
            self.counts[func] = self.counts.get(func, 0) + 1
            if func not in self.first:  # copies that require grad where the arguments did
                self.first[func] = pytree.tree_map_only(
                    torch.Tensor, lambda t: t.detach().clone().requires_grad_(t.requires_grad), (args, kwargs))
        return func(*args, **kwargs)


def _first_line(error: Any) -> str:
    cause = getattr(error, "__cause__", None) or error
    reason = getattr(cause, "reason", None) or str(cause)
    text = " ".join(str(reason).split())
    return text[:400] + ("..." if len(text) > 400 else "")


def _described_outputs(op: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """The dtype and shape of each tensor ``op`` returns on copies of ``args``: "float32 (8, 1)"."""
    try:
        copies = pytree.tree_map_only(torch.Tensor, lambda t: t.clone(), (args, kwargs))
        with torch.no_grad():
            outputs = op(*copies[0], **copies[1])
    except Exception as exc:  # noqa: BLE001 - described as what happened
        return f"an error ({type(exc).__name__})"
    tensors = [t for t in pytree.tree_leaves(outputs) if isinstance(t, torch.Tensor)]
    return ", ".join(f"{str(t.dtype).removeprefix('torch.')} {tuple(t.shape)}" for t in tensors) or "no tensor"


def check_custom_ops(fn: Callable[..., Any], inputs: Sequence[Any], *, train: bool = False,
                     seed: int = 0) -> list[CustomOpCheck]:
    """The custom ops ``fn(*inputs)`` calls (run once eagerly on copies of ``inputs``, seeded,
    under ``no_grad`` unless ``train``), each checked with ``torch.library.opcheck`` on the
    arguments of its first call: the schema's mutations, the fake implementation, and with
    ``train`` the autograd registration (where an argument required grad). Failures first; an
    empty list when it calls none."""
    recorder = _CustomOpCalls()
    torch.manual_seed(seed)
    try:
        with running_eagerly(), torch.set_grad_enabled(train), recorder:
            fn(*clone_inputs(inputs))
    except Exception:  # noqa: BLE001 - the ops called before it raised are checked still
        pass
    tests = ["test_schema", "test_faketensor"] + (["test_autograd_registration"] if train else [])
    checks = []
    for op, (args, kwargs) in recorder.first.items():
        check = CustomOpCheck(op.name(), recorder.counts[op])
        try:
            outcome = torch.library.opcheck(op, args, kwargs, test_utils=tests, raise_exception=False)
        except Exception as exc:  # noqa: BLE001 - said, not raised: the diagnosis stands without it
            check.error = f"{type(exc).__name__}: {_first_line(exc)}"
        else:
            check.failures = {test: _first_line(result) for test, result in outcome.items() if result != "SUCCESS"}
            if "test_faketensor" in check.failures:  # which side is which: the op's own outputs
                check.failures["test_faketensor"] += f"; the op itself returns {_described_outputs(op, args, kwargs)}"
        checks.append(check)
    return sorted(checks, key=lambda c: c.passed)


def render_custom_op_checks(checks: Sequence[CustomOpCheck]) -> str:
    """The checks as text, with what a failure means for the diagnosis."""
    lines = [check.render() for check in checks]
    if any(not check.passed for check in checks):
        lines.append("a custom op registered wrongly is not Inductor's bug: torch.compile relies on its schema and "
                     "fake implementation, so fix the registration first")
    return "\n".join(lines)
