"""Seam: ``torch._inductor.loop_body.LightTracer`` and ``InterpreterShim``.

Each node the LightTracer creates while tracing a LoopBody is stamped with the current FX
origin, or, when a body is re-traced from another body, with the stamp of the node being re-run
(``V.interpreter.current_node``), or, when neither is known (a template traces its epilogue's
final store itself), with the stamp of the value it consumes (data flow: the stored value).
While ``InterpreterShim.run_node`` runs a stamped node during codegen, the lines the kernel writes
are tagged with that node's IR op and FX node. A node a codegen pass inserted into the body's
graph directly, past the tracer (the C++ backend's low-precision legalization adds a ``to_dtype``
after each bf16/fp16 load and before each such store), has no stamp: its lines get the stamp of
the value it consumes, as a template's final store does.
"""

from __future__ import annotations

from typing import Any, Callable, ContextManager

from ...recording import recorder as recording
from .. import Replacement, ScopedPatches, SeamMoved, install_once

__all__ = ["install", "tracking", "check", "STAMP"]

STAMP = "instrumented_backend_origin"
_ORIGIN = "instrumented_backend_line_origin"  # the Origin the node's lines get, derived from its stamp


def _interpreter_stamp() -> Any:
    from torch._inductor.virtualized import V

    try:
        node = getattr(V.interpreter, "current_node", None)
    except Exception:  # noqa: BLE001
        return None
    meta = getattr(node, "meta", None)
    return meta.get(STAMP) if meta else None


def _consumed_stamp(node: Any) -> Any:
    """The stamp of the last stamped node ``node`` takes as an argument (a store's value), or None."""
    for arg in reversed(node.args):
        meta = getattr(arg, "meta", None)
        if meta and meta.get(STAMP) is not None:
            return meta[STAMP]
    return None


def _ir_op(node: Any) -> str:
    if node.op == "call_method":
        return f"ops.{node.target}"
    return str(node.target)


@install_once
def install() -> None:
    """Check, once per process, that the hooked methods are there (the hooks themselves are in
    place only while :func:`tracking`)."""


def tracking() -> ContextManager[None]:
    """LightTracer.create_node and InterpreterShim.run_node hooked for the block (an instrumented
    compile); outside every such block, Inductor's own methods run unwrapped."""
    install()
    return _hooks.active()


def _stamping_create_node(base_create_node: Callable[..., Any]) -> Callable[..., Any]:
    state = recording.thread_state()  # read directly: create_node runs for every op a body traces

    def create_node(self: Any, *args: Any, **kwargs: Any) -> Any:
        node = base_create_node(self, *args, **kwargs)
        if state.recorder is not None:
            stack = state.fx_stack  # current_fx_origin(), inlined
            origin = (stack[-1] if stack else None) or _interpreter_stamp() or _consumed_stamp(node)
            if origin is not None:
                node.meta[STAMP] = origin
        return node

    return create_node


def _emitting_run_node(original_run_node: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    state = recording.thread_state()  # read directly: run_node runs for every op of every kernel

    def run_node(self: Any, n: Any) -> Any:
        if state.recorder is None or n.op not in ("call_method", "call_module"):
            return original_run_node(self, n)
        meta = n.meta
        origin = meta.get(_ORIGIN)
        if origin is None:  # a body's node runs once per kernel it is generated into: look it up once
            stamp = meta.get(STAMP)
            if stamp is None:  # inserted by a codegen pass, not traced: attributed by data flow
                stamp = _consumed_stamp(n)
            origin = meta[_ORIGIN] = recording.origin_of(_ir_op(n), stamp)
        previous = state.emission
        state.emission = origin
        try:
            return original_run_node(self, n)
        finally:
            state.emission = previous

    return run_node


def _replacements() -> list[Replacement]:
    from torch._inductor import loop_body

    return [(loop_body.LightTracer, "create_node", _stamping_create_node),
            (loop_body.InterpreterShim, "run_node", _emitting_run_node)]


_hooks = ScopedPatches(_replacements)


def check() -> None:
    """Raise SeamMoved unless LightTracer and InterpreterShim are still there with these methods."""
    from torch._inductor import loop_body

    for cls_name, method in (("LightTracer", "create_node"), ("InterpreterShim", "run_node")):
        cls = getattr(loop_body, cls_name, None)
        if cls is None or not callable(getattr(cls, method, None)):
            raise SeamMoved(f"loop_body_origins: torch._inductor.loop_body.{cls_name}.{method} is gone")
