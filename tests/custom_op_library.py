"""A library of custom ops, as a package ships one (transformers' grouped-mm ops, a user's kernels).

Tests whose graphs call its ops import it; the minifier's workers and repros must import it too.
"""

from __future__ import annotations

import torch


@torch.library.custom_op("ib_tests::scaled_sin", mutates_args=())
def scaled_sin(x: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.sin(x) * scale


@scaled_sin.register_fake
def _(x: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.empty_like(x)
