"""The ``instrumented`` Dynamo backend: Inductor, with every compiled graph captured.

Registered through the ``torch_dynamo_backends`` entry point, so
``torch.compile(fn, backend="instrumented")`` works without importing this package.

What it guarantees:

* The compiled program is Inductor's: the same config patches (``mode``/``options`` are
  handled by Inductor's own option code) and byte-identical output code.
* Instrumented compiles bypass the FX-graph and AOTAutograd caches, whose hits skip codegen
  (nothing to capture) and whose keys do not see in-memory patches.
* A failure inside instrumentation never breaks the program: capture steps are fail-soft; if a
  compile fails while instrumentation had recorded a problem, the graph is recompiled with plain
  Inductor from a copy taken beforehand, and one warning names what failed. A compile error
  that is Inductor's own propagates unchanged (its partial capture is still recorded).
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence

import torch
import torch.fx

from ..fail_soft import warn_capture_problem, warn_once
from ..graphs import GraphCapture
from ..recording import recorder, rewrites
from ..seams import install_capture_seams
from ..seams.aot.caches import CACHE_BYPASS_PATCHES, autograd_cache_disabled
from ..seams.aot.compile_entry import compile_fx, compile_fx_inner, current_compile_id
from ..seams.codegen import line_tags
from ..seams.dynamo.ddp_buckets import current_ddp_bucket
from ..seams.dynamo.dynamo_reasons import take_graph_break_reason
from ..seams.lowering import ir_logging, loop_body_origins
from .builder import CaptureBuilder
from .call_site import user_call_site
from .distributed import RankInfo, current_rank
from .graph_copy import GraphSnapshot, count_nodes, printed_later
from .hooks import diagnosis_hooks
from .options import BackendOptions, parse_options
from .registry import open_sessions, record

__all__ = ["instrumented", "CompileJob", "keep_call_args", "before_calls", "compiles_instrumented"]



def _install_ddp_buckets() -> None:
    """DDPOptimizer hands its first bucket to the backend from inside the hook, so the hook must be
    in place before the first compile: installed when this module loads (the entry point's lookup)."""
    from ..seams.dynamo import ddp_buckets

    try:
        ddp_buckets.install()
    except Exception as exc:  # noqa: BLE001 - the bucket is a label, never worth a failure
        warn_once("ddp_buckets", f"cannot tell DDPOptimizer buckets apart ({exc!r}); captures have ddp_bucket=None")


_install_ddp_buckets()


def _install_dynamo_frames() -> None:
    """Dynamo traces a frame before it hands the graph to the backend: the hook that records where
    torch's own modules made a node is put in place when this module loads."""
    from ..seams.dynamo import dynamo_frames

    try:
        setattr(instrumented, dynamo_frames.BACKEND_MARK, True)
        dynamo_frames.install()
    except Exception as exc:  # noqa: BLE001 - a finer source line is never worth a failure
        warn_once("dynamo_frames", f"cannot tell where inside torch.nn's modules a node was made ({exc!r}); "
                  "such nodes are sourced to their module's forward")


class CompileJob:
    """State shared by the AOT graphs of one Dynamo graph (its forward and lazy backward)."""

    def __init__(self, gm: torch.fx.GraphModule, options: BackendOptions, *, ahead_of_time: bool = False) -> None:
        install_capture_seams()
        self.options = options
        # AOTInductor's compile: what it returns is a library's files, never called here
        self.ahead_of_time = ahead_of_time
        self.compile_id = current_compile_id() or ("aoti" if ahead_of_time else "")  # no Dynamo frame: "#0 aoti ..."
        try:
            self.graph_break_reason = take_graph_break_reason(gm)  # the break that ended this graph
        except Exception:  # noqa: BLE001 - a reason is worth no failure
            self.graph_break_reason = ""
        try:
            self.rank = current_rank()
        except Exception:  # noqa: BLE001
            self.rank = RankInfo()
        self.ddp_bucket = current_ddp_bucket()  # the DDPOptimizer bucket this graph is, or None
        try:
            self.called_from = user_call_site()  # the user's line a graph of torch's own code is put on
        except Exception:  # noqa: BLE001 - a line is worth no failure
            self.called_from = None
        # compile_fx's pre-grad passes mutate gm itself: the copy is built, and printed, on first read.
        self.dynamo_graph_copy = GraphSnapshot(gm).deferred()
        self.dynamo_graph_code = printed_later(self.dynamo_graph_copy, "dynamo_graph")
        self.dynamo_node_count = count_nodes(gm)
        self.sessions = open_sessions()
        self.rewrites = rewrites.RewriteLog()  # what the pre-grad and joint-graph passes replaced
        # Set when the forward graph is captured (assembled on first read); the lazy backward falls back on it.
        self.forward_by_seq_nr: Any = {}

    @property
    def dynamo_graph(self) -> Optional[torch.fx.GraphModule]:
        """The copy of the Dynamo graph (None, after one warning, if it could not be built)."""
        return self.dynamo_graph_copy.get()

    def inner_compile(self, gm: torch.fx.GraphModule, example_inputs: Sequence[Any], *args: Any, **kwargs: Any) -> Any:
        """Drop-in ``inner_compile`` for ``compile_fx``: compile one AOT graph and capture it."""
        try:
            builder = CaptureBuilder(job=self, aot_graph=gm, example_inputs=example_inputs, inner_kwargs=kwargs)
        except Exception as exc:  # noqa: BLE001
            warn_once("start_graph", f"could not start capturing an AOT graph ({exc!r}); compiled without capture")
            return compile_fx_inner(gm, example_inputs, *args, **kwargs)

        try:
            with _capturing(builder):  # restored before the except clause runs
                compiled = compile_fx_inner(gm, example_inputs, *args, **kwargs)
        except Exception as exc:
            if builder.problems:
                problem = builder.problems[0]
                warn_once(
                    f"compile:{problem.part}",
                    f"compiling graph {builder.compile_id} ({builder.kind}) failed while its "
                    f"{problem.part} capture had failed ({problem.error}); recompiled with plain Inductor",
                )
                return compile_fx_inner(builder.original_graph, example_inputs, *args, **kwargs)
            graph = self._publish(builder, None, exc)
            explained = diagnosis_hooks().explained_compile_error(graph, exc) if graph is not None else None
            if self.options.minify:
                diagnosis_hooks().minify_compile_failure(explained or exc, builder.original_graph, example_inputs,
                                                         graph)
            if explained is None:
                raise
            raise explained from None
        graph = self._publish(builder, compiled, None)
        hooks = _call_hooks.get()
        if graph is not None and not self.ahead_of_time and (_keeping_call_args.get() or hooks is not None):
            _watch_calls(compiled, graph, keep=_keeping_call_args.get(), hooks=hooks,
                         inductor_patches=self.options.inductor_patches)
        return compiled

    def _publish(self, builder: CaptureBuilder, compiled: Any,
                 error: Optional[BaseException]) -> Optional[GraphCapture]:
        try:
            graph = builder.build(compiled, error)
        except Exception as exc:  # noqa: BLE001
            warn_once("build", f"could not assemble the capture of graph {builder.compile_id}: {exc!r}")
            return None
        for problem in builder.problems:  # the line maps' own problems warn when they are assembled
            warn_capture_problem(graph.label, problem)
        record(graph, self.sessions)
        if self.options.dump_dir is not None:
            _dump_quietly(graph, self.options.dump_dir)
        return graph


_keeping_call_args: contextvars.ContextVar[bool] = contextvars.ContextVar("keep_call_args", default=False)
# Called with (the capture, its first call's arguments, the compile's Inductor options) before that call runs.
FirstCallHook = Callable[[GraphCapture, list[Any], Mapping[str, Any]], None]
# Called with (the capture, the call's number: 2, 3, ..., its arguments, not copied) before each later call runs.
LaterCallHook = Callable[[GraphCapture, int, list[Any]], None]
_call_hooks: contextvars.ContextVar[Optional[tuple[Optional[FirstCallHook], Optional[LaterCallHook]]]] = \
    contextvars.ContextVar("call_hooks", default=None)


@contextlib.contextmanager
def keep_call_args() -> Iterator[None]:
    """Inside the block, each graph compiled keeps the arguments of its first call
    (``GraphCapture.call_args``): a backward graph's saved tensors and gradients included."""
    token = _keeping_call_args.set(True)
    try:
        yield
    finally:
        _keeping_call_args.reset(token)


@contextlib.contextmanager
def before_calls(first: Optional[FirstCallHook], *, later: Optional[LaterCallHook] = None) -> Iterator[None]:
    """Inside the block, each graph compiled calls ``first(graph, args, inductor_options)`` just
    before its compiled code first runs (``args``: copies of that call's arguments, strides kept),
    and ``later(graph, number, args)`` before each later call (``args``: the call's own list, which
    the hook must not change; ``number`` counts from 2). A hook that raises costs one warning,
    never the call."""
    token = _call_hooks.set((first, later))
    try:
        yield
    finally:
        _call_hooks.reset(token)


def _watch_calls(compiled: Any, graph: GraphCapture, *, keep: bool,
                 hooks: Optional[tuple[Optional[FirstCallHook], Optional[LaterCallHook]]],
                 inductor_patches: Mapping[str, Any]) -> None:
    """Make ``compiled`` (Inductor's compiled graph) copy its first call's arguments onto ``graph``
    (``keep``) and hand them to the first-call hook, and each later call's to the later-call hook,
    before the call runs.

    Wraps the compiled graph's ``current_callable`` (what its ``__call__`` runs, with the list of
    arguments, which the generated ``call`` empties): the object AOTAutograd holds stays Inductor's.
    """
    original = getattr(compiled, "current_callable", None)
    if original is None:
        if not getattr(compiled, "_boxed_call", False):
            warn_once("call_args", f"cannot keep the call arguments of graph {graph.label}")
        # else Inductor's boxed ``gm.forward`` for a graph with no op to compile (a resumed
        # ``return loss.detach()``): no kernel, nothing a first call could show
        return
    first, later = hooks if hooks is not None else (None, None)
    calls = [0]

    def call(args: list[Any]) -> Any:
        calls[0] += 1
        if calls[0] == 1 and (keep or first is not None):
            from minifier.judge import clone_inputs  # strides kept: the compiled code asserts them

            copies = clone_inputs(args)
            if keep:
                graph.call_args = copies
            if first is not None:
                try:
                    first(graph, copies, inductor_patches)
                except Exception as exc:  # noqa: BLE001 - never worth the user's call
                    warn_once("first_call_hook", f"before the first call of graph {graph.label}: {exc!r}")
        elif calls[0] > 1 and later is not None:
            try:
                later(graph, calls[0], args)
            except Exception as exc:  # noqa: BLE001 - never worth the user's call
                warn_once("later_call_hook", f"before call {calls[0]} of graph {graph.label}: {exc!r}")
        return original(args)

    call.__wrapped__ = original  # type: ignore[attr-defined]  # Inductor's own: what the search copies
    compiled.current_callable = call


@contextlib.contextmanager
def _capturing(builder: CaptureBuilder) -> Iterator[None]:
    """Route this thread's IR logs and line marks to ``builder`` for the duration of the block."""
    previous_listener = ir_logging.set_listener(builder.on_ir)
    previous_recorder = recorder.activate(builder.recorder)
    previous_log = rewrites.activate_log(builder.rewrites)
    hooks = contextlib.ExitStack()
    try:
        hooks.enter_context(line_tags.tagging())
        hooks.enter_context(loop_body_origins.tracking())
    except Exception as exc:  # noqa: BLE001 - the compile goes on, its kernel lines untagged
        hooks.close()
        warn_once("hooks", f"could not hook Inductor's code generation ({exc!r}): kernel lines are not "
                           "mapped to their origins")
    try:
        with hooks:
            yield
    finally:
        ir_logging.set_listener(previous_listener)
        recorder.activate(previous_recorder)
        rewrites.activate_log(previous_log)


def _dump_quietly(graph: GraphCapture, directory: Any) -> None:
    from ..capture.dump import append_to_dump

    try:
        append_to_dump(graph, directory)
    except Exception as exc:  # noqa: BLE001
        warn_once("dump", f"could not write the capture to {directory}: {exc!r}")


def instrumented(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    *,
    mode: Optional[str] = None,
    options: Optional[Mapping[str, Any]] = None,
) -> Callable[..., Any]:
    """Dynamo backend: compile ``gm`` with Inductor and record every AOT graph it produces.

    ``mode`` and ``options`` are those of ``torch.compile``; ``options`` takes Inductor config
    keys plus this package's own (see :mod:`instrumented_backend.capture.options`). Raises ValueError
    for an unknown option.
    """
    settings = parse_options(mode, options)
    try:
        job = CompileJob(gm, settings)
    except Exception as exc:  # noqa: BLE001
        warn_once("start", f"could not start capturing ({exc!r}); compiling with plain Inductor")
        return compile_fx(gm, example_inputs, config_patches=settings.inductor_patches)
    patches = {**settings.inductor_patches, **CACHE_BYPASS_PATCHES}
    previous_log = rewrites.activate_log(job.rewrites)
    try:
        with autograd_cache_disabled():
            compiled = compile_fx(gm, example_inputs, inner_compile=job.inner_compile, config_patches=patches)
    finally:
        rewrites.activate_log(previous_log)
    if settings.check_accuracy:
        return diagnosis_hooks().accuracy_checked(compiled, job, settings.check_accuracy in (True, "raise"))
    return compiled


def compiles_instrumented(backend: Callable[..., Any]) -> Callable[..., Any]:
    """Mark ``backend``, a backend function that compiles each graph through :func:`instrumented`
    (the diagnosis's own, which record calls around it), as the instrumented backend: Dynamo then
    keeps, for the nodes of its graphs, the frames inside torch's own modules
    (:mod:`~instrumented_backend.seams.dynamo.dynamo_frames`), and their source lines are the ones a
    plain ``backend="instrumented"`` compile gives."""
    from ..seams.dynamo.dynamo_frames import BACKEND_MARK

    setattr(backend, BACKEND_MARK, True)
    return backend


_install_dynamo_frames()  # after ``instrumented`` is defined: it marks it
