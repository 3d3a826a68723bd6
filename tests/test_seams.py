"""Every touch of Inductor internals is checked here: a moved seam fails loudly, by name."""

from __future__ import annotations

import pytest
import torch

from instrumented_backend.seams import SeamMoved, all_checks


@pytest.mark.parametrize("name", sorted(all_checks()))
def test_seam_is_where_we_expect_it(name):
    all_checks()[name]()


def test_a_moved_ir_logger_is_reported(monkeypatch):
    import torch._inductor.debug as debug

    from instrumented_backend.seams.lowering import ir_logging

    monkeypatch.delattr(debug, "log_ir_pre_fusion")
    with pytest.raises(SeamMoved, match="log_ir_pre_fusion is gone"):
        ir_logging.check()


def test_a_moved_output_code_field_is_reported(monkeypatch):
    import dataclasses

    import torch._inductor.output_code as output_code

    from instrumented_backend.seams.codegen import output_code as seam

    real_fields = dataclasses.fields
    monkeypatch.setattr(dataclasses, "fields", lambda cls: [f for f in real_fields(cls) if f.name != "source_code"]
                        if cls is output_code.CompiledFxGraph else real_fields(cls))
    with pytest.raises(SeamMoved, match="no field 'source_code'"):
        seam.check()


def test_a_moved_cache_switch_is_reported(monkeypatch):
    from instrumented_backend.seams.aot import caches

    monkeypatch.setitem(caches.CACHE_BYPASS_PATCHES, "fx_graph_cache_v2", False)
    with pytest.raises(SeamMoved, match="fx_graph_cache_v2"):
        caches.check()


def test_a_moved_wrapper_loader_is_reported(monkeypatch):
    from torch._inductor.graph import GraphLowering

    from instrumented_backend.seams.codegen import wrapper_buffers

    monkeypatch.delattr(GraphLowering, "_compile_to_module_lines")
    with pytest.raises(SeamMoved, match="_compile_to_module_lines is gone"):
        wrapper_buffers.check()


def test_extern_buffers_no_longer_told_from_generated_ones_are_reported(monkeypatch):
    """buffer_origins keeps an extern call's line to its op by telling its buffer (an ExternKernel)
    from a generated kernel's (a ComputedBuffer)."""
    from torch._inductor import ir

    from instrumented_backend.seams.codegen import wrapper_buffers

    monkeypatch.delattr(ir, "ExternKernel")
    with pytest.raises(SeamMoved, match="ir.ExternKernel no longer tells"):
        wrapper_buffers.check()


def test_an_extern_kernel_that_no_longer_keeps_its_op_is_reported(monkeypatch):
    """buffer_origins tells a fallback's own node (``convolution_backward``, named by no
    ``origin_node``) by the ``op_overload`` every ExternKernel keeps."""
    from torch._inductor import ir

    from instrumented_backend.seams.codegen import wrapper_buffers

    def init(self, name, layout, inputs, constant_args=(), kwargs=None, op=None):  # keeps no op_overload
        self.name = name

    monkeypatch.setattr(ir.ExternKernel, "__init__", init)
    with pytest.raises(SeamMoved, match="no longer keeps its op_overload"):
        wrapper_buffers.check()


def test_a_copy_no_longer_made_over_its_inputs_loader_is_reported(monkeypatch):
    """A copy Inductor makes of a node's value (a fallback's layout) is recognised by its loader."""
    from torch._inductor import ir

    from instrumented_backend.seams.lowering import ir_origins

    def copy_input(x):  # a copy that no longer hands the input's loader on
        return ir.Pointwise.create(device=x.get_device(), dtype=x.get_dtype(), inner_fn=lambda index: None,
                                   ranges=x.get_size())

    monkeypatch.setattr(ir.ExternKernel, "copy_input", staticmethod(copy_input))
    with pytest.raises(SeamMoved, match="copy_input no longer makes a Pointwise"):
        ir_origins.check()


def test_a_changed_aoti_compile_entry_is_reported(monkeypatch):
    """AOTInductor's wrapper buffers are read in AotCodeCompiler.compile(graph, wrapper_code, ...)."""
    from torch._inductor.codecache import AotCodeCompiler

    from instrumented_backend.seams.codegen import wrapper_buffers

    monkeypatch.setattr(AotCodeCompiler, "compile", classmethod(lambda cls, source, graph: None))
    with pytest.raises(SeamMoved, match=r"AotCodeCompiler.compile\(graph, wrapper_code, ...\) changed"):
        wrapper_buffers.check()
    monkeypatch.setattr(AotCodeCompiler, "compile", staticmethod(lambda graph, wrapper_code: None))
    with pytest.raises(SeamMoved, match="AotCodeCompiler.compile is no longer a classmethod"):
        wrapper_buffers.check()



def test_a_moved_aoti_package_loader_is_reported(monkeypatch):
    """The AOTInductor diagnosis builds and loads a package through torch._inductor's two entries."""
    import torch._inductor

    from instrumented_backend.seams.runtime import aot_compile

    aot_compile.check()
    monkeypatch.delattr(torch._inductor, "aoti_load_package")
    with pytest.raises(SeamMoved, match="torch._inductor.aoti_load_package is gone"):
        aot_compile.check()
    monkeypatch.undo()

    def aoti_load_package(path):  # a loader that no longer goes through torch._inductor.package.load_package
        return path

    monkeypatch.setattr(torch._inductor, "aoti_load_package", aoti_load_package)
    with pytest.raises(SeamMoved, match="no longer imports torch._inductor.package.load_package"):
        aot_compile.check()


def test_a_changed_cpp_lowering_is_reported(monkeypatch):
    from torch._inductor.codegen.cpp import CppVecOverrides

    from instrumented_backend.seams.codegen import cpp_overrides

    monkeypatch.setattr(CppVecOverrides, "neg", lambda x: f"{x}.neg()")  # no longer a staticmethod
    with pytest.raises(SeamMoved, match="CppVecOverrides.neg is no longer a static method"):
        cpp_overrides.check()


def test_a_sign_lowering_that_stops_writing_a_code_block_is_reported(monkeypatch):
    from torch._inductor.codegen.cpp import CppOverrides

    from instrumented_backend.seams.codegen import cpp_overrides

    monkeypatch.setattr(CppOverrides, "sign", staticmethod(lambda x: f"c10::sign({x})"))
    with pytest.raises(SeamMoved, match="no longer returns a C.. lambda block"):
        cpp_overrides.check()


def test_ir_wrapper_is_installed_once_and_delegates():
    import torch._inductor.debug as debug

    from instrumented_backend.seams.lowering import ir_logging

    ir_logging.install()
    first = debug.log_ir_pre_fusion
    ir_logging.install()
    assert debug.log_ir_pre_fusion is first
    assert first._instrumented_backend_stage == "pre_fusion"
    assert first.__wrapped__ is ir_logging._originals["log_ir_pre_fusion"]

    delegated, seen = [], []
    wrapper = ir_logging._make_wrapper("post_fusion", lambda nodes: delegated.append(nodes) or "original")
    assert wrapper(["a"]) == "original" and seen == []  # no listener: only delegates
    previous = ir_logging.set_listener(lambda stage, nodes: seen.append((stage, nodes)))
    try:
        assert wrapper(["b"]) == "original"
    finally:
        ir_logging.set_listener(previous)
    assert seen == [("post_fusion", ["b"])] and delegated == [["a"], ["b"]]


def test_a_moved_fake_mode_switch_is_reported(monkeypatch):
    import torch._subclasses.fake_tensor as fake_tensor

    from instrumented_backend.seams.aot import fake_mode

    monkeypatch.delattr(fake_tensor, "unset_fake_temporarily")
    with pytest.raises(SeamMoved, match="unset_fake_temporarily is gone"):
        fake_mode.check()


def test_tensors_made_inside_a_compile_are_real_in_the_fake_mode_seam():
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    from instrumented_backend.seams.aot.fake_mode import real_tensors

    with FakeTensorMode():
        assert isinstance(torch.ones(2), FakeTensor)
        with real_tensors():
            assert not isinstance(torch.ones(2), FakeTensor)


def test_a_moved_memory_dependency_is_reported(monkeypatch):
    from torch._inductor.dependencies import MemoryDep

    from instrumented_backend.seams.codegen import kernel_traffic

    monkeypatch.setattr(MemoryDep, "get_numel", None)
    with pytest.raises(SeamMoved, match="kernel_traffic: MemoryDep.get_numel is gone"):
        kernel_traffic.check()


def test_a_renamed_kernel_profile_event_is_reported(monkeypatch):
    from instrumented_backend.seams.runtime import kernel_profile

    real = kernel_profile._source
    monkeypatch.setattr(kernel_profile, "_source",
                        lambda name: real(name).replace('prefix = "graph_"', 'prefix = "g_"'))
    with pytest.raises(SeamMoved, match="kernel_profile: C.. kernels no longer record"):
        kernel_profile.check()


def test_a_changed_kernel_rename_in_define_kernel_is_reported(monkeypatch):
    """Template kernels' lines are matched through define_kernel's placeholder rewrites."""
    import inspect

    from torch._inductor.codegen.cpp import CppScheduling

    from instrumented_backend.seams.codegen import line_tags

    real_getsource = inspect.getsource

    def getsource(obj):
        text = real_getsource(obj)
        if getattr(obj, "__qualname__", "") == "CppScheduling.define_kernel":
            return text.replace("str(Placeholder.KERNEL_NAME)", "Placeholder.KERNEL_NAME.value")
        return text

    monkeypatch.setattr(inspect, "getsource", getsource)
    assert CppScheduling.define_kernel  # the class is importable: only the rewrite moved
    with pytest.raises(SeamMoved, match=r"no longer rewrites str\(Placeholder.KERNEL_NAME\)"):
        line_tags.check()


def test_renamed_template_lines_match_what_define_kernel_wrote():
    from instrumented_backend.seams.codegen import line_tags

    pattern = line_tags.renamed_line_pattern("inline void Placeholder.KERNEL_NAME_micro_gemm(")
    assert pattern.fullmatch("inline void kernel_micro_gemm(")
    assert pattern.fullmatch("inline void cpp_fused_mm_0_micro_gemm(")
    assert not pattern.fullmatch("inline void kernel_micro_gemm_kernel(")
    assert line_tags.renamed_line_pattern("#pragma CMT loop").fullmatch("// loop")
    assert line_tags.renamed_line_pattern("auto tmp0 = in_ptr0[x0];") is None


def test_a_moved_lazy_graph_module_is_reported(monkeypatch):
    from torch.fx import _lazy_graph_module

    from instrumented_backend.seams.dynamo import lazy_graph

    monkeypatch.delattr(_lazy_graph_module._LazyGraphModule, "real_recompile")
    with pytest.raises(SeamMoved, match="lazy_graph: _LazyGraphModule.real_recompile is gone"):
        lazy_graph.check()


def test_a_dynamo_graphs_attributes_are_named_as_the_program_reaches_them():
    """Dynamo flattens an attribute's source into its name (``self___param_groups_0__params___0``);
    the seam reads the source it keeps, the graph copies carry it, and a dict's n-th key (an
    optimizer's state, keyed by its parameters) reads ``<key n>``."""
    from instrumented_backend.capture.graph_copy import GraphSnapshot
    from instrumented_backend.seams.dynamo.dynamo_sources import attribute_sources, readable_source

    model = torch.nn.Linear(4, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(2, 4)).sum().backward()
    optimizer.step()  # momentum buffers exist: the compiled step reads them from its state
    seen = []

    def keep(gm, example_inputs):
        seen.append(gm)
        return gm.forward

    torch._dynamo.reset()
    torch.compile(lambda: optimizer.step(), backend=keep)()
    torch._dynamo.reset()
    names = attribute_sources(seen[-1])
    assert "self.param_groups[0]['params'][0]" in names.values(), names
    assert any(name.startswith("self.state[<key 0>]") for name in names.values()), names
    assert attribute_sources(GraphSnapshot(seen[-1]).module()) == names
    assert attribute_sources(torch.fx.symbolic_trace(model)) == {}  # not a Dynamo graph
    assert readable_source("G['model']._modules['0'].weight") == "model._modules['0'].weight"


def test_a_moved_attribute_source_table_is_reported(monkeypatch):
    import inspect

    from instrumented_backend.seams.dynamo import dynamo_sources

    monkeypatch.setattr(inspect, "getsource", lambda obj: "")
    with pytest.raises(SeamMoved, match="no longer sets gm._param_name_to_source"):
        dynamo_sources.check()


def test_graph_copies_generate_their_code_on_first_use():
    from instrumented_backend.capture.graph_copy import GraphSnapshot

    gm = torch.fx.symbolic_trace(lambda x: torch.relu(x) + 1)
    clone = GraphSnapshot(gm).module()
    assert type(clone)._needs_recompile()  # no code generated yet
    assert clone.code == gm.code  # generated on first use, the same code
    torch.testing.assert_close(clone(torch.tensor([-1.0, 2.0])), torch.tensor([1.0, 3.0]))


def test_a_graph_snapshot_is_the_graph_as_it_was_when_taken():
    """The copy is built on first use, from the nodes and attributes as they were at the snapshot."""
    import copy

    from instrumented_backend.capture.graph_copy import GraphSnapshot

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(3, 3)
            self.register_buffer("shift", torch.ones(3))

        def forward(self, x):
            return torch.relu(self.lin(x)) + self.shift

    gm = torch.fx.symbolic_trace(Net())
    expected = copy.deepcopy(gm.graph).python_code("self").src
    x = torch.randn(2, 3)
    want = gm(x)
    metas = [node.meta for node in gm.graph.nodes]
    snapshot = GraphSnapshot(gm)
    for node in list(gm.graph.nodes):  # what a pass does to the original afterwards
        if node.target is torch.relu:
            node.replace_all_uses_with(node.args[0])
            gm.graph.erase_node(node)
    gm.shift = torch.zeros(3)
    gm.recompile()
    copy_ = snapshot.module()
    assert copy_ is snapshot.module()
    assert copy_.graph.python_code("self").src == expected
    assert all(new.meta is not old and new.meta == old for new, old in zip(copy_.graph.nodes, metas))
    torch.testing.assert_close(copy_(x), want)
    assert set(dict(copy_.named_buffers())) == {"shift"}


def test_an_unbuilt_snapshot_keeps_neither_the_original_nodes_nor_their_graph_alive():
    """A capture keeps its snapshots: they must not pin the graph Inductor compiled (its nodes,
    the Graph, the GraphModule and what hangs off them), only the node fields they copy."""
    import gc
    import weakref

    from instrumented_backend.capture.graph_copy import GraphSnapshot

    gm = torch.fx.symbolic_trace(torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU()))
    expected = gm.graph.python_code("self").src
    snapshot = GraphSnapshot(gm)
    graph, node = weakref.ref(gm.graph), weakref.ref(next(iter(gm.graph.nodes)))
    del gm
    gc.collect()
    assert graph() is None and node() is None
    assert snapshot.module().graph.python_code("self").src == expected


def test_a_node_that_no_longer_keeps_its_arguments_is_reported_by_the_snapshot_seam(monkeypatch):
    from instrumented_backend.seams.dynamo import graph_structure

    graph_structure.check()
    monkeypatch.setattr(torch.fx.Node, "args", property(lambda self: tuple(list(self._args))))
    with pytest.raises(SeamMoved, match="graph_structure: torch.fx.Node no longer keeps its args"):
        graph_structure.check()


def test_an_input_spec_that_no_longer_lays_out_keywords_is_reported_by_the_snapshot_seam(monkeypatch):
    """Profiling an exported program's eager side lays its keyword arguments out by that spec."""
    import torch.fx._pytree as fx_pytree

    from instrumented_backend.seams.dynamo import graph_structure

    original = fx_pytree.tree_flatten_spec
    monkeypatch.setattr(fx_pytree, "tree_flatten_spec", lambda *a, **k: original(*a, **k)[::-1])
    with pytest.raises(SeamMoved, match=r"no longer lays out \(x, \*, y\) as \[x, y\]"):
        graph_structure.check()


def test_the_seam_list_names_every_seam_module_once():
    import pkgutil

    from instrumented_backend import seams

    # one subpackage per compiler stage, every module in the stage's folder, and nothing loose
    assert sorted(m.name for m in pkgutil.iter_modules(seams.__path__)) == sorted(seams.STAGES)
    for stage, names in seams.STAGES.items():
        folder = [seams.__path__[0] + "/" + stage]
        assert sorted(m.name for m in pkgutil.iter_modules(folder)) == sorted(names), stage
        assert all(seams.seam_module(name).__name__ == f"{seams.__name__}.{stage}.{name}" for name in names)
    modules = sorted(name for names in seams.STAGES.values() for name in names)
    assert sorted(seams.SEAMS) == modules and len(set(seams.SEAMS)) == len(seams.SEAMS)
    assert set(seams.CAPTURE_SEAMS) <= set(seams.SEAMS)
    for name in seams.CAPTURE_SEAMS:
        assert callable(getattr(seams.seam_module(name), "install", None)), name


def test_private_torch_apis_are_touched_only_in_seams():
    """Outside seams/ (and minifier/_seams.py), the package reaches torch through public APIs."""
    import re

    from conftest import REPO

    private = re.compile(r"\btorch\.(_inductor|_dynamo|_functorch|_subclasses|_ops|_TorchCompile)\b|\.node\.hint\b")
    offenders = []
    for folder in ("instrumented_backend", "minifier"):
        for path in sorted((REPO / folder).rglob("*.py")):
            relative = path.relative_to(REPO).as_posix()
            # judge.py is embedded, verbatim, in standalone repro scripts (torch and the standard
            # library only): its compile path stays in it and minifier._seams.check_seams checks it.
            if relative.startswith("instrumented_backend/seams/") or relative in ("minifier/_seams.py",
                                                                                   "minifier/judge.py"):
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                code = line.split("#", 1)[0]
                if private.search(code) and not code.strip().startswith(("\"", "'", "f\"")):
                    offenders.append(f"{relative}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_define_kernel_is_wrapped_once_per_scheduler_with_listeners_in_a_fixed_order():
    import importlib

    from instrumented_backend import seams
    from instrumented_backend.seams.codegen import define_kernel

    seams.install_capture_seams()
    for module_name, class_name, _ in define_kernel.SCHEDULERS:
        method = getattr(importlib.import_module(module_name), class_name).define_kernel
        assert hasattr(method, "__wrapped__"), f"{class_name}.define_kernel is not wrapped"
        assert not hasattr(method.__wrapped__, "__wrapped__"), f"{class_name}.define_kernel is wrapped twice"
    assert define_kernel.LISTENERS == ("line_tags", "kernel_traffic")
    assert all(callable(seams.seam_module(name).on_define_kernel) for name in define_kernel.LISTENERS)


def test_scoped_patches_are_all_in_place_or_none_and_restore_what_was_there():
    """A replacement that fails to apply takes out the ones already in place; leaving the last
    scope restores each attribute (an inherited one is inherited again)."""
    from instrumented_backend.seams import ScopedPatches

    class Base:
        def greet(self):
            return "base"

    class Child(Base):
        def name(self):
            return "child"

    def broken(original):
        raise RuntimeError("cannot wrap")

    failing = ScopedPatches(lambda: [(Child, "name", lambda original: lambda self: "patched"),
                                     (Child, "greet", broken)])
    with pytest.raises(RuntimeError, match="cannot wrap"):
        with failing.active():
            pass
    assert Child().name() == "child" and "greet" not in Child.__dict__

    working = ScopedPatches(lambda: [(Child, "greet", lambda original: lambda self: "hooked " + original(self))])
    with working.active():
        assert Child().greet() == "hooked base" and Base().greet() == "base"
        with working.active():
            assert Child().greet() == "hooked base"
        assert Child().greet() == "hooked base"
    assert Child().greet() == "base" and "greet" not in Child.__dict__


def test_the_frames_dynamo_skips_are_collected_once_each_and_the_list_put_back():
    from torch._dynamo.eval_frame import dynamo_tls

    from instrumented_backend.seams.dynamo.dynamo_skips import skipped_frames

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    torch.compiler.reset()  # Dynamo notes a frame only the first time it skips it
    before = dynamo_tls.skip_reasons
    with skipped_frames() as skipped:
        for _ in range(2):
            torch.compile(model._call_impl, backend="eager")(torch.randn(2, 4))
    assert any(s.startswith("forward (") and "container.py" in s and "skipfiles" in s for s in skipped), skipped
    assert len(set(skipped)) == len(skipped) and dynamo_tls.skip_reasons is before


def test_the_frames_skipped_before_a_fullgraph_compile_in_the_block_are_kept():
    """A fullgraph compile starts a skip list of its own and ends with none: `run` wraps a whole
    script, and the frames Dynamo had skipped before such a compile were lost."""
    from torch._dynamo.eval_frame import dynamo_tls

    from instrumented_backend.seams.dynamo.dynamo_skips import skipped_frames

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh())
    torch.compiler.reset()
    before = dynamo_tls.skip_reasons
    with skipped_frames() as skipped:
        torch.compile(model._call_impl, backend="eager")(torch.randn(2, 4))
        torch.compile(lambda x: x.cos() + 1, backend="eager", fullgraph=True)(torch.randn(3))
    assert any(s.startswith("forward (") and "container.py" in s for s in skipped), skipped
    assert dynamo_tls.skip_reasons is before


def test_a_frame_refused_at_the_recompile_limit_is_named_as_failed_with_the_guard_that_failed():
    """Past ``recompile_limit`` Dynamo refuses the frame ("compilation failed with a custom frame
    execution strategy") and records the refusal with no code object: each later call whose guards
    fail ran eagerly, and `run` said nothing of it."""
    from instrumented_backend.capture.skipped_frames import failed_frames
    from instrumented_backend.seams.dynamo.dynamo_skips import skipped_frames

    def scaled(x, mode):
        return torch.relu(x) * len(mode) if mode.startswith("a") else x

    torch.compiler.reset()
    compiled = torch.compile(scaled, backend="eager")
    with torch._dynamo.config.patch(recompile_limit=2), skipped_frames() as skipped:
        for n in range(1, 5):
            compiled(torch.randn(3), "a" * n)
    [frame] = failed_frames(skipped)
    assert (frame.name, frame.line) == ("scaled", scaled.__code__.co_firstlineno), frame
    assert frame.reason.startswith("its compile failed: Unsupported: Dynamo recompile limit exceeded"), frame
    assert frame.reason.endswith("(recompiled as 0/1: mode == 'aa' failed)"), frame


def test_a_frames_recompiles_are_counted_with_their_guards_and_the_limit_that_stopped_them():
    """A string argument guarded as a constant recompiles the frame on each new value, seconds a
    compile, and past the limit its calls run eagerly: `run` and `profile` say how often and why."""
    from instrumented_backend.capture.recompiles import recompiles_of

    def scaled(x, mode):
        return torch.relu(x) * len(mode)

    def shifted(x, n):
        return x + n

    torch.compiler.reset()
    compiled, steady = torch.compile(scaled, backend="eager"), torch.compile(shifted, backend="eager")
    with torch._dynamo.config.patch(recompile_limit=3):
        for n in range(1, 6):
            compiled(torch.randn(3), "a" * n)
            steady(torch.randn(3), n)  # an int becomes dynamic at its first change: two compiles
    frames = recompiles_of(compiled)
    assert frames is not None and frames.frame == f"scaled ({__file__}:{scaled.__code__.co_firstlineno})", frames
    assert frames.compiles == 3 and frames.limit_hit and frames.guards[:2] == ["mode == 'a'", "mode == 'aa'"], frames
    assert "was compiled 3 times, 2 of them recompiles" in frames.summary()
    assert "Dynamo's recompile limit stopped it" in frames.summary()
    assert recompiles_of(steady) is None and recompiles_of(steady, at_least=2).compiles == 2
    for _ in range(3):  # compiled afresh after each reset: first compiles, none of them a recompile
        torch.compiler.reset()
        steady(torch.randn(3), 1)
    assert recompiles_of(steady, at_least=2) is None


def test_a_training_steps_backward_compiles_are_not_counted_as_its_frames_compiles():
    """Each training graph's backward, compiled at its first ``backward()``, leaves Dynamo a record
    with no code object under its forward's compile id, as a compile the recompile limit refused
    does: a ViT training step compiled twice (Hugging Face sets ``config.problem_type`` in its first
    call, a guard that then fails) was "compiled 3 times", and with a backward refused "at the limit"."""
    from instrumented_backend.capture.recompiles import recompiles_of
    from instrumented_backend.seams.dynamo.dynamo_reasons import frame_compiles

    def scaled(x, mode):
        return torch.relu(x) * len(mode)

    torch.compiler.reset()
    compiled = torch.compile(scaled, backend="aot_eager")
    for n in range(1, 3):
        compiled(torch.randn(3, requires_grad=True), "a" * n).sum().backward()
    code = scaled.__code__
    records = frame_compiles(code.co_name, code.co_filename, code.co_firstlineno)
    assert [(r.compile_id, r.refused) for r in records] == [("0/0", False), ("0/1", False)], records
    assert recompiles_of(compiled) is None and recompiles_of(compiled, at_least=2).compiles == 2
    compiled(torch.randn(3, requires_grad=True), "aaa").sum().backward()
    frames = recompiles_of(compiled)
    assert frames.compiles == 3 and not frames.limit_hit, frames


def test_a_recompiled_target_run_as_a_decorators_wrapper_is_named_as_the_script_names_it():
    """``model.forward = torch.compile(model.forward)`` on a Hugging Face model, whose forward is
    decorated: the frame Dynamo compiles is transformers' ``wrapper``, and `run` said only
    "wrapper (.../generic.py:937) was compiled 3 times", never which model's forward that was."""
    import functools

    from instrumented_backend.capture.recompiles import recompiles_of

    def logged(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            return fn(*args, **kwargs)
        return wrapper

    @logged
    def forward(x, mode):
        return x * len(mode)

    torch.compiler.reset()
    compiled = torch.compile(forward, backend="eager")
    for n in range(1, 4):
        compiled(torch.randn(3), "a" * n)
    frames = recompiles_of(compiled, name="Model.forward")
    line = forward.__code__.co_firstlineno  # the wrapper's def: functools.wraps keeps its code
    assert frames is not None and frames.frame == f"Model.forward (wrapper at {__file__}:{line})", frames
    assert "args[1] == 'a'; args[1] == 'aa'" in frames.summary(), frames.summary()  # guards apart: they hold commas
    assert recompiles_of(compiled).frame.startswith("wrapper ("), "no name: the frame's own"


def test_unreadable_compile_records_leave_recompiles_unreported_with_one_warning(monkeypatch):
    import torch._dynamo.utils as dynamo_utils

    from instrumented_backend.capture.recompiles import recompiles_of
    from instrumented_backend.fail_soft import InstrumentationWarning, reset_warnings

    def moved() -> list:
        raise AttributeError("'CompilationMetrics' object has no attribute 'co_name'")

    monkeypatch.setattr(dynamo_utils, "get_compilation_metrics", moved)
    reset_warnings()
    with pytest.warns(InstrumentationWarning, match="could not read Dynamo's compile records"):
        assert recompiles_of(lambda x: x) is None


def test_a_generator_expression_dynamo_refused_is_not_named_as_a_failed_frame():
    """Dynamo refuses every generator frame handed to it on its own (a BLOOM training step's
    backward runs ``inspect``'s genexpr with Dynamo's callback on): naming it made `diagnose` say a
    frame of the user's program was not judged."""
    from instrumented_backend.capture.skipped_frames import failed_frames

    skipped = ["<genexpr> (/usr/lib/python3.11/inspect.py:3019): an error was suppressed during compilation",
               "forward (/work/model.py:8): an error was suppressed during compilation",
               "helper (/work/model.py:20): frame is in the Dynamo skipfiles list"]
    assert [(frame.name, frame.line) for frame in failed_frames(skipped)] == [("forward", 8)]


def test_a_moved_skip_reason_list_is_reported(monkeypatch):
    import inspect

    from instrumented_backend.seams.dynamo import dynamo_skips

    monkeypatch.setattr(inspect, "getsource", lambda obj: "")
    with pytest.raises(SeamMoved, match="no longer records into"):
        dynamo_skips.check()


def test_a_moved_failed_frame_skip_reason_is_reported(monkeypatch):
    import inspect

    from instrumented_backend.seams.dynamo import dynamo_skips

    # add_skip_reason still records; convert_frame's module no longer names a failed frame so
    monkeypatch.setattr(inspect, "getsource", lambda obj: "dynamo_tls.skip_reasons" if callable(obj) else "")
    with pytest.raises(SeamMoved, match="convert_frame no longer skips a failed frame as"):
        dynamo_skips.check()


def test_a_moved_compile_failure_record_is_reported(monkeypatch):
    import dataclasses

    import torch._dynamo.utils as dynamo_utils

    from instrumented_backend.seams.dynamo import dynamo_reasons

    dynamo_reasons.check()
    kept = [(f.name, f.type) for f in dataclasses.fields(dynamo_utils.CompilationMetrics) if f.name != "fail_reason"]
    monkeypatch.setattr(dynamo_utils, "CompilationMetrics", dataclasses.make_dataclass("CompilationMetrics", kept))
    with pytest.raises(SeamMoved, match=r"no longer has \['fail_reason'\] \(why a frame's compile failed\)"):
        dynamo_reasons.check()


def test_a_moved_compile_wrapper_is_reported(monkeypatch):
    from instrumented_backend.seams.dynamo import compile_wrappers

    compile_wrappers.check()

    def calls_only_its_own_impl(self, *args, **kwargs):  # a __call__ that ignores module.compile()
        return self._call_impl(*args, **kwargs)

    monkeypatch.setattr(torch.nn.Module, "_wrapped_call_impl", calls_only_its_own_impl)
    with pytest.raises(SeamMoved, match="Module.compile\\(\\) no longer stores _compiled_call_impl"):
        compile_wrappers.check()


def test_compile_settings_kept_elsewhere_are_reported(monkeypatch):
    """Inductor's torch.compile wrapper keeping the mode and options somewhere else than
    ``config``: the settings read off a compiled target would silently be none."""
    from instrumented_backend.seams.dynamo import compile_wrappers

    original_init = torch._TorchCompileInductorWrapper.__init__

    def keeps_them_elsewhere(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        self.settings, self.config = self.config, {}

    monkeypatch.setattr(torch._TorchCompileInductorWrapper, "__init__", keeps_them_elsewhere)
    with pytest.raises(SeamMoved, match="no longer keeps its settings where compile_settings reads them"):
        compile_wrappers.check()


def test_a_moved_fake_tensor_meta_failure_log_is_reported(monkeypatch):
    import inspect

    from instrumented_backend.seams.aot import fake_tensor_log

    fake_tensor_log.check()
    monkeypatch.setattr(inspect, "getsource", lambda obj: "")
    with pytest.raises(SeamMoved, match="no longer logs 'failed while attempting to run meta'"):
        fake_tensor_log.check()


def test_a_lowering_step_that_no_longer_takes_the_node_as_n_is_reported(monkeypatch):
    from torch._inductor.graph import GraphLowering

    from instrumented_backend.seams.lowering import lowering_node

    monkeypatch.setattr(GraphLowering, "run_node", lambda self, node: None)
    with pytest.raises(SeamMoved, match=r"takes \['self', 'node'\], not \(self, n\)"):
        lowering_node.check()


def test_a_module_path_is_named_as_named_modules_names_it():
    """Dynamo's ``nn_module_stack`` paths start at the compiled frame's local (``self``, ``fn``, an
    argument) and may index children; the path users know is ``named_modules()``'s."""
    from instrumented_backend.seams.dynamo.dynamo_sources import module_name

    assert module_name("L['self'].transformer.h.0.mlp.act") == "transformer.h.0.mlp.act"
    assert module_name("L['fn'].1") == "1"
    assert module_name("L['self'].layers[3].act") == "layers.3.act"
    assert module_name("L['self'].h._modules['0'].mlp") == "h.0.mlp"
    assert module_name("G['model'].layers[0]") == "model.layers.0"  # a global keeps its own name
    assert module_name("L['model']") == ""
    # a bound method under a wrapper (``@torch.no_grad()`` on it): the object's attribute path
    assert module_name("L['fn'].__self__.model.0") == "model.0" and module_name("L['fn'].__self__") == ""


def test_the_frame_inside_torchs_modules_is_kept_only_for_the_instrumented_backend():
    """dynamo_frames keeps, for a node Dynamo made inside torch/nn/modules (no stack_trace), the
    line being traced; a compile for another backend is left as Dynamo made it."""
    import instrumented_backend as ib
    from instrumented_backend.seams.dynamo.dynamo_frames import FRAME_KEY, traced_frame

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))
    seen = []

    def keep(gm, example_inputs):
        seen.extend(n.meta.get(FRAME_KEY) for n in gm.graph.nodes if n.op == "call_function")
        return gm.forward

    torch._dynamo.reset()
    torch.compile(model, backend=keep)(torch.randn(3, 4))
    assert seen and not any(seen), seen
    torch._dynamo.reset()
    with ib.capture() as session:
        torch.compile(model, backend="instrumented")(torch.randn(3, 4))
    frames = [traced_frame(n) for n in session[0].dynamo_graph.graph.nodes if n.op == "call_function"]
    assert frames and all(frames), frames
    assert any(code.startswith("return F.batch_norm(") for _, _, _, code in frames), frames


def test_a_tracer_that_no_longer_makes_nodes_through_create_proxy_is_reported(monkeypatch):
    from torch._dynamo import output_graph

    from instrumented_backend.seams.dynamo import dynamo_frames

    monkeypatch.delattr(output_graph.SubgraphTracer, "create_proxy")
    with pytest.raises(SeamMoved, match="SubgraphTracer.create_proxy is gone"):
        dynamo_frames.check()


def test_names_used_reads_a_classs_code_as_its_checks_need_it():
    """What the checks of large classes read instead of their source (which ``inspect`` finds by
    parsing the whole file): every name a class's own functions use, nested ones included, its
    call-time imports and its string keys; not a name only another class uses."""
    from instrumented_backend.seams import names_used

    class Traced:
        def run(self):
            from torch._inductor.debug import log_ir_pre_fusion

            def inner():
                return self.output_graph.current_tx

            return log_ir_pre_fusion, inner, {"stack_trace": 1}

        @property
        def size(self):
            return self._size

        @staticmethod
        def build():
            return is_co_filename_from_nn_modules()  # noqa: F821 - a global name, never called here

    used = names_used(Traced)
    assert {"torch._inductor.debug", "log_ir_pre_fusion", "current_tx", "output_graph", "stack_trace", "_size",
            "is_co_filename_from_nn_modules"} <= used
    assert "reduction_prefix_generators" not in used and "log_ir_post_fusion" not in used
    assert "current_tx" in names_used(Traced.run) and "_size" not in names_used(Traced.run)


def test_a_scheduler_that_no_longer_imports_the_ir_loggers_at_call_time_is_reported(monkeypatch):
    import instrumented_backend.seams as seams
    from instrumented_backend.seams.lowering import ir_logging

    monkeypatch.setattr(ir_logging, "names_used", lambda owner: seams.names_used(owner) - {"log_ir_post_fusion"})
    with pytest.raises(SeamMoved, match="no longer imports log_ir_pre_fusion/log_ir_post_fusion at call time"):
        ir_logging.check()


def test_lowering_replacements_no_longer_marked_are_reported(monkeypatch):
    import instrumented_backend.seams as seams
    from instrumented_backend.seams.lowering import lowering_patterns

    monkeypatch.setattr(lowering_patterns, "names_used",
                        lambda owner: seams.names_used(owner) - {lowering_patterns.MARK})
    with pytest.raises(SeamMoved, match="register_lowering_pattern no longer marks its handlers"):
        lowering_patterns.check()


def test_scalar_constants_moved_is_reported_and_the_counterfactual_rounds_only_the_ops_named(monkeypatch):
    """The seam's compile rounds a float16 op's Python float as eager does, for the ops it is
    given only; a ``promote_constants`` that takes other parameters fails its check."""
    from torch._inductor import lowering

    from instrumented_backend.seams.aot.caches import compile_caches_disabled
    from instrumented_backend.seams.lowering import scalar_constants

    def rem(x: torch.Tensor) -> torch.Tensor:
        return torch.remainder(x, 3.14)

    x = torch.tensor([3.140625, -4.0], dtype=torch.float16)
    with compile_caches_disabled():
        torch._dynamo.reset()
        with scalar_constants.scalars_rounded(frozenset({"aten::remainder.Scalar"})):
            rounded = torch.compile(rem)(x)
        torch._dynamo.reset()
        with scalar_constants.scalars_rounded(frozenset({"aten::add.Tensor"})):
            as_written = torch.compile(rem)(x)
        torch._dynamo.reset()
    assert torch.equal(rounded, rem(x)) and not torch.equal(as_written, rem(x))
    assert lowering.promote_constants.__name__ == "promote_constants"  # put back

    monkeypatch.setattr(lowering, "promote_constants", lambda inputs, dtype=None: inputs)
    with pytest.raises(SeamMoved, match="promote_constants is gone or no longer takes"):
        scalar_constants.check()


def test_the_constants_inductor_sets_on_a_loaded_module_are_read_from_it():
    """Frozen parameters are ``name = None`` in the output code until Inductor sets them on the
    module it loaded: the search's copy of the code reads them there."""
    from instrumented_backend.seams.codegen.output_code import loaded_constants

    weight = torch.ones(2)
    namespace = {"_frozen_param0": weight, "unset": None}
    exec("def call(args):\n    return args", namespace)  # noqa: S102 - a stand-in for a loaded output code

    class Compiled:
        current_callable = staticmethod(namespace["call"])

    assert loaded_constants(Compiled(), ["_frozen_param0", "unset", "absent"]) == {"_frozen_param0": weight}
    assert loaded_constants(object(), ["_frozen_param0"]) == {}


def test_a_compiled_graph_that_no_longer_keeps_its_loaded_call_is_reported(monkeypatch):
    import instrumented_backend.seams as seams
    from instrumented_backend.seams.codegen import output_code

    monkeypatch.setattr(seams, "names_used", lambda owner: frozenset())
    with pytest.raises(SeamMoved, match="no longer keeps the loaded module's call as current_callable"):
        output_code.check()
