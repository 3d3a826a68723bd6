"""Profile the functions a script compiles, with the inputs it first called them with.

``python -m instrumented_backend profile script.py`` runs the script with ``torch.compile``
patched: every call that would use Inductor compiles with ``backend="instrumented"`` (so the
script runs as before) and the first call of each compiled function or module records its
arguments (tensors cloned), whether grad was enabled and whether the script later ran a backward
through its outputs. When the script ends, each recorded target is profiled by
:func:`instrumented_backend.profile` on those arguments, with its backward when the script ran one
(a training step: forward and backward are both profiled); and so is the first later call that
compiled a new graph (a recompile: a generate loop's decode step after its prefill), after the
first call is replayed on the compiled side.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import torch
import torch.utils._pytree as pytree

from ..capture.as_written import owning_module
from ..capture.distributed import data_parallel_module, data_parallel_note
from ..capture.recompiles import FrameRecompiles, recompiles_of
from ..capture.redirect import (
    CompiledCall,
    autocast_at_first_call,
    record_compiled_calls,
    run_as_main,
    state_at_first_call,
)
from .api import profile
from .findings import diagnose
from .report import ProfileReport

__all__ = ["profile_script"]


def profile_script(script: "str | Path", argv: Sequence[str] = (), *, warmup: int = 10, iters: int = 50,
                   active: int = 5, echo: Optional[Callable[[str], None]] = None) -> list[ProfileReport]:
    """Run ``script`` as ``__main__`` and profile every target it compiled; returns the reports."""
    script = Path(script)
    if not script.is_file():
        raise FileNotFoundError(f"no such script: {script}")
    say = echo or (lambda line: print(line, file=sys.stderr))
    calls: list[CompiledCall] = []
    reports = []
    with contextlib.ExitStack() as script_main:  # the script's __main__ stays until its targets are profiled
        undo = record_compiled_calls(calls)
        try:
            status = run_as_main(script, argv, keep=script_main)
        finally:
            undo()
        if status != 0:
            raise SystemExit(status)  # the script failed: its status is the command's
        if not calls:
            say(f"instrumented_backend profile: {script} called no torch.compile'd function; nothing to profile")
        # the script's own compiles, read before the profiles below compile the same code again
        script_compiles = [recompiles_of(call.target, name=call.name) for call in calls]
        profiled: dict[tuple[Any, ...], int] = {}
        for index, call in enumerate(calls):
            same = profiled.setdefault(_program_of(call), index)
            if same != index:  # block.compile() on each of 24 identical blocks: one profile, not 24
                say(f"instrumented_backend profile: [{index}] {call.name}: the same program as [{same}] (the same "
                    "code, parameter and argument sizes, and settings): its kernels and times are those; not "
                    "profiled again")
                continue
            # a step that runs its own backward is profiled as it is: no second backward after it
            backward = call.grad_enabled and call.backward and not call.own_backward
            shape = ", forward and backward" if backward else ", runs its own backward" if call.own_backward else ""
            # an optimizer step: the gradients it had, not zero_grad()'s None; autocast as at the call
            target = data_parallel_module(call.target) or call.target
            with state_at_first_call(call), autocast_at_first_call(call) as autocast:
                under = f", under {', '.join(autocast)}" if autocast else ""
                under += f", on {call.arguments_from}" if call.arguments_from else ""
                say(f"instrumented_backend profile: [{index}] {call.name} ({len(call.args)} args, "
                    f"{'grad' if call.grad_enabled else 'no_grad'}{shape}{under})")
                if target is not call.target:
                    say(f"instrumented_backend profile: [{index}] {call.name}: profiled as "
                        f"{data_parallel_note(target)}")
                reports.append(_with_recompiles(
                    profile(target, *call.args, warmup=warmup, iters=iters, active=active,
                            no_grad=not call.grad_enabled, backward=backward, options=call.options or None,
                            **call.kwargs), script_compiles[index]))
                for later in call.recompiles[:1]:  # a generate loop's decode step, say: where the time goes
                    if (later.grad_enabled == call.grad_enabled
                            and _arguments_kind(later.args, later.kwargs) == _arguments_kind(call.args, call.kwargs)):
                        # the same sizes: what recompiled was state the first call changed (HF's
                        # config.problem_type), which the profile above compiled and timed already
                        say(f"instrumented_backend profile: [{index}] {call.name}, its call {later.number}: "
                            "compiled a new graph for arguments of the same sizes and kinds as the first "
                            "call's, so for state the script changed (an attribute or setting its first call "
                            "set, an optimizer's buffers); the profile above ran after that change and timed "
                            "that graph: not profiled again")
                        continue
                    mode = "" if later.grad_enabled == call.grad_enabled else (
                        ", under grad" if later.grad_enabled else ", under no_grad")
                    say(f"instrumented_backend profile: [{index}] {call.name}, its call {later.number}: the "
                        f"first that compiled a new graph (a recompile){mode}, after its first call")
                    reports.append(profile(target, *later.args, warmup=warmup, iters=iters,
                                           active=active, no_grad=not later.grad_enabled,
                                           backward=backward and later.grad_enabled,
                                           options=call.options or None, calls_before=[(call.args, call.kwargs)],
                                           **later.kwargs))
    return reports


def _with_recompiles(report: ProfileReport, recompiles: Optional[FrameRecompiles]) -> ProfileReport:
    """``report`` with the script's recompiles of its target, and its findings judged again."""
    if recompiles is not None:
        report.left_out.recompiles.append(recompiles)
        report.findings = diagnose(report)
    return report


def _program_of(call: CompiledCall) -> tuple[Any, ...]:
    """What decides the program a recorded call compiles and runs: the code (a module's class and
    its parts' plain settings: ``eps``, ``p``, an activation's name; a function is only ever itself),
    the sizes and kinds of its parameters and arguments, and how it was called."""
    target = call.target
    module = owning_module(target)
    if module is None:
        code: tuple[Any, ...] = (id(target),)
    else:
        function = getattr(target, "__func__", None)
        code = (getattr(function, "__code__", None), repr(module), tuple(
            (name, type(part).__qualname__, tuple(sorted(
                (key, value) for key, value in vars(part).items()
                if not key.startswith("_") and (value is None or isinstance(value, (bool, int, float, str))))))
            for name, part in module.named_modules()), tuple(
            (name, tuple(p.shape), p.dtype, p.requires_grad) for name, p in module.named_parameters()))

    return (code, _arguments_kind(call.args, call.kwargs), call.grad_enabled, call.backward, call.own_backward,
            repr(sorted(call.compile_kwargs.items())), tuple(call.autocast), bool(call.recompiles), id(call.state))


def _arguments_kind(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """What of a call's arguments Dynamo compiles for: each tensor's size, dtype, device and
    ``requires_grad``, each plain value itself, the type of anything else, and their nesting."""
    def kind(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return ("tensor", tuple(value.shape), value.dtype, value.device.type, value.requires_grad)
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        return type(value).__qualname__

    tree = [list(args), kwargs]
    return tuple(kind(v) for v in pytree.tree_leaves(tree)), str(pytree.tree_structure(tree))
