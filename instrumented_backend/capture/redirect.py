"""Make ``torch.compile`` use ``backend="instrumented"`` wherever it would use Inductor.

Shared by the CLI's ``run`` (capture a script unchanged) and ``profile`` (which also wraps each
compiled callable to record its first call), which both run the user's script with
:func:`run_as_main`.
"""

from __future__ import annotations

import functools
import runpy
import sys
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

__all__ = ["redirect_torch_compile", "run_as_main"]


def run_as_main(script: Path, argv: Sequence[str] = ()) -> int:
    """Run ``script`` as ``__main__`` with ``sys.argv = [script, *argv]`` and its folder first on
    ``sys.path``, as ``python script.py`` would; returns its exit status (``sys.exit(...)`` in the
    script ends the script, not the caller). Both are restored afterwards."""
    old_argv, old_path0 = sys.argv, sys.path[0]
    sys.argv = [str(script), *argv]
    sys.path[0] = str(script.resolve().parent)
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv, sys.path[0] = old_argv, old_path0
    return 0

OnCompiled = Callable[[Any, Any, dict[str, Any]], Any]


def redirect_torch_compile(on_compiled: Optional[OnCompiled] = None) -> Callable[[], None]:
    """Patch torch.compile; returns the undo.

    ``on_compiled(target, compiled, compile_kwargs)`` may replace what a redirected compile
    returns. The decorator form (``@torch.compile(mode=...)``) is redirected too.
    """
    import torch

    original = torch.compile

    @functools.wraps(original)
    def compile_instrumented(model: Any = None, **kwargs: Any) -> Any:
        if kwargs.get("backend", "inductor") not in ("inductor", "instrumented"):
            return original(model, **kwargs)
        kwargs["backend"] = "instrumented"
        if model is None:
            return lambda target: compile_instrumented(target, **kwargs)
        compiled = original(model, **kwargs)
        return on_compiled(model, compiled, kwargs) if on_compiled is not None else compiled

    torch.compile = compile_instrumented

    def undo() -> None:
        torch.compile = original

    return undo
