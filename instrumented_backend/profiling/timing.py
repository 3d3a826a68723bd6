"""Side-by-side wall-clock timing: warm-up, then calls interleaved so drift hits both sides."""

from __future__ import annotations

import contextlib
import time
from typing import Any, Callable, ContextManager, Mapping, Optional

from .records import TimingStats

__all__ = ["time_side_by_side"]


def time_side_by_side(calls: dict[str, Callable[[], Any]], *, warmup: int, iters: int,
                      sync: Optional[Callable[[], None]] = None,
                      around: Optional[Mapping[str, Callable[[], ContextManager[Any]]]] = None,
                      ) -> dict[str, TimingStats]:
    """Time each callable ``iters`` times after ``warmup`` calls, alternating which goes first.
    ``around[label]()`` is a context entered for each of that label's calls, warm-ups included,
    outside its timer: what it costs to enter and leave is not in the samples."""
    sync = sync or (lambda: None)
    around = around or {}

    def context(label: str) -> ContextManager[Any]:
        make = around.get(label)
        return make() if make is not None else contextlib.nullcontext()

    for label, call in calls.items():
        with context(label):
            for _ in range(warmup):
                call()
        sync()
    samples: dict[str, list[float]] = {label: [] for label in calls}
    labels = list(calls)
    for round_index in range(iters):
        order = labels if round_index % 2 == 0 else labels[::-1]
        for label in order:
            with context(label):
                sync()
                started = time.perf_counter()
                calls[label]()
                sync()
                samples[label].append((time.perf_counter() - started) * 1e3)
    return {label: TimingStats(label=label, samples_ms=values) for label, values in samples.items()}
