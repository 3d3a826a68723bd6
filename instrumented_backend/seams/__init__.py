"""Every touch of PyTorch's private compiler internals lives in this package.

One small module per concern, each with a ``check()`` that raises :class:`SeamMoved` with a
precise message when the private API it relies on is no longer where it expects it. The test
suite calls every ``check()`` so that a new torch release breaks loudly, in one place, instead
of silently capturing nothing.
"""

from __future__ import annotations

from typing import Callable

__all__ = ["SeamMoved", "all_checks"]


class SeamMoved(RuntimeError):
    """A private PyTorch API this package depends on has moved or changed shape."""


def all_checks() -> dict[str, Callable[[], None]]:
    """Return ``{seam name: check function}`` for every seam module."""
    from . import (caches, compile_entry, cpp_reduction_prefix, inductor_options, ir_logging, ir_origins,
                   line_marks, loop_body_origins, output_code)

    modules = (caches, compile_entry, cpp_reduction_prefix, inductor_options, ir_logging, ir_origins,
               line_marks, loop_body_origins, output_code)
    return {module.__name__.rsplit(".", 1)[-1]: module.check for module in modules}
