"""Seam: Inductor's intermediate-value hooks (``torch._inductor.hooks``).

The first-divergence search re-runs a graph's output code with a ``run_intermediate_hooks(name,
buffer)`` call after each buffer-writing statement, and collects the values with Inductor's
``intermediate_hook`` context manager.
"""

from __future__ import annotations

from typing import Any, Callable, ContextManager

from .. import SeamMoved

__all__ = ["IMPORT_LINE", "intermediate_hook", "check"]

# The line a hooked copy of the output code starts with.
IMPORT_LINE = "from torch._inductor.hooks import run_intermediate_hooks"


def intermediate_hook(callback: Callable[[str, Any], None]) -> ContextManager[None]:
    """Call ``callback(name, value)`` for every ``run_intermediate_hooks`` call inside the block."""
    from torch._inductor.hooks import intermediate_hook as inductor_hook

    return inductor_hook(callback)


def check() -> None:
    """Raise SeamMoved unless the hooks run a registered callback with (name, value)."""
    try:
        from torch._inductor.hooks import run_intermediate_hooks  # noqa: F401
    except ImportError as exc:
        raise SeamMoved(f"intermediate_hooks: {exc}") from exc
    seen: list[tuple[str, Any]] = []
    with intermediate_hook(lambda name, value: seen.append((name, value))):
        run_intermediate_hooks("probe", 1)
    if seen != [("probe", 1)]:
        raise SeamMoved("intermediate_hooks: run_intermediate_hooks no longer calls the registered hook")
