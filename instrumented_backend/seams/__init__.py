"""Every touch of PyTorch's private compiler internals lives in this package.

One small module per concern, each with a ``check()`` that raises :class:`SeamMoved` with a
precise message when the private API it relies on is no longer where it expects it. The test
suite calls every ``check()`` so that a new torch release breaks loudly, in one place, instead
of silently capturing nothing.
"""

from __future__ import annotations

import functools
import sys
import threading
from typing import Callable

__all__ = ["SeamMoved", "all_checks", "install_once"]


class SeamMoved(RuntimeError):
    """A private PyTorch API this package depends on has moved or changed shape."""


def install_once(patch: Callable[[], None]) -> Callable[[], None]:
    """Make a seam's patching function idempotent and thread-safe.

    The first call runs the seam module's ``check()`` (so a moved seam raises SeamMoved instead
    of patching the wrong thing), then ``patch``; later calls do nothing.
    """
    lock = threading.Lock()
    done = False

    @functools.wraps(patch)
    def install() -> None:
        nonlocal done
        if done:
            return
        with lock:
            if done:
                return
            sys.modules[patch.__module__].check()
            patch()
            done = True

    return install


def all_checks() -> dict[str, Callable[[], None]]:
    """Return ``{seam name: check function}`` for every seam module."""
    from . import (caches, compile_entry, cpp_overrides, cpp_reduction_prefix, fake_mode, inductor_options,
                   ir_format, ir_logging, ir_origins, kernel_profile, kernel_traffic, lazy_graph, line_tags,
                   loop_body_origins, output_code, rewrite_origins, wrapper_buffers)

    modules = (caches, compile_entry, cpp_overrides, cpp_reduction_prefix, fake_mode, inductor_options,
               ir_format, ir_logging, ir_origins, kernel_profile, kernel_traffic, lazy_graph, line_tags,
               loop_body_origins, output_code, rewrite_origins, wrapper_buffers)
    return {module.__name__.rsplit(".", 1)[-1]: module.check for module in modules}
