"""What a call leaves besides its outputs: the inputs and the named state it updates in place.

A compiled function may do its work in place: an optimizer step (``optimizer.step()`` updates
every parameter and its moments, and returns None), a moving average, a cache written with
``index_copy_``, a module in training mode updating its running statistics. Its outputs then say
nothing of a wrong kernel: judged by them alone, a wrong Adam update passed.

:func:`find_effects` calls the function once eagerly and notes which tensors it updated: of its
tensor arguments, of the tensors it names in its closure and globals, and of the state it names
(:class:`~.step_state.StepState`: modules, optimizers, trainable tensors; a module is its own),
those whose version counter moved, and the tensors of its optimizers' state it updated or made.
:class:`Effects` then stands for the function in every run of the diagnosis: it puts all of that
back after each call, so every run starts where the first did and the user's weights end as
they were, and it returns ``{"output": <the outputs>, "updated": {<name>: <value after the
call>}}``, which the one accuracy rule compares leaf by leaf like any output.

``torch.compile(Effects(...))`` compiles the function itself, not the wrapper: the wrapper's own
frame is skipped (``torch.compiler.disable(recursive=False)``) and its bookkeeping runs eagerly, so
the graphs compiled are the ones ``torch.compile(fn)`` makes.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import torch
import torch.utils._pytree as pytree

from .copies import clone_inputs, same_values
from .keyword_call import user_module
from .reached_names import reached_names
from .step_state import SavedState, StepState

__all__ = ["Effects", "find_effects", "parameter_names", "parameter_labels"]


@dataclass(frozen=True)
class _Located:
    """Where an updated tensor is, found again in another run (or in a float64 copy of a module)."""

    kind: str  # "input" (index among the call's tensor leaves), "named", "parameter", "buffer", "optimizer"
    index: int
    key: str = ""  # the optimizer state's entry (exp_avg, step)
    name: str = ""  # what the report calls it


@dataclass
class Effects:
    """``fn`` called from the same named state each time, returning its outputs and the tensors
    the first eager call updated (see the module's docstring)."""

    fn: Callable[..., Any]
    located: list[_Located] = field(default_factory=list)
    # each updated tensor's value before the latest call, by name (every call starts from the same)
    starts: dict[str, Any] = field(default_factory=dict, repr=False)

    @torch.compiler.disable(recursive=False)  # the wrapper's frame only: ``fn`` is what compiles
    def __call__(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        state, saved = _saved(self.fn, {item.index for item in self.located if item.kind == "named"}, args)
        try:
            self.starts = _collected(None, self.located, state, args, self.fn)["updated"]
            output = _call(self.fn, *args, **kwargs)
            return _collected(output, self.located, state, args, self.fn)
        finally:
            _restored(state, saved)

    def to_fp64(self) -> "Effects":
        """The same call in float64, for the referee (``accuracy.to_fp64`` calls it): a module
        target as a float64 copy, whose parameters and buffers are located in the same order."""
        fn = copy.deepcopy(self.fn).double() if isinstance(self.fn, torch.nn.Module) else self.fn
        return Effects(fn, self.located)

    def describe(self) -> str:
        """The updated tensors, named, in one line."""
        names = [item.name for item in self.located]
        shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
        return f"judged with the {len(names)} tensor(s) the call updates in place: {shown}"


def _call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` in a frame of its own, which ``torch.compile(Effects(fn))`` compiles:
    Dynamo compiles no frame of a module's own call reached from a skipped frame (``_call_impl`` is
    torch's code), so a module target called straight from ``Effects.__call__`` ran eagerly."""
    return fn(*args, **kwargs)


def find_effects(fn: Callable[..., Any], inputs: Sequence[Any], seed: int = 0) -> Optional[Effects]:
    """An :class:`Effects` for ``fn`` when one eager call of it on copies of ``inputs`` updates a
    tensor in place (or any optimizer's state); None for a function with no such effect, or
    when the eager call raises (the diagnosis reports that error itself). The named state is put
    back afterwards."""
    args = clone_inputs(inputs)
    state = StepState.of(fn).with_arguments(args)
    watched = _watched(state, args, fn)
    before = [(t._version, t.detach().clone()) for _, t in watched]
    optimizer_before = {id(t): (t, t._version) for _, t in _optimizer_entries(state)}
    saved = (_saved_named(fn), state.save())
    try:
        torch.manual_seed(seed)
        with torch.no_grad():
            fn(*args)
        # by its version counter, or by its values: an op may write a tensor without counting it
        # (batch norm's running statistics)
        located = [item for (item, tensor), (version, value) in zip(watched, before)
                   if tensor._version != version or not same_values(tensor, value)]
        located += [item for item, tensor in _optimizer_entries(state)  # updated, or made by the call
                    if optimizer_before.get(id(tensor), (None, -1))[0] is not tensor
                    or optimizer_before[id(tensor)][1] != tensor._version]
    except Exception:  # noqa: BLE001 - the diagnosis runs it again and reports the error
        return None
    finally:
        _restored(state, saved)
    return Effects(fn, located) if located else None


def _named_tensors(fn: Callable[..., Any]) -> list[tuple[str, torch.Tensor]]:
    """The tensors ``fn`` names in its closure and globals, and the user functions it calls in
    theirs, trainable or not (a moving average's buffer), by name; none for a module or a callable
    Python cannot inspect."""
    if isinstance(fn, torch.nn.Module):
        return []
    found: dict[int, tuple[str, torch.Tensor]] = {}
    for name, value in reached_names(fn):  # its own names, and those of the helpers it calls
        if isinstance(value, torch.Tensor):
            found.setdefault(id(value), (name, value))
    return list(found.values())


def _watched(state: StepState, args: Sequence[Any], fn: Callable[..., Any]) -> list[tuple[_Located, torch.Tensor]]:
    """Every tensor the call could update in place, located: its arguments', the tensors it names,
    then the state's."""
    inputs = [t for t in pytree.tree_leaves(list(args)) if isinstance(t, torch.Tensor)]
    watched = [(_Located("input", i, name=f"input {i}"), t) for i, t in enumerate(inputs)]
    trainable = {id(p) for p in state.parameters()}
    watched += [(_Located("named", i, name=name), t) for i, (name, t) in enumerate(_named_tensors(fn))
                if id(t) not in trainable]
    watched += [(_Located("parameter", i, name=name), p)
                for i, (name, p) in enumerate(zip(parameter_labels(state), state.parameters()))]
    buffers = _buffers(state)
    watched += [(_Located("buffer", i, name=name), b) for i, (name, b) in enumerate(buffers)]
    return watched


def parameter_names(state: StepState) -> dict[int, str]:
    """The name each parameter has in the first module naming it (``0.weight``), else in a module
    of the function's namespace (``model.0.weight``), by ``id``."""
    names: dict[int, str] = {}
    for module in state.modules:
        for name, parameter in user_module(module).named_parameters():
            names.setdefault(id(parameter), name)
    for prefix, module in state.namesakes:
        for name, parameter in module.named_parameters():
            names.setdefault(id(parameter), f"{prefix}.{name}")
    return names


def parameter_labels(state: StepState) -> list[str]:
    """What a report calls each of ``state.parameters()``, in order: its module name, else
    ``parameter i`` (a step that names only its optimizer)."""
    names = parameter_names(state)
    return [names.get(id(p), f"parameter {i}") for i, p in enumerate(state.parameters())]


def _buffers(state: StepState) -> list[tuple[str, torch.Tensor]]:
    found: dict[int, tuple[str, torch.Tensor]] = {}
    for module in state.modules:
        for name, buffer in user_module(module).named_buffers():
            found.setdefault(id(buffer), (name, buffer))
    return list(found.values())


def _optimizer_params(state: StepState) -> list[tuple[int, int, torch.Tensor]]:
    """(optimizer index, parameter index within it, parameter) in param-group order."""
    return [(o, i, p) for o, optimizer in enumerate(state.optimizers)
            for i, p in enumerate(p for group in optimizer.param_groups for p in group["params"])]


def _optimizer_entries(state: StepState) -> list[tuple[_Located, torch.Tensor]]:
    """Every tensor in the optimizers' state now, located by parameter and entry."""
    names = parameter_names(state)
    found = []
    for flat, (o, i, parameter) in enumerate(_optimizer_params(state)):
        entries = state.optimizers[o].state.get(parameter, {})
        for key in sorted(entries):
            if isinstance(entries[key], torch.Tensor):
                label = names.get(id(parameter), f"parameter {i}")
                found.append((_Located("optimizer", flat, key=key, name=f"optimizer {o} {key} of {label}"),
                              entries[key]))
    return found


@torch.compiler.disable
def _collected(output: Any, located: Sequence[_Located], state: StepState, args: Sequence[Any],
               fn: Callable[..., Any]) -> dict[str, Any]:
    inputs = [t for t in pytree.tree_leaves(list(args)) if isinstance(t, torch.Tensor)]
    named = [t for _, t in _named_tensors(fn)]
    parameters, buffers = state.parameters(), [b for _, b in _buffers(state)]
    optimizer_params = [(o, p) for o, _, p in _optimizer_params(state)]
    updated: dict[str, Any] = {}
    for item in located:
        if item.kind == "input":
            value = inputs[item.index] if item.index < len(inputs) else None
        elif item.kind == "named":
            value = named[item.index] if item.index < len(named) else None
        elif item.kind == "parameter":
            value = parameters[item.index] if item.index < len(parameters) else None
        elif item.kind == "buffer":
            value = buffers[item.index] if item.index < len(buffers) else None
        else:
            o, parameter = optimizer_params[item.index] if item.index < len(optimizer_params) else (0, None)
            value = state.optimizers[o].state.get(parameter, {}).get(item.key) if parameter is not None else None
        updated[item.name] = value.detach().clone() if isinstance(value, torch.Tensor) else value
    return {"output": output, "updated": updated}


def _saved_named(fn: Callable[..., Any], only: Optional[set[int]] = None) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Copies of the tensors ``fn`` names (``only``: of those at these indices, the ones it updates)."""
    return [(t, t.detach().clone()) for i, (_, t) in enumerate(_named_tensors(fn)) if only is None or i in only]


def _restore_named(saved: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
    with torch.no_grad():
        for tensor, value in saved:
            tensor.copy_(value)


@torch.compiler.disable  # eager bookkeeping, never a compiled graph
def _saved(fn: Callable[..., Any], named: set[int], args: Sequence[Any] = ()) -> tuple[StepState,
                                                                                    tuple[list[Any], SavedState]]:
    state = StepState.of(fn).with_arguments(args)
    return state, (_saved_named(fn, named), state.save())


@torch.compiler.disable
def _restored(state: StepState, saved: tuple[list[Any], SavedState]) -> None:
    _restore_named(saved[0])
    state.restore(saved[1])
