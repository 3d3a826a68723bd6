"""A small block and a bug only builds with a C++ wrapper have (``cpp_wrapper=True`` and
AOTInductor's), shared by the C++-wrapper and AOTInductor tests."""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch


class GeluBlock(torch.nn.Module):
    """``x + tanh(fc2(gelu_tanh(fc1(x))))``: two tanh, one of them the user's own line."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(16, 32), torch.nn.Linear(32, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.tanh(self.fc2(torch.nn.functional.gelu(self.fc1(x), approximate="tanh")))


@contextlib.contextmanager
def tanh_wrong_in_cpp_wrapper_builds() -> Iterator[None]:
    """tanh's scalar and vector lowerings scaled by 1.05 when ``cpp_wrapper`` is on, and only then
    (Inductor's caches off: the patch is not in their keys)."""
    import torch._inductor.config as inductor_config
    from torch._inductor.codegen.cpp import CppOverrides, CppVecOverrides

    from instrumented_backend.seams.caches import compile_caches_disabled

    originals = {kind: kind.tanh for kind in (CppOverrides, CppVecOverrides)}

    def scaled(original):
        def tanh(x):
            text = original(x)
            return f"decltype({text})(1.05) * {text}" if inductor_config.cpp_wrapper else text
        return staticmethod(tanh)

    torch.compiler.reset()
    with compile_caches_disabled():
        for kind, original in originals.items():
            kind.tanh = scaled(original)
        try:
            yield
        finally:
            for kind, original in originals.items():
                kind.tanh = staticmethod(original)
            torch.compiler.reset()
