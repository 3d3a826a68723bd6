"""A small block and bugs only some builds have, shared by the C++-wrapper and AOTInductor tests:
one only builds with a C++ wrapper have (``cpp_wrapper=True`` and AOTInductor's), one only
graphs with symbolic sizes have (a package exported with a dynamic batch, a ``dynamic=True`` build)."""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator

import torch


class GeluBlock(torch.nn.Module):
    """``x + tanh(fc2(gelu_tanh(fc1(x))))``: two tanh, one of them the user's own line."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(16, 32), torch.nn.Linear(32, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.tanh(self.fc2(torch.nn.functional.gelu(self.fc1(x), approximate="tanh")))


@contextlib.contextmanager
def tanh_wrong_when(applies: Callable[[], bool]) -> Iterator[None]:
    """tanh's scalar and vector lowerings scaled by 1.05 in the code generated while ``applies()``
    is true, and only there (Inductor's caches off: the patch is not in their keys)."""
    from torch._inductor.codegen.cpp import CppOverrides, CppVecOverrides

    from instrumented_backend.seams.aot.caches import compile_caches_disabled

    originals = {kind: kind.tanh for kind in (CppOverrides, CppVecOverrides)}

    def scaled(original):
        def tanh(x):
            text = original(x)
            return f"decltype({text})(1.05) * {text}" if applies() else text
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


def tanh_wrong_in_cpp_wrapper_builds() -> contextlib.AbstractContextManager[None]:
    """tanh wrong when ``cpp_wrapper`` is on, and only then."""
    import torch._inductor.config as inductor_config

    return tanh_wrong_when(lambda: inductor_config.cpp_wrapper)


def _kernels_take_symbolic_sizes() -> bool:
    """Whether the graph Inductor is generating code for has an input with a symbolic size."""
    import sympy
    from torch._inductor.virtualized import V

    for value in V.graph.graph_inputs.values():
        sizes = [value] if isinstance(value, sympy.Expr) else value.get_size() if hasattr(value, "get_size") else []
        if any(getattr(size, "free_symbols", None) for size in sizes):
            return True
    return False


def tanh_wrong_with_symbolic_sizes() -> contextlib.AbstractContextManager[None]:
    """tanh wrong in graphs whose inputs have symbolic sizes, and only there."""
    return tanh_wrong_when(_kernels_take_symbolic_sizes)
