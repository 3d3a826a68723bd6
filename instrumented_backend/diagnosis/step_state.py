"""The trainable state a compiled function reads by name, kept and put back around each run.

A training step is often a function, not a module: ``def step(x, y): loss = model(x)...;
loss.backward(); optimizer.step(); return loss``, with ``model`` and ``optimizer`` globals (or
closure variables). Judging it means running it several times (eager twice, the fp64 referee,
compiled), each from the same state, and comparing the gradients it leaves on the model's
parameters. :class:`StepState` finds that state (the modules, optimizers and tensors requiring
grad the function names; a module target is its own) and :meth:`StepState.kept` puts it back
after each run, so judging a step never moves the user's weights, running statistics or gradients.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Optional, Sequence

import torch

from .reached_names import is_user_object, reached_names
from .widened_casts import as_they_are

__all__ = ["StepState", "SavedState"]

# Values a step may reassign that are put back by assignment (immutable: a copy is the value).
_PLAIN = (bool, int, float, complex, str, bytes, type(None))


@dataclass
class StepState:
    """Modules, optimizers and trainable tensors a function names (closure, then globals)."""

    modules: list[torch.nn.Module] = field(default_factory=list)
    optimizers: list[torch.optim.Optimizer] = field(default_factory=list)
    tensors: list[torch.Tensor] = field(default_factory=list)
    # Modules of the function's module namespace it does not name, by global name: what names the
    # parameters of an optimizer it names (``step(): optimizer.step()`` beside a global ``model``).
    # Never run, saved or judged.
    namesakes: list[tuple[str, torch.nn.Module]] = field(default_factory=list)
    # Plain values (ints, floats, strings, flags) the step may reassign, as (namespace, key): the
    # attributes of the user's objects it reaches and the globals it reads. A step counting its
    # calls (``self.calls += 1``, gradient accumulation) ran a second time from another count, and
    # eager looked nondeterministic.
    plain_values: list[tuple[dict[str, Any], str]] = field(default_factory=list)

    @classmethod
    def of(cls, fn: Callable[..., Any]) -> "StepState":
        """What ``fn`` names, itself or through the user functions it calls (a helper reading a
        global model), or holds as the user's object it is a method of (a ``Trainer``'s model and
        optimizer); a module (or a module's method) is its own state, with the optimizers it holds
        as attributes (``self.opt``); empty for a callable Python cannot inspect."""
        state = cls()
        owner = fn if isinstance(fn, torch.nn.Module) else getattr(fn, "__self__", None)
        if isinstance(owner, torch.nn.Module):  # a module, or its method (a compiled ``model.forward``)
            state._add_module(owner)
            return state
        function = fn
        while isinstance(function, functools.partial):
            function = function.func
        function = inspect.unwrap(getattr(function, "__func__", function))
        for _, value in reached_names(fn):  # its own names, those of the helpers it calls, its object's
            state._add(value)
        if inspect.isfunction(function):
            try:
                read = inspect.getclosurevars(function).globals
            except (TypeError, ValueError):
                read = {}
            state._add_plain(function.__globals__, read)
        if state.optimizers:
            state.namesakes = [(name, value) for name, value in list(getattr(function, "__globals__", {}).items())
                               if isinstance(value, torch.nn.Module) and not any(value is m for m in state.modules)]
        return state

    def with_arguments(self, inputs: Sequence[Any]) -> "StepState":
        """This state and what the call's arguments hold: a module passed (``self`` of a method
        compiled with ``@torch.compile``, with the optimizer it holds as ``self.opt``), an optimizer
        passed (``step(optimizer)``), and the
        modules, optimizers and trainable tensors of a user's object passed (``step(trainer, x)``):
        their parameters are trained by the step too."""
        state = StepState(modules=list(self.modules), optimizers=list(self.optimizers), tensors=list(self.tensors),
                          namesakes=list(self.namesakes), plain_values=list(self.plain_values))
        for value in inputs:
            if isinstance(value, torch.nn.Module):
                state._add_module(value)
            elif isinstance(value, torch.optim.Optimizer):  # step(optimizer): the weights it updates
                state._add(value)
            elif is_user_object(value):
                for _, held in reached_names(value):  # the object itself ("self"), then what it holds
                    state._add(held)
        known = {id(m) for m in state.modules}
        state.namesakes = [(name, m) for name, m in state.namesakes if id(m) not in known]
        return state

    def _add(self, value: Any) -> None:
        if is_user_object(value):
            self._add_plain(vars(value), vars(value))
        if isinstance(value, torch.nn.Module):
            if not any(value is m for m in self.modules):
                self.modules.append(value)
        elif isinstance(value, torch.optim.Optimizer):
            if not any(value is o for o in self.optimizers):
                self.optimizers.append(value)
        elif isinstance(value, torch.Tensor) and value.requires_grad and value.is_leaf:
            if not any(value is t for t in self.tensors):
                self.tensors.append(value)

    def _add_plain(self, namespace: dict[str, Any], names: Iterable[str]) -> None:
        """The plain values among ``names`` in ``namespace`` (an object's ``__dict__``, globals)."""
        known = {(id(ns), key) for ns, key in self.plain_values}
        for key in list(names):
            if isinstance(namespace.get(key), _PLAIN) and (id(namespace), key) not in known:
                self.plain_values.append((namespace, key))

    def _add_module(self, module: torch.nn.Module) -> None:
        """``module``, and the optimizers it or a submodule holds as a plain attribute."""
        self._add(module)
        for submodule in module.modules():
            for value in list(vars(submodule).values()):
                if isinstance(value, torch.optim.Optimizer):
                    self._add(value)

    def parameters(self) -> list[torch.Tensor]:
        """Every tensor requiring grad that the modules, optimizers and names hold, once each."""
        found: dict[int, torch.Tensor] = {}
        for module in self.modules:
            found.update((id(p), p) for p in module.parameters() if p.requires_grad)
        for optimizer in self.optimizers:
            for group in optimizer.param_groups:
                found.update((id(p), p) for p in group["params"] if p.requires_grad)
        found.update((id(t), t) for t in self.tensors)
        return list(found.values())

    def gradient_marks(self) -> list[tuple[Optional[torch.Tensor], int]]:
        """Each parameter's gradient and its version: different after a backward (a new gradient,
        or one accumulated in place); see :meth:`backward_since`."""
        return [(p.grad, -1 if p.grad is None else p.grad._version) for p in self.parameters()]

    @contextlib.contextmanager
    def gradients_reached(self) -> Iterator[list[bool]]:
        """Inside the block, the yielded list's one item turns True when a backward accumulates a
        gradient into a parameter: seen even when the block then drops the gradients (a step
        that ends with ``optimizer.zero_grad()``), which :meth:`backward_since` cannot see."""
        reached = [False]

        def hook(_: torch.Tensor) -> None:
            reached[0] = True

        handles = [p.register_post_accumulate_grad_hook(hook) for p in self.parameters() if p.is_leaf]
        try:
            yield reached
        finally:
            for handle in handles:
                handle.remove()

    def backward_since(self, marks: list[tuple[Optional[torch.Tensor], int]]) -> bool:
        """Did a gradient reach a parameter since ``marks`` were taken?"""
        now = self.gradient_marks()
        return len(now) == len(marks) and any(
            grad is not None and (grad is not before or version != before_version)
            for (grad, version), (before, before_version) in zip(now, marks))

    def save(self) -> "SavedState":
        """Copies of every parameter, gradient, buffer and optimizer state, for :meth:`restore`."""
        params = self.parameters()
        return SavedState([p.detach().clone() for p in params],
                          [None if p.grad is None else p.grad.detach().clone() for p in params],
                          [(b, b.detach().clone()) for m in self.modules for b in m.buffers()],
                          [copy.deepcopy(o.state_dict()) for o in self.optimizers],
                          [namespace.get(key) for namespace, key in self.plain_values])

    def restore(self, saved: "SavedState") -> None:
        """Put back what :meth:`save` copied (each optimizer state cast to its parameter's dtype as
        it was saved, also inside the fp64 referee's :class:`~.widened_casts.WidenedCasts`)."""
        with as_they_are():
            with torch.no_grad():
                for param, value, grad in zip(self.parameters(), saved.values, saved.grads):
                    param.copy_(value)
                    param.grad = grad
                for buffer, value in saved.buffers:
                    buffer.copy_(value)
            for optimizer, state in zip(self.optimizers, saved.optimizer_states):
                optimizer.load_state_dict(state)
        for (namespace, key), value in zip(self.plain_values, saved.plain_values):
            namespace[key] = value

    @contextlib.contextmanager
    def widened(self) -> Iterator[None]:
        """Inside the block, every floating parameter, trainable tensor and buffer named holds a
        float64 copy of its value (and each optimizer's state follows its parameters), for the fp64
        referee of a training step: the step's backward and optimizer then run in float64 on the
        very parameters it names. The originals (values, gradients, optimizer states) are put back
        after, untouched: the float64 run writes only the copies."""
        leaves = [t for t in self.parameters() if t.is_floating_point()]
        saved = [(t, t.data, t.grad) for t in leaves]
        buffers = [(m, name, b) for m in self.modules for name, b in list(m._buffers.items())
                   if isinstance(b, torch.Tensor) and b.is_floating_point()]
        states = [copy.deepcopy(o.state_dict()) for o in self.optimizers]
        try:
            with torch.no_grad():
                for tensor, data, _ in saved:
                    tensor.grad = None
                    tensor.data = data.double()
                for module, name, buffer in buffers:
                    module._buffers[name] = buffer.double()
            for optimizer, state in zip(self.optimizers, states):
                # its floating state cast to its parameters' float64; a copy, since a state it loads
                # as it is (Adam's ``step`` count) is its own from then on, and counted in place
                optimizer.load_state_dict(copy.deepcopy(state))
            yield
        finally:
            with torch.no_grad():
                for tensor, data, grad in saved:
                    tensor.grad = None
                    tensor.data = data
                    tensor.grad = grad
                for module, name, buffer in buffers:
                    module._buffers[name] = buffer
            with as_they_are():  # each state cast back to its parameter's own dtype
                for optimizer, state in zip(self.optimizers, states):
                    optimizer.load_state_dict(state)

    @contextlib.contextmanager
    def kept(self) -> Iterator[None]:
        """Run the block, then put back every parameter, buffer, gradient and optimizer state
        as they were (a step that updates the weights must not move the next run's start)."""
        saved = self.save()
        try:
            yield
        finally:
            self.restore(saved)


@dataclass
class SavedState:
    """What :meth:`StepState.save` copied."""

    values: list[torch.Tensor]
    grads: list[Optional[torch.Tensor]]
    buffers: list[tuple[torch.Tensor, torch.Tensor]]
    optimizer_states: list[dict[str, Any]]
    plain_values: list[Any] = field(default_factory=list)
