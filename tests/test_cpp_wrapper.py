"""``cpp_wrapper=True``: the wrapper is C++, and the capture still finds every kernel and maps every line."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import compile_and_run, foo1, tutorial_inputs
from wrapper_faults import GeluBlock, tanh_wrong_in_cpp_wrapper_builds

import instrumented_backend as ib

CPP_WRAPPER = {"cpp_wrapper": True}


@pytest.fixture(scope="module")
def tutorial():
    x1, x2 = tutorial_inputs(torch.float32)
    expected, plain = compile_and_run(foo1, x1, x2, backend="inductor", options=CPP_WRAPPER)
    with ib.capture() as session:
        result, ours = compile_and_run(foo1, x1, x2, options=CPP_WRAPPER)
    return session[0], plain, ours, result, expected


def test_the_code_is_plain_inductors_and_the_result_too(tutorial):
    capture, plain, ours, result, expected = tutorial
    assert "cpp_wrapper_src" in ours[0] and ours == plain
    assert capture.output_code == plain[0]
    assert torch.equal(result, expected)


def test_kernels_and_their_lines_are_found_in_the_cpp_wrapper(tutorial):
    capture = tutorial[0]
    assert capture.complete, capture.problems
    [kernel] = capture.kernels
    assert kernel.kind == "cpp" and kernel.call_lines
    assert "inductor_entry_impl" not in kernel.source and kernel.source.startswith('extern "C"')
    [neg] = [line for line in kernel.lines if "ops.neg" in line.ir_ops]
    assert neg.fx_nodes == ["neg"] and neg.source.code == "a = torch.neg(x1)"
    launch = [line for line in capture.wrapper_lines if line.number in kernel.call_lines]
    assert launch and set(launch[0].fx_nodes) == {"neg", "maximum"}


class _MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(16, 32), torch.nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


def test_an_extern_gemm_is_found_and_mapped_under_cpp_wrapper():
    torch.manual_seed(0)
    model = _MLP().eval()
    with ib.capture() as session, torch.no_grad():
        torch.compiler.reset()
        torch.compile(model, backend="instrumented", options=CPP_WRAPPER)(torch.randn(4, 16))
    capture = session[0]
    externs = [k for k in capture.kernels if k.kind == "extern"]
    assert externs and all(k.name.startswith("aoti_torch_cpu_") for k in externs), capture.kernels
    assert all(k.lines and k.lines[0].fx_nodes for k in externs)
    assert all(k.lines[0].source.code == "return self.fc2(torch.relu(self.fc1(x)))" for k in externs)
    assert capture.complete, capture.problems
    # A size or stride array is declared right before the allocation or call it was made for, and
    # takes that statement's node; the wrapper's own boilerplate (the GIL release) stays untagged.
    by_number = {line.number: line for line in capture.wrapper_lines}
    arrays = [line for line in capture.wrapper_lines if "int_array_" in line.text and "[] =" in line.text]
    assert arrays
    for array in arrays:
        name = array.text.split("[]")[0].split()[-1]
        user = next(by_number[n] for n in sorted(by_number) if n > array.number and name in by_number[n].text)
        assert array.fx_nodes == user.fx_nodes and array.fx_nodes[0].startswith("addmm"), (array.text, user.text)
    untagged = [line.text.strip() for line in capture.wrapper_lines if not line.tagged]
    assert untagged == ["py::gil_scoped_release_simple release;"], untagged


def test_a_compile_error_under_cpp_wrapper_is_explained_to_its_source_line():
    x1, x2 = tutorial_inputs()
    with ib.faults.cast_dropping_neg(), pytest.raises(Exception) as raised:
        torch.compile(foo1, backend="instrumented", options=CPP_WRAPPER)(x1, x2)
    inner = getattr(raised.value, "inner_exception", raised.value)
    assert isinstance(inner, ib.KernelCompileError)
    [failing] = [item.line for item in inner.report.lines if item.role == "error"]
    assert "max_propagate_nan" in failing.text and failing.source.code == "b = torch.maximum(x2, a)"


def test_kernels_the_capture_cannot_find_are_a_problem_never_silence():
    from instrumented_backend.provenance.assemble import map_lines
    from instrumented_backend.recording.recorder import LineRecorder

    recorder = LineRecorder()
    recorder.record_kernel("cpp_fused_add_0", "void kernel() {}", [[]])
    line_map = map_lines(output_code="# an unknown wrapper layout\n", recorder=recorder, post_grad=None,
                         post_grad_code="", dynamo_graph=None, rewrites=(), forward_by_seq_nr=None)
    [problem] = [p for p in line_map.problems if p.part == "kernels"]
    assert "cpp_fused_add_0" in problem.error and "not found in the output code" in problem.error


def test_a_training_step_under_cpp_wrapper_maps_forward_and_backward():
    torch.manual_seed(0)
    model = _MLP()
    with ib.capture() as session:
        torch.compiler.reset()
        torch.compile(model, backend="instrumented", options=CPP_WRAPPER)(torch.randn(4, 16)).sum().backward()
    assert [g.kind for g in session] == ["forward", "backward"]
    for graph in session:
        assert graph.complete and graph.kernels, (graph.label, graph.problems)
        assert "cpp_wrapper_src" in graph.output_code
    backward = session.by_kind("backward")[0]
    mapped = [line for k in backward.kernels if k.kind != "extern" for line in k.lines if line.source is not None]
    assert mapped and all(line.source.code == "return self.fc2(torch.relu(self.fc1(x)))" for line in mapped)


def test_the_first_divergence_search_reads_a_cpp_wrapper_graph_through_its_python_wrapper_build():
    x1, x2 = tutorial_inputs(torch.float32)
    with ib.faults.doubling_neg():
        report = ib.find_first_divergence(foo1, x1, x2, options=CPP_WRAPPER)
    assert report.found and report.culprit == "neg", report.render()
    assert "Python-wrapper build (cpp_wrapper=False)" in report.build and "0/0" in report.build
    rendered = report.render()
    assert rendered.startswith("searched in the Python-wrapper build") and "a = torch.neg(x1)" in rendered


def test_diagnose_under_cpp_wrapper_names_the_culprit_and_minifies_with_the_cpp_wrapper(tmp_path):
    torch.manual_seed(0)
    model = GeluBlock().eval()
    with ib.faults.scaled("tanh", 1.05), torch.no_grad():
        result = ib.diagnose(torch.compile(model, options=CPP_WRAPPER), torch.randn(4, 16), out_dir=tmp_path,
                             progress=False)
    divergence = result.divergence
    assert result.verdict == "inaccurate" and divergence.found, result.render()
    assert divergence.culprit.startswith("tanh") and "Python-wrapper build" in divergence.build
    # the culprit's kernel line is the Python-wrapper build's, mapped to the user's line
    assert all(line.source.code.startswith("return x + torch.tanh") for line in divergence.key_lines)
    assert "searched in the Python-wrapper build" in result.render()
    repro = Path(result.repro_path).read_text()
    assert "'cpp_wrapper': True" in repro and "-> 1 nodes" in result.minifier
    assert any(g.label.endswith("0/0 inference") and "cpp_wrapper_src" in g.output_code for g in result.captures)


def test_a_bug_only_the_cpp_wrapper_build_has_is_blamed_on_what_cpp_wrapper_changes(tmp_path):
    torch.manual_seed(0)
    model = GeluBlock().eval()
    with tanh_wrong_in_cpp_wrapper_builds(), torch.no_grad():
        result = ib.diagnose(model, torch.randn(4, 16), compile_kwargs={"options": CPP_WRAPPER}, out_dir=tmp_path,
                             minify=False, progress=False)
    assert result.verdict == "inaccurate", result.render()
    divergence = result.divergence
    assert not divergence.found and divergence.graph.endswith("0/0 inference")
    assert "only the C++ wrapper's build fails" in divergence.note and "matches eager" in divergence.note
    assert "only the C++ wrapper's build fails" in result.render()
