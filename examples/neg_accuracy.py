"""The tutorial's second bug: a ``neg`` lowering that doubles instead of negating - wrong results,
no error. Found, localised to one kernel line, and traced to the user's source in one run.

Run:  python examples/neg_accuracy.py [--no-bisect]   (part of ``make demo``)
"""

from __future__ import annotations

import sys

import torch

import instrumented_backend as ib


def foo1(x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
    a = torch.neg(x1)
    b = torch.maximum(x2, a)
    y = torch.cat([b], dim=0)
    return y


def main(argv: list[str]) -> int:
    torch.manual_seed(0)
    x1, x2 = torch.randn(1, 8), torch.randn(8390, 8)

    with ib.faults.doubling_neg():  # neg -> 2 * x
        print("== 1. Does the compiled function agree with eager? ==")
        accuracy = ib.check_accuracy(foo1, x1, x2)
        print(accuracy)

        print("\n== 2. Which layer of torch.compile is wrong? ==")
        layers = ib.find_failing_layer(foo1, x1, x2, bisect="--no-bisect" not in argv)
        print(layers)

        print("\n== 3. Which kernel, which line, which source line? ==")
        divergence = ib.find_first_divergence(foo1, x1, x2)
        print(divergence)
    ok = accuracy.passed is False and layers.first_failing == "inductor" and divergence.culprit == "neg"
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
