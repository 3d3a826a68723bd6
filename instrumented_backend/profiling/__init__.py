"""Profiling compiled code: kernel time joined to FX nodes and source lines, eager beside compiled.

``ib.profile(model, *inputs)`` returns a :class:`ProfileReport`; see :func:`profile`.
"""

from __future__ import annotations

from .api import KERNEL_PROFILE_OPTION, profile
from .findings import RULES, THRESHOLDS, diagnose, rule
from .records import (
                    CategoryComparison,
                    Comparison,
                    Finding,
                    KernelTiming,
                    LineComparison,
                    OpTiming,
                    SourceLineTiming,
                    TimingStats,
)
from .report import ProfileReport
from .roofline import measure_copy_bandwidth

__all__ = [
    "profile",
    "ProfileReport",
    "KernelTiming",
    "OpTiming",
    "SourceLineTiming",
    "Comparison",
    "CategoryComparison",
    "LineComparison",
    "Finding",
    "TimingStats",
    "measure_copy_bandwidth",
    "diagnose",
    "rule",
    "RULES",
    "THRESHOLDS",
    "KERNEL_PROFILE_OPTION",
]
