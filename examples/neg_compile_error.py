"""The tutorial's first bug: a bad ``neg`` lowering that breaks the C++ compile, diagnosed in one run.

Run:  python examples/neg_compile_error.py   (part of ``make demo``)

The tutorial edits torch's cpp.py so that ``neg`` is lowered to ``-{x}`` (the cast dropped); on
uint8 inputs ``-tmp1`` becomes an ``int`` and ``max_propagate_nan(tmp0, tmp2)`` no longer
compiles. Here the bug is injected without editing torch, and the error explains itself: which
kernel line failed, and the IR op, FX node and source line behind it and behind its operands.
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


def main() -> int:
    torch.manual_seed(0)
    x1 = torch.randint(256, (1, 8), dtype=torch.uint8)
    x2 = torch.randint(256, (8390, 8), dtype=torch.uint8)

    with ib.faults.cast_dropping_neg():  # neg -> "-{x}", scalar C++ kernels (cpp.simdlen=1)
        try:
            torch.compile(foo1, backend="instrumented")(x1, x2)
        except Exception as error:  # InductorError wrapping a KernelCompileError
            inner = getattr(error, "inner_exception", error)
            if not isinstance(inner, ib.KernelCompileError):
                raise
            print("== The compile error, explained ==")
            print(inner.report.render())
            failed = ib.last_capture()
            print(f"\n(the capture of the failed graph is kept: {failed.label}, "
                  f"{len(failed.kernels)} kernel(s), compile_error={failed.compile_error[:40]!r}...)")
            report = ib.report.html(failed, "reports/neg_compile_error.html")
            print(f"\nHTML report (the failing line highlighted, every pane linked): {report.resolve()}")
        else:
            print("expected a C++ compile error", file=sys.stderr)
            return 1

        print("\n== Which layer fails? ==")
        print(ib.find_failing_layer(foo1, x1, x2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
