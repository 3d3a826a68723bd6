"""Fault injection: reproduce Inductor codegen bugs without editing torch.

``bad_lowering(op, template)`` replaces the C++ backend's lowering of one op, in both the scalar
(``CppOverrides``) and the vectorized (``CppVecOverrides``) code generators, for as long as the
context (or the decorated function) runs::

    with ib.faults.bad_lowering("neg", "decltype({x})(2 * {x})", vectorized="decltype({x})({x} + {x})"):
        torch.compile(fn, backend="instrumented")(x)     # neg now doubles

Templates are ``str.format`` patterns over the lowering's parameter names (``{x}`` for neg,
``{a}``/``{b}`` for maximum) or positions (``{0}``), and ``{original}``: what the lowering it
replaces writes for the same operands, so any op can be made wrong without writing its C++
(:func:`scaled`: ``{original} * decltype({original})(1.01)``). Two presets are the tutorial's
bugs: :func:`cast_dropping_neg` (a C++ compile error on uint8) and :func:`doubling_neg` (wrong
results). :func:`from_spec` reads a fault named on the command line (``diagnose --fault``).

While a fault is active:

* Inductor's FX-graph and AOTAutograd caches are off (their keys cannot see the patch), so a
  faulty build is never served from, or written into, the cache;
* Dynamo is reset on entry and exit, so no function compiled before (or under) the fault keeps
  running stale code;
* ``INSTRUMENTED_BACKEND_FAULTS`` holds the active faults as JSON, and importing this package in a
  child process (the minifier's workers, a repro script) activates them there too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import inspect
import json
import math
import os
import string
import threading
from typing import Any, Iterator, Optional, Sequence

import minifier

from ..seams.aot import decompositions
from ..seams.aot.caches import compile_caches_disabled
from ..seams.aot.inductor_options import inductor_config_patch
from ..seams.codegen import cpp_overrides

__all__ = ["Fault", "bad_lowering", "SAME", "ORIGINAL", "cast_dropping_neg", "doubling_neg", "scaled", "from_spec",
           "PRESETS", "active_faults", "patchable_ops", "UnknownOpError", "ENV_VAR", "install_from_environment",
           "carried_context", "lowering_uses", "reapplied"]

ENV_VAR = "INSTRUMENTED_BACKEND_FAULTS"
ORIGINAL = "original"  # the template field for what the replaced lowering writes


class UnknownOpError(ValueError):
    """The op named in a fault has no C++ lowering to replace."""


@dataclasses.dataclass(frozen=True)
class Fault:
    """One replaced lowering: op name, scalar and vectorized templates, Inductor config it needs."""

    op: str
    scalar: str
    vectorized: Optional[str] = None  # None: scalar kernels only (the fault sets cpp.simdlen=1)
    triton: Optional[str] = None  # the template for Triton kernels; None leaves their lowering alone
    config: dict[str, Any] = dataclasses.field(default_factory=dict)
    name: str = ""

    @property
    def label(self) -> str:
        return self.name or f"{self.op} -> {self.scalar!r}"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Fault":
        return cls(**data)


def patchable_ops() -> list[str]:
    """Every op name :func:`bad_lowering` accepts."""
    return cpp_overrides.patchable_ops()


def _validate(fault: Fault) -> list[str]:
    cpp_overrides.check()
    known = patchable_ops()
    if fault.op not in known:
        close = difflib.get_close_matches(fault.op, known, n=3)
        hint = _decomposed_hint(fault.op, known) or (
            f"; did you mean {', '.join(repr(c) for c in close)}?" if close else "")
        raise UnknownOpError(
            f"no C++ lowering named {fault.op!r}{hint} ({len(known)} ops can be patched: "
            "instrumented_backend.faults.patchable_ops())")
    names = cpp_overrides.parameter_names(fault.op)
    for label, template in (("template", fault.scalar), ("vectorized template", fault.vectorized),
                            ("triton template", fault.triton)):
        if template is None:
            continue
        try:
            template.format(*names, **{ORIGINAL: ORIGINAL, **{n: n for n in names}})
        except (KeyError, IndexError) as exc:
            raise ValueError(
                f"{label} {template!r} for {fault.op!r} uses {exc} but the lowering's parameters are "
                f"{names} (write {{{names[0]}}} or {{0}}, or {{{ORIGINAL}}} for what the op's own lowering "
                "writes)") from exc
    return names


# ATen ops a decomposition leaves, by the name of the C++ lowering that computes them.
_LOWERED_AS = {"div": "truediv", "clamp_min": "maximum", "clamp_max": "minimum", "rsub": "sub"}
# Lowerings too common to point at: a fault in one of them reaches far more than the op asked for.
_PLUMBING = frozenset({"add", "sub", "mul", "truediv", "where", "gt", "lt", "ge", "le", "eq", "ne", "neg",
                       "maximum", "minimum", "isnan", "isinf", "signbit", "to_dtype"})


def _decomposed_hint(op: str, known: Sequence[str]) -> str:
    """For an ATen op Inductor decomposes before lowering (``softplus``, ``gelu``, ``silu``): the
    patchable ops it becomes, and the one to name instead ("" when it is not decomposed)."""
    name = op.removeprefix("aten.").removeprefix("torch.").split(".")[0]
    try:
        decomposed = decompositions.ops_decomposed_into(name)
    except Exception:  # noqa: BLE001 - a hint only: the error is raised either way
        return ""
    decomposed = [aten for aten in decomposed if aten != name]  # aten.var stays aten.var: a reduction
    if not decomposed:
        return ""
    lowered = [aten for aten in dict.fromkeys(_LOWERED_AS.get(aten, aten) for aten in decomposed)
               if aten in known]
    head = f": Inductor decomposes aten.{name} before it lowers anything, into {', '.join(decomposed)}"
    if not lowered:
        return f"{head}, none of which is an op the C++ kernels compute elementwise"
    distinctive = [aten for aten in lowered if aten not in _PLUMBING]
    suggestion = (distinctive or lowered)[-1]
    return f"{head}; name one of those it computes in C++ instead ({', '.join(lowered)}): {suggestion!r}, say"


_uses: dict[tuple[Any, ...], int] = {}


def _key(fault: Fault) -> tuple[Any, ...]:
    return fault.op, fault.scalar, fault.vectorized, fault.name


def lowering_uses(fault: Fault) -> int:
    """How many C++ expressions ``fault``'s lowering has written in this process (0: no kernel
    compiled while it was in effect computed its op in generated code)."""
    return _uses.get(_key(fault), 0)


def _uses_original(template: str) -> bool:
    return any(field == ORIGINAL for _, field, _, _ in string.Formatter().parse(template))


def _lowering(template: str, names: list[str], fault: Fault, replaced: Any) -> staticmethod:
    """The lowering that writes ``template``; ``replaced`` (the staticmethod it replaces) fills
    ``{original}``, called on the same operands, so whatever it emits is emitted as before."""
    key = _key(fault)
    original = replaced.__func__ if _uses_original(template) else None

    def lowering(*args: Any) -> Any:
        _uses[key] = _uses.get(key, 0) + 1
        fields = dict(zip(names, args))
        if original is None:
            return template.format(*args, **fields)
        try:  # what the op's own lowering wrote: an expression, or a block of code (sign's)
            return cpp_overrides.over_value(original(*args),
                                            lambda text: template.format(*args, **{**fields, ORIGINAL: text}))
        except TypeError as exc:
            raise ValueError(f"fault {fault.label}: {{{ORIGINAL}}} cannot stand for what {fault.op}'s "
                             f"lowering writes: {exc}") from exc

    # The lowering it replaces keeps its signature: the seam check and a fault stacked on top of
    # this one (the same op or another) read the parameter names from whatever is installed.
    lowering.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for name in names])
    return staticmethod(lowering)


_lock = threading.RLock()
_active: list[Fault] = []
_entered: list[Any] = []  # entered contexts: a fault stays on until its __exit__, not its object's collection


def active_faults() -> list[Fault]:
    """The faults in effect in this process, innermost last."""
    with _lock:
        return list(_active)


@contextlib.contextmanager
def _patched_overrides(fault: Fault, names: list[str]) -> Iterator[None]:
    saved = []
    flavours = [(cpp_overrides.SCALAR, fault.scalar), (cpp_overrides.VECTORIZED, fault.vectorized or fault.scalar)]
    if fault.triton is not None:
        flavours.append((cpp_overrides.TRITON, fault.triton))
    for flavour, template in flavours:
        own = cpp_overrides.defines(flavour, fault.op)
        replaced = cpp_overrides.get_override(flavour, fault.op)  # its own, or the one it inherits
        saved.append((flavour, own, replaced if own else None))
        cpp_overrides.set_override(flavour, fault.op, _lowering(template, names, fault, replaced))
    try:
        yield
    finally:
        for flavour, own, original in reversed(saved):
            if own:
                cpp_overrides.set_override(flavour, fault.op, original)
            else:
                cpp_overrides.remove_override(flavour, fault.op)


def _environment_value(faults: list[Fault]) -> str:
    return json.dumps([f.to_dict() for f in faults])


@contextlib.contextmanager
def _activated(fault: Fault, *, reset_dynamo: bool) -> Iterator[Fault]:
    import torch

    names = _validate(fault)
    stack = contextlib.ExitStack()
    with _lock:  # held while patching and unpatching, not while the fault is in effect
        previous_env = os.environ.get(ENV_VAR)
        if reset_dynamo:
            torch.compiler.reset()
        try:
            stack.enter_context(compile_caches_disabled())
            if fault.config:
                stack.enter_context(inductor_config_patch(fault.config))
            stack.enter_context(_patched_overrides(fault, names))
        except BaseException:
            stack.close()
            raise
        _active.append(fault)
        os.environ[ENV_VAR] = _environment_value(_active)
    try:
        yield fault
    finally:
        with _lock:
            _active.remove(fault)
            if previous_env is None:
                os.environ.pop(ENV_VAR, None)
            else:
                os.environ[ENV_VAR] = previous_env
            stack.close()
            if reset_dynamo:
                torch.compiler.reset()


@contextlib.contextmanager
def reapplied(faults: Sequence[Fault]) -> Iterator[list[Fault]]:
    """Inside the block, ``faults`` are in effect again: those not in effect now are activated
    (Dynamo reset on the way in and out); yields the ones it activated."""
    with contextlib.ExitStack() as stack:
        activated = []
        for fault in faults:
            if fault not in active_faults():
                stack.enter_context(_activated(fault, reset_dynamo=True))
                activated.append(fault)
        yield activated


SAME = "same"  # vectorized=SAME: the scalar template is valid C++ on Vectorized operands too


def _vectorized_template(op: str, template: str, vectorized: Optional[str], config: dict[str, Any]) -> Optional[str]:
    """The vectorized template to use, or None for scalar kernels only; refuses an ambiguous fault."""
    if vectorized == SAME:
        return template
    if vectorized is None and config.get("cpp.simdlen") != 1:
        raise ValueError(
            f"bad_lowering({op!r}, {template!r}) also needs the vectorized lowering: most kernels are "
            "vectorized, and there the operands are at::vec::Vectorized values, on which a scalar template "
            "often does not compile (Vectorized<float> * 2 has no operator). Pass one of:\n"
            f"  vectorized='...'            a template for Vectorized operands, e.g. '{{x}} + {{x}}' or "
            "'{x}.exp() * decltype({x})(2)';\n"
            f"  vectorized='{SAME}'           the same template, when it only uses operators Vectorized has;\n"
            "  config={'cpp.simdlen': 1}  scalar kernels only (no vectorized code is generated).")
    return vectorized


class bad_lowering(contextlib.ContextDecorator):
    """Replace the C++ lowering of ``op`` with ``template`` (scalar and vectorized) while active.

    Use as ``with bad_lowering(...):`` or as a decorator. ``vectorized`` is the template for the
    vectorized code generator (``at::vec::Vectorized`` operands), ``"same"`` to reuse ``template``
    there; without it, ``config`` must force scalar kernels (``{"cpp.simdlen": 1}``), else a
    ValueError says what to write. ``triton`` is the template for Triton kernels (Python operands:
    ``"2 * {x}"``); without it, Triton kernels keep their lowering. ``config`` adds Inductor config
    patches the bug needs.
    Raises :class:`UnknownOpError` for an op with no C++ lowering and ValueError for a template
    naming a parameter the lowering does not have.
    """

    def __init__(self, op: str, template: str, *, vectorized: Optional[str] = None, triton: Optional[str] = None,
                 config: Optional[dict[str, Any]] = None, name: str = "", reset_dynamo: bool = True) -> None:
        config = dict(config or {})
        _validate(Fault(op=op, scalar=template, vectorized=None if vectorized == SAME else vectorized, triton=triton))
        vectorized = _vectorized_template(op, template, vectorized, config)
        self.fault = Fault(op=op, scalar=template, vectorized=vectorized, triton=triton, config=config, name=name)
        _validate(self.fault)
        self.reset_dynamo = reset_dynamo
        self._contexts: list[Any] = []

    def __enter__(self) -> Fault:
        context = _activated(self.fault, reset_dynamo=self.reset_dynamo)
        fault = context.__enter__()
        self._contexts.append(context)
        with _lock:  # ``bad_lowering(...).__enter__()`` with no reference kept: collecting the object
            _entered.append(context)  # must not close the context (and turn the fault off) silently
        return fault

    def __exit__(self, *exc_info: Any) -> None:
        context = self._contexts.pop()
        with _lock:
            _entered.remove(context)
        context.__exit__(*exc_info)

    def __repr__(self) -> str:
        return f"bad_lowering({self.fault.label})"


def cast_dropping_neg(**kwargs: Any) -> bad_lowering:
    """The tutorial's compile-error bug: ``neg`` lowered to ``-{x}``, dropping the cast.

    On uint8 inputs ``-tmp1`` is an ``int``, so ``max_propagate_nan(tmp0, tmp2)`` gets two
    different types and the C++ compile fails. This only happens in scalar kernels, so the
    preset switches vectorization off (``cpp.simdlen=1``); a vectorized variant is not faithful.
    """
    return bad_lowering("neg", "-{x}", config={"cpp.simdlen": 1}, name="cast-dropping neg", **kwargs)


def doubling_neg(**kwargs: Any) -> bad_lowering:
    """The tutorial's accuracy bug: ``neg`` lowered to ``2 * x``, so float results are wrong."""
    return bad_lowering("neg", "decltype({x})(2 * {x})", vectorized="decltype({x})({x} + {x})",
                        triton="(2 * {x})", name="doubling neg", **kwargs)


def scaled(op: str, factor: float, **kwargs: Any) -> bad_lowering:
    """``op`` computed as Inductor computes it, times ``factor``, in scalar, vectorized and Triton kernels:
    a wrong result in any op with a floating-point result, without writing its C++
    (``scaled("rsqrt", 1.01)``: every normalisation 1% off). ``kwargs`` go to :class:`bad_lowering`."""
    factor = float(factor)
    if not math.isfinite(factor):
        raise ValueError(f"scaled({op!r}, {factor}): the factor must be a finite number")
    template = f"{{{ORIGINAL}}} * decltype({{{ORIGINAL}}})({factor!r})"
    kwargs.setdefault("name", f"{op} scaled by {factor:g}")
    kwargs.setdefault("triton", f"(({{{ORIGINAL}}}) * {factor!r})")
    return bad_lowering(op, template, vectorized=SAME, **kwargs)


PRESETS = {"doubling_neg": doubling_neg, "cast_dropping_neg": cast_dropping_neg}


def from_spec(spec: str) -> bad_lowering:
    """The fault a command line names: a preset (``doubling_neg``, ``cast_dropping_neg``) or
    ``OP*FACTOR`` (:func:`scaled`, e.g. ``rsqrt*1.01``). Raises ValueError saying what it accepts."""
    if spec in PRESETS:
        return PRESETS[spec]()
    op, star, factor = spec.partition("*")
    try:
        value = float(factor) if star and op.strip() else None
    except ValueError:
        value = None
    if value is None:
        raise ValueError(f"unknown fault {spec!r}: expected {' or '.join(PRESETS)}, or OP*FACTOR "
                         "(that op's result scaled, e.g. rsqrt*1.01)")
    return scaled(op.strip(), value)


_environment_stack: Optional[contextlib.ExitStack] = None


def install_from_environment() -> list[Fault]:
    """Activate, for the rest of the process, the faults listed in ``INSTRUMENTED_BACKEND_FAULTS``.

    Called when the package is imported, so child processes inherit a parent's faults. Returns
    the faults activated (none when the variable is unset or already applied here).
    """
    global _environment_stack
    raw = os.environ.get(ENV_VAR)
    if not raw or _environment_stack is not None:
        return []
    try:
        faults = [Fault.from_dict(item) for item in json.loads(raw)]
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{ENV_VAR} must be a JSON list of faults ({exc}): {raw[:200]!r}") from exc
    stack = contextlib.ExitStack()
    for fault in faults:
        stack.enter_context(_activated(fault, reset_dynamo=False))
    _environment_stack = stack
    return faults


def carried_context() -> Any:
    """For the minifier: the faults in effect, as modules to import and variables to set in its
    workers and repro scripts (None when no fault is active). Registered with the minifier when this
    module is imported."""
    faults = active_faults()
    if not faults:
        return None
    from minifier import CarriedContext

    return CarriedContext(imports=("instrumented_backend",), env=((ENV_VAR, _environment_value(faults)),),
                          description="injected fault: " + ", ".join(f.label for f in faults))


minifier.register_context_provider(carried_context)  # the faults in effect reach the minifier's workers and repros
