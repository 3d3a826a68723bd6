"""The one way this package tells a user that instrumentation failed: a warning, once per cause."""

from __future__ import annotations

import threading
import warnings

__all__ = ["InstrumentationWarning", "warn_once"]


class InstrumentationWarning(UserWarning):
    """Part of the instrumentation failed; the program ran on with plain Inductor behaviour."""


_warned: set[str] = set()
_lock = threading.Lock()


def warn_once(key: str, message: str) -> bool:
    """Warn with ``message`` the first time ``key`` is seen in this process; True if it warned."""
    with _lock:
        if key in _warned:
            return False
        _warned.add(key)
    warnings.warn(f"instrumented_backend: {message}", InstrumentationWarning, stacklevel=3)
    return True


def reset_warnings() -> None:
    """Forget which warnings were given (for tests)."""
    with _lock:
        _warned.clear()
