"""Profile the functions a script compiles, with the inputs it first called them with.

``python -m instrumented_backend profile script.py`` runs the script with ``torch.compile``
patched: every call that would use Inductor compiles with ``backend="instrumented"`` (so the
script runs as before) and the first call of each compiled function or module records its
arguments (tensors cloned) and whether grad was enabled. When the script ends, each recorded
target is profiled by :func:`instrumented_backend.profile` on those arguments.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import torch

from ..capture.redirect import run_as_main
from .api import profile
from .report import ProfileReport

__all__ = ["CompiledCall", "record_compiled_calls", "profile_script"]


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
    from ..capture.redirect import redirect_torch_compile

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


def profile_script(script: "str | Path", argv: Sequence[str] = (), *, warmup: int = 10, iters: int = 50,
                   active: int = 5, echo: Optional[Callable[[str], None]] = None) -> list[ProfileReport]:
    """Run ``script`` as ``__main__`` and profile every target it compiled; returns the reports."""
    script = Path(script)
    if not script.is_file():
        raise FileNotFoundError(f"no such script: {script}")
    say = echo or (lambda line: print(line, file=sys.stderr))
    calls: list[CompiledCall] = []
    undo = record_compiled_calls(calls)
    try:
        status = run_as_main(script, argv)
    finally:
        undo()
    if status != 0:
        raise SystemExit(status)  # the script failed: its status is the command's
    if not calls:
        say(f"instrumented_backend profile: {script} called no torch.compile'd function; nothing to profile")
    reports = []
    for index, call in enumerate(calls):
        say(f"instrumented_backend profile: [{index}] {call.name} ({len(call.args)} args, "
            f"{'grad' if call.grad_enabled else 'no_grad'})")
        reports.append(profile(call.target, *call.args, warmup=warmup, iters=iters, active=active,
                               no_grad=not call.grad_enabled, options=call.options or None, **call.kwargs))
    return reports
