"""Whether every thread a zygote started has really ended, so that it can fork safely.

Python's ``Thread.join`` returns before the thread's native exit has run: the thread's
thread-local destructors run after it, and MKL's frees the thread's buffers there under the
spinlocks of its memory manager. A fork in that window copies a held lock into the child, whose
first matrix multiply then spins forever. The window is microseconds on an idle machine and
seconds under load when the ending thread is niced to 19 (a zygote started ahead of need does its
imports on such a thread): the cause of a minifier worker found hung in MKL's allocator
(``mm_account_ptr_by_tid``) with 248 of its memory book's 1024 locks held and none in its zygote.

So a zygote notes the kernel thread id of every thread started through :mod:`threading`
(:func:`track_thread_starts`) and, before forking, waits until the kernel lists none of them any
more (:func:`started_threads_ended`). Threads started by native libraries (OpenBLAS's server, an
OpenMP pool) are not Python's: they are not waited for, as before.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from typing import Any

__all__ = ["platform_can_fork", "kernel_threads", "track_thread_starts", "started_threads_ended"]

_started: set[int] = set()  # kernel thread ids of threads started through ``threading``, not yet seen gone


def _note_start(frame: Any, event: str, arg: Any) -> None:
    """A profile hook each new thread runs once: note its kernel id, then profile nothing more."""
    _started.add(threading.get_native_id())
    sys.setprofile(None)


def track_thread_starts() -> None:
    """From now on note every thread started through :mod:`threading` (once, as it starts)."""
    threading.setprofile(_note_start)


def platform_can_fork() -> bool:
    """Whether workers may be forked here at all. Linux only: on macOS a process that has loaded
    system frameworks (torch does, for MPS) is not safe to fork, and Windows has no fork."""
    return sys.platform.startswith("linux") and hasattr(os, "fork") and hasattr(socket, "send_fds")


def kernel_threads() -> set[int] | None:
    """The kernel ids of this process's threads, or None where there is no /proc to list them."""
    try:
        return {int(name) for name in os.listdir("/proc/self/task")}
    except OSError:  # no /proc: Python's own count is all there is
        return None


def started_threads_ended(within: float) -> bool:
    """Whether only this thread runs Python and every noted thread has left the kernel's list,
    waiting up to ``within`` seconds for those still ending."""
    if threading.active_count() != 1:
        return False
    deadline = time.monotonic() + within
    while True:
        alive = kernel_threads()
        if alive is None:
            return True
        _started.intersection_update(alive)
        _started.discard(threading.get_native_id())
        if not _started:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.002)
