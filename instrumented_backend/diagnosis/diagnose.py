"""``ib.diagnose``: one call from a failing function to the culprit line and a minimal repro.

In order, stopping at what is known:

1. eager twice with one seed: a nondeterministic function is reported as such, never as a bug;
2. compile with the instrumented backend and run it: a compile error is explained through the
   line map; outputs (and, with ``train=True``, the gradients of every parameter and floating
   input, against a fixed random weighting of the outputs) are judged with the package's one
   accuracy rule, fp64 as referee;
3. which layer fails (eager / aot_eager / decomp / inductor), forward or training step;
4. the first diverging buffer, the kernel that wrote it, the culprit FX node, its kernel lines
   and the user's source line: in the forward graph, or, for a wrong gradient, in the backward
   graph replayed on the saved tensors and gradients it received (its lines point to the
   forward source line they came from);
5. a minimal repro from the minifier, starting from the culprit;
6. a report on disk: ``diagnosis.txt``, ``diagnosis.json`` and the HTML report.

The steps are the stages of :mod:`.pipeline`, the settings one record (:mod:`.settings`), what they
find another (:class:`~.verdict.Diagnosis`); a script is driven by :mod:`.script`.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from ..capture.as_written import settings_as_written
from ..capture.call_state import CallState
from .aoti_package import is_exported_program
from .exported import diagnose_exported
from .keyword_call import KeywordCall, keyword_call
from .pipeline import diagnose_callable
from .settings import CompileSettings, DiagnoseSettings, minify_budget
from .verdict import NOT_FOUND, VERDICTS, Diagnosis, DiagnosisStep

__all__ = ["Diagnosis", "DiagnosisStep", "diagnose", "keyword_call", "KeywordCall", "VERDICTS", "NOT_FOUND"]


def diagnose(fn: Callable[..., Any], *inputs: Any, kwargs: Optional[dict[str, Any]] = None, train: bool = False,
             compile_kwargs: Optional[dict[str, Any]] = None, out_dir: "str | Path" = "diagnosis",
             minify: "bool | float" = True, bisect: bool = False, tol: Optional[float] = None, seed: int = 0,
             progress: Optional[bool] = None, name: str = "",
             calls_before: Sequence[tuple[Sequence[Any], dict[str, Any]]] = (),
             input_gradients: bool = True, call_state: Optional[CallState] = None) -> Diagnosis:
    """Find what goes wrong when ``fn(*inputs, **kwargs)`` is compiled, down to the culprit line and a repro.

    ``kwargs`` are keyword arguments of the call (``model(input_ids=ids)``: ``kwargs={"input_ids":
    ids}``); those holding tensors are inputs like the positional ones. ``compile_kwargs`` are the
    ``torch.compile`` arguments the target is compiled with (``dynamic``, ``mode``, ``options``,
    ``fullgraph``): every compile of the diagnosis uses them. ``train=True`` judges a training step
    too: gradients of every trainable parameter and floating input (``input_gradients=False``: of
    the inputs that require grad as passed, as a script's call passed them, so that the graphs judged
    are the ones it compiled; a backward it never ran is not judged). Writes ``diagnosis.txt``,
    ``diagnosis.json`` and ``report.html`` under ``out_dir`` (the minifier's repro under
    ``out_dir/repros``); on one rank of several (``torchrun``), under ``out_dir/rank_<r>``, so that
    ranks do not overwrite each other's. ``minify``: True lets the minifier search for at most
    :data:`~.auto_minify.MINIFY_SECONDS`, a number for that many seconds, and the smallest failing
    graph found by then is the repro; False writes no repro. Returns a :class:`Diagnosis`; ``found`` says whether a bug
    was found. ``calls_before`` (``(args, kwargs)`` each) are calls made on every compiled ``fn``
    before the judged one, unjudged, as a script made them: a later call that recompiled (a new
    shape, another branch) is judged on the graph Dynamo made for it then (its sizes symbolic, say).
    A target already compiled (``torch.compile(model)``, a compiled function, ``block.compile()``
    inside it) is judged as written: eager runs it without that compile, which stays as it was;
    without ``compile_kwargs``, it is compiled with the ``dynamic``, ``fullgraph``, mode and options
    its own ``torch.compile`` was given.
    A ``torch.export.ExportedProgram`` is judged as its AOTInductor package (``compile_kwargs``:
    ``mode`` and ``options``, the package's ``inductor_configs``); when the package fails, the
    steps after it run on the Python-wrapper build of the same graph once it fails alike
    (:mod:`.aoti_package`).
    ``call_state`` (:class:`~instrumented_backend.capture.call_state.CallState`) is the grad mode, inference
    mode and deterministic flag the call is judged in, as the program called it: a call made with
    grad on compiles other graphs than one under ``no_grad`` (default: ``no_grad``, an inference
    call; ``train=True`` judges a training step with grad on).
    """
    from ..capture.distributed import rank_out_dir

    if kwargs is not None and not isinstance(kwargs, dict):
        raise TypeError(f"diagnose: kwargs must be a dict of keyword arguments, got {type(kwargs).__name__}")
    settings = DiagnoseSettings(name=name, out_dir=rank_out_dir(out_dir), train=train,
                                minify_seconds=minify_budget(minify),  # a bad value is refused before any compile
                                bisect=bisect, tol=tol, seed=seed, progress=progress,
                                input_gradients=input_gradients)
    if is_exported_program(fn):  # its AOTInductor package is what ships: judged first
        if calls_before:
            raise ValueError("diagnose: an exported program has no earlier calls to replay (calls_before)")
        return diagnose_exported(fn, inputs, dict(kwargs or {}), compile_kwargs, settings)
    if not callable(fn):
        raise TypeError(f"diagnose needs a function or module, got {type(fn).__name__}")
    settings_notes: list[str] = []
    if compile_kwargs is None:  # what it was compiled with, when it was: read off its wrapper
        compile_kwargs, settings_notes = settings_as_written(fn)
    settings = replace(settings, compile=CompileSettings.of(compile_kwargs), as_written=tuple(settings_notes))
    return diagnose_callable(fn, inputs, kwargs or {}, settings, calls_before=calls_before, call_state=call_state)
