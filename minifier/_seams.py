"""Every touch of torch's private internals the minifier makes, one function each.

``tests/test_minifier.py::test_seams`` calls each, so a torch release that moves one fails
loudly there. (The compile path itself is in :mod:`minifier.judge`: ``compile_fx_inner`` and
``compile_fx`` from ``torch._inductor.compile_fx``.)
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any, Optional

import torch

__all__ = ["changed_inductor_config", "module_source", "inside_compile", "start_cpu_isa_probe", "is_aten_op",
           "decomposes_when_traced",
           "symbolic_hint", "import_compiler", "op_defining_module", "subgraph_calls",
           "keep_fork_safe", "compile_without_threads", "idle_compile_pool_threads", "forget_compile_pool",
           "propagate_symbolic_sizes", "check_seams",
           "SeamMoved"]

# Settings that say where or how to cache, not how to compile: never carried into a repro.
_NOT_CARRIED = {"fx_graph_cache", "fx_graph_remote_cache", "autotune_local_cache", "autotune_remote_cache"}


def changed_inductor_config() -> dict[str, Any]:
    """Inductor config entries that differ from their defaults and can be written as literals."""
    import torch._inductor.config as config

    changed = {}
    for name, value in config.get_config_copy().items():
        if name in _NOT_CARRIED or name.startswith("_") or config._is_default(name):
            continue
        if isinstance(value, (bool, int, float, str, type(None))):
            changed[name] = value
    return changed


def module_source(module: torch.nn.Module) -> str:
    """Python source of a ``Repro`` nn.Module class equivalent to ``module`` (torch's repro writer)."""
    from torch._dynamo.debug_utils import NNModuleToString

    return NNModuleToString.convert(module)


def inside_compile() -> bool:
    """Is a torch.compile trace in progress on this thread? (Then in-process compiles see its fake mode.)"""
    from torch._guards import TracingContext

    return TracingContext.try_get() is not None


def start_cpu_isa_probe(*, remember: bool = False) -> Optional[threading.Thread]:
    """Run Inductor's CPU vector-ISA detection on background threads; join the result before compiling.

    A fresh process pays for it on its first C++ compile: each candidate ISA's test library is
    loaded by a short child process (about ten of them, one after another: seconds on a small
    machine). Here each x86 ISA the CPU advertises is probed on a thread of its own (every
    ``__bool__`` is cached per ISA object, so the threads never share one), then
    ``valid_vec_isa_list`` (cached for the process) reads those answers. A worker starts this
    while it imports. Returns None when detection cannot be started here.

    With ``remember=True`` a load another worker saw succeed is not repeated
    (:mod:`minifier.workers.isa_answers`).
    """
    import platform

    try:
        import torch._inductor.codecache  # noqa: F401 - what the probes import, imported here rather
        import torch._inductor.cpp_builder  # noqa: F401 - than on the threads (no import-lock races)
        import torch.utils._filelock  # noqa: F401

        # The probes' first build imports torch.utils.cpp_extension and with it setuptools, whose
        # distutils shim inserts itself into sys.meta_path and removes itself again: an import on
        # another thread iterating sys.meta_path meanwhile can skip the path finder and fail with
        # ModuleNotFoundError (seen once: multiprocessing.queues, imported by Inductor's compile path).
        import torch.utils.cpp_extension  # noqa: F401
        from torch._inductor import cpu_vec_isa
    except ImportError:
        return None
    if remember:
        from minifier.workers.isa_answers import remember_loads

        remember_loads(cpu_vec_isa.VecISA, os.path.join(os.path.dirname(torch.__file__), "lib"))

    def probe_each() -> None:
        try:
            if platform.machine() in ("x86_64", "AMD64") and sys.platform == "linux":
                flags = cpu_vec_isa.x86_isa_checker()
                isas = [isa for isa in cpu_vec_isa.supported_vec_isa_list
                        if all(flag in flags for flag in str(isa).split())]
                threads = [threading.Thread(target=bool, args=(isa,), daemon=True) for isa in isas]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
            cpu_vec_isa.valid_vec_isa_list()
        except Exception:  # noqa: BLE001 - the first compile detects again, and reports any error
            pass

    thread = threading.Thread(target=probe_each, name="minifier-cpu-isa-probe", daemon=True)
    thread.start()
    return thread


def keep_fork_safe() -> None:
    """Keep Inductor (and its progress bars) from starting threads or a compile sidecar process in
    this process, which forks workers: a thread alive at fork time can leave a lock held in the child.

    Inductor's Dynamo backend warms a compile pool unless ``TORCH_WARM_POOL`` is ``0``
    (``torch._inductor.async_compile.maybe_warm_pool``); tqdm starts a monitor thread for its
    first bar unless ``monitor_interval`` is 0.
    """
    os.environ["TORCH_WARM_POOL"] = "0"
    try:
        import tqdm

        tqdm.tqdm.monitor_interval = 0
    except ImportError:
        pass


def compile_without_threads(module: torch.fx.GraphModule, inputs: list[Any]) -> None:
    """Compile a post-AOT graph as a candidate is compiled, without running it and without
    Inductor's compile threads (``compile_threads=1``): it pays first-compile costs in a process
    that must stay safe to fork."""
    import torch._inductor.config as config
    from torch._inductor.compile_fx import compile_fx_inner

    with config.patch(compile_threads=1, fx_graph_cache=False):
        compile_fx_inner(module, inputs)


def idle_compile_pool_threads() -> Optional[set[int]]:
    """Python thread idents of Inductor's compile thread pool (an empty set when it was never
    started), or None while work is queued on it. Idle, its threads hold no lock: they wait on
    the pool's queue, so a fork of this process is safe beside them (see :func:`forget_compile_pool`)."""
    from torch._inductor.async_compile import AsyncCompile

    if AsyncCompile.pool.cache_info().currsize == 0:
        return set()
    executor = AsyncCompile.pool()
    if not executor._work_queue.empty():
        return None
    return {thread.ident for thread in list(executor._threads)}


def forget_compile_pool() -> None:
    """In a forked child: drop Inductor's compile thread pool, whose threads stayed in the parent
    (work sent to it would wait forever); the next compile that wants one starts its own. Inductor
    resets its process pools after a fork itself."""
    from torch._inductor.async_compile import AsyncCompile

    AsyncCompile.pool.cache_clear()


class SeamMoved(RuntimeError):
    """A private torch API the minifier (or its judge, embedded in repros) relies on has moved."""


def is_aten_op(target: Any) -> bool:
    """An op overload or higher-order operator: what a post-AOT (ATen-level) graph calls."""
    return isinstance(target, (torch._ops.OpOverload, torch._ops.HigherOrderOperator))


def decomposes_when_traced(target: Any) -> bool:
    """An op overload AOT autograd's trace always decomposes (a CompositeImplicitAutograd kernel, as
    ``aten.linear`` has): a graph calling one has not been through AOT (a Dynamo graph of an exported
    program's module calls ATen ops directly), and Inductor cannot lower it as it is."""
    return isinstance(target, torch._ops.OpOverload) and target.has_kernel_for_dispatch_key(
        torch._C.DispatchKey.CompositeImplicitAutograd)


def symbolic_hint(value: Any) -> Any:
    """The concrete value a SymInt/SymFloat/SymBool was traced with (None when it has none)."""
    return value.node.hint


def propagate_symbolic_sizes(module: torch.fx.GraphModule, inputs: list[Any], dynamic: dict[int, list[int]],
                             ints: list[int]) -> None:
    """Give each node of ``module`` a fake ``meta["val"]`` as a dynamic-shape trace would: the
    ``dynamic`` dims of ``inputs`` ({index: [dims]}) and the ``ints`` (indices) symbolic, sizes
    that follow from them symbolic too. For a graph that lost its meta values (a saved repro)."""
    from torch._dynamo.source import ConstantSource
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    shape_env = ShapeEnv()
    mode = FakeTensorMode(shape_env=shape_env)
    fakes: list[Any] = []
    for index, value in enumerate(inputs):
        source = ConstantSource(f"input_{index}")
        if isinstance(value, torch.Tensor):
            marked = set(dynamic.get(index, ()))
            sizes = [DimDynamic.DYNAMIC if d in marked else DimDynamic.STATIC for d in range(value.dim())]
            context = StatelessSymbolicContext(dynamic_sizes=sizes, constraint_sizes=[None] * value.dim())
            fakes.append(mode.from_tensor(value, source=source, symbolic_context=context))
        elif index in ints and isinstance(value, int):
            symbol = shape_env.create_symbol(value, source, dynamic_dim=DimDynamic.DYNAMIC)
            fakes.append(shape_env.create_symintnode(symbol, hint=value, source=source))
        else:
            fakes.append(value)
    with mode:
        FakeTensorProp(module, mode).propagate_dont_convert_inputs(*fakes)


def op_defining_module(op: Any) -> Optional[str]:
    """The module whose import defines ``op`` (a call_function target) in Python, or None for an op
    torch itself defines and for anything not an op overload: a ``torch.library.custom_op`` (its
    function's module), or an op given a fake kernel with ``torch.library.register_fake`` (that
    kernel's module)."""
    from torch._library import custom_ops, simple_registry

    if not isinstance(op, torch._ops.OpOverload):
        return None
    qualname = op._schema.name
    definition = custom_ops.OPDEFS.get(qualname)
    function = getattr(definition, "_init_fn", None)
    if function is None:
        fake = simple_registry.singleton.find(qualname).fake_impl.kernel
        function = getattr(fake, "func", None) or fake
    module = getattr(function, "__module__", None)
    if module is None or module == "torch" or module.startswith("torch."):
        return None
    return module


# Higher-order ops whose value is their subgraph's applied to their operands, by name:
# (position of the subgraph argument, position of the first operand, whether keyword arguments
# are the op's own options rather than the subgraph's). ``tag_activation_checkpoint(body, *args,
# use_reentrant=...)`` is ``torch.utils.checkpoint`` (it only trades memory for recomputing in the
# backward), ``wrap(body, *args)`` a region Dynamo keeps whole, ``invoke_subgraph(body, identifier,
# *args)`` a nested compile region, ``control_deps(deps, body, *args)`` Inductor's ordering wrapper
# (its post-grad passes wrap ops in it to keep their order: random ops under ``fallback_random``,
# every attention of a transformer; compiling the graph again wraps them again).
_SUBGRAPH_CALLS = {"control_deps": (1, 2, False), "tag_activation_checkpoint": (0, 1, True), "wrap": (0, 1, False),
                   "invoke_subgraph": (0, 2, False)}
# Their parameter names, as check_seams reads them.
_SUBGRAPH_CALL_PARAMETERS = {"control_deps": ["self", "additional_deps", "subgraph"],
                             "tag_activation_checkpoint": ["self", "gmod"], "wrap": ["self", "func"],
                             "invoke_subgraph": ["self", "subgraph", "identifier"]}


def subgraph_calls() -> dict[Any, tuple[int, int, bool]]:
    """The higher-order ops that only call a subgraph, found now (Inductor registers
    ``control_deps`` when it is imported), each with (subgraph position, first operand position,
    whether its keyword arguments are its own options). Inlining such a call computes the same
    values, and a graph calling subgraphs cannot be rebuilt in a worker."""
    found = {}
    for name, form in _SUBGRAPH_CALLS.items():
        op = getattr(torch.ops.higher_order, name, None)
        if op is not None:
            found[op] = form
    return found


def import_compiler() -> None:
    """Import Inductor's compile path ahead of the first candidate (a worker's warm-up)."""
    import torch._inductor.compile_fx  # noqa: F401


def check_seams() -> None:
    """Raise :class:`SeamMoved`, naming the API, if one the minifier or its judge uses has moved."""
    import inspect

    import torch._dynamo.utils as dynamo_utils
    import torch._functorch.config as functorch_config
    import torch._inductor.compile_fx as compile_fx_module
    import torch._inductor.config as config
    import torch._inductor.cpu_vec_isa as cpu_vec_isa

    for name in ("valid_vec_isa_list", "x86_isa_checker", "supported_vec_isa_list"):
        if not hasattr(cpu_vec_isa, name):
            raise SeamMoved(f"torch._inductor.cpu_vec_isa.{name} is gone "
                            "(workers detect the CPU's vector ISA ahead of their first compile)")
    probe_load = getattr(cpu_vec_isa.VecISA, "_probe_load", None)
    loads_through_it = "self._probe_load(output_path)" in inspect.getsource(cpu_vec_isa.VecISA.check_build)
    if not callable(probe_load) or not loads_through_it or \
            list(inspect.signature(probe_load).parameters) != ["self", "output_path"]:
        raise SeamMoved("torch._inductor.cpu_vec_isa.VecISA.check_build no longer loads its test library "
                        "through _probe_load(output_path) (workers remember its answers)")
    cached = [cpu_vec_isa.valid_vec_isa_list, getattr(cpu_vec_isa.VecISA, "_VecISA__bool__impl", None)]
    cached += [type(isa).__bool__ for isa in cpu_vec_isa.supported_vec_isa_list
               if type(isa).__bool__ is not cpu_vec_isa.VecISA.__bool__]
    if not all(hasattr(fn, "cache_info") for fn in cached):
        raise SeamMoved("torch._inductor.cpu_vec_isa's ISA checks are no longer cached per process "
                        "(probing them ahead of the first compile would be wasted)")
    for owner, name in ((compile_fx_module, "compile_fx"), (compile_fx_module, "compile_fx_inner"),
                        (config, "_is_default"), (dynamo_utils, "same")):
        if not callable(getattr(owner, name, None)):
            raise SeamMoved(f"{owner.__name__}.{name} is gone (the judge's compile path and comparison use it)")
    known = set(config.get_config_copy())
    for key in ("fx_graph_cache", "fx_graph_remote_cache", "fallback_random", "compile_threads"):
        if key not in known:
            raise SeamMoved(f"torch._inductor.config.{key} is gone (candidates are compiled with it set)")
    import inspect

    import torch._inductor.async_compile as async_compile

    warm_pool = getattr(async_compile, "maybe_warm_pool", None)
    if warm_pool is None or "TORCH_WARM_POOL" not in inspect.getsource(warm_pool):
        raise SeamMoved("torch._inductor.async_compile.maybe_warm_pool no longer reads TORCH_WARM_POOL "
                        "(the workers' zygote would start a compile pool and could not fork safely)")
    pool = getattr(async_compile.AsyncCompile, "pool", None)
    if not (hasattr(pool, "cache_info") and hasattr(pool, "cache_clear")):
        raise SeamMoved("torch._inductor.async_compile.AsyncCompile.pool is no longer a cached function "
                        "(a minifier zygote forked from the caller cannot drop the caller's compile threads)")
    from concurrent.futures import ThreadPoolExecutor

    executor = ThreadPoolExecutor(1)
    executor.shutdown()
    if not (hasattr(executor, "_work_queue") and hasattr(executor, "_threads")):
        raise SeamMoved("ThreadPoolExecutor has no _work_queue and _threads: whether Inductor's compile "
                        "thread pool is idle cannot be read")
    try:  # the fp64 referee replays the random draws (judge.RandomDraws)
        from torch.utils._python_dispatch import TorchDispatchMode  # noqa: F401
        seeded = torch.Tag.nondeterministic_seeded
    except (ImportError, AttributeError) as exc:
        raise SeamMoved(f"torch.utils._python_dispatch.TorchDispatchMode or torch.Tag.nondeterministic_seeded "
                        f"is gone ({exc}): the float64 referee cannot replay eager's random draws") from exc
    if any(seeded not in op.tags for op in (torch.ops.aten.native_dropout.default, torch.ops.aten.rand.default)):
        raise SeamMoved("random ATen ops are no longer tagged nondeterministic_seeded: the float64 referee finds "
                        "the draws it replays by that tag")
    if "enable_autograd_cache" not in functorch_config.get_config_copy():
        raise SeamMoved("torch._functorch.config.enable_autograd_cache is gone (candidates turn it off)")
    try:
        inside_compile()
    except (ImportError, AttributeError) as exc:
        raise SeamMoved(f"torch._guards.TracingContext.try_get is gone ({exc})") from exc
    if not isinstance(changed_inductor_config(), dict):
        raise SeamMoved("reading the changed Inductor config failed")
    try:
        if op_defining_module(torch.ops.aten.neg.default) is not None:
            raise SeamMoved("op_defining_module names a module for aten.neg")
    except (ImportError, AttributeError) as exc:
        raise SeamMoved(f"torch._library's custom-op registries moved ({exc}): the modules defining a "
                        "graph's custom ops are no longer found") from exc
    if not is_aten_op(torch.ops.aten.neg.default) or is_aten_op(torch.neg):
        raise SeamMoved("torch._ops.OpOverload no longer marks ATen op overloads")
    aten = torch.ops.aten
    if not decomposes_when_traced(aten.linear.default) or decomposes_when_traced(aten.addmm.default):
        raise SeamMoved("OpOverload.has_kernel_for_dispatch_key(CompositeImplicitAutograd) no longer tells the ops "
                        "AOT autograd decomposes (aten.linear) from those it keeps (aten.addmm)")
    if symbolic_hint(torch.fx.experimental.symbolic_shapes.ShapeEnv().create_unbacked_symint()) is not None:
        raise SeamMoved("SymInt.node.hint no longer says None for a size without a hint")
    if "class Repro" not in module_source(torch.fx.symbolic_trace(torch.nn.ReLU())):
        raise SeamMoved("torch._dynamo.debug_utils.NNModuleToString no longer writes a Repro class")
    from torch import _higher_order_ops  # noqa: F401 - registers wrap, tag_activation_checkpoint, invoke_subgraph

    for name, parameters in _SUBGRAPH_CALL_PARAMETERS.items():
        op = getattr(torch.ops.higher_order, name, None)
        if op is None or list(inspect.signature(type(op).__call__).parameters)[:len(parameters)] != parameters:
            raise SeamMoved(f"torch.ops.higher_order.{name}({', '.join(parameters[1:])}, *args) moved (graphs are "
                            "minified with the subgraphs it calls inlined)")
    relu = torch.fx.symbolic_trace(torch.nn.ReLU())
    try:
        propagate_symbolic_sizes(relu, [torch.ones(3, 2)], {0: [0]}, [])
        output = next(n for n in relu.graph.nodes if n.op == "call_function").meta["val"]
        moved = not isinstance(output.shape[0], torch.SymInt) or isinstance(output.shape[1], torch.SymInt)
    except (ImportError, AttributeError, TypeError) as exc:
        moved, output = True, exc
    if moved:
        raise SeamMoved(f"fake-tensor propagation with a ShapeEnv moved ({output!r}): a saved repro's symbolic "
                        "sizes are no longer propagated")
