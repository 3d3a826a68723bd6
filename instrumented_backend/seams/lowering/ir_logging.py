"""Seam: Inductor's IR logging functions, ``torch._inductor.debug.log_ir_pre_fusion`` / ``..._post_fusion``.

The scheduler imports both at call time (``from torch._inductor.debug import ...`` inside
``Scheduler._init``), so replacing the module attributes reaches every compile. We wrap them
once per process; the wrapper always delegates to the original and only hands the nodes to a
listener active on the current thread (which formats them with :mod:`.ir_format`).
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from ...recording.thread_state import thread_local
from .. import SeamMoved, install_once, names_used

__all__ = ["install", "set_listener", "check"]

# listener(stage, nodes) with stage in {"pre_fusion", "post_fusion"}
IrListener = Callable[[str, Any], None]

_state = thread_local("IrListenerState", listener=None)
_originals: dict[str, Callable[..., Any]] = {}


def set_listener(listener: Optional[IrListener]) -> Optional[IrListener]:
    """Set this thread's IR listener; return the previous one."""
    previous = _state.listener
    _state.listener = listener
    return previous


def _make_wrapper(stage: str, original: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(nodes: Any) -> Any:
        listener = _state.listener
        if listener is not None:
            listener(stage, nodes)  # listeners are fail-soft by contract
        return original(nodes)

    wrapper.__wrapped__ = original  # type: ignore[attr-defined]
    wrapper._instrumented_backend_stage = stage  # type: ignore[attr-defined]
    return wrapper


@install_once
def install() -> None:
    """Wrap the two IR logging functions once per process (idempotent, thread-safe)."""
    import torch._inductor.debug as debug

    for stage, attr in (("pre_fusion", "log_ir_pre_fusion"), ("post_fusion", "log_ir_post_fusion")):
        original = getattr(debug, attr)
        _originals[attr] = original
        setattr(debug, attr, _make_wrapper(stage, original))


def check() -> None:
    """Raise SeamMoved unless the scheduler still imports the IR loggers at call time."""
    try:
        import torch._inductor.debug as debug
        from torch._inductor.scheduler import Scheduler
    except ImportError as exc:  # pragma: no cover - only on a moved torch
        raise SeamMoved(f"ir_logging: cannot import Inductor's debug/scheduler modules: {exc}") from exc
    for attr in ("log_ir_pre_fusion", "log_ir_post_fusion"):
        if not callable(getattr(debug, attr, None)):
            raise SeamMoved(f"ir_logging: torch._inductor.debug.{attr} is gone")
    if not {"torch._inductor.debug", "log_ir_post_fusion", "log_ir_pre_fusion"} <= names_used(Scheduler):
        raise SeamMoved(
            "ir_logging: the Scheduler no longer imports log_ir_pre_fusion/log_ir_post_fusion at "
            "call time, so patching torch._inductor.debug would capture no IR"
        )
