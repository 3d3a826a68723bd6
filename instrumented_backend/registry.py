"""Where finished captures go: the process-wide list and any open ``capture()`` sessions.

A compile job remembers the sessions open on its thread when Dynamo handed it the graph, so a
backward compiled lazily (possibly on an autograd thread) lands in the same sessions as its
forward, and two threads compiling at once never see each other's graphs.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator

from .model import CaptureSession, GraphCapture

__all__ = ["record", "captures", "last_capture", "capture", "clear", "open_sessions", "next_index"]

_lock = threading.Lock()
_all: list[GraphCapture] = []
_counter = 0
_thread_state = threading.local()


class _OpenSession:
    """Bookkeeping for one ``with capture()`` block: the session and whether it is still open."""

    def __init__(self) -> None:
        self.session = CaptureSession()
        self.open = True


def next_index() -> int:
    """A process-wide, increasing index for the next capture."""
    global _counter
    with _lock:
        index = _counter
        _counter += 1
        return index


def open_sessions() -> list[_OpenSession]:
    """The sessions open on the calling thread, outermost first."""
    return list(getattr(_thread_state, "sessions", []))


def record(graph: GraphCapture, sessions: list[_OpenSession]) -> None:
    """Publish a finished capture to the process-wide list and to each still-open session."""
    with _lock:
        _all.append(graph)
        for entry in sessions:
            if entry.open:
                entry.session.graphs.append(graph)


def captures() -> CaptureSession:
    """Every graph compiled with the ``instrumented`` backend in this process, in order."""
    with _lock:
        return CaptureSession(list(_all))


def last_capture() -> GraphCapture:
    """The most recently compiled graph; raises LookupError when none was compiled yet."""
    with _lock:
        if not _all:
            raise LookupError(
                "no graph has been compiled with backend='instrumented' in this process yet "
                "(compilation happens on the first call of the compiled function)"
            )
        return _all[-1]


def clear() -> None:
    """Forget every capture recorded so far (open sessions keep theirs)."""
    with _lock:
        _all.clear()


@contextlib.contextmanager
def capture() -> Iterator[CaptureSession]:
    """Collect the graphs compiled inside the block (on this thread, plus their lazy backwards).

    Example::

        with ib.capture() as session:
            compiled(x).sum().backward()
        session.graphs   # forward and backward records
    """
    entry = _OpenSession()
    stack = getattr(_thread_state, "sessions", None)
    if stack is None:
        stack = _thread_state.sessions = []
    stack.append(entry)
    try:
        yield entry.session
    finally:
        entry.open = False
        stack.remove(entry)
