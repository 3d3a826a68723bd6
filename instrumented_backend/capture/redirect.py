"""Make ``torch.compile`` use ``backend="instrumented"`` wherever it would use Inductor.

Shared by the CLI's ``run`` (capture a script unchanged) and ``profile`` (which also wraps each
compiled callable to record its first call), which both run the user's script with
:func:`run_as_main`.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import os
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence

import torch

from ..records import SourceLocation
from .call_site import user_call_site
from .call_state import INFERENCE, CallState
from .registry import compiles_so_far

__all__ = ["redirect_torch_compile", "run_as_main", "CompiledCall", "LaterCall", "record_compiled_calls",
           "state_at_first_call", "autocast_now", "autocast_at_first_call", "target_name", "COMPILE_SETTINGS",
           "MAX_RECOMPILES_KEPT"]

# The torch.compile arguments that change what is compiled: a replay of a recorded call repeats them.
COMPILE_SETTINGS = ("dynamic", "mode", "options", "fullgraph")


def run_as_main(script: Path, argv: Sequence[str] = (), *, keep: Optional[contextlib.ExitStack] = None) -> int:
    """Run ``script`` as ``__main__`` with ``sys.argv = [script, *argv]`` and its folder first on
    ``sys.path``, as ``python script.py`` would; returns its exit status (``sys.exit(...)`` in the
    script ends the script, not the caller). ``sys.argv`` and ``sys.path`` are restored afterwards.

    The script runs in a module of its own, installed as ``sys.modules["__main__"]``. Without
    ``keep`` the caller's ``__main__`` is back on return; with ``keep`` it comes back when that
    exit stack closes: until then, code the script defined still finds its globals by module name
    (Dynamo guards a function it inlines through ``sys.modules[fn.__module__]``), so what the
    script compiled can be compiled again after it ended."""
    module = types.ModuleType("__main__")
    module.__dict__.update(__file__=str(script), __builtins__=builtins, __cached__=None, __package__=None)
    code = compile(script.read_bytes(), str(script), "exec")
    previous_main = sys.modules.get("__main__")
    old_argv, old_path0 = sys.argv, sys.path[0]

    def restore_main() -> None:
        if previous_main is not None:
            sys.modules["__main__"] = previous_main

    sys.modules["__main__"] = module
    sys.argv = [str(script), *argv]
    sys.path[0] = str(script.resolve().parent)
    try:
        exec(code, module.__dict__)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv, sys.path[0] = old_argv, old_path0
        if keep is None:
            restore_main()
        else:
            keep.callback(restore_main)
    return 0

OnCompiled = Callable[[Any, Any, dict[str, Any]], Any]


def redirect_torch_compile(on_compiled: Optional[OnCompiled] = None) -> Callable[[], None]:
    """Patch torch.compile; returns the undo.

    ``on_compiled(target, compiled, compile_kwargs)`` may replace what a redirected compile
    returns. The decorator form (``@torch.compile(mode=...)``) is redirected too.
    """
    import torch

    original = torch.compile

    @functools.wraps(original)
    def compile_instrumented(model: Any = None, **kwargs: Any) -> Any:
        if kwargs.get("backend", "inductor") not in ("inductor", "instrumented"):
            return original(model, **kwargs)
        kwargs["backend"] = "instrumented"
        if model is None:
            return lambda target: compile_instrumented(target, **kwargs)
        compiled = original(model, **kwargs)
        return on_compiled(model, compiled, kwargs) if on_compiled is not None else compiled

    torch.compile = compile_instrumented

    def undo() -> None:
        torch.compile = original

    return undo


# How many later calls that compiled a graph (recompiles) a record keeps, the first ones: each is
# judged in turn after the calls before it, so a bug only a later recompile's graph has is found.
MAX_RECOMPILES_KEPT = 3


@dataclass
class LaterCall:
    """A later call of a compiled target: its number (2, 3, ...) and its arguments, copied before it ran."""

    number: int
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    grad_enabled: bool = True  # grad mode at the call (an evaluation under no_grad after training)


@dataclass
class CompiledCall:
    """The first call of one function or module the script compiled."""

    target: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    grad_enabled: bool
    name: str = ""
    # The torch.compile arguments it was compiled with that change what is compiled (COMPILE_SETTINGS).
    compile_kwargs: dict[str, Any] = field(default_factory=dict)
    # The script later ran a backward through this call's outputs, or a later call's (a training
    # step): set by a gradient hook on the outputs that require grad (the first eight of each call,
    # until one is reached); or the call ran its own
    # (``loss.backward()`` inside a compiled step): a gradient reached a parameter the function names.
    backward: bool = False
    # The backward ran inside the call (its gradients were already computed when it returned).
    own_backward: bool = False
    # What was in effect at that call and may be off by the time it is diagnosed (a ``with`` block
    # around the script's loop): the injected faults, and Inductor's literal config values.
    faults: list[Any] = field(default_factory=list)
    inductor_config: dict[str, Any] = field(default_factory=dict)
    calls: int = 1  # how many times the script called it (an exported program: its loaded package, from 0)
    # A later call that raised (the first call that raised, after one that did not): its number
    # (2, 3, ...) and its arguments, copied before it ran (after a recompile was kept: when it
    # raised); the diagnosis replays it.
    raising_call: int = 0
    raising_args: tuple[Any, ...] = ()
    raising_kwargs: dict[str, Any] = field(default_factory=dict)
    # The first later calls that compiled a graph (recompiles: a new shape, another branch) and
    # returned, up to MAX_RECOMPILES_KEPT, in order: diagnosed after the first call, each after the
    # ones before it.
    recompiles: list[LaterCall] = field(default_factory=list)
    # A function (not a module) naming an optimizer: the state it names as it was at its first
    # call (weights, gradients, buffers, optimizer state; a ``StepState.save``), which the script
    # moves on afterwards (``optimizer.zero_grad()`` leaves a replayed optimizer step nothing to do).
    state: Any = None
    # The autocast in effect at the first call: (device type, dtype) of each device it was on for
    # (a training loop under ``torch.autocast("cpu", dtype=torch.bfloat16)``); replayed with it.
    autocast: list[tuple[str, torch.dtype]] = field(default_factory=list)
    # Whose arguments ``args`` and ``kwargs`` are, when not the first call's (an exported program's
    # package: its example inputs, until the script calls the package it loaded).
    arguments_from: str = ""
    # grad mode, inference mode and deterministic algorithms at the first call: what it is judged in
    call_state: CallState = INFERENCE
    raised: bool = False  # a call of it raised (the first or a later one)
    # The script's line of its first call: the source of a graph with no line of the script's own
    # (``torch.compile(torch.min)``), when a diagnosis compiles it again.
    called_from: Optional[SourceLocation] = None

    @property
    def options(self) -> dict[str, Any]:
        """The ``options`` it was compiled with."""
        return dict(self.compile_kwargs.get("options") or {})


@contextlib.contextmanager
def state_at_first_call(call: CompiledCall) -> Iterator[None]:
    """Inside the block, the state a recorded optimizer step names is as it was at its first call
    (its gradients, which the script zeroed since, above all); as the script left it afterwards."""
    if call.state is None:
        yield
        return
    from .hooks import diagnosis_hooks

    state = diagnosis_hooks().step_state(call.target, call.args)
    now = state.save()
    state.restore(call.state)
    try:
        yield
    finally:
        state.restore(now)


_AUTOCAST_DEVICES = ("cpu", "cuda")


def autocast_now() -> list[tuple[str, torch.dtype]]:
    """(device type, dtype) of each device autocast is on for here."""
    return [(device, torch.get_autocast_dtype(device)) for device in _AUTOCAST_DEVICES
            if torch.is_autocast_enabled(device)]


@contextlib.contextmanager
def autocast_at_first_call(call: CompiledCall) -> Iterator[list[str]]:
    """Inside the block, autocast is on as it was at ``call``'s first call (the script's ``with
    torch.autocast(...)`` block has ended by now); yields a description of each it entered (none
    for one on already, as it was)."""
    now = autocast_now()
    entered = [(device, dtype) for device, dtype in call.autocast if (device, dtype) not in now]
    with contextlib.ExitStack() as stack:
        for device, dtype in entered:
            stack.enter_context(torch.autocast(device_type=device, dtype=dtype))
        yield [f"torch.autocast({device!r}, dtype={dtype})" for device, dtype in entered]


def target_name(target: Any) -> str:
    """What a compiled target is called in reports: its qualified name; a module's class for
    ``model.compile()``, which compiles the module's bound ``_call_impl``; ``partial(train_step)``
    for a ``functools.partial``."""
    if isinstance(target, functools.partial):
        return f"partial({target_name(target.func)})"
    owner = getattr(target, "__self__", None)
    if isinstance(owner, torch.nn.Module) and getattr(target, "__func__", None) is torch.nn.Module._call_impl:
        return type(owner).__qualname__
    name = getattr(target, "__qualname__", type(target).__name__)
    if name.startswith("_VariableFunctionsClass."):
        return "torch." + name.rsplit(".", 1)[-1]  # a torch function compiled directly: as the script names it
    return name


def _detached(value: Any) -> Any:
    """A copy of every tensor in ``value`` (lists, tuples, dicts of them too; ``requires_grad``
    kept), and of every object holding tensors (a model's cache, which the script's later calls
    extend): what the script does to them after the first call must not change the call that is
    replayed."""
    from .object_arguments import copy_object_argument, is_object_argument

    def copied(leaf: Any) -> Any:
        if isinstance(leaf, torch.Tensor):
            return leaf.detach().clone().requires_grad_(leaf.requires_grad)
        return copy_object_argument(leaf) if is_object_argument(leaf) else leaf

    return torch.utils._pytree.tree_map(copied, value)


def _step_state(target: Any, args: Sequence[Any] = ()) -> Any:
    """The trainable state a compiled target names or is, and its arguments hold (``self`` of a
    method compiled with ``@torch.compile``); None when it has no trainable parameter."""
    from .hooks import diagnosis_hooks

    state = diagnosis_hooks().step_state(target, args)
    return state if state.parameters() else None


def _watch_backward(result: Any, record: CompiledCall) -> None:
    """Mark ``record`` as a training step's forward when a gradient later flows into its result."""
    from .backward import grad_roots

    try:
        roots = grad_roots(result)
    except Exception:  # noqa: BLE001 - an output we cannot walk: not watched
        return
    if not roots:
        return
    handles: list[Any] = []

    def seen_gradient(grad: torch.Tensor) -> None:
        record.backward = True
        for handle in handles:
            handle.remove()

    for root in roots[:8]:  # a backward through any of them (a loss, or logits) makes it a training step
        try:
            handles.append(root.register_hook(seen_gradient))
        except RuntimeError:
            continue


def _keep_raising_call(record: CompiledCall, args: tuple[Any, ...], kwargs: dict[str, Any],
                       copied: Optional[tuple[tuple[Any, ...], dict[str, Any]]] = None) -> None:
    """Keep a later call that raised: its arguments as copied before it ran when they were
    (``copied``), else copied now (what the call changed in them before it raised stays changed)."""
    kept = copied if copied is not None else _copied_call(args, kwargs)
    if kept is not None:  # else arguments that cannot be copied: the first call is replayed
        record.raising_args, record.raising_kwargs = kept
        record.raising_call = record.calls


def _copied_call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Optional[tuple[tuple[Any, ...], dict[str, Any]]]:
    """Copies of a call's arguments, made before the call (which may update them in place: a
    cache it appends to), or None when they cannot be copied."""
    try:
        return tuple(_detached(a) for a in args), {k: _detached(v) for k, v in kwargs.items()}
    except Exception:  # noqa: BLE001 - arguments that cannot be copied: the call is not kept
        return None


def record_compiled_calls(calls: list[CompiledCall]) -> Callable[[], None]:
    """Redirect torch.compile to the instrumented backend and record first calls into ``calls``
    (and the first later call that raises, on its record), and each exported program an
    AOTInductor package is built from, with its example inputs; returns the undo."""
    from ..seams.runtime import aot_compile

    recorder = _CallRecorder(calls)
    undo_compile = redirect_torch_compile(recorder.on_compiled)
    undo_package = aot_compile.watch_compile_and_package(recorder.on_packaged, recorder.on_built)
    undo_package_calls = aot_compile.watch_loaded_packages(recorder.on_package_call)

    def undo() -> None:
        undo_package_calls()
        undo_package()
        undo_compile()

    return undo


class _CallRecorder:
    """What :func:`record_compiled_calls` hooks in: each compiled target's first call (and later
    calls that raise or recompile), and each AOTInductor package built and called."""

    def __init__(self, calls: list[CompiledCall]) -> None:
        self.calls = calls
        self.built: dict[str, CompiledCall] = {}  # a package's real path -> the record of its exported program

    def on_compiled(self, target: Any, compiled: Any, compile_kwargs: dict[str, Any]) -> Any:
        if isinstance(compiled, torch.nn.Module) and hasattr(compiled, "_orig_mod"):
            compiled.forward = self.recording(compiled._orig_mod, compile_kwargs, compiled.forward)
            return compiled
        return self.recording(target, compile_kwargs, compiled)

    def recording(self, target: Any, compile_kwargs: dict[str, Any], call: Callable[..., Any]) -> Callable[..., Any]:
        """``call`` (the compiled ``target``), its first call recorded, and its later calls watched."""
        made: list[CompiledCall] = []  # the first call's record, once made
        settings = {k: compile_kwargs[k] for k in COMPILE_SETTINGS
                    if compile_kwargs.get(k) is not None and (k == "dynamic" or compile_kwargs[k])}

        @functools.wraps(call)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if made:
                return _later_call(made[0], call, args, kwargs)
            record = self._first_record(target, settings, args, kwargs)
            made.append(record)
            return _first_call(record, target, call, args, kwargs)
        return wrapper

    def _first_record(self, target: Any, settings: dict[str, Any], args: tuple[Any, ...],
                      kwargs: dict[str, Any]) -> CompiledCall:
        from ..seams.aot.inductor_options import plain_inductor_config
        from .hooks import diagnosis_hooks

        record = CompiledCall(target, tuple(_detached(a) for a in args),
                              {k: _detached(v) for k, v in kwargs.items()}, torch.is_grad_enabled(),
                              target_name(target), settings,
                              faults=diagnosis_hooks().active_faults(), inductor_config=plain_inductor_config(),
                              autocast=autocast_now(), call_state=CallState.now(), called_from=user_call_site())
        self.calls.append(record)
        return record

    def on_packaged(self, exported: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """An AOTInductor package built from ``exported``: judged on the example inputs it was
        exported with, until the script calls the package it loaded (:meth:`on_package_call`)."""
        from ..fail_soft import warn_once
        from ..seams.aot.inductor_options import plain_inductor_config
        from .hooks import diagnosis_hooks

        try:
            example = getattr(exported, "example_inputs", None)
            configs = kwargs.get("inductor_configs")
            if example is None or any(exported is call.target for call in self.calls):
                return
            self.calls.append(CompiledCall(exported, tuple(_detached(a) for a in example[0]),
                                           {k: _detached(v) for k, v in example[1].items()}, False,
                                           "exported program (AOTInductor package)",
                                           {"options": dict(configs)} if configs else {},
                                           faults=diagnosis_hooks().active_faults(),
                                           inductor_config=plain_inductor_config(), autocast=autocast_now(),
                                           calls=0, arguments_from="its example inputs"))
        except Exception as exc:  # noqa: BLE001 - the script's own call goes on untouched
            warn_once("aoti_record", f"could not record the exported program an AOTInductor package is built "
                                     f"from: {exc!r}")

    def on_built(self, exported: Any, path: Any) -> None:
        from ..fail_soft import warn_once

        try:
            record = next((call for call in self.calls if call.target is exported), None)
            if record is not None and isinstance(path, (str, os.PathLike)):
                self.built[os.path.realpath(path)] = record
        except Exception as exc:  # noqa: BLE001
            warn_once("aoti_record", f"could not record where an AOTInductor package was written: {exc!r}")

    def on_package_call(self, path: str, args: tuple[Any, ...], kwargs: dict[str, Any],
                        run: Callable[[], Any]) -> Any:
        """A call of a loaded package the script built: its first call's arguments replace the
        example inputs, and the first call that raises is kept as a compiled target's is."""
        record = self.built.get(path)
        if record is None or record.raising_call:
            return run()
        record.calls += 1  # the script's calls of its loaded package
        copied = _copied_call(args, kwargs) if record.calls == 1 else None
        try:
            result = run()
        except Exception:
            _keep_raising_call(record, args, kwargs, copied)
            if record.raising_call:
                record.arguments_from = ""
            raise
        if copied is not None:
            record.args, record.kwargs = copied
            record.arguments_from = "its loaded package's first call"
        return result


def _first_call(record: CompiledCall, target: Any, call: Callable[..., Any], args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> Any:
    """Run a compiled target's first call, noting whether it ran its own backward (a training step)."""
    state = _step_state(target, args)
    marks = state.gradient_marks() if state is not None else []
    if state is not None and state.optimizers and not isinstance(target, torch.nn.Module):
        record.state = state.save()
    with state.gradients_reached() if state is not None else contextlib.nullcontext([False]) as reached:
        try:
            result = call(*args, **kwargs)
        except Exception:
            record.raised = True
            raise
    if state is not None and (reached[0] or state.backward_since(marks)):
        record.backward = record.own_backward = True
    _watch_backward(result, record)
    return result


def _later_call(record: CompiledCall, call: Callable[..., Any], args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> Any:
    """Run a later call: kept when it raises first, or when it compiles a graph (a recompile)."""
    record.calls += 1
    # Until enough later calls have compiled a graph, each call's arguments are copied first:
    # kept if it compiles one (a recompile: a new shape, another branch).
    compiled_before = compiles_so_far()
    copied = _copied_call(args, kwargs) if len(record.recompiles) < MAX_RECOMPILES_KEPT else None
    grad_enabled = torch.is_grad_enabled()
    try:
        result = call(*args, **kwargs)
    except Exception:
        record.raised = True
        if not record.raising_call:
            _keep_raising_call(record, args, kwargs, copied)
        raise
    if copied is not None and compiles_so_far() != compiled_before:
        record.recompiles.append(LaterCall(record.calls, *copied, grad_enabled=grad_enabled))
    if not record.backward:  # a warm-up call first, the training loop after it
        _watch_backward(result, record)
    return result
