"""AOTInductor: ``ib.aoti_compile_and_package`` runs PyTorch's own call with the graph captured."""

from __future__ import annotations

import inspect
import zipfile
from pathlib import Path

import pytest
import torch
import torch.utils._pytree as pytree
from wrapper_faults import GeluBlock, tanh_wrong_in_cpp_wrapper_builds, tanh_wrong_with_symbolic_sizes

import instrumented_backend as ib


class _MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(16, 32), torch.nn.Linear(32, 8)
        self.gain = torch.nn.Parameter(torch.linspace(0.5, 1.5, 8))  # a constant a generated kernel loads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.neg(torch.relu(self.fc1(x)))
        return self.fc2(h) * self.gain


def _sources(package: str) -> dict[str, bytes]:
    """The generated C++ sources in a package, without the ``// Compile cmd`` trailer the build
    appends to a file it compiles (there or not depending on whether this package's build or an
    earlier one compiled that file: a build record, not generated code)."""
    with zipfile.ZipFile(package) as archive:
        return {Path(name).name: archive.read(name).split(b"\n// Compile cmd\n")[0]
                for name in archive.namelist() if name.endswith(".cpp")}


@pytest.fixture(scope="module")
def packages(tmp_path_factory):
    torch.manual_seed(0)
    model, x = _MLP().eval(), torch.randn(4, 16)
    exported = torch.export.export(model, (x,))
    out = tmp_path_factory.mktemp("aoti")
    with torch._inductor.config.patch(fx_graph_cache=False):  # both generate, neither reads a cache
        plain = torch._inductor.aoti_compile_and_package(exported, package_path=str(out / "plain.pt2"))
    ours = ib.aoti_compile_and_package(exported, package_path=str(out / "ours.pt2"))
    return model, x, plain, ours, ib.last_capture()


def test_the_package_is_pytorchs_and_runs(packages):
    model, x, plain, ours, _ = packages
    assert _sources(ours) and _sources(ours) == _sources(plain)
    loaded = torch._inductor.aoti_load_package(ours)
    assert torch.allclose(loaded(x), model(x))


def test_the_aot_graph_is_captured_with_kernels_and_source_lines(packages):
    capture = packages[4]
    assert capture.complete and capture.kind == "inference", capture.problems
    assert capture.label.endswith(" aoti inference")  # no Dynamo frame id: named for what compiled it
    assert "AOTInductorModel::run_impl" in capture.output_code
    generated = [k for k in capture.kernels if k.kind == "cpp"]
    externs = [k for k in capture.kernels if k.kind == "extern"]
    assert generated and externs and all(k.name.startswith("aoti_torch_cpu_") for k in externs)
    [neg] = [line for k in generated for line in k.lines if "ops.neg" in line.ir_ops]
    assert neg.fx_nodes == ["neg"] and neg.source.code == "h = torch.neg(torch.relu(self.fc1(x)))"
    launch = [line for line in capture.wrapper_lines if line.number in generated[0].call_lines]
    assert launch and "neg" in launch[0].fx_nodes
    assert "fc1" in capture.dynamo_graph_code  # the exported program's graph stands for the Dynamo graph
    # The weights are constants in an exported graph (get_attr nodes): a line loading one is
    # sourced to the line that first uses it, as a graph input's is.
    coverage = ib.line_coverage([capture])
    assert coverage.sourced_percent == 100.0, coverage.unsourced_nodes
    # Library calls (aoti_torch_cpu_addmm_out) map to their node and line, through the buffers
    # the wrapper names, read when AOTInductor compiles it into the package.
    assert coverage.extern_calls_tagged_percent == 100.0
    first = [k.lines[0] for k in externs][0]
    assert first.fx_nodes[0] == "addmm" and first.source.code == "h = torch.neg(torch.relu(self.fc1(x)))"
    assert capture.nodes["gain"].attribution == "constant" and capture.nodes["gain"].first_use is not None
    # A constant's reference (``auto& fc1_weight = constants_->at(0);``) and the size arrays serve
    # the statement that first uses them: the wrapper's statements are tagged but for boilerplate.
    [weight] = [line for line in capture.wrapper_lines if "fc1_weight = constants_" in line.text]
    assert weight.fx_nodes[0] == "addmm", weight
    assert coverage.wrapper_statements_tagged_percent >= 90.0, \
        [line.text.strip() for line in capture.wrapper_lines if not line.tagged]


# ---------------------------------------------------------------- diagnose(exported_program)

@pytest.fixture(scope="module")
def gelu_block():
    torch.manual_seed(0)
    model, x = GeluBlock().eval(), torch.randn(4, 16)
    return torch.export.export(model, (x,)), x


def test_a_bug_only_the_c_wrapper_builds_have_is_blamed_on_the_wrapper_not_a_kernel(gelu_block, tmp_path):
    exported, x = gelu_block
    with tanh_wrong_in_cpp_wrapper_builds():
        result = ib.diagnose(exported, x, out_dir=tmp_path, minify=False, progress=False)
    package = result.package
    assert result.verdict == package.verdict == "inaccurate", result.render()
    assert "matches eager, so the bug is in what AOTInductor changes" in package.python_wrapper
    assert "cpp_wrapper=True, it fails alike (inaccurate): the C++ wrapper's code" in package.cpp_wrapper
    assert not result.divergence.found and "only the AOTInductor package fails" in result.divergence.note
    assert [step.name for step in result.steps] == ["AOTInductor package", "Python-wrapper build",
                                                   "cpp_wrapper build"]
    assert [step.summary for step in result.steps] == ["inaccurate", "passed", "inaccurate"]


def test_a_bug_only_symbolic_sizes_show_is_searched_in_a_dynamic_build_of_the_same_graph(tmp_path):
    """A package exported with a dynamic batch has kernels with symbolic sizes; the Python-wrapper
    build judged beside it was specialised to the inputs' sizes, so a bug only symbolic sizes show
    was put down to AOTInductor, unsearched. Built again with dynamic=True, it fails alike."""
    torch.manual_seed(0)
    model, x = GeluBlock().eval(), torch.randn(4, 16)
    exported = torch.export.export(model, (x,), dynamic_shapes={"x": {0: torch.export.Dim("batch")}})
    with tanh_wrong_with_symbolic_sizes():  # patched in this process only: a minifier worker may not have it
        result = ib.diagnose(exported, x, out_dir=tmp_path, minify=False, progress=False)
    package = result.package
    assert result.verdict == package.verdict == "inaccurate", result.render()
    assert "matches eager with sizes specialised to these inputs; built again with dynamic=True" in \
        package.python_wrapper and "fails alike (inaccurate): the bug needs symbolic sizes" in package.python_wrapper
    first_steps = [(step.name, step.summary) for step in result.steps][:2]
    assert first_steps == [("AOTInductor package", "inaccurate"), ("Python-wrapper build, sizes specialised", "passed")]
    divergence = result.divergence
    assert divergence.found and divergence.culprit.startswith("tanh"), divergence.render()
    assert {line.source.code for line in divergence.key_lines} == {
        'return x + torch.tanh(self.fc2(torch.nn.functional.gelu(self.fc1(x), approximate="tanh")))'}
    # the culprit compiled alone with symbolic sizes, as the build searched: specialised, it matched eager
    assert ("tanh", True) in divergence.narrowed, divergence.render()


def test_an_exported_program_is_diagnosed_for_inference_with_its_package_settings_only(gelu_block):
    exported, x = gelu_block
    with pytest.raises(ValueError, match="runs inference only"):
        ib.diagnose(exported, x, train=True)
    with pytest.raises(ValueError, match=r"not \['dynamic'\]: export fixed them"):
        ib.diagnose(exported, x, compile_kwargs={"dynamic": True})


_PACKAGING_SCRIPT = '''
import sys
import torch


class GeluBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(16, 32), torch.nn.Linear(32, 16)

    def forward(self, x):
        return x + torch.tanh(self.fc2(torch.nn.functional.gelu(self.fc1(x), approximate="tanh")))


torch.manual_seed(0)
model = GeluBlock().eval()
exported = torch.export.export(model, (torch.randn(4, 16),), dynamic_shapes={"x": {0: torch.export.Dim("batch")}})
path = torch._inductor.aoti_compile_and_package(exported, package_path=sys.argv[1])
runner = torch._inductor.aoti_load_package(path)
x = torch.randn(3, 16) * 4  # the real inputs: not the example's batch, nor its values
print("max difference from eager:", (runner(x) - model(x)).abs().max().item())
'''


def test_a_package_a_script_builds_is_diagnosed_on_its_loaded_packages_first_call(tmp_path):
    import warnings

    from instrumented_backend.diagnosis.script import diagnose_script

    script = tmp_path / "package_it.py"
    script.write_text(_PACKAGING_SCRIPT)
    said: list[str] = []
    with ib.faults.scaled("tanh", 1.05), warnings.catch_warnings():
        warnings.simplefilter("error", ib.InstrumentationWarning)  # its compile is not a graph to call
        [result] = diagnose_script(script, [str(tmp_path / "user.pt2")], out_dir=tmp_path / "diagnosis",
                                   progress=False, echo=said.append)
    assert (tmp_path / "user.pt2").is_file()  # the script's own package, built as it asked
    assert "(1 args, inference, on its loaded package's first call)" in said[0], said
    assert result.target == "exported program (AOTInductor package)"
    package = result.package
    assert result.verdict == "inaccurate" and package.verdict == "inaccurate", result.render()
    assert Path(package.path).is_file() and package.outputs.passed is False
    # judged on the script's own call of its loaded package (batch 3), not on the export's example (batch 4)
    assert [output.shape for output in package.outputs.outputs] == [[3, 16]]
    assert "fails alike (inaccurate)" in package.python_wrapper and not package.cpp_wrapper
    # the package's graph is reported beside the Python-wrapper build's, whose buffers were searched
    assert result.graphs[0] == package.graphs[0] and len(result.graphs) == 2
    assert result.steps[0].name == "AOTInductor package"
    divergence = result.divergence
    assert divergence.found and divergence.culprit.startswith("tanh"), divergence.render()
    assert {line.source.code for line in divergence.key_lines} == {
        'return x + torch.tanh(self.fc2(torch.nn.functional.gelu(self.fc1(x), approximate="tanh")))'}
    assert {Path(line.source.file).name for line in divergence.key_lines} == {"package_it.py"}
    # the minifier reads the Dynamo graph of exported.module() (ATen ops, aten.linear among them)
    # as a torch-level graph: at the ATen level Inductor could not lower aten.linear
    assert "-> 1 nodes" in result.minifier and Path(result.repro_path).is_file(), result.minifier
    text = (tmp_path / "diagnosis" / "diagnosis.txt").read_text()
    assert f"AOTInductor package {package.path}: its outputs are wrong" in text


def test_what_each_build_of_a_failing_package_says():
    from instrumented_backend.diagnosis.aoti_package import PackageJudgement

    alike = PackageJudgement("m.pt2", verdict="compile_error")
    alike.record_builds("compile_error")
    assert "fails alike (compile_error): the steps below ran on it" in alike.python_wrapper and not alike.cpp_wrapper
    only = PackageJudgement("m.pt2", verdict="runtime_error", symbolic_sizes=["s0"])
    only.record_builds("passed", "error")  # the cpp_wrapper build raised too: alike
    assert "matches eager, so the bug is in what AOTInductor changes" in only.python_wrapper
    assert "symbolic sizes, s0" in only.python_wrapper
    assert "fails alike (runtime_error): the C++ wrapper's code" in only.cpp_wrapper
    needs = PackageJudgement("m.pt2", verdict="inaccurate", symbolic_sizes=["s0"])
    needs.record_builds("passed", dynamic_verdict="inaccurate")
    assert ("matches eager with sizes specialised to these inputs; built again with dynamic=True (symbolic sizes, as "
            "the package's s0), it fails alike (inaccurate)") in needs.python_wrapper and not needs.cpp_wrapper
    neither = PackageJudgement("m.pt2", verdict="inaccurate", symbolic_sizes=["s0"])
    neither.record_builds("passed", "passed", dynamic_verdict="passed")
    assert "(built again with dynamic=True, symbolic sizes as the package's s0, it matches eager too)" in \
        neither.python_wrapper and "specialised" not in neither.python_wrapper
    own = PackageJudgement("m.pt2", verdict="inaccurate")
    own.record_builds("passed", "passed")
    assert "symbolic" not in own.python_wrapper and "what only AOTInductor does" in own.cpp_wrapper
    assert own.render().splitlines() == ["AOTInductor package m.pt2: its outputs are wrong",
                                         f"  {own.python_wrapper}", f"  {own.cpp_wrapper}"]


def test_profile_of_an_exported_program_times_its_packages_kernels_by_source_line():
    torch.manual_seed(0)
    model, x = _MLP().eval(), torch.randn(64, 16)
    report = ib.profile(torch.export.export(model, (x,)), x, warmup=2, iters=4, active=2, bandwidth=False)
    assert report.graphs and report.graphs[0].endswith(" aoti inference") and not report.unmatched_events
    kinds = {row.kernel: row.kind for row in report.kernels}
    assert "extern" in kinds.values() and "cpp" in kinds.values(), kinds  # the shim's GEMMs and a fused kernel
    [fused] = [row for row in report.kernels if "neg" in row.fx_nodes and row.kind == "cpp"]
    neg_line = inspect.getsourcelines(_MLP.forward)[1] + 1  # h = torch.neg(torch.relu(self.fc1(x)))
    assert fused.calls == 1 and fused.time_us > 0, fused
    assert any(line.endswith(f"test_aoti.py:{neg_line}") for line in fused.source_lines), fused.source_lines
    # eager's ops meet the kernels on the user's line, though eager runs the module's generated code
    [row] = [r for r in report.by_source_line() if r.source.endswith(f"test_aoti.py:{neg_line}")]
    assert row.compiled_us > 0 and row.eager_us > 0 and "aten::neg" in row.eager_ops, row
    # and on the module: an exported program's modules are no frames either; its nodes name them
    modules = {m.module: m for m in report.by_module()}
    for linear in ("fc1 (Linear)", "fc2 (Linear)"):
        assert modules[linear].compiled_us > 0 and "aten::linear" in modules[linear].eager_ops, modules
    with pytest.raises(ValueError, match="runs inference only"):
        ib.profile(torch.export.export(model, (x,)), x, no_grad=False, backward=True)


def test_recording_a_scripts_package_never_fails_the_scripts_own_call(monkeypatch):
    import warnings

    from instrumented_backend.capture.redirect import record_compiled_calls

    class Unreadable:
        @property
        def example_inputs(self):
            raise RuntimeError("no example inputs here")

    monkeypatch.setattr(torch._inductor, "aoti_compile_and_package", lambda ep, **kwargs: "package.pt2")
    calls = []
    undo = record_compiled_calls(calls)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert torch._inductor.aoti_compile_and_package(Unreadable(), package_path="x.pt2") == "package.pt2"
    finally:
        undo()
    assert calls == [] and any("could not record the exported program" in str(w.message) for w in caught)
    assert torch._inductor.aoti_compile_and_package(Unreadable()) == "package.pt2"  # undone: not watched


class _FakeLoader:
    """What ``AOTICompiledModel`` calls of PyTorch's C++ package loader: doubles its one input, and
    raises on a 3-row input (a call the package cannot run)."""

    def get_call_spec(self):
        x = torch.zeros(1)
        return [pytree.treespec_dumps(pytree.tree_flatten(((x,), {}))[1]),
                pytree.treespec_dumps(pytree.tree_flatten(x)[1])]

    def boxed_run(self, flat):
        if flat[0].shape[0] == 3:
            raise RuntimeError("the package cannot run 3 rows")
        return [flat[0] * 2]


def test_a_scripts_loaded_package_is_recorded_at_its_first_call_and_its_first_raising_call(monkeypatch, tmp_path):
    import torch._inductor.package as package

    from instrumented_backend.capture.redirect import record_compiled_calls

    class Exported:
        example_inputs = ((torch.ones(4, 2),), {})

    exported, path = Exported(), str(tmp_path / "model.pt2")
    monkeypatch.setattr(torch._inductor, "aoti_compile_and_package", lambda ep, **kwargs: path)
    monkeypatch.setattr(package, "load_package", lambda p, *a, **k: package.AOTICompiledModel(_FakeLoader()))
    original_call = package.AOTICompiledModel.__call__
    calls = []
    undo = record_compiled_calls(calls)
    try:
        built = torch._inductor.aoti_compile_and_package(exported, package_path=path)
        [record] = calls
        assert record.arguments_from == "its example inputs" and record.args[0].shape == (4, 2)
        other = torch._inductor.aoti_load_package(tmp_path / "elsewhere.pt2")  # not the script's package
        runner = torch._inductor.aoti_load_package(built)
        first = torch.full((5, 2), 3.0)
        assert torch.equal(runner(first), first * 2) and torch.equal(other(first), first * 2)
        first.zero_()  # the script changes it afterwards: the copy made before the call is kept
        assert record.arguments_from == "its loaded package's first call"
        assert torch.equal(record.args[0], torch.full((5, 2), 3.0)) and record.raising_call == 0
        runner(torch.ones(6, 2))
        with pytest.raises(RuntimeError, match="cannot run 3 rows"):
            runner(torch.ones(3, 2))
        assert record.raising_call == 3 and record.raising_args[0].shape == (3, 2) and not record.arguments_from
    finally:
        undo()
    assert package.AOTICompiledModel.__call__ is original_call  # undone: PyTorch's own call again
    with pytest.raises(RuntimeError, match="cannot run 3 rows"):
        runner(torch.ones(3, 2))
    assert record.raising_call == 3


_FAKE_PACKAGING_SCRIPT = '''
import sys
import torch


class Exported:  # what the recording reads of an exported program
    example_inputs = ((torch.ones(4, 2),), {})


path = torch._inductor.aoti_compile_and_package(Exported(), package_path=sys.argv[1])
runner = torch._inductor.aoti_load_package(path)
print(runner(torch.full((5, 2), 3.0)).sum().item())
'''


def test_the_profile_command_times_a_scripts_package_on_the_scripts_first_call(monkeypatch, tmp_path):
    import torch._inductor.package as package

    from instrumented_backend.profiling import script as profile_command

    profiled, said = [], []
    monkeypatch.setattr(torch._inductor, "aoti_compile_and_package", lambda ep, package_path: package_path)
    monkeypatch.setattr(package, "load_package", lambda p, *a, **k: package.AOTICompiledModel(_FakeLoader()))
    monkeypatch.setattr(profile_command, "profile", lambda target, *args, **kwargs: profiled.append((target, args)))
    script = tmp_path / "package_it.py"
    script.write_text(_FAKE_PACKAGING_SCRIPT)
    profile_command.profile_script(script, [str(tmp_path / "m.pt2")], echo=said.append)
    [(target, args)] = profiled
    assert type(target).__name__ == "Exported" and torch.equal(args[0], torch.full((5, 2), 3.0))
    assert said == ["instrumented_backend profile: [0] exported program (AOTInductor package) (1 args, no_grad, "
                    "on its loaded package's first call)"], said
