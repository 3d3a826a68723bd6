"""Every touch of PyTorch's private compiler internals lives in this package.

The modules are grouped by the compiler stage they touch (:data:`STAGES`): ``dynamo/`` (tracing
the user's frames), ``aot/`` (AOTAutograd and the passes before lowering), ``lowering/`` (FX nodes
into Inductor IR), ``codegen/`` (kernels and wrapper code) and ``runtime/`` (running what was
compiled). One small module per concern, each with a ``check()`` that raises :class:`SeamMoved` with a
precise message when the private API it relies on is no longer where it expects it. The test
suite calls every ``check()`` so that a new torch release breaks loudly, in one place, instead
of silently capturing nothing.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import sys
import threading
from types import ModuleType
from typing import Any, Callable, Iterator

__all__ = ["SeamMoved", "SEAMS", "STAGES", "CAPTURE_SEAMS", "all_checks", "install_capture_seams", "install_once",
           "seam_module", "ScopedPatches", "names_used"]


class SeamMoved(RuntimeError):
    """A private PyTorch API this package depends on has moved or changed shape."""


def install_once(patch: Callable[[], None]) -> Callable[[], None]:
    """Make a seam's patching function idempotent and thread-safe.

    The first call runs the seam module's ``check()`` (so a moved seam raises SeamMoved instead
    of patching the wrong thing), then ``patch``; later calls do nothing.
    """
    lock = threading.Lock()
    done = False

    @functools.wraps(patch)
    def install() -> None:
        nonlocal done
        if done:
            return
        with lock:
            if done:
                return
            sys.modules[patch.__module__].check()
            patch()
            done = True

    return install


def names_used(owner: Any) -> frozenset[str]:
    """Every name and string constant in the code of ``owner``: a function, or each function a
    class defines itself (methods, properties, static and class methods), with the functions
    nested in them. The attributes it reads or sets, the globals it calls, the modules and names
    it imports at call time (``from m import a`` uses ``m`` and ``a``) and its string keys.

    What a check of a large class reads instead of its source text: ``inspect.getsource`` of a
    class parses its whole file, 0.1-0.3 s for Inductor's scheduler or C++ kernel, which every
    process paid once per seam before its first instrumented compile."""
    import inspect
    from types import CodeType

    if isinstance(owner, type):
        functions = []
        for value in vars(owner).values():
            if isinstance(value, property):
                functions += [value.fget, value.fset, value.fdel]
            else:
                functions.append(getattr(value, "__func__", value))  # staticmethod, classmethod
    else:
        functions = [owner]
    pending = [code for f in functions if f is not None
               for code in [getattr(inspect.unwrap(f), "__code__", None)] if isinstance(code, CodeType)]
    names: set[str] = set()
    while pending:
        code = pending.pop()
        names.update(code.co_names, code.co_varnames, code.co_freevars)
        for constant in code.co_consts:
            if isinstance(constant, CodeType):
                pending.append(constant)
            elif isinstance(constant, str):
                names.add(constant)
            elif isinstance(constant, tuple):  # an import's names, a tuple of keys
                names.update(item for item in constant if isinstance(item, str))
    return frozenset(names)


# (owner, attribute, wrap): ``wrap(current value)`` is what the attribute holds while in place.
Replacement = tuple[Any, str, Callable[[Any], Any]]
_INHERITED = object()  # an attribute the class did not define itself before it was patched


class ScopedPatches:
    """Attribute replacements that are in place only while some thread is inside :meth:`active`.

    They are applied when the first thread enters and taken out when the last one leaves, so
    Inductor's work outside an instrumented compile (plain ``backend="inductor"`` compiles in the
    same process) never runs through them. Another thread that runs the patched code meanwhile
    must find it delegating to the original (each wrapper checks a thread-local state). Taking
    them out puts back what each attribute held, unless someone replaced ours in between.
    """

    def __init__(self, replacements: Callable[[], list[Replacement]]) -> None:
        self._replacements = replacements  # read when applied, so each wraps what is there then
        self._lock = threading.Lock()
        self._users = 0
        self._applied: list[tuple[Any, str, Any, Any]] = []

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """The replacements in place for the block (nested and concurrent blocks share them)."""
        with self._lock:
            if self._users == 0:
                self._apply()
            self._users += 1
        try:
            yield
        finally:
            with self._lock:
                self._users -= 1
                if self._users == 0:
                    self._remove()

    def _apply(self) -> None:
        """All of them or none: a failure takes out those already in place, then raises."""
        try:
            for owner, name, wrap in self._replacements():
                replacement = wrap(getattr(owner, name))
                self._applied.append((owner, name, owner.__dict__.get(name, _INHERITED), replacement))
                setattr(owner, name, replacement)
        except BaseException:
            self._remove()
            raise

    def _remove(self) -> None:
        while self._applied:
            owner, name, before, replacement = self._applied.pop()
            if owner.__dict__.get(name) is not replacement:
                continue
            if before is _INHERITED:
                delattr(owner, name)
            else:
                setattr(owner, name, before)


# Every seam module, once, in install order: True for the ones an instrumented compile installs
# (``install_capture_seams``), False for the ones only checked (listeners, or installed by the
# feature that uses them). ``all_checks`` checks them all. A test fails if a module in this
# package is missing here.
SEAMS: dict[str, bool] = {
    "ir_logging": True,
    "ir_format": True,
    "ir_origins": True,
    "loop_body_origins": True,
    "line_tags": True,
    "define_kernel": True,  # one wrapper; its listeners: line_tags, kernel_traffic
    "cpp_reduction_prefix": True,
    "cpp_line_rewrites": True,  # tags follow the lines a scalar tail loop rewrites
    "wrapper_buffers": True,
    "rewrite_origins": True,
    "kernel_traffic": False,
    "aot_compile": False,  # routed only inside ib.capturing_aoti()
    "bisector": False,
    "caches": False,
    "compile_entry": False,
    "compile_wrappers": False,  # used by capture.as_written
    "cpp_overrides": False,
    "decompositions": False,  # used by diagnosis.faults
    "dynamo_reasons": False,
    "dynamo_skips": False,
    "dynamo_sources": False,
    "fx_block_code": False,  # used by ir_format
    "ir_text_buffer": False,  # used by ir_format
    "sympy_linear_text": False,  # used by ir_format
    "graph_structure": False,  # used by capture.graph_copy
    "ddp_buckets": False,  # installed when the backend module loads: DDPOptimizer calls it mid-run
    "dynamo_frames": False,  # installed when the backend module loads: Dynamo traces before the backend runs
    "errors": False,
    "fake_mode": False,
    "fake_tensor_log": False,  # used by diagnose
    "inductor_options": False,
    "intermediate_hooks": False,
    "kernel_profile": False,
    "lazy_graph": False,
    "lowering_node": False,  # used by diagnose
    "lowering_patterns": False,  # used by diagnose
    "scalar_constants": False,  # used by diagnose
    "output_code": False,
}
CAPTURE_SEAMS = tuple(name for name, installed in SEAMS.items() if installed)

# The compiler stage each seam touches, in the order a compile reaches them: its subpackage.
STAGES: dict[str, tuple[str, ...]] = {
    "dynamo": ("dynamo_frames", "dynamo_reasons", "dynamo_skips", "dynamo_sources", "compile_wrappers",
            "lazy_graph", "graph_structure", "ddp_buckets"),
    "aot": ("compile_entry", "decompositions", "rewrite_origins", "caches", "fake_mode", "fake_tensor_log",
            "bisector", "inductor_options"),
    "lowering": ("ir_origins", "ir_logging", "ir_format", "ir_text_buffer", "fx_block_code",
            "sympy_linear_text", "lowering_node", "lowering_patterns", "scalar_constants", "loop_body_origins"),
    "codegen": ("line_tags", "define_kernel", "cpp_overrides", "cpp_reduction_prefix", "cpp_line_rewrites",
            "wrapper_buffers", "kernel_traffic", "output_code"),
    "runtime": ("kernel_profile", "intermediate_hooks", "errors", "aot_compile"),
}
_STAGE_OF = {name: stage for stage, names in STAGES.items() for name in names}



def seam_module(name: str) -> ModuleType:
    """The seam module called ``name``."""
    if name not in SEAMS:
        raise KeyError(f"no seam {name!r}; seams: {', '.join(SEAMS)}")
    return importlib.import_module(f"{__name__}.{_STAGE_OF[name]}.{name}")


def all_checks() -> dict[str, Callable[[], None]]:
    """Return ``{seam name: check function}`` for every seam module."""
    return {name: seam_module(name).check for name in SEAMS}


def install_capture_seams() -> None:
    """Install (once per process) every seam an instrumented compile relies on. The seams with
    scoped hooks (line_tags, loop_body_origins, ir_format) are only checked here: their hooks go
    in place per compile (:class:`ScopedPatches`)."""
    for name in CAPTURE_SEAMS:
        seam_module(name).install()
