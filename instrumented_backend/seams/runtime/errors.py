"""Seam: the exception types Inductor raises (``torch._inductor.exc``).

A compile error under ``backend="instrumented"`` keeps Inductor's types: ``InductorError``
wrapping a ``CppCompileError``, which the diagnosis explains and re-raises.
"""

from __future__ import annotations

from typing import Iterator

from .. import SeamMoved

__all__ = ["inductor_error_type", "cpp_compile_error_type", "exception_chain", "check"]


def inductor_error_type() -> type:
    """``torch._inductor.exc.InductorError``: what Inductor raises around a failed compile."""
    from torch._inductor.exc import InductorError

    return InductorError


def cpp_compile_error_type() -> type:
    """``torch._inductor.exc.CppCompileError``: a C++ kernel that g++ refused."""
    from torch._inductor.exc import CppCompileError

    return CppCompileError


def exception_chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, then the exception it wraps (``InductorError.inner_exception``), else the one it
    was raised from or during, and so on, each once."""
    seen: set[int] = set()
    current: "BaseException | None" = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        inner = getattr(current, "inner_exception", None)
        current = inner if isinstance(inner, BaseException) else (current.__cause__ or current.__context__)


def check() -> None:
    """Raise SeamMoved unless both types are importable and take what we construct them with."""
    import inspect

    try:
        inductor_error, cpp_error = inductor_error_type(), cpp_compile_error_type()
    except ImportError as exc:
        raise SeamMoved(f"errors: {exc}") from exc
    if list(inspect.signature(cpp_error.__init__).parameters)[1:3] != ["cmd", "output"]:
        raise SeamMoved("errors: CppCompileError(cmd, output) changed")
    if "inner_exception" not in inspect.getsource(inductor_error):
        raise SeamMoved("errors: InductorError no longer keeps inner_exception")
