"""The tutorial's ``foo1``, compiled and run as an ordinary script would (no diagnosis code in it).

``make demo`` ends by diagnosing it with the tutorial's doubling-neg bug injected:

    python -m instrumented_backend diagnose --fault doubling_neg examples/tutorial_model.py

which finds the failing layer, the diverging kernel line, the source line ``a = torch.neg(x1)``
and a minimal repro, from this unchanged script.
"""

from __future__ import annotations

import torch


def foo1(x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
    a = torch.neg(x1)
    b = torch.maximum(x2, a)
    y = torch.cat([b], dim=0)
    return y


if __name__ == "__main__":
    torch.manual_seed(0)
    x1, x2 = torch.randn(1, 8), torch.randn(8390, 8)
    y = torch.compile(foo1)(x1, x2)
    print(f"foo1 compiled: output {tuple(y.shape)}, sum {y.sum().item():.3f}")
