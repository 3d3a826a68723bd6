"""Seam: which DDPOptimizer bucket a graph is.

Under DDP, Dynamo's DDPOptimizer splits a graph at gradient-bucket boundaries into submodules
``submod_0``, ``submod_1``, ... and its ``SubmodCompiler`` (an FX interpreter) hands each to the
backend while it runs that submodule's node. The wrapper around ``SubmodCompiler.run_node``
remembers, on this thread, the bucket whose node is running; the backend reads it.
"""

from __future__ import annotations

import re
import threading
from typing import Any, Optional

from .. import SeamMoved, install_once

__all__ = ["install", "check", "current_ddp_bucket"]

_state = threading.local()
_SUBMOD = re.compile(r"^submod_(\d+)$")


def current_ddp_bucket() -> Optional[int]:
    """The bucket index of the DDPOptimizer submodule being compiled on this thread, or None."""
    return getattr(_state, "bucket", None)


@install_once
def install() -> None:
    """Wrap SubmodCompiler.run_node, once per process."""
    from torch._dynamo.backends.distributed import SubmodCompiler

    original = SubmodCompiler.run_node

    def run_node(self: Any, n: Any) -> Any:
        match = _SUBMOD.match(str(n.target)) if n.op == "call_module" else None
        if match is None:
            return original(self, n)
        previous, _state.bucket = current_ddp_bucket(), int(match.group(1))
        try:
            return original(self, n)
        finally:
            _state.bucket = previous

    run_node.__wrapped__ = original  # type: ignore[attr-defined]
    SubmodCompiler.run_node = run_node


def check() -> None:
    """Raise SeamMoved unless DDPOptimizer still compiles its submodules from SubmodCompiler.run_node."""
    import inspect

    from torch._dynamo.backends.distributed import SubmodCompiler

    source = inspect.getsource(inspect.unwrap(SubmodCompiler.run_node))
    if "compile_submod" not in source or "call_module" not in source:
        raise SeamMoved("ddp_buckets: SubmodCompiler.run_node no longer compiles call_module submodules")
