"""Seam: Inductor's compiler bisector (``torch._inductor.compiler_bisector``).

``find_failing_layer(bisect=True)`` asks the bisector which subsystem (and which lowering or
pass) first makes a compiled function wrong.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from .. import SeamMoved

__all__ = ["bisect", "check"]


def bisect(passes: Callable[[], bool]) -> Optional[Any]:
    """Inductor's ``CompilerBisector.do_bisect(passes)``: the first failing subsystem, or None."""
    from torch._inductor.compiler_bisector import CompilerBisector

    return CompilerBisector.do_bisect(passes)


def check() -> None:
    """Raise SeamMoved unless the bisector is where we call it."""
    import inspect

    try:
        from torch._inductor.compiler_bisector import CompilerBisector
    except ImportError as exc:
        raise SeamMoved(f"bisector: {exc}") from exc
    do_bisect = getattr(CompilerBisector, "do_bisect", None)
    if not callable(do_bisect) or len(inspect.signature(do_bisect).parameters) < 1:
        raise SeamMoved("bisector: CompilerBisector.do_bisect(fn) is gone")
