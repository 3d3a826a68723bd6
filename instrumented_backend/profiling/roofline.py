"""Memory roofline: a kernel's least bytes moved over its time, against measured copy bandwidth.

The bandwidth is what ``dst.copy_(src)`` reaches on this machine for buffers far larger than the
last-level cache (bytes read + bytes written per second, median of repeated copies), the same
measure a memory-bound kernel is held to.
"""

from __future__ import annotations

import statistics
import time
from typing import Iterable, Optional

import torch

from .records import KernelTiming

__all__ = ["measure_copy_bandwidth", "apply_roofline"]

_measured: dict[tuple[str, int], float] = {}


def measure_copy_bandwidth(device: str = "cpu", *, megabytes: int = 128, repeats: int = 9) -> float:
    """GB/s of a large tensor copy on ``device`` (read + write bytes over time); cached per process."""
    key = (device, megabytes)
    if key in _measured:
        return _measured[key]
    numel = megabytes * (1 << 20) // 4
    src = torch.ones(numel, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    dst.copy_(src)  # first touch: page faults are not bandwidth
    sync()
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        dst.copy_(src)
        sync()
        seconds.append(time.perf_counter() - started)
    gbps = 2 * src.numel() * src.element_size() / statistics.median(seconds) / 1e9
    _measured[key] = gbps
    return gbps


def apply_roofline(kernels: Iterable[KernelTiming], bandwidth_gbps: Optional[float]) -> None:
    """Fill ``achieved_gbps`` and ``bandwidth_share`` for kernels whose bytes are known."""
    for row in kernels:
        if not row.bytes or not row.calls or row.per_call_us <= 0:
            continue
        row.achieved_gbps = row.bytes / (row.per_call_us * 1e-6) / 1e9
        if bandwidth_gbps:
            row.bandwidth_share = row.achieved_gbps / bandwidth_gbps
