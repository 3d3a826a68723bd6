"""``diagnose script.py``: run a script with every ``torch.compile`` redirected to the instrumented
backend, then diagnose each function or module it compiled, on the arguments of its first call (or
of the first call that raised, or of a later call that recompiled), until one fails."""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence

import torch
import torch.utils._pytree as pytree

from ..capture.call_site import replaying_call_from
from .accuracy import error_line as _error_text
from .diagnose import diagnose
from .error_origin import raising_line
from .verdict import Diagnosis, which_recompile
from .written import write_reports

__all__ = ["diagnose_script", "ScriptNotDiagnosed"]


@contextlib.contextmanager
def _as_at_first_call(call: Any) -> Iterator[list[str]]:
    """Inside the block, what was in effect at ``call`` (a recorded first call) and is not now is
    on again: its injected faults, Inductor config values and autocast (a script that set them in
    a ``with`` block around its loop has left it by now). Yields a description of each."""
    from ..capture.redirect import autocast_at_first_call
    from ..seams.aot.inductor_options import inductor_config_patch, plain_inductor_config
    from .faults import reapplied

    with contextlib.ExitStack() as stack:
        described = [f"fault {fault.label}" for fault in stack.enter_context(reapplied(call.faults))]
        described += stack.enter_context(autocast_at_first_call(call))
        now = plain_inductor_config()
        config = {k: v for k, v in call.inductor_config.items() if k in now and now[k] != v}
        if config:
            stack.enter_context(inductor_config_patch(config))
            described.append("Inductor config " + ", ".join(f"{k}={v!r}" for k, v in sorted(config.items())))
        yield described


def _trains(call: Any, script_finished: bool = False) -> bool:
    """Was the compiled target called for training? Grad on, and: a backward seen through the call
    (after it, through the outputs of any of its calls, or inside it: a function that names its
    model and optimizer), an input requiring grad, or a module with trainable parameters, unless
    the script ran to its end without a backward through it (inference that left grad on)."""
    if not call.grad_enabled:
        return False
    if call.backward:  # a gradient reached what the call computed, or it ran its own backward
        return True
    module = call.target if isinstance(call.target, torch.nn.Module) else getattr(call.target, "__self__", None)
    if isinstance(module, torch.nn.Module) and any(p.requires_grad for p in module.parameters()):
        return not script_finished
    leaves = pytree.tree_leaves([list(call.args), dict(call.kwargs)])
    return any(isinstance(a, torch.Tensor) and a.requires_grad for a in leaves)


@dataclasses.dataclass(frozen=True)
class _ScriptDiagnosis:
    """How each target a script compiled is diagnosed: where its reports go, and the choices the
    caller made for every one of them."""

    out_dir: Path
    single: bool  # the script compiled one target: its reports go in out_dir itself
    minify: "bool | float"
    progress: Optional[bool]
    tol: Optional[float]
    say: Callable[[str], None]

    def folder(self, index: int, call: Any) -> Path:
        return self.out_dir if self.single else self.out_dir / f"{index}_{call.name}"

    def diagnose(self, target: Any, call: Any, index: int, args: Sequence[Any], kwargs: dict[str, Any], *,
                 train: bool, call_state: Any, calls_before: Sequence[tuple[Any, Any]] = ()) -> Diagnosis:
        return diagnose(target, *args, kwargs=kwargs, train=train, input_gradients=False,
                        compile_kwargs=call.compile_kwargs, out_dir=self.folder(index, call), minify=self.minify,
                        progress=self.progress, name=call.name, tol=self.tol, call_state=call_state,
                        calls_before=calls_before)


def diagnose_script(script: "str | Path", argv: Sequence[str] = (), *, out_dir: "str | Path" = "diagnosis",
                    minify: "bool | float" = True, progress: Optional[bool] = None,
                    echo: Optional[Callable[[str], None]] = None, tol: Optional[float] = None) -> list[Diagnosis]:
    """Run ``script`` with every ``torch.compile`` redirected to the instrumented backend, then
    diagnose each function or module it compiled, on the arguments of its first call, until one
    fails (``train`` when it was called with gradients on and something to differentiate), at
    ``tol`` (see :func:`diagnose`). Returns the diagnoses made, the failing one last. An exception
    the compile raised inside the script is not re-raised: it is what the diagnosis explains.
    Under ``torchrun`` each rank writes under ``out_dir/rank_<r>``."""
    from ..capture.distributed import rank_out_dir
    from ..capture.redirect import CompiledCall, record_compiled_calls, run_as_main

    say = echo or (lambda line: print(line, file=sys.stderr))
    script = Path(script)
    if not script.is_file():
        raise FileNotFoundError(f"no such script: {script}")
    out_dir = rank_out_dir(out_dir)
    calls: list[CompiledCall] = []
    results: list[Diagnosis] = []
    with contextlib.ExitStack() as script_main:  # the script's __main__ stays until its targets are diagnosed
        undo = record_compiled_calls(calls)
        raised_at = ""  # where the script's own exception was raised
        try:
            status = run_as_main(script, argv, keep=script_main)
            raised = "" if status == 0 else f"the script exited with status {status}"
        except Exception as exc:  # noqa: BLE001 - what the diagnosis is about
            raised, raised_at = _error_text(exc), raising_line(exc)
        finally:
            undo()
        if raised and not calls:
            where = f" at {raised_at}" if raised_at else ""
            raise ScriptNotDiagnosed(f"{script} failed before it compiled anything ({raised}{where}): "
                                     "nothing compiled, so nothing to diagnose")
        if raised:
            say(f"instrumented_backend diagnose: {raised}; diagnosing what it compiled")
        how = _ScriptDiagnosis(out_dir, len(calls) == 1, minify, progress, tol, say)
        for index, call in enumerate(calls):
            results += _diagnose_target(how, index, call, train=_trains(call, script_finished=not raised),
                                        before=_compiled_before(calls[:index], call))
            if results[-1].found:
                break
    if not calls:
        say(f"instrumented_backend diagnose: {script} compiled nothing with torch.compile; nothing to diagnose")
    elif raised and not any(result.found or result.verdict == "eager_error" for result in results):
        say(f"instrumented_backend diagnose: {_unexplained_error(raised, raised_at, calls)}")
    return results


def _code_of(target: Any) -> Any:
    """The code object Dynamo keys its cache on for ``target``: a function's, a bound method's, a
    module's ``forward``."""
    if isinstance(target, torch.nn.Module):
        return getattr(type(target).forward, "__code__", None)
    return getattr(getattr(target, "__func__", target), "__code__", None)


def _shapes(args: Sequence[Any]) -> list[tuple[int, ...]]:
    return [tuple(value.shape) for value in args if isinstance(value, torch.Tensor)]


def _compiled_before(earlier: Sequence[Any], call: Any) -> Optional[tuple[int, Any]]:
    """(its index, the earlier target) of the last target compiled before ``call``'s from the same
    code, first called with tensors of other shapes. Dynamo keeps one cache, and one record of the
    shapes it saw, per code object: a function compiled anew in a loop over sizes was compiled with
    the changed dims dynamic (automatic dynamic shapes) from its second size on. Replaying that
    earlier call first, the diagnosis compiles the graph the script ran. None when there is none."""
    code, shapes = _code_of(call.target), _shapes(call.args)
    if code is None:
        return None
    for index in range(len(earlier) - 1, -1, -1):
        other = earlier[index]
        other_shapes = _shapes(other.args)
        if _code_of(other.target) is code and not other.raising_call and (
                len(other_shapes) == len(shapes) and other_shapes != shapes):
            return index, other
    return None


def _diagnose_target(how: _ScriptDiagnosis, index: int, call: Any, *, train: bool,
                     before: Optional[tuple[int, Any]] = None) -> list[Diagnosis]:
    """The diagnoses of one compiled target: on its first call (or the first that raised), after
    the first call of ``before`` (an earlier target compiled from the same code, other shapes) when
    given; then, while it passes, on each later call that recompiled, after the calls before it."""
    from ..capture.distributed import data_parallel_module, data_parallel_note
    from ..capture.redirect import LaterCall, state_at_first_call

    say = how.say
    args, kwargs = (call.raising_args, call.raising_kwargs) if call.raising_call else (call.args, call.kwargs)
    keywords = f", keyword arguments {', '.join(kwargs)}" if kwargs else ""
    which = (f", its call {call.raising_call}: the first that raised" if call.raising_call
             else f", on {call.arguments_from}" if call.arguments_from else "")
    if not train and _trains(call):  # only because the script ended without a backward through it
        which += ": grad was on, but no backward reached its outputs"
    say(f"instrumented_backend diagnose: [{index}] {call.name} ({len(args)} args{keywords}, "
        f"{'training step' if train else 'inference'}{which})")
    target = data_parallel_module(call.target) or call.target
    if target is not call.target:
        say(f"instrumented_backend diagnose: [{index}] {call.name}: judged as {data_parallel_note(target)}")
    with _as_at_first_call(call) as restored, state_at_first_call(call), replaying_call_from(call.called_from):
        if restored:
            say(f"instrumented_backend diagnose: [{index}] {call.name}: on at its first call, off when the "
                f"script ended, on again for its diagnosis: {'; '.join(restored)}")
        if before is not None:
            say(f"instrumented_backend diagnose: [{index}] {call.name}: judged after the first call of "
                f"[{before[0]}], the same code on other shapes, as the script compiled it (Dynamo's automatic "
                "dynamic shapes)")
        first_calls = [(before[1].args, before[1].kwargs)] if before is not None else []
        result = how.diagnose(target, call, index, args, kwargs, train=train, call_state=call.call_state,
                              calls_before=first_calls)
    if restored or call.raising_call:
        result.reapplied, result.replayed_call = restored, call.raising_call
        write_reports(result, how.folder(index, call))
    results = [result]
    # each later call that compiled a graph (a recompile), after the calls that compiled before it
    replayed: list[LaterCall] = [LaterCall(1, call.args, call.kwargs)]
    for nth_recompile, later in enumerate(call.recompiles if not call.raising_call else [], 1):
        if result.found or result.verdict not in ("passed", "amplified_rounding"):
            break
        nth, after = which_recompile(nth_recompile, [c.number for c in replayed])
        say(f"instrumented_backend diagnose: [{index}] {call.name}, its call {later.number}: {nth} that "
            f"compiled a new graph (a recompile), replayed after {after}")
        with _as_at_first_call(call) as restored, state_at_first_call(call), \
                replaying_call_from(call.called_from):
            result = how.diagnose(target, call, index, later.args, later.kwargs, train=train,
                                  call_state=dataclasses.replace(call.call_state, grad_enabled=later.grad_enabled),
                                  calls_before=[(c.args, c.kwargs) for c in replayed])
        result.reapplied, result.replayed_call, result.replayed_recompile = restored, later.number, nth_recompile
        result.replayed_before = [c.number for c in replayed]
        write_reports(result, how.folder(index, call))
        results.append(result)
        replayed.append(later)
    return results


def _unexplained_error(raised: str, raised_at: str, calls: Sequence[Any]) -> str:
    """Why the script's error (``raised``, at ``raised_at``) is not what the diagnoses found: it was
    raised outside every compiled call, or inside one and did not recur when that was judged."""
    where = f" at {raised_at}" if raised_at else ""
    if not any(call.raised for call in calls):
        return (f"the script's error ({raised}{where}) came from outside the functions it compiled; what they "
                "computed was judged, and the error is the script's own, not the compiler's")
    return (f"the script's error did not recur when what it compiled was compiled and run again ({raised}{where}): "
            "it depends on something on only while the script ran (a fault or config set around the call, "
            "state built by earlier steps)")


class ScriptNotDiagnosed(RuntimeError):
    """``diagnose_script``: the script failed (raised, exited non-zero) before it compiled anything."""
