"""The user's line that called a compiled function.

A graph of nothing the user wrote (``torch.compile(torch.min)``: Dynamo traces ``torch.min``
inside a frame of its own) has no user frame in any node's ``stack_trace``; the line that called
the compiled function is the user's line of its every op. It is read from the Python stack while
Dynamo compiles the graph (:func:`user_call_site`), the compile running inside that call. A
diagnosis replaying a recorded call compiles from its own frames: it names the script's call site
with :func:`replaying_call_from`.
"""

from __future__ import annotations

import contextlib
import contextvars
import linecache
import os
import sys
import sysconfig
from typing import Iterator, Optional

import torch

from ..records import SourceLocation

__all__ = ["user_call_site", "replaying_call_from"]

_NOT_USER = tuple(os.path.realpath(path) + os.sep for path in (
    os.path.dirname(torch.__file__),  # torch, Dynamo and Inductor
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),  # this package
    sysconfig.get_paths()["stdlib"],  # runpy, contextlib, functools
))

_REPLAYED: contextvars.ContextVar[Optional[SourceLocation]] = contextvars.ContextVar("replayed_call_site",
                                                                                      default=None)


def _is_user_file(filename: str) -> bool:
    if filename.startswith("<"):  # <frozen runpy>, <string>
        return False
    return not os.path.realpath(filename).startswith(_NOT_USER)


def user_call_site() -> Optional[SourceLocation]:
    """The innermost frame on the stack outside torch, this package and the standard library
    (the line that called what is being compiled), or the call a diagnosis is replaying; None
    when there is none."""
    replayed = _REPLAYED.get()
    if replayed is not None:
        return replayed
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if _is_user_file(code.co_filename):
            return SourceLocation(file=code.co_filename, line=frame.f_lineno,
                                  code=linecache.getline(code.co_filename, frame.f_lineno).strip(),
                                  function=code.co_name)
        frame = frame.f_back
    return None


@contextlib.contextmanager
def replaying_call_from(site: Optional[SourceLocation]) -> Iterator[None]:
    """Inside the block, graphs compiled are called from ``site`` (a recorded call's line)."""
    token = _REPLAYED.set(site)
    try:
        yield
    finally:
        _REPLAYED.reset(token)
