"""Leaving Inductor's FakeTensorMode for a moment.

Inductor compiles under a FakeTensorMode; when a compile fails and the minifier takes over, it
needs real tensors (inputs to save, eager values to record). ``real_tensors()`` suspends the
fake mode for the duration of the block.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from .. import SeamMoved

__all__ = ["real_tensors", "size_hint", "check"]


@contextlib.contextmanager
def real_tensors() -> Iterator[Any]:
    """Tensors created in this block are real, even inside a compile."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    with unset_fake_temporarily() as mode:
        yield mode


def size_hint(value: Any, *, fallback: int) -> int:
    """The concrete value a symbolic size was traced with (``fallback`` when it has none)."""
    from torch.fx.experimental.symbolic_shapes import hint_int

    return int(hint_int(value, fallback=fallback))


def check() -> None:
    """Raise SeamMoved unless torch._subclasses.fake_tensor.unset_fake_temporarily exists."""
    try:
        from torch._subclasses.fake_tensor import unset_fake_temporarily
    except ImportError as exc:
        raise SeamMoved(f"torch._subclasses.fake_tensor.unset_fake_temporarily is gone ({exc})") from exc
    if not callable(unset_fake_temporarily):
        raise SeamMoved("torch._subclasses.fake_tensor.unset_fake_temporarily is not callable")
