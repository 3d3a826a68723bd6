"""Seam: ``torch._inductor.ir.Loops`` creation and ``ComputedBuffer.get_store_function``.

At the end of ``Loops.__post_init__`` (every Pointwise/Reduction/Scan IR node) we wrap
``inner_fn`` so that calling it pushes the FX node that was being lowered when the IR node was
created (``V.graph.current_node``). The store function of a ComputedBuffer pushes the origin of
its data, so ``ops.store`` is attributed to the node whose value is stored. Both do nothing
outside an instrumented compile.
"""

from __future__ import annotations

from typing import Any, Callable

from ..provenance import recorder as provenance
from . import SeamMoved, install_once

__all__ = ["install", "check"]

ORIGIN_ATTR = "_instrumented_backend_fx_origin"


def _lowering_node_name() -> Any:
    from torch._inductor.virtualized import V

    try:
        node = V.graph.current_node
    except Exception:  # noqa: BLE001 - no graph being lowered
        return None
    return provenance.fx_label(node)


def _wrap_inner_fn(inner_fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    state = provenance.thread_state()  # read directly: an IR node's inner_fn runs at every trace of it

    def inner_fn_with_origin(*args: Any, **kwargs: Any) -> Any:
        if state.recorder is None:
            return inner_fn(*args, **kwargs)
        stack = state.fx_stack  # push_fx_origin / pop_fx_origin, inlined
        if stack is None:
            stack = state.fx_stack = []
        stack.append(name)
        try:
            return inner_fn(*args, **kwargs)
        finally:
            stack.pop()

    inner_fn_with_origin.__wrapped__ = inner_fn  # type: ignore[attr-defined]
    return inner_fn_with_origin


@install_once
def install() -> None:
    """Patch Loops.__post_init__ and ComputedBuffer.get_store_function once per process."""
    from torch._inductor import ir

    original_post_init = ir.Loops.__post_init__
    original_store = ir.ComputedBuffer.get_store_function

    def post_init(self: Any) -> None:
        original_post_init(self)
        if provenance.active_recorder() is None:
            return
        try:
            name = _lowering_node_name()
            if name is not None:
                object.__setattr__(self, ORIGIN_ATTR, name)
                object.__setattr__(self, "inner_fn", _wrap_inner_fn(self.inner_fn, name))
        except Exception:  # noqa: BLE001 - provenance is best effort, never a compile error
            pass

    def get_store_function(self: Any) -> Callable[..., None]:
        store = original_store(self)
        name = getattr(self.data, ORIGIN_ATTR, None)
        if name is None or provenance.active_recorder() is None:
            return store

        def store_with_origin(*args: Any, **kwargs: Any) -> None:
            provenance.push_fx_origin(name)
            try:
                return store(*args, **kwargs)
            finally:
                provenance.pop_fx_origin()

        return store_with_origin

    ir.Loops.__post_init__ = post_init
    ir.ComputedBuffer.get_store_function = get_store_function


def check() -> None:
    """Raise SeamMoved unless Loops still has an inner_fn field and ComputedBuffer a store function."""
    import dataclasses

    from torch._inductor import ir

    if "inner_fn" not in {f.name for f in dataclasses.fields(ir.Loops)}:
        raise SeamMoved("ir_origins: ir.Loops has no inner_fn field any more")
    if not callable(getattr(ir.Loops, "__post_init__", None)):
        raise SeamMoved("ir_origins: ir.Loops.__post_init__ is gone")
    if not callable(getattr(ir.ComputedBuffer, "get_store_function", None)):
        raise SeamMoved("ir_origins: ir.ComputedBuffer.get_store_function is gone")
    from torch._inductor.virtualized import V

    if not hasattr(type(V), "graph"):
        raise SeamMoved("ir_origins: V.graph is gone")
