"""Run a callable under torch.profiler with a schedule and keep what the report needs.

The profiler's FunctionEvents are reduced to :class:`Event` records (id, name, times, parent,
step), and the Chrome trace is loaded back as a dict so the report can annotate it.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional

__all__ = ["Event", "ProfiledRun", "run_profiled", "STEP_PREFIX"]

STEP_PREFIX = "ProfilerStep"


@dataclass
class Event:
    """One profiler event: times in microseconds; ``device_us`` is its own kernels' device time."""

    id: int
    name: str
    start_us: float
    total_us: float
    self_us: float
    device_us: float = 0.0
    parent: Optional[int] = None
    children: list[int] = field(default_factory=list)
    step: int = -1  # index of the active step it ran in (-1: outside any step)
    # Autograd's sequence number: a forward op that records a backward node and that node's
    # backward events share it (-1: none).
    sequence: int = -1


@dataclass
class ProfiledRun:
    """The events of the active steps, their step durations and the Chrome trace."""

    events: dict[int, Event]
    step_us: list[float]
    trace: dict[str, Any]
    device: str

    def roots_in(self, step: int) -> list[Event]:
        """The events directly under step ``step``'s ProfilerStep event, in start order."""
        step_events = [e for e in self.events.values() if e.name.startswith(STEP_PREFIX) and e.step == step]
        if not step_events:
            return []
        return [self.events[i] for i in step_events[0].children]

    def ancestors(self, event: Event) -> list[Event]:
        chain = []
        while event.parent is not None and event.parent in self.events:
            event = self.events[event.parent]
            chain.append(event)
        return chain


def _device_time(event: Any) -> float:
    return float(getattr(event, "device_time_total", 0.0) or 0.0)  # inclusive: a launcher's kernels


# Kineto's logger reads its level from this variable once, when the profiler first starts in a
# process; at its default it still writes two "USDT: ... profiler_start/profiler_stop" lines to
# stderr for every profiled run (its ERROR and STAGE lines are below the default level already).
KINETO_LOG_LEVEL = "KINETO_LOG_LEVEL"
_ABOVE_EVERY_KINETO_LEVEL = "6"  # VERBOSE 0, INFO 1, WARNING 2, ERROR 3, STAGE 4, USDT 5


@contextlib.contextmanager
def _kineto_quiet() -> Iterator[None]:
    """Keep kineto's USDT lines out of the user's stderr, when the user has not set its level.

    The variable is set only while the profiler runs and taken away after: kineto keeps the level
    it read for the process, and child processes the program starts later inherit nothing. A
    process that profiled before keeps the level it started with (kineto reads it once)."""
    if KINETO_LOG_LEVEL in os.environ:
        yield
        return
    os.environ[KINETO_LOG_LEVEL] = _ABOVE_EVERY_KINETO_LEVEL
    try:
        yield
    finally:
        os.environ.pop(KINETO_LOG_LEVEL, None)


def run_profiled(step: Callable[[], Any], *, active: int, wait: int = 1, warmup: int = 1,
                 device: str = "cpu", sync: Optional[Callable[[], None]] = None) -> ProfiledRun:
    """Call ``step`` ``wait + warmup + active`` times under torch.profiler; keep the active steps.

    CPU activity always; CUDA activity too when ``device`` is ``"cuda"``. Inductor's per-kernel
    events come from kernels compiled with ``cpp.enable_kernel_profile`` (C++) or from Triton's
    launcher (GPU).
    """
    from torch.profiler import ProfilerActivity, profile, schedule

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    got: dict[str, Any] = {}

    def ready(prof: Any) -> None:
        got["events"] = list(prof.events())
        handle, path = tempfile.mkstemp(suffix=".json", prefix="ib_trace_")
        os.close(handle)
        try:
            prof.export_chrome_trace(path)
            with open(path) as stream:
                got["trace"] = json.load(stream)
        finally:
            os.unlink(path)

    with _kineto_quiet(), profile(activities=activities, on_trace_ready=ready,
                                  schedule=schedule(wait=wait, warmup=warmup, active=active, repeat=1)) as prof:
        for _ in range(wait + warmup + active):
            step()
            if sync is not None:
                sync()
            prof.step()
    if "events" not in got:
        raise RuntimeError("torch.profiler produced no trace for the active steps")
    return _reduce(got["events"], got.get("trace", {}), device)


def _reduce(function_events: list[Any], trace: dict[str, Any], device: str) -> ProfiledRun:
    events: dict[int, Event] = {}
    for fe in function_events:
        if getattr(fe, "device_type", None) is not None and str(fe.device_type).endswith("CUDA"):
            continue  # device-side records: their time is read through the launching CPU event
        parent = fe.cpu_parent.id if fe.cpu_parent is not None else None
        sequence = getattr(fe, "sequence_nr", -1)
        events[fe.id] = Event(id=fe.id, name=fe.name, start_us=float(fe.time_range.start),
                              total_us=float(fe.cpu_time_total), self_us=float(fe.self_cpu_time_total),
                              device_us=_device_time(fe), parent=parent,
                              sequence=sequence if isinstance(sequence, int) else -1)
    for event in sorted(events.values(), key=lambda e: e.start_us):
        if event.parent in events:
            events[event.parent].children.append(event.id)
    steps = sorted((e for e in events.values() if e.name.startswith(STEP_PREFIX)), key=lambda e: e.start_us)
    for index, step_event in enumerate(steps):
        step_event.step = index
        stack = list(step_event.children)
        while stack:
            child = events[stack.pop()]
            child.step = index
            stack.extend(child.children)
    return ProfiledRun(events=events, step_us=[s.total_us for s in steps], trace=trace, device=device)
