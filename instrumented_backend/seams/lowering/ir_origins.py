"""Seam: ``torch._inductor.ir.Loops`` creation and ``ComputedBuffer.get_store_function``.

At the end of ``Loops.__post_init__`` (every Pointwise/Reduction/Scan IR node) we wrap
``inner_fn`` so that calling it pushes the FX node that was being lowered when the IR node was
created (``V.graph.current_node``). The store function of a ComputedBuffer pushes the origin of
its data, so ``ops.store`` is attributed to the node whose value is stored. Both do nothing
outside an instrumented compile.

A lowering that needs an input in a given layout (a fallback kernel's stride constraint, e.g.
``native_dropout`` under ``fallback_random``) copies it: ``ExternKernel.copy_input`` makes a
Pointwise over the input's own loader, realized as a buffer Inductor names after no FX node (it
means to pass the input's ``origin_node`` on, but reads it through a box that answers None). The
copy holds the input's value, so :func:`value_node` names the input's node for it, and its store is
attributed to that node, not to the lowering that asked for the copy.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable, Optional

from ...recording import recorder as recording
from .. import SeamMoved, install_once

__all__ = ["install", "check", "value_node"]

ORIGIN_ATTR = "_instrumented_backend_fx_origin"
_OWNER_ATTR = "_instrumented_backend_loops"  # on a wrapped inner_fn: a weak reference to its Loops


def _lowering_node_name() -> Any:
    from torch._inductor.virtualized import V

    try:
        node = V.graph.current_node
    except Exception:  # noqa: BLE001 - no graph being lowered
        return None
    return recording.fx_label(node)


def _wrap_inner_fn(inner_fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    state = recording.thread_state()  # read directly: an IR node's inner_fn runs at every trace of it

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


def _copied_loops(loops: Any) -> Any:
    """The Pointwise whose value ``loops`` copies, or None: ``loops`` is a Pointwise whose loader is
    that Pointwise's own (``Pointwise.make_loader`` hands out its ``inner_fn``), over the same
    ranges and dtype (what ``ExternKernel.copy_input`` makes)."""
    from torch._inductor import ir

    inner = getattr(loops, "inner_fn", None)
    owner = getattr(getattr(inner, "__wrapped__", None), _OWNER_ATTR, None)
    source = owner() if owner is not None else None
    if (isinstance(loops, ir.Pointwise) and isinstance(source, ir.Pointwise) and source is not loops
            and list(source.ranges) == list(loops.ranges) and source.dtype == loops.dtype):
        return source
    return None


def value_node(buffer: Any) -> Optional[Any]:
    """The FX node whose value ``buffer`` (an IR buffer) holds, or None: its ``origin_node``; else
    its data's (a node's result realized later, by another node's lowering); else, for a copy of a
    node's result (see the module docstring), that node."""
    own = getattr(buffer, "origin_node", None)
    if own is not None:
        return own
    data = getattr(buffer, "data", None)
    node = getattr(data, "origin_node", None)
    if node is not None:
        return node
    source = _copied_loops(data)
    return getattr(source, "origin_node", None) if source is not None else None


@install_once
def install() -> None:
    """Patch Loops.__post_init__ and ComputedBuffer.get_store_function once per process."""
    from torch._inductor import ir

    original_post_init = ir.Loops.__post_init__
    original_store = ir.ComputedBuffer.get_store_function

    def post_init(self: Any) -> None:
        original_post_init(self)
        if recording.active_recorder() is None:
            return
        try:
            name = _lowering_node_name()
            if name is not None:
                object.__setattr__(self, ORIGIN_ATTR, name)
                wrapped = _wrap_inner_fn(self.inner_fn, name)
                setattr(wrapped, _OWNER_ATTR, weakref.ref(self))
                object.__setattr__(self, "inner_fn", wrapped)
        except Exception:  # noqa: BLE001 - provenance is best effort, never a compile error
            pass

    def get_store_function(self: Any) -> Callable[..., None]:
        store = original_store(self)
        name = getattr(self.data, ORIGIN_ATTR, None)
        if name is None or recording.active_recorder() is None:
            return store
        if getattr(self, "origin_node", None) is None and getattr(self.data, "origin_node", None) is None:
            copied = value_node(self)  # a copy stores the value it copies
            if copied is not None:
                name = recording.fx_label(copied)

        def store_with_origin(*args: Any, **kwargs: Any) -> None:
            recording.push_fx_origin(name)
            try:
                return store(*args, **kwargs)
            finally:
                recording.pop_fx_origin()

        return store_with_origin

    ir.Loops.__post_init__ = post_init
    ir.ComputedBuffer.get_store_function = get_store_function


def check() -> None:
    """Raise SeamMoved unless Loops still has an inner_fn field and ComputedBuffer a store function,
    and a copy of an input is still a Pointwise over the input's own ``inner_fn``."""
    import dataclasses
    import inspect

    from torch._inductor import ir

    if "inner_fn" not in {f.name for f in dataclasses.fields(ir.Loops)}:
        raise SeamMoved("ir_origins: ir.Loops has no inner_fn field any more")
    if not callable(getattr(ir.Loops, "__post_init__", None)):
        raise SeamMoved("ir_origins: ir.Loops.__post_init__ is gone")
    if not callable(getattr(ir.ComputedBuffer, "get_store_function", None)):
        raise SeamMoved("ir_origins: ir.ComputedBuffer.get_store_function is gone")
    if "return self.inner_fn" not in inspect.getsource(ir.Pointwise.make_loader):
        raise SeamMoved("ir_origins: ir.Pointwise.make_loader no longer hands out its inner_fn")
    copy_source = inspect.getsource(ir.ExternKernel.copy_input)
    if "Pointwise.create" not in copy_source or "x.make_loader()" not in copy_source:
        raise SeamMoved("ir_origins: ir.ExternKernel.copy_input no longer makes a Pointwise over x.make_loader()")
    from torch._inductor.virtualized import V

    if not hasattr(type(V), "graph"):
        raise SeamMoved("ir_origins: V.graph is gone")
