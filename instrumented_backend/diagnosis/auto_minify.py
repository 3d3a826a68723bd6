"""``options={"minify": True}``: shrink a failing graph automatically and name the repro in the error.

On an accuracy failure (with ``check_accuracy``) the Dynamo graph is minified with the call's
real arguments (torch level); on a compile failure, the AOT graph Inductor was given is minified
(ATen level) with seeded random inputs of the example inputs' shapes, strides and dtypes, and
the FX nodes of the failing kernel line are tried first. ``INSTRUMENTED_BACKEND_MINIFY=1``
turns it on for scripts you cannot edit; ``INSTRUMENTED_BACKEND_MINIFY_DIR`` says where repros go.

The minifier's judging worker starts when a failure is found, not before: starting it ahead of
need (a fresh process importing torch) made the first call of a function that does not fail
1.25x slower on 2 cores even at the lowest priority (``benchmarks/minify_option.py``), and most
compiles do not fail. :func:`prewarm_worker` starts it early where a failure is expected
(``ib.diagnose`` calls it as it starts, since it is asked to find one, and closes it again with
:func:`release_worker` when it finds none).
"""

from __future__ import annotations

import os
from typing import Any, Optional, Sequence

import torch

from ..fail_soft import warn_once
from ..seams.aot.fake_mode import real_tensors, size_hint

__all__ = ["MINIFY_SECONDS", "MINIFY_DIR_ENV", "minify_accuracy_failure", "minify_compile_failure", "real_inputs",
           "prewarm_worker", "release_worker"]

# How long a minifier search the instrumentation starts may run (the backend's ``minify`` option,
# ``diagnose``): past it, the smallest failing graph found so far is the repro. A dynamic-shape
# model's every compile can take minutes of symbolic reasoning; a diagnosis must end.
MINIFY_SECONDS = 600.0

MINIFY_DIR_ENV = "INSTRUMENTED_BACKEND_MINIFY_DIR"


def prewarm_worker() -> Optional[Any]:
    """Start the minifier's worker for the current context now (fail-soft: a failure only costs
    time). Returns the worker's setup when this call started it (for :func:`release_worker`),
    None when one was already running or none could be started."""
    try:
        from minifier import current_context, prewarm
        from minifier.workers import WorkerSetup, pool

        setup = WorkerSetup.for_context(current_context())
        already = pool.has(setup)
        prewarm(setup, fork_caller=True)  # a diagnosis starts outside any compile: a fork of this process
        return None if already else setup
    except Exception as exc:  # noqa: BLE001 - minification will start its own worker
        warn_once("minify_prewarm", f"could not start the minifier's worker early ({exc!r})")
        return None


def release_worker(setup: Optional[Any]) -> None:
    """Close the worker :func:`prewarm_worker` started, when nothing came to need it."""
    if setup is None:
        return
    try:
        from minifier.workers import pool

        pool.close(setup)
    except Exception as exc:  # noqa: BLE001 - it exits with the process anyway
        warn_once("minify_release", f"could not close the minifier's unused worker ({exc!r})")


def _repro_dir() -> Optional[str]:
    return os.environ.get(MINIFY_DIR_ENV) or None


def real_inputs(example_inputs: Sequence[Any], seed: int = 0) -> list[Any]:
    """Concrete inputs like Inductor's (possibly fake) example inputs: same shapes, strides, dtypes, devices.

    Floating-point values are random; integer tensors are zeros, the one value valid as an index
    into any non-empty dimension (a backward graph's saved ``topk`` or ``argmax`` indices, an
    embedding's ids): the graph must run in eager for the minifier to slice it."""
    generator = torch.Generator().manual_seed(seed)
    values = []
    for value in example_inputs:
        if isinstance(value, torch.Tensor):
            size = [int(s) for s in value.shape]
            stride = [int(s) for s in value.stride()]
            base = torch.empty_strided(size, stride, dtype=value.dtype, device=value.device)
            if value.dtype.is_floating_point or value.dtype.is_complex:
                base.copy_(torch.randn(size, generator=generator).to(value.dtype))
            elif value.dtype == torch.bool:
                base.copy_(torch.randint(0, 2, size, generator=generator).bool())
            else:
                base.zero_()
            values.append(base)
        elif isinstance(value, torch.SymInt):
            values.append(size_hint(value, fallback=2))
        else:
            values.append(value)
    return values


def _run(error: BaseException, gm: torch.fx.GraphModule, inputs: Sequence[Any], check: Any,
         hint_nodes: Sequence[str] = ()) -> Optional[Any]:
    """Minify; name the repro in ``error``'s notes. A failure of the minifier is one warning."""
    from minifier import minify

    try:
        with real_tensors():  # the minifier is called from inside Inductor's fake-mode compile
            result = minify(gm, list(inputs), check=check, hint_nodes=hint_nodes, repro_dir=_repro_dir(),
                            max_seconds=MINIFY_SECONDS)
    except Exception as exc:  # noqa: BLE001 - never hide the user's real error behind ours
        warn_once("minify", f"the minifier could not shrink the failing graph ({exc!r})")
        return None
    if result.repro_path is not None:
        error.add_note(result.summary())
    return result


def minify_accuracy_failure(error: BaseException, dynamo_graph: torch.fx.GraphModule,
                            args: Sequence[Any]) -> Optional[Any]:
    """Shrink the Dynamo graph whose outputs disagreed with eager (the call's real arguments)."""
    from minifier import AccuracyFailure

    return _run(error, dynamo_graph, args, AccuracyFailure())


def minify_compile_failure(error: BaseException, aot_graph: torch.fx.GraphModule, example_inputs: Sequence[Any],
                           graph: Optional[Any]) -> Optional[Any]:
    """Shrink the AOT graph whose compile failed, trying the failing kernel line's FX nodes first."""
    from minifier import CompileFailure

    suspects: list[str] = []
    report = getattr(graph, "compile_error_report", None)
    for item in (report.lines if report is not None else []):
        suspects.extend(n for n in item.line.fx_nodes if n not in suspects)
    with real_tensors():
        inputs = real_inputs(example_inputs)
    # Judged in worker processes, never here: this runs inside Inductor's compile, whose tracing
    # context would make every in-process candidate fail on fake-tensor checks instead of the bug.
    return _run(error, aot_graph, inputs, CompileFailure(), hint_nodes=suspects)
