"""Make ``torch.compile`` use ``backend="instrumented"`` wherever it would use Inductor.

Shared by the CLI's ``run`` (capture a script unchanged) and ``profile`` (which also wraps each
compiled callable to record its first call), which both run the user's script with
:func:`run_as_main`.
"""

from __future__ import annotations

import functools
import runpy
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import torch

__all__ = ["redirect_torch_compile", "run_as_main", "CompiledCall", "record_compiled_calls"]


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


@dataclass
class CompiledCall:
    """The first call of one function or module the script compiled."""

    target: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    grad_enabled: bool
    name: str = ""
    options: dict[str, Any] = field(default_factory=dict)


def _detached(value: Any) -> Any:
    return value.detach().clone() if isinstance(value, torch.Tensor) else value


def record_compiled_calls(calls: list[CompiledCall]) -> Callable[[], None]:
    """Redirect torch.compile to the instrumented backend and record first calls into ``calls``; returns the undo."""
    def recording(target: Any, options: dict[str, Any], call: Callable[..., Any]) -> Callable[..., Any]:
        seen: list[bool] = []

        @functools.wraps(call)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not seen:
                seen.append(True)
                calls.append(CompiledCall(target, tuple(_detached(a) for a in args),
                                          {k: _detached(v) for k, v in kwargs.items()}, torch.is_grad_enabled(),
                                          getattr(target, "__qualname__", type(target).__name__), options))
            return call(*args, **kwargs)
        return wrapper

    def on_compiled(target: Any, compiled: Any, compile_kwargs: dict[str, Any]) -> Any:
        options = dict(compile_kwargs.get("options") or {})
        if isinstance(compiled, torch.nn.Module) and hasattr(compiled, "_orig_mod"):
            compiled.forward = recording(compiled._orig_mod, options, compiled.forward)
            return compiled
        return recording(target, options, compiled)

    return redirect_torch_compile(on_compiled)
