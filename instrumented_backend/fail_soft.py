"""The one way this package tells a user that instrumentation failed: a warning, once per cause."""

from __future__ import annotations

import threading
import warnings
from typing import Callable, Optional, TypeVar

from .records import CaptureProblem

__all__ = ["InstrumentationWarning", "warn_once", "guarded", "warn_capture_problem"]

T = TypeVar("T")


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


def guarded(problems: list[CaptureProblem], part: str, step: Callable[[], T]) -> Optional[T]:
    """Run one capturing step; on failure append a CaptureProblem naming ``part`` and return None."""
    try:
        return step()
    except Exception as exc:  # noqa: BLE001 - instrumentation must never raise
        problems.append(CaptureProblem(part=part, error=f"{type(exc).__name__}: {exc}"))
        return None


def warn_capture_problem(label: str, problem: CaptureProblem) -> None:
    """The one warning per failed capture part (``label`` names the graph, e.g. ``#3 0/1 backward``)."""
    warn_once(f"part:{problem.part}", f"could not capture {problem.part} of graph {label} "
                                      f"({problem.error}); the compiled code is unaffected")
