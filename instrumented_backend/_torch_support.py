"""The torch versions this package supports, checked at import with a clear message."""

from __future__ import annotations

import os
import re
import warnings

__all__ = ["SUPPORTED_TORCH", "UnsupportedTorchError", "check_torch_version"]

# [lowest, highest) major.minor: Inductor internals move between releases.
SUPPORTED_TORCH = ((2, 13), (2, 14))
ALLOW_ENV = "INSTRUMENTED_BACKEND_ALLOW_UNSUPPORTED_TORCH"


class UnsupportedTorchError(ImportError):
    """The installed torch is outside the range this package supports."""


def _major_minor(version: str) -> tuple[int, int]:
    match = re.match(r"(\d+)\.(\d+)", version)
    if match is None:
        raise UnsupportedTorchError(f"instrumented_backend: cannot parse torch version {version!r}")
    return int(match.group(1)), int(match.group(2))


def check_torch_version(version: str) -> None:
    """Raise UnsupportedTorchError unless ``version`` is supported (or the override is set)."""
    low, high = SUPPORTED_TORCH
    found = _major_minor(version)
    if low <= found < high:
        return
    message = (
        f"instrumented_backend supports torch >={low[0]}.{low[1]},<{high[0]}.{high[1]} "
        f"but torch {version} is installed. It patches Inductor internals that change between "
        f"releases; install a supported torch (e.g. pip install torch=={low[0]}.{low[1]}.0), "
        f"or set {ALLOW_ENV}=1 to try anyway."
    )
    if os.environ.get(ALLOW_ENV) == "1":
        warnings.warn(message, RuntimeWarning, stacklevel=2)
        return
    raise UnsupportedTorchError(message)
