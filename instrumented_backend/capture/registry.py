"""Where finished captures go: the process-wide list and any open ``capture()`` sessions.

A compile job remembers the sessions open on its thread when Dynamo handed it the graph, so a
backward compiled lazily (possibly on an autograd thread) lands in the same sessions as its
forward, and two threads compiling at once never see each other's graphs. A graph also lands
in the sessions open on the thread that compiles it: a backward compiled inside a ``capture()``
block belongs to it even when its forward was compiled before the block.

The process-wide list is bounded (:func:`set_capture_limit`, default 100, or the environment
variable ``INSTRUMENTED_BACKEND_MAX_CAPTURES``): a long job that recompiles keeps the newest
captures; an evicted one releases its GraphModules and compiled callable unless an open session
still holds it, and whatever ``dump_dir`` wrote stays on disk.
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Iterator, Optional

from ..graphs import CaptureSession, GraphCapture

__all__ = ["record", "captures", "last_capture", "capture", "clear", "open_sessions", "next_index", "compiles_so_far",
           "set_capture_limit", "capture_limit", "DEFAULT_CAPTURE_LIMIT"]

DEFAULT_CAPTURE_LIMIT = 100
_LIMIT_VARIABLE = "INSTRUMENTED_BACKEND_MAX_CAPTURES"

_lock = threading.Lock()
_all: list[GraphCapture] = []
_counter = 0
_thread_state = threading.local()
_open_everywhere: list["_OpenSession"] = []  # open sessions of every thread (eviction checks them)


def _limit_from_environment() -> Optional[int]:
    raw = os.environ.get(_LIMIT_VARIABLE, "").strip()
    if not raw:
        return DEFAULT_CAPTURE_LIMIT
    if raw.lower() in ("none", "unlimited", "0"):
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{_LIMIT_VARIABLE} must be a positive integer or 'none', got {raw!r}") from None
    if value < 0:
        raise ValueError(f"{_LIMIT_VARIABLE} must be a positive integer or 'none', got {raw!r}")
    return value


_limit: Optional[int] = _limit_from_environment()


def set_capture_limit(limit: Optional[int]) -> None:
    """Keep at most ``limit`` captures in the process-wide list (None: keep every one)."""
    global _limit
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"set_capture_limit: limit must be a positive int or None, got {limit!r}")
    with _lock:
        _limit = limit
        _evict_over_limit()


def capture_limit() -> Optional[int]:
    """How many captures the process-wide list keeps (None: unbounded)."""
    return _limit


def _evict_over_limit() -> None:
    """Drop the oldest captures past the limit (caller holds the lock)."""
    if _limit is None:
        return
    while len(_all) > _limit:
        evicted = _all.pop(0)
        if not any(g is evicted for entry in _open_everywhere for g in entry.session.graphs):
            evicted.release_live_objects()


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


def compiles_so_far() -> int:
    """How many captures this process has started (an increasing count: a call that moves it compiled)."""
    return _counter


def open_sessions() -> list[_OpenSession]:
    """The sessions open on the calling thread, outermost first."""
    return list(getattr(_thread_state, "sessions", []))


def record(graph: GraphCapture, sessions: list[_OpenSession]) -> None:
    """Publish a finished capture to the process-wide list, to each still-open session of its
    job, and to the sessions open on this thread."""
    targets = list(sessions) + [entry for entry in open_sessions() if entry not in sessions]
    with _lock:
        _all.append(graph)
        for entry in targets:
            if entry.open:
                entry.session.graphs.append(graph)
        _evict_over_limit()


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
    with _lock:
        _open_everywhere.append(entry)
    try:
        yield entry.session
    finally:
        entry.open = False
        stack.remove(entry)
        with _lock:
            _open_everywhere.remove(entry)
