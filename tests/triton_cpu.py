"""Test-only: make Inductor generate Triton kernels for CPU tensors, and optionally run them.

With ``torch._inductor.config.cpu_backend = "triton"`` Inductor writes Triton kernels for CPU
tensors, but it asks Triton's *active driver* for a target first, and a machine without a GPU has
none ("0 active drivers"). :func:`triton_on_cpu` stands in for that driver (a CUDA sm_90 target,
which only picks the codegen's backend hash and options; nothing is compiled for it) and sets:

* ``TRITON_INTERPRET=1``: Inductor's own interpreter switch. ``AsyncCompile.triton`` then loads
  each kernel without ``triton.compile`` (which would fail: "0 compatible backends for target
  (cpu)"), and ``CachingAutotuner.run`` launches the kernel through Triton's interpreter
  (numpy, on CPU tensors) with the kernel's first config.
* ``compile_threads = 1`` (the default here, 2, starts a pool of compile workers that interpreter
  mode never uses, one more process on a small machine) and ``fx_graph_cache = False`` (a cache
  hit would skip the codegen a test wants to see).

``run_kernels=True`` runs every kernel through the interpreter, so compiled results equal eager.
Triton's interpreter only works when ``TRITON_INTERPRET=1`` was in the environment *before*
``triton`` was first imported (``triton.language``'s own ``@triton.jit`` helpers, ``tl.zeros``
among them, and Inductor's ``triton_helpers``, are decorated at import), and note that
``import torch._inductor.config`` already imports ``triton``. Call :func:`prepare_interpreter`
first thing in a conftest, or run the test in a subprocess with that variable set;
:func:`interpreter_usable` tells whether it was. Triton's interpreter cannot call ``libdevice``
functions (the stubs Inductor calls return None there; the CUDA ones raise "extern_elementwise
not supported in interpreter mode"), which Inductor emits for ``exp``,
``tanh``, ``pow``, ``erf`` and about 45 more, so while running kernels the fixture replaces the
functions of ``triton.language.extra.libdevice`` (stubs that only Triton's compiler resolves; the
module kernels import as ``libdevice``) by ones computing with torch on the interpreter's numpy
arrays (patched on the module, not swapped for another module, because Inductor's ``PyCodeCache``
keeps each loaded kernel module, and its ``libdevice`` name, for the whole process).

``run_kernels=False`` only generates and loads kernels: every launch is a no-op (outputs are left
as allocated, i.e. garbage), which needs no interpreter and no early environment variable.

Everything is restored on exit. Private names touched: ``triton.runtime.driver.driver._active``
(through ``set_active``, restored directly because ``reset_active`` would look for a real driver),
``torch.utils._triton.triton_backend`` / ``triton_hash_with_backend`` (``functools.cache``d, cleared),
the functions of ``triton.language.extra.libdevice`` (run_kernels=True) and
``torch._inductor.runtime.triton_heuristics.CachingAutotuner.run`` (run_kernels=False), and the
interpreter's ``triton.runtime.interpreter.TensorHandle`` / ``InterpretedFunction``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import os
import sys
import types
import warnings
from typing import Any, Callable, Iterator

__all__ = [
    "STAND_IN_TARGET",
    "interpreter_usable",
    "prepare_interpreter",
    "triton_available",
    "triton_on_cpu",
]

#: What the stand-in driver reports: (backend, arch, warp size) of Triton's ``GPUTarget``.
STAND_IN_TARGET: tuple[str, int, int] = ("cuda", 90, 32)


def triton_available(run_kernels: bool = False) -> bool:
    """Whether ``triton`` is installed (and, to run kernels, numpy, which Triton's interpreter needs).

    Does not import triton.
    """
    names = ["triton"] + (["numpy"] if run_kernels else [])
    return all(importlib.util.find_spec(name) is not None for name in names)


def prepare_interpreter() -> None:
    """Set ``TRITON_INTERPRET=1`` for this process, before anything imports triton.

    Call it at the top of a conftest (before ``torch._inductor`` is imported). It is harmless when
    triton is not installed, and it changes nothing for Inductor's C++ CPU backend.
    """
    if "triton" in sys.modules and not interpreter_usable():
        raise RuntimeError("prepare_interpreter() came too late: triton was already imported without "
                           "TRITON_INTERPRET=1")
    os.environ["TRITON_INTERPRET"] = "1"


def interpreter_usable() -> bool:
    """Whether Triton's interpreter can run kernels in this process.

    True when triton was imported with ``TRITON_INTERPRET=1`` (its ``tl.zeros`` is then an
    ``InterpretedFunction``), or is not imported yet and the variable is set now.
    """
    if not triton_available(run_kernels=True):
        return False
    if "triton" not in sys.modules:
        return os.environ.get("TRITON_INTERPRET", "0") == "1"
    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(tl.zeros, InterpretedFunction)


class _StandInDriver:
    """Triton's active driver, as far as Inductor's codegen asks: only ``get_current_target`` is used.

    The rest answer what a CUDA driver would for device 0, for code paths that look (the FX-IR
    wrapper asks for the current device and stream).
    """

    def __init__(self, target: Any) -> None:
        self._target = target

    @classmethod
    def is_active(cls) -> bool:
        return True

    def get_current_target(self) -> Any:
        return self._target

    def get_current_device(self) -> int:
        return 0

    def set_current_device(self, device: int) -> None:
        pass

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def get_active_torch_device(self) -> Any:
        import torch

        return torch.device("cpu")

    def get_benchmarker(self) -> Callable[..., Any]:
        raise NotImplementedError("the test-only stand-in driver cannot benchmark (no autotuning on CPU)")


_PREDICATES = {"isnan": "int1", "isinf": "int1", "signbit": "int1", "isfinited": "int1"}
_INTEGER_RESULTS = {"llrint": "int64", "ilogb": "int32"}


def _interpreter_libdevice(stubs: types.ModuleType) -> dict[str, Callable[..., Any]]:
    """Replacements for each function of ``triton.language.extra.libdevice``, for Triton's interpreter.

    That module's functions are stubs (``...``) that Triton's compiler resolves to the backend's
    ``extern_elementwise`` calls, which the interpreter cannot run. Inside an interpreted kernel a
    value is a ``tl.tensor`` whose ``handle.data`` is a numpy array; each replacement computes
    with the torch function of the same meaning (so results match eager's) and wraps the result
    back. The result takes the widest float type among the tensor arguments (libdevice functions
    are typed per argument type), except for predicates (int1) and integer-valued functions. A
    function torch has no counterpart for raises NotImplementedError when a kernel calls it.
    """
    replacements: dict[str, Callable[..., Any]] = {}
    for name, stub in vars(stubs).items():
        if name.startswith("_") or not inspect.isfunction(stub) or stub.__module__ != stubs.__name__:
            continue
        replacements[name] = _libdevice_replacement(name)
    return replacements


def _libdevice_replacement(name: str) -> Callable[..., Any]:
    result = _PREDICATES.get(name) or _INTEGER_RESULTS.get(name)

    def function(*args: Any) -> Any:
        try:
            compute = _torch_libdevice_function(name)
        except AttributeError as missing:
            raise NotImplementedError(str(missing)) from None
        return _call_on_interpreter_values(compute, result, args)

    function.__name__ = function.__qualname__ = name
    return function


def _torch_libdevice_function(name: str) -> Callable[..., Any]:
    """The torch function computing libdevice's ``name`` (raises AttributeError when none does)."""
    import torch

    special = {
        "rsqrt": torch.rsqrt, "nearbyint": torch.round, "rint": torch.round, "llrint": torch.round,
        "fast_tanhf": torch.tanh, "pow": torch.pow, "atan2": torch.atan2, "fmod": torch.fmod,
        "mul_rn": torch.mul, "div_rn": torch.div, "add_rn": torch.add, "fma": lambda a, b, c: a * b + c,
        "ldexp": lambda x, e: torch.ldexp(x, e).to(x.dtype), "ilogb": lambda x: torch.frexp(x)[1] - 1,
        "cyl_bessel_i0": torch.special.i0, "cyl_bessel_i1": torch.special.i1, "erfcx": torch.special.erfcx,
        "j0": torch.special.bessel_j0, "j1": torch.special.bessel_j1, "y0": torch.special.bessel_y0,
        "y1": torch.special.bessel_y1, "erfinv": torch.special.erfinv, "isnan": torch.isnan,
        "isinf": torch.isinf, "signbit": torch.signbit, "copysign": torch.copysign,
        "nextafter": torch.nextafter, "hypot": torch.hypot, "lgamma": torch.lgamma, "isfinited": torch.isfinite,
        "round": lambda x: torch.sign(x) * torch.floor(x.abs() + 0.5),  # libdevice rounds half away from 0
    }
    if name in special:
        return special[name]
    found = getattr(torch, name, None) or getattr(torch.special, name, None)
    if found is None:
        raise AttributeError(f"the test-only interpreter libdevice has no {name!r}")
    return found


def _call_on_interpreter_values(compute: Callable[..., Any], result_name: str | None, args: tuple[Any, ...]) -> Any:
    """Apply ``compute`` to interpreter values and wrap the result as the interpreter's ``tl.tensor``."""
    import numpy as np
    import torch
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    tensors = [arg for arg in args if isinstance(arg, tl.tensor)]
    floats = [t.dtype for t in tensors if t.dtype.is_floating()]
    dtype = max(floats, key=lambda d: d.primitive_bitwidth) if floats else (tensors[0].dtype if tensors
                                                                           else tl.float32)
    shape = np.broadcast_shapes(*[t.handle.data.shape for t in tensors]) if tensors else (1,)
    is_block = any(t.type.is_block() for t in tensors)

    def as_torch(arg: Any) -> Any:
        if isinstance(arg, tl.tensor):
            return torch.from_numpy(np.ascontiguousarray(arg.handle.data))
        if isinstance(arg, tl.constexpr):
            return arg.value
        return arg

    out = compute(*[as_torch(arg) for arg in args])
    if not isinstance(out, torch.Tensor):
        out = torch.tensor(out)
    out_dtype = getattr(tl, result_name) if result_name else dtype
    np_dtype = {"int1": np.bool_, "int32": np.int32, "int64": np.int64}.get(result_name or "")
    if np_dtype is None:
        np_dtype = {16: np.float16, 32: np.float32, 64: np.float64}[dtype.primitive_bitwidth] \
            if dtype.is_floating() and dtype.name != "bf16" else out.numpy().dtype
    data = np.broadcast_to(out.numpy().astype(np_dtype), shape).copy()
    ty = tl.block_type(out_dtype, list(data.shape)) if is_block else out_dtype
    return tl.tensor(TensorHandle(data, out_dtype.scalar if is_block else out_dtype), ty)


@contextlib.contextmanager
def triton_on_cpu(run_kernels: bool = True) -> Iterator[None]:
    """Inductor makes Triton kernels for CPU tensors inside this block; everything is restored after.

    ``run_kernels=True`` launches them through Triton's interpreter (results equal eager's); it needs
    :func:`interpreter_usable` (see the module docstring) and raises RuntimeError otherwise.
    ``run_kernels=False`` generates and loads the kernels but every launch does nothing.
    Call ``torch._dynamo.reset()`` inside the block when the function was compiled before it.
    """
    if not triton_available(run_kernels):
        raise RuntimeError("triton (and numpy, to run kernels) must be installed for triton_on_cpu()")
    if run_kernels and not interpreter_usable():
        raise RuntimeError("Triton's interpreter needs TRITON_INTERPRET=1 before triton is first imported "
                           "(import torch._inductor imports it): call prepare_interpreter() early, or set it "
                           "in a subprocess's environment")
    import torch._inductor.config as inductor_config
    import torch.utils._triton as torch_triton
    from torch._inductor.runtime import triton_helpers, triton_heuristics
    from triton.backends.compiler import GPUTarget
    from triton.runtime.driver import driver

    saved_env = os.environ.get("TRITON_INTERPRET")
    saved_active = driver._active
    stubs = triton_helpers.libdevice  # triton.language.extra.libdevice, what kernels import
    replacements = _interpreter_libdevice(stubs) if run_kernels else {}
    saved_stubs = {name: getattr(stubs, name) for name in replacements}
    saved_run = triton_heuristics.CachingAutotuner.run
    config_patch = inductor_config.patch(cpu_backend="triton", compile_threads=1, fx_graph_cache=False)

    def no_launch(self: Any, *args: Any, **kwargs: Any) -> None:
        return None

    def clear_caches() -> None:
        torch_triton.triton_backend.cache_clear()
        torch_triton.triton_hash_with_backend.cache_clear()

    try:
        os.environ["TRITON_INTERPRET"] = "1"
        driver.set_active(_StandInDriver(GPUTarget(*STAND_IN_TARGET)))
        clear_caches()
        if run_kernels:
            for name, function in replacements.items():
                setattr(stubs, name, function)
        else:
            triton_heuristics.CachingAutotuner.run = no_launch
        with config_patch, warnings.catch_warnings():
            # Each kernel module calls triton_helpers.set_driver_to_cpu(), which warns that Triton
            # has no CPU backend; Triton 3.9 warns once that TRITON_DEFAULT_FP_FUSION is unset.
            warnings.filterwarnings("ignore", message="Could not find an active CPU backend")
            warnings.filterwarnings("ignore", message="TRITON_DEFAULT_FP_FUSION is unset")
            yield
    finally:
        triton_heuristics.CachingAutotuner.run = saved_run
        for name, stub in saved_stubs.items():
            setattr(stubs, name, stub)
        driver._active = saved_active
        clear_caches()
        if saved_env is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = saved_env
