"""A target as its user wrote it, without the ``torch.compile`` already applied to it.

``ib.diagnose(torch.compile(model), x)`` looks natural: the user hands over what they run. But
the eager side of every comparison then ran Inductor's code too, so a wrong lowering was on both
sides, matched itself and was reported as "no bug found"; a profile compared compiled with
compiled. :func:`as_written` unwraps what ``torch.compile`` wrapped (an ``OptimizedModule``, a
compiled function, ``torch.compile(model.forward)``) and, for the block it runs, takes off what
was compiled inside a module (``block.compile()``, a child replaced by ``torch.compile(child)``,
``model.forward = torch.compile(model.forward)``), putting every one back when the block ends.
:func:`running_eagerly` keeps an eager reference eager past compiled code no wrapper shows.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import types
from typing import Any, Callable, ContextManager, Iterator, Optional

import torch

from ..seams.dynamo.compile_wrappers import (
    compile_settings,
    compiled_in_place,
    compiled_original,
    set_compiled_in_place,
)

__all__ = ["as_written", "judged_as_written", "running_eagerly", "owning_module", "settings_as_written"]


_JUDGED_AS_WRITTEN = (
    "the target was compiled with torch.compile ({kind}): judged as written, its {original} run eagerly and "
    "compiled here with backend='instrumented'")
_OUR_BACKENDS = ("inductor", "instrumented")  # whose options are Inductor config (and ours)


def settings_as_written(target: Any, keys: tuple[str, ...] = ("dynamic", "fullgraph", "mode", "options")
                        ) -> tuple[dict[str, Any], list[str]]:
    """(the ``torch.compile`` arguments ``target`` was compiled with, those of ``keys``, to compile it
    with here; notes saying so) when ``target`` is compiled itself (a compiled module or function,
    or a module whose ``module.compile()`` is on); ({}, []) else. Inductor's wrapper keeps the mode
    as the options it folds it into; ``backend="instrumented"`` keeps it as given, and it is folded
    into the options the same way when ``keys`` takes options but no mode. A backend other than
    Inductor's keeps only ``dynamic`` and ``fullgraph``: its options are not Inductor config."""
    read = compile_settings(target)
    module = owning_module(target)
    if read is None and module is not None and compiled_in_place(module) is not None:
        read = compile_settings(compiled_in_place(module))
    if not read:
        return {}, []
    backend = read.pop("backend", None)
    foreign = backend is not None and backend not in _OUR_BACKENDS
    if foreign:
        read.pop("mode", None)
        read.pop("options", None)
    elif "mode" in read and "mode" not in keys and "options" in keys:
        from .options import parse_options

        mode, given = read.pop("mode"), read.pop("options", None)
        folded = {**parse_options(mode, given).inductor_patches, **(given or {})}
        if folded:
            read["options"] = folded
    settings = {k: v for k, v in read.items() if k in keys}
    notes = []
    if settings:
        shown = ", ".join(f"{k}={v!r}" for k, v in settings.items())
        notes.append(f"compiled here with the settings its torch.compile was given: {shown}")
    if foreign:
        notes.append(f"it was compiled with backend={backend!r}: compiled here with Inductor (backend='instrumented'), "
                     "without that backend's mode and options")
    return settings, notes


def _unwrap(target: Any) -> tuple[Any, list[str]]:
    notes: list[str] = []
    original = compiled_original(target)
    while original is not None:
        kind = "an OptimizedModule" if isinstance(target, torch.nn.Module) else "a compiled function"
        notes.append(_JUDGED_AS_WRITTEN.format(kind=kind, original=type(original).__name__))
        target, original = original, compiled_original(original)
    return target, notes


def owning_module(target: Any) -> "torch.nn.Module | None":
    """The module ``target`` is, or whose bound method it is (``model.forward``, ``model._call_impl``)."""
    if isinstance(target, torch.nn.Module):
        return target
    owner = getattr(target, "__self__", None)
    if isinstance(target, types.MethodType) and isinstance(owner, torch.nn.Module):
        return owner
    return None


def _take_off_inner_compiles(root: torch.nn.Module, undo: contextlib.ExitStack) -> list[str]:
    """Take off, until ``undo`` closes, every compile inside ``root``; returns where each was, in
    module order ("" for ``root.compile()``)."""
    names: list[str] = []
    pending: collections.deque[tuple[str, Optional[torch.nn.Module], str, torch.nn.Module]] = collections.deque(
        [("", None, "", root)])
    seen: set[int] = set()
    while pending:
        name, parent, key, module = pending.popleft()
        plain = compiled_original(module) if parent is not None else None
        if plain is not None and parent is not None:  # parent.child = torch.compile(child)
            parent._modules[key] = plain
            undo.callback(parent._modules.__setitem__, key, module)
            names.append(name)
            module = plain
        if id(module) in seen:
            continue
        seen.add(id(module))
        compiled = compiled_in_place(module)
        if compiled is not None:  # module.compile()
            set_compiled_in_place(module, None)
            undo.callback(set_compiled_in_place, module, compiled)
            names.append(name)  # "": the root's own
        forward = module.__dict__.get("forward")
        plain_forward = compiled_original(forward) if forward is not None else None
        if plain_forward is not None:  # module.forward = torch.compile(module.forward)
            module.forward = plain_forward
            undo.callback(setattr, module, "forward", forward)
            names.append(f"{name}.forward" if name else "forward")
        for child_name, child in module._modules.items():
            if child is not None:
                pending.append((f"{name}.{child_name}" if name else child_name, module, child_name, child))
    return names


@contextlib.contextmanager
def as_written(target: Callable[..., Any]) -> Iterator[tuple[Callable[..., Any], list[str]]]:
    """Yield ``(target without torch.compile's wrapper, notes on what was taken off)``; inside
    the block, what was compiled within its module runs as written too, and is put back after."""
    plain, notes = _unwrap(target)
    with contextlib.ExitStack() as undo:
        module = owning_module(plain)
        inner = _take_off_inner_compiles(module, undo) if module is not None else []
        if inner and inner[0] == "":  # the module's own module.compile()
            inner.pop(0)
            if plain is module:  # handed over as compiled; its bound _call_impl is what that compiled
                notes.append(_JUDGED_AS_WRITTEN.format(kind="module.compile()", original=type(module).__name__))
        if inner:
            shown = ", ".join(inner[:4]) + (f" and {len(inner) - 4} more" if len(inner) > 4 else "")
            notes.append(f"{len(inner)} part(s) inside it compiled with torch.compile ran as written for this, "
                         f"and were put back after: {shown}")
        yield plain, notes


def running_eagerly() -> ContextManager[Any]:
    """Inside the block every ``torch.compile`` runs its function eagerly (the ``force_eager``
    stance): an eager reference stays eager when the code it calls was compiled where no wrapper
    can be taken off (a helper decorated with ``@torch.compile`` at module level). Entering costs
    about 0.1 ms: a timed call enters it outside its timer."""
    return torch.compiler.set_stance("force_eager")


def judged_as_written(function: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a function whose first argument is the target: it gets the target as written, and
    the settings of the target's own ``torch.compile`` (:func:`settings_as_written`) for those of
    its ``options`` / ``dynamic`` / ``fullgraph`` parameters the caller did not pass (``options``
    only for Inductor: a ``backend`` argument naming another backend keeps its own)."""
    import inspect

    accepted = tuple(k for k in ("dynamic", "fullgraph", "options") if k in inspect.signature(function).parameters)

    @functools.wraps(function)
    def with_target_as_written(target: Any, *args: Any, **kwargs: Any) -> Any:
        unset = tuple(k for k in accepted if kwargs.get(k) is None)
        if kwargs.get("backend", "instrumented") not in _OUR_BACKENDS:
            unset = tuple(k for k in unset if k != "options")
        if unset:
            settings, _ = settings_as_written(target, keys=unset)
            kwargs.update(settings)
        with as_written(target) as (plain, _):
            return function(plain, *args, **kwargs)

    return with_target_as_written
