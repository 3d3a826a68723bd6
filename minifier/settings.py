"""What the caller of one :func:`~minifier.search.minify` chose, as one frozen record.

``minify`` takes its choices as keyword arguments (its documented interface) and packs them here
at once; the search's phases read them from this record, not from a dozen parameters each.
:meth:`MinifySettings.checked` refuses a bad value with a message naming it, and fills in the
defaults that depend on the call (the inputs that require grad, the number of workers).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import torch

from .errors import MinifierError

__all__ = ["MinifySettings"]


@dataclass(frozen=True)
class MinifySettings:
    """How one minification compiles its candidates, searches, and reports (see ``minify`` for each)."""

    # how a candidate is compiled and run
    level: str = "auto"
    config: Optional[dict[str, Any]] = None
    dynamic: Optional[dict[int, list[int]]] = None
    dynamic_ints: Optional[Sequence[int]] = None
    requires_grad: Optional[Sequence[int]] = None
    seed: int = 0
    # how the search runs
    hint_nodes: tuple[str, ...] = ()
    strategies: Optional[Sequence[str]] = None
    isolate: bool = True
    timeout: Optional[float] = None
    workers: Optional[int] = None
    max_candidates: int = 500
    max_seconds: Optional[float] = None
    assume_failing: bool = False
    # where it reports
    repro_dir: "str | Path | None" = None
    progress: Optional[bool] = None
    echo: Optional[Callable[[str], None]] = None

    def checked(self, inputs: Sequence[Any], default_workers: Callable[[], int]) -> "MinifySettings":
        """These settings with the call's defaults filled in (``requires_grad``: the inputs that
        require grad while grad is enabled, as ``torch.compile`` would compile them here and now;
        ``workers``: ``default_workers()``); raises :class:`MinifierError` naming a bad value."""
        requires_grad = self.requires_grad
        if requires_grad is None:
            requires_grad = [i for i, value in enumerate(inputs)
                             if isinstance(value, torch.Tensor) and value.requires_grad and torch.is_grad_enabled()]
        if any(not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < len(inputs) for i in requires_grad):
            raise MinifierError(f"minify: requires_grad must name inputs by index, 0 to {len(inputs) - 1}; "
                                f"got {list(requires_grad)!r}")
        workers = default_workers() if self.workers is None else self.workers
        if not isinstance(workers, int) or workers < 1:
            raise MinifierError(f"minify: workers must be a positive int, got {workers!r}")
        max_seconds = self.max_seconds
        if max_seconds is not None and (isinstance(max_seconds, bool) or not isinstance(max_seconds, (int, float))
                                        or not max_seconds > 0):
            raise MinifierError(f"minify: max_seconds must be a positive number of seconds or None, "
                                f"got {max_seconds!r}")
        if not isinstance(self.assume_failing, bool):
            raise MinifierError(f"minify: assume_failing must be True or False, got {self.assume_failing!r}")
        return dataclasses.replace(self, requires_grad=list(requires_grad), workers=workers)
