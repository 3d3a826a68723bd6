"""Seam: the per-op lowerings of the C++ backend, ``CppOverrides`` (scalar) and ``CppVecOverrides``
(vectorized), and of the Triton backend, ``TritonKernelOverrides`` (deriving from ``TritonOverrides``).

Each ``ops.<name>`` of a LoopBody becomes C++ text through a static method of one of these two
classes (``CppOverrides.neg(x) -> "decltype(x)(-x)"``, ``CppVecOverrides.neg(x) -> "x.neg()"``);
the kernel looks the method up on its overrides class at codegen time, so replacing the class
attribute changes what the next compile generates. Used by :mod:`instrumented_backend.diagnosis.faults`.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

from .. import SeamMoved

__all__ = ["SCALAR", "VECTORIZED", "TRITON", "overrides_class", "patchable_ops", "get_override", "set_override",
           "parameter_names", "over_value", "check"]

SCALAR = "scalar"
VECTORIZED = "vectorized"
TRITON = "triton"


def overrides_class(flavour: str) -> type:
    """CppOverrides for ``"scalar"``, CppVecOverrides for ``"vectorized"``, TritonOverrides for ``"triton"``."""
    from torch._inductor.codegen.cpp import CppOverrides, CppVecOverrides

    if flavour == SCALAR:
        return CppOverrides
    if flavour == VECTORIZED:
        return CppVecOverrides
    if flavour == TRITON:
        from torch._inductor.codegen.triton import TritonKernelOverrides

        # Triton kernels look ops up on TritonKernelOverrides, which replaces its fp64-sensitive ops
        # (sin, exp, ...) by routers over TritonOverrides' at its first kernel (once per process):
        # set up now, so that a fault replaces the router a kernel calls and the router never wraps it.
        TritonKernelOverrides._setup_libdevice_routing()
        return TritonKernelOverrides
    raise ValueError(f"unknown override flavour {flavour!r}; expected 'scalar', 'vectorized' or 'triton'")


def patchable_ops() -> list[str]:
    """Every op name with a C++ lowering (defined or inherited) on the scalar overrides class."""
    cls = overrides_class(SCALAR)
    names = []
    for name in dir(cls):
        if name.startswith("_"):
            continue
        raw = inspect.getattr_static(cls, name)
        if isinstance(raw, staticmethod):
            names.append(name)
    return sorted(names)


def get_override(flavour: str, op: str) -> Any:
    """The raw class attribute (a staticmethod) lowering ``op`` for ``flavour``."""
    return inspect.getattr_static(overrides_class(flavour), op)


def set_override(flavour: str, op: str, value: Any) -> None:
    """Install ``value`` (a staticmethod, or the raw attribute saved by get_override) for ``op``.

    The function is renamed ``op``: a vectorized kernel given only scalar operands falls back to
    the scalar lowering found by the function's ``__name__`` (``CppVecOverrides.__new__``'s wrapper)."""
    function = getattr(value, "__func__", None)
    if function is not None and getattr(function, "__name__", op) != op:
        function.__name__ = op
        function.__qualname__ = f"{overrides_class(flavour).__name__}.{op}"
    setattr(overrides_class(flavour), op, value)


def remove_override(flavour: str, op: str) -> None:
    """Delete a class attribute set by set_override (restores inheritance)."""
    delattr(overrides_class(flavour), op)


def defines(flavour: str, op: str) -> bool:
    """True when ``op`` is set on the flavour's class itself (not inherited)."""
    return op in vars(overrides_class(flavour))


def parameter_names(op: str) -> list[str]:
    """Names of the scalar lowering's parameters (``["x"]`` for neg, ``["a", "b"]`` for maximum)."""
    function: Callable[..., Any] = get_override(SCALAR, op).__func__
    return [p.name for p in inspect.signature(function).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


_VALUE = "original_value"  # the local a wrapping block keeps a code block's value in


def over_value(value: Any, expression: Callable[[str], str]) -> Any:
    """What a lowering returns for ``expression(text)`` over ``value``, what another lowering
    returned for the same operands.

    An expression (a string, a CSE variable) is used as its text. A block of code (an
    ``IndentedBuffer`` holding an immediately invoked C++ lambda, which the kernel writes as
    ``auto tmp =``, the block, ``;``: ``sign``, the vectorized ``asinh`` and every special function
    a vectorized kernel computes element by element) cannot be pasted into a one-line expression:
    it is kept whole in a local of a new lambda block, which returns the expression over that local.
    Raises TypeError for anything else (``frexp``'s pair of values)."""
    from torch._inductor.utils import IndentedBuffer

    if isinstance(value, IndentedBuffer):
        block = IndentedBuffer()
        block.writeline("[&]()")
        block.writeline("{")
        with block.indent():
            block.writeline(f"auto {_VALUE} =")
            block.splice(value)
            block.writeline(";")
            block.writeline(f"return {expression(_VALUE)};")
        block.writeline("}")
        block.writeline("()")
        return block
    if isinstance(value, (tuple, list)):
        raise TypeError(f"the lowering returns {len(value)} values, not one expression")
    return expression(f"{value}")


def check() -> None:
    """Raise SeamMoved unless both override classes exist and lower neg through a static method."""
    try:
        from torch._inductor.codegen.cpp import CppOverrides, CppVecOverrides
    except ImportError as exc:  # pragma: no cover
        raise SeamMoved(f"cpp_overrides: CppOverrides/CppVecOverrides are gone: {exc}") from exc
    if not issubclass(CppVecOverrides, CppOverrides):
        raise SeamMoved("cpp_overrides: CppVecOverrides no longer derives from CppOverrides")
    for cls in (CppOverrides, CppVecOverrides):
        if not isinstance(vars(cls).get("neg"), staticmethod):
            raise SeamMoved(f"cpp_overrides: {cls.__name__}.neg is no longer a static method")
    if parameter_names("neg") != ["x"]:
        raise SeamMoved("cpp_overrides: CppOverrides.neg(x) changed its signature")
    from torch._inductor.codegen.triton import TritonKernelOverrides, TritonOverrides
    from torch._inductor.utils import IndentedBuffer

    if not issubclass(TritonKernelOverrides, TritonOverrides) or not isinstance(
            inspect.getattr_static(TritonOverrides, "exp"), staticmethod) or not callable(
            getattr(TritonKernelOverrides, "_setup_libdevice_routing", None)):
        raise SeamMoved("cpp_overrides: TritonKernelOverrides no longer derives from TritonOverrides, which "
                        "lowers exp through a static method, or sets up its libdevice routing "
                        "(_setup_libdevice_routing) no more")
    block = CppOverrides.sign("x")  # a code block, which over_value keeps whole
    if not isinstance(block, IndentedBuffer) or "return" not in block.getvalue():
        raise SeamMoved("cpp_overrides: CppOverrides.sign no longer returns a C++ lambda block (an "
                        f"IndentedBuffer), which over_value wraps as one: {block!r}")
