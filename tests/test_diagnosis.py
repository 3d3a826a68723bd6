"""Diagnosis: explained compile errors, accuracy, failing layer, first diverging kernel."""

from __future__ import annotations

import copy
import functools
import inspect
import re
import types
import warnings

import pytest
import torch
import torch.nn.functional as F
from conftest import Blocks, float32_mix_under_autocast, foo1, tutorial_inputs
from torch._inductor.exc import CppCompileError, InductorError

import instrumented_backend as ib

FOO1_LINE = inspect.getsourcelines(foo1)[1]


@pytest.fixture(scope="module")
def compile_error():
    torch._dynamo.reset()
    with ib.faults.cast_dropping_neg(), ib.capture() as session:
        with pytest.raises(InductorError) as raised:
            torch.compile(foo1, backend="instrumented")(*tutorial_inputs())
    return raised.value, session


def test_compile_error_keeps_inductors_type_and_explains_the_lines(compile_error):
    error, _ = compile_error
    inner = error.inner_exception
    assert isinstance(inner, ib.KernelCompileError) and isinstance(inner, CppCompileError)
    assert isinstance(inner.__cause__, CppCompileError) and inner.output == inner.__cause__.output
    report = inner.report
    assert report.kernel.startswith("cpp_fused_maximum_neg")
    assert any("max_propagate_nan" in m.text for m in report.errors)
    failing, *definitions = report.lines
    assert failing.role == "error" and failing.line.text.strip() == "auto tmp3 = max_propagate_nan(tmp0, tmp2);"
    assert failing.line.ir_ops == ["ops.maximum"] and failing.node_targets == ["aten.maximum.default"]
    assert failing.line.source.code == "b = torch.maximum(x2, a)" and failing.line.source.line == FOO1_LINE + 3
    tmp2 = next(d for d in definitions if d.variable == "tmp2")
    assert tmp2.line.text.strip() == "auto tmp2 = -tmp1;" and tmp2.line.ir_ops == ["ops.neg"]
    assert tmp2.line.source.code == "a = torch.neg(x1)"
    message = str(error)
    assert "b = torch.maximum(x2, a)" in message and "a = torch.neg(x1)" in message
    # The compiler's full log (thousands of header warnings) is an attribute and a file, not the message.
    assert "Command:" not in message and len(message.splitlines()) < 40, message
    assert inner.compiler_output == inner.output and "max_propagate_nan" in inner.compiler_output
    assert inner.log_path in message and "max_propagate_nan" in open(inner.log_path).read()


def test_a_compile_errors_lines_name_the_module_their_op_ran_in():
    """The failing line of a library's module points at the library's code (transformers'
    ``activations.py:89: return self.act(input)``): which of the model's modules ran it, as
    ``named_modules()`` names it, is what places it in the user's model."""
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU()))
    torch._dynamo.reset()
    with ib.faults.bad_lowering("erf", "no_such_function({x})", vectorized="no_such_function({x})"), \
            pytest.raises(InductorError) as raised:
        torch.compile(model, backend="instrumented")(torch.randn(4, 8))
    report = raised.value.inner_exception.report
    [failing] = [item for item in report.lines if item.role == "error"]
    assert failing.node_targets == ["aten.erf.default"] and failing.module == "1.1 (GELU)", failing
    assert "in module 1.1 (GELU)" in report.render()


def test_failed_compile_keeps_its_capture(compile_error):
    _, session = compile_error
    (graph,) = session
    assert graph.failed and "CppCompileError" in graph.compile_error
    assert graph.compile_error_report is not None
    assert "max_propagate_nan(tmp0, tmp2)" in graph.output_code and graph.kernels[0].tagged_lines
    assert graph.nodes["neg"].dynamo_nodes == ["a"]


def test_check_accuracy_passes_clean_and_fails_doubling_neg():
    x = tutorial_inputs(torch.float32)
    clean = ib.check_accuracy(foo1, *x)
    assert clean.passed is True and clean.outputs[0].max_abs_error == 0
    with ib.faults.doubling_neg():
        bad = ib.check_accuracy(foo1, *x)
    (out,) = bad.outputs
    assert bad.passed is False and not out.passed
    expected = foo1(*x)
    wrong = torch.maximum(x[1], 2 * x[0])
    differs = (~torch.isclose(wrong, expected, atol=1e-4, rtol=1e-4)).nonzero()  # float32 tolerance
    assert out.first_bad_index == differs[0].tolist() and out.mismatched == len(differs)
    assert out.rmse_compiled > 0 and out.rmse_eager == 0
    assert out.max_abs_error == pytest.approx((expected - wrong).abs().max().item())
    assert "FAIL" in str(bad)


def test_integer_outputs_compare_exactly_and_nondeterminism_is_not_a_compiler_bug():
    with ib.faults.bad_lowering("bitwise_and", "({a} | {b})", vectorized="same"):
        report = ib.check_accuracy(lambda a, b: (a & b) + 1, torch.arange(16), torch.full((16,), 6))
    assert report.passed is False and report.outputs[0].dtype == "int64"
    assert report.outputs[0].max_abs_error > 0

    calls = iter(range(100))
    nondeterministic = ib.check_accuracy(lambda t: t + next(calls), torch.ones(3))
    assert nondeterministic.passed is None and nondeterministic.nondeterministic


def test_check_accuracy_option_raises_or_warns_and_records_the_report():
    x = tutorial_inputs(torch.float32)
    with ib.faults.doubling_neg(), ib.capture() as session:
        with pytest.raises(ib.AccuracyError, match="FAIL"):
            torch.compile(foo1, backend="instrumented", options={"check_accuracy": True})(*x)
        torch._dynamo.reset()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = torch.compile(foo1, backend="instrumented", options={"check_accuracy": "warn"})(*x)
    assert torch.equal(result, torch.maximum(x[1], 2 * x[0]))  # the program's own result is untouched
    assert any("accuracy" in str(w.message) for w in caught)
    assert session[-1].accuracy is not None and session[-1].accuracy.passed is False
    torch._dynamo.reset()
    fine = torch.compile(foo1, backend="instrumented", options={"check_accuracy": True})(*x)
    assert torch.equal(fine, foo1(*x)) and ib.last_capture().accuracy.passed is True
    with pytest.raises(Exception, match="check_accuracy must be True, False or 'warn', got 'sometimes'"):
        torch.compile(foo1, backend="instrumented", options={"check_accuracy": "sometimes"})(*x)


def _adamw_run(options: dict, steps: int = 3) -> list[torch.Tensor]:
    torch.manual_seed(0)
    torch._dynamo.reset()
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=True)
    step = torch.compile(lambda: optimizer.step(), backend="instrumented", options=options)
    for _ in range(steps):
        model(torch.randn(4, 8)).pow(2).mean().backward()
        step()
        optimizer.zero_grad()
    return [p.detach().clone() for p in model.parameters()]


def test_the_accuracy_option_never_changes_a_compiled_optimizer_steps_training(tmp_path, monkeypatch):
    """A compiled ``optimizer.step()`` holds the optimizer's moments and step counts as graph
    attributes. The check ran the graph eagerly on those very tensors, three times (two seeds and
    the fp64 referee), so ``check_accuracy`` changed the training it watched (the weights after 3
    steps differed). Eager now runs on copies, and the weights and moments the step updates are
    judged like outputs: a wrong update raises, and the ``minify`` option shrinks the step, from
    the state before it, to the faulty op."""
    assert all(torch.equal(a, b) for a, b in zip(_adamw_run({}), _adamw_run({"check_accuracy": "warn"})))
    monkeypatch.setenv("INSTRUMENTED_BACKEND_MINIFY_DIR", str(tmp_path))
    with ib.faults.scaled("reciprocal", 1.1):
        with pytest.raises(ib.AccuracyError,  # the state as the program names it, not Dynamo's flat names
                           match=r"""\['updated'\]\["self\.param_groups\[0\]\['params'\]\[0\]"\]\s.*FAIL""") as caught:
            _adamw_run({"check_accuracy": True, "minify": True}, steps=1)
    assert "['updated'][\"self.state[<key 1>]['exp_avg']\"]" in str(caught.value)
    assert "self___" not in str(caught.value)
    torch._dynamo.reset()
    (repro,) = tmp_path.glob("*.py")
    assert any(str(repro) in note for note in caught.value.__notes__)  # the repro is named in the error
    assert "torch._foreach_reciprocal(" in repro.read_text()


def test_failing_layer_table_and_inductor_bisector():
    import logging

    x = tutorial_inputs(torch.float32)
    heard: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: heard.append(record.getMessage())
    loggers = [logging.getLogger(f"torch._dynamo.backends.{name}") for name in ("debugging", "common")]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        with ib.faults.doubling_neg():
            report = ib.find_failing_layer(foo1, *x, bisect=True)
    finally:
        for logger in loggers:
            logger.removeHandler(handler)
    assert not [m for m in heard if "ignoring extra kwargs" in m], heard
    statuses = {layer.backend: layer.status for layer in report.layers}
    assert statuses == {"eager": "ok", "aot_eager": "ok", "aot_eager_decomp_partition": "ok",
                        "inductor": "inaccurate", "instrumented": "inaccurate"}
    assert report.first_failing == "inductor"
    assert report.bisection["subsystem"] == "lowerings" and report.bisection["debug_info"] == "neg"
    assert "first failing layer: inductor" in str(report)
    assert ib.find_failing_layer(foo1, *x, layers=("eager", "inductor")).first_failing is None
    with pytest.raises(ValueError, match="unknown layer"):
        ib.find_failing_layer(foo1, *x, layers=("inductr",))


@pytest.mark.parametrize("failing, judged, statuses", [
    ({"inductor"}, ["inductor", "aot_eager_decomp_partition"], ["skipped", "skipped", "ok", "inaccurate"]),
    ({"inductor", "aot_eager_decomp_partition"}, ["inductor", "aot_eager_decomp_partition", "aot_eager"],
     ["skipped", "ok", "inaccurate", "inaccurate"]),
    ({"eager", "aot_eager", "aot_eager_decomp_partition", "inductor"},
     ["inductor", "aot_eager_decomp_partition", "aot_eager", "eager"], ["inaccurate"] * 4),
    ({"aot_eager"}, ["inductor", "eager", "aot_eager", "aot_eager_decomp_partition"],  # last passes: all run
     ["ok", "inaccurate", "ok", "ok"]),
], ids=["inductor", "decompositions", "dynamo", "last-layer-passes"])
def test_layers_judged_top_down_stop_below_the_first_that_passes(failing, judged, statuses):
    from instrumented_backend.diagnosis.layers import LayerReport, LayerResult, judge_layers

    layers = ("eager", "aot_eager", "aot_eager_decomp_partition", "inductor")
    calls = []

    def judge(backend):
        calls.append(backend)
        return LayerResult(backend, "inaccurate" if backend in failing else "ok")

    report = LayerReport(layers=judge_layers(layers, judge, top_down=True))
    assert calls == judged and [layer.status for layer in report.layers] == statuses
    assert report.first_failing == next((b for b, s in zip(layers, statuses) if s == "inaccurate"), None)
    calls.clear()
    in_order = judge_layers(layers, judge, stop_at_first=True)
    assert calls == [layer.backend for layer in in_order] and in_order[-1].status == (
        "inaccurate" if failing else "ok")


def test_the_culprits_key_lines_leave_out_loads_stores_and_a_lambda_blocks_punctuation():
    from instrumented_backend.diagnosis.divergence import BufferCheck, DivergenceReport
    from instrumented_backend.records import KernelLine

    texts = [("auto tmp0 = in_ptr0[x0];", "ops.load"), ("auto tmp1 =", "ops.sign"), ("[&]()", "ops.sign"),
             ("{", "ops.sign"), ("auto left = tmp0 > 0;", "ops.sign"), ("}", "ops.sign"), ("()", "ops.sign"),
             (";", "ops.sign"), ("out_ptr0[x0] = tmp1;", "ops.store")]
    lines = [KernelLine(kernel="k", number=n, text=text, ir_ops=[op]) for n, (text, op) in enumerate(texts)]
    report = DivergenceReport(diverging_node="sign", culprit="sign", checked=[BufferCheck("sign", "sign", False)],
                              lines=lines)
    assert [line.text for line in report.key_lines] == ["auto tmp1 =", "auto left = tmp0 > 0;"]
    assert "[&]()" not in report.render() and "auto left = tmp0 > 0;" in report.render()


def test_first_divergence_points_at_the_neg_line():
    x = tutorial_inputs(torch.float32)
    with ib.faults.doubling_neg():
        report = ib.find_first_divergence(foo1, *x)
    assert report.diverging_node == "maximum" and report.kernel.startswith("cpp_fused_maximum_neg")
    assert report.culprit == "neg" and report.culprit_target == "aten.neg.default"
    (line,) = report.key_lines
    assert line.ir_ops == ["ops.neg"] and "tmp1 + tmp1" in line.text
    assert line.source.code == "a = torch.neg(x1)" and line.source.line == FOO1_LINE + 2
    clean = ib.find_first_divergence(foo1, *x)
    assert not clean.found and clean.checked and all(c.passed for c in clean.checked)
    # with the process-wide list full (a long session), the search still finds what it compiled:
    # it read it as an index into that list, which stops growing at the limit
    from instrumented_backend.capture.registry import capture_limit

    limit = capture_limit()
    ib.set_capture_limit(1)
    try:
        with ib.faults.doubling_neg():
            again = ib.find_first_divergence(foo1, *x)
    finally:
        ib.set_capture_limit(limit)
    assert again.culprit == "neg", again.render()



def test_the_buffer_replay_leaves_no_file_behind_and_its_lines_reach_tracebacks(tmp_path, monkeypatch):
    import tempfile
    import traceback

    from instrumented_backend.diagnosis.divergence import collect_buffers

    x = tutorial_inputs(torch.float32)
    torch._dynamo.reset()
    torch.compile(foo1, backend="instrumented")(*x)
    graph = ib.last_capture()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    buffers = collect_buffers(graph, list(x))
    assert "maximum" in buffers and list(tmp_path.iterdir()) == []  # a search replays many graphs
    with pytest.raises(AssertionError) as raised:  # the compiled code checks its inputs' sizes
        collect_buffers(graph, [t[:1] for t in x])
    hooked = [frame for frame in traceback.extract_tb(raised.value.__traceback__)
              if frame.filename.startswith("<ib_hooked")]
    assert hooked and all(frame.line for frame in hooked), hooked

def block(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    h = torch.relu(x @ w + bias)
    n = F.layer_norm(h, (h.shape[-1],))
    s = torch.softmax(n * 0.5, dim=-1)
    g = F.gelu(s + h)
    return torch.tanh(g) * n


def test_first_divergence_in_a_larger_graph_with_a_bad_exp():
    torch.manual_seed(0)
    inputs = (torch.randn(64, 32), torch.randn(32, 32), torch.randn(32))
    first = inspect.getsourcelines(block)[1]
    with ib.faults.bad_lowering(
        "exp", "std::exp({x}) * decltype({x})(1.5)", vectorized="{x}.exp() * decltype({x})(1.5)"
    ):
        report = ib.find_first_divergence(block, *inputs)
    assert report.found and report.culprit_target == "aten.exp.default"
    assert any(c.passed for c in report.checked)  # buffers before it (layer norm) matched eager
    # The softmax kernel's nodes compiled together name exp first (those before it match), and
    # exp alone confirms it: two compiles, not one per node up to the culprit.
    probed = dict(report.probed)
    assert len(probed) > 2 and probed[report.culprit], report.render()
    assert not any(probed[name] for name, _ in report.probed[:[n for n, _ in report.probed].index(report.culprit)])
    assert report.narrowed == [(report.culprit, True)], report.render()
    assert f"{report.culprit} diverges first" in report.render()
    lines = report.key_lines
    assert lines and all(line.source.line == first + 3 for line in lines)  # the softmax line
    assert any("exp()" in line.text or "std::exp" in line.text for line in lines)


def test_first_divergence_under_the_callers_autocast_replays_the_graph_as_inductor_runs_it():
    """The post-grad graph holds autocast's casts; Inductor compiles and runs it with autocast off.
    Replayed under the caller's ``torch.autocast`` (a training loop's, as ``diagnose`` replays it),
    its float32 ``bmm`` ran in bfloat16: the first "diverging" buffer was that bmm, at a max abs
    err of 0 (a dtype mismatch), and a BERT fine-tuning step's bad ``exp`` was blamed on it."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 12, 8) for _ in range(3))
    with ib.faults.scaled("tanh", 1.01), torch.autocast("cpu", dtype=torch.bfloat16):
        report = ib.find_first_divergence(float32_mix_under_autocast, q, k, v)
        assert torch.is_autocast_enabled("cpu")  # the caller's autocast, as it was
    assert report.found and report.culprit_target == "aten.tanh.default", report.render()
    checked = {check.node: check for check in report.checked}
    assert checked["bmm_1"].passed and all(c.passed for c in report.checked[:-1]), report.render()
    assert report.checked[-1].max_abs_error > 0.001


def scatter_then_softmax(h: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    s = torch.zeros(8, 16).scatter_add(0, rows[:, None].expand(-1, 16), h * 2)
    return torch.softmax(s + 1, dim=-1)


def test_a_buffer_completed_by_a_later_in_place_call_is_compared_once_complete():
    """A scatter_add's buffer is zeroed by a fused kernel, then filled by an in-place fallback
    (``aten.scatter_reduce_.two(buf, ...)``): compared after the zeroing, it read as the first
    diverging buffer (max abs err 13.2) of any graph, bug or none, and the true culprit was missed."""
    torch.manual_seed(0)
    x = (torch.randn(6, 16), torch.tensor([0, 2, 2, 5, 7, 1]))
    clean = ib.find_first_divergence(scatter_then_softmax, *x)
    assert not clean.found and any(c.node == "scatter_add" for c in clean.checked), clean.render()
    with ib.faults.bad_lowering("exp", "std::exp({x}) * decltype({x})(1.5)",
                                vectorized="{x}.exp() * decltype({x})(1.5)"):
        report = ib.find_first_divergence(scatter_then_softmax, *x)
    assert report.found and report.culprit_target == "aten.exp.default", report.render()
    assert {"mul", "scatter_add"} <= {c.node for c in report.checked if c.passed}, report.render()


def autocast_gelu_sum(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    with torch.autocast("cpu", dtype=torch.bfloat16):
        g = F.gelu(F.linear(x, w, b)) * 3  # bfloat16 in eager; fused, Inductor keeps it in float32
        s = g.sum(0)  # a bfloat16 sum of it
    return s.float() * torch.sigmoid(x.sum())  # float32, judged at 1e-4


def test_mixed_precision_roundings_inductor_leaves_out_are_no_divergence():
    """Under autocast eager rounds every op's result to bfloat16; Inductor computes a fused kernel in
    float32 and rounds once. The search compared buffers without the fp64 referee, and ran that
    referee with the post-grad graph's ``convert_element_type(..., torch.bfloat16)`` kept, so it
    rounded as eager did: a ViT training step under autocast, no bug in it, was reported as
    diverging at its classifier's bias gradient (``mul_4`` here, max abs err 4.0). The referee now
    computes in float64 throughout, and the search judges a buffer as outputs are judged."""
    torch.manual_seed(0)
    x = (torch.randn(64, 32), torch.randn(48, 32), torch.randn(48))
    clean = ib.find_first_divergence(autocast_gelu_sum, *x)
    assert not clean.found, clean.render()
    assert any(c.node.startswith("mul") and c.max_abs_error > 1e-2 for c in clean.checked), clean.render()
    with ib.faults.scaled("sigmoid", 1.01):
        report = ib.find_first_divergence(autocast_gelu_sum, *x)
    assert report.found and report.culprit_target == "aten.sigmoid.default", report.render()


class _ResidualTanh(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.fc(x)) + x


def test_a_kernel_shared_by_identical_blocks_is_compared_after_each_launch():
    """Three identical residual blocks share one fused kernel (``cpp_fused_add_tanh_0(buf3,
    buf1)``: the second block writes ``buf3`` and reads the first's ``buf1``). The kernel's lines
    carry all three blocks' nodes, so the first block's buffer was compared after the second
    launch, past the second block's matmul: that matmul was "the first diverging buffer" and the
    culprit "addmm_1: no node of the kernel diverges alone"; the wrong tanh was missed."""
    from instrumented_backend.diagnosis.divergence import _final_writes

    torch.manual_seed(0)
    model = torch.nn.Sequential(_ResidualTanh(), _ResidualTanh(), _ResidualTanh())
    with ib.faults.scaled("tanh", 1.05), ib.capture() as session:
        report = ib.find_first_divergence(model, torch.randn(8, 16))
    [graph] = [g for g in session if g.label == report.graph]
    shared = [k for k in graph.kernels if k.kind != "extern" and len(k.call_lines) == 3]
    assert shared, [(k.name, k.call_lines) for k in graph.kernels]  # the premise: one kernel, three launches
    completed = {graph.buffers[b]: line for b, (line, _) in _final_writes(graph).items()}
    assert sorted(completed[n] for n in ("add", "add_1", "add_2")) == sorted(shared[0].call_lines)
    assert report.found and report.diverging_node == "add", report.render()
    assert report.culprit_target == "aten.tanh.default", report.render()


def test_the_buffers_a_triton_launch_writes_are_its_output_parameters():
    from instrumented_backend.diagnosis.divergence import _written_arguments
    from instrumented_backend.records import KernelInfo

    source = ("@triton.jit\ndef triton_poi_fused_add_tanh_0(in_out_ptr0, in_ptr0, out_ptr1, xnumel, "
              "XBLOCK : tl.constexpr):\n    xoffset = tl.program_id(0) * XBLOCK\n")
    kernel = KernelInfo(name="triton_poi_fused_add_tanh_0", kind="triton", source=source, start_line=1, end_line=3,
                        source_start_line=1)
    line = "        triton_poi_fused_add_tanh_0.run(buf3, reinterpret_tensor(buf1, (8, 16), (16, 1), 0), buf7, 128, " \
           "stream=stream0)"
    assert _written_arguments(kernel, line) == {"buf3", "buf7"}
    assert _written_arguments(kernel, "        del buf3") is None


def test_the_buffers_a_cpp_launch_writes_are_its_output_parameters_whatever_their_type():
    """``at::BFloat16* out_ptr0`` once read as a parameter named ``at``: no buffer of a bfloat16
    kernel was written, so none was compared, and autocast's wrong neg was "no diverging buffer"."""
    from instrumented_backend.diagnosis.divergence import _written_arguments
    from instrumented_backend.records import KernelInfo

    source = ('#include <torch/csrc/inductor/cpp_prefix.h>\nextern "C"  void  kernel(const float* in_ptr0,\n'
              '                       at::BFloat16* out_ptr0,\n                       float* in_out_ptr1,\n'
              '                       const int64_t ks0)\n{\n')
    kernel = KernelInfo(name="cpp_fused__to_copy_0", kind="cpp", source=source, start_line=1, end_line=6,
                        source_start_line=1)
    assert _written_arguments(kernel, "    cpp_fused__to_copy_0(arg2_1, buf0, buf1, s0)") == {"buf0", "buf1"}
    unreadable = KernelInfo(name="cpp_k", kind="cpp", source='extern "C" void kernel(float* a)\n', start_line=1,
                            end_line=1, source_start_line=1)
    assert _written_arguments(unreadable, "    cpp_k(buf0)") is None  # no output read: not "writes nothing"


def write_through_a_view(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x[:, :4].add_(torch.tanh(y))
    return y * 2


def test_an_input_updated_through_a_view_is_compared_whole_when_the_call_returns():
    """The post-grad graph writes the input through a slice (``copy_(slice(arg0_1), add)``) and
    the kernel writes the input's memory: no buffer held the update, so a wrong ``tanh`` was "no
    diverging buffer: all 1 compared buffers match eager". The input is compared whole, after the
    call, under the node that last writes it."""
    torch.manual_seed(0)
    x = (torch.randn(8, 16), torch.randn(8, 4))
    clean = ib.find_first_divergence(write_through_a_view, *x)
    assert not clean.found and any(c.node.startswith("copy_") for c in clean.checked), clean.render()
    with ib.faults.scaled("tanh", 1.01):
        report = ib.find_first_divergence(write_through_a_view, *x)
    assert report.found and report.culprit_target == "aten.tanh.default", report.render()
    assert report.diverging_node.startswith("copy_"), report.render()


def token_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.view(-1, logits.shape[-1]), target.view(-1))


def test_a_buffer_named_after_a_node_computed_only_in_registers_is_not_compared():
    """A cross-entropy's kernel names a buffer after the log-softmax's ``log`` but computes the log
    in registers; the buffer (reused in place) ends up holding the sum of exponentials. Compared
    with eager's ``log`` it was the "first diverging buffer" of every language model's loss."""
    torch.manual_seed(0)
    x = (torch.randn(2, 15, 128) * 5, torch.randint(0, 128, (2, 15)))
    clean = ib.find_first_divergence(token_loss, *x)
    assert not clean.found and clean.checked, clean.render()
    assert "log" not in [c.node for c in clean.checked]
    with ib.faults.bad_lowering("log", "std::log({x}) * decltype({x})(1.5)",
                                vectorized="{x}.log() * decltype({x})(1.5)"):
        report = ib.find_first_divergence(token_loss, *x)
    assert report.found and report.culprit_target == "aten.log.default", report.render()


def rotary_complex(x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
    x = torch.exp(x) * 0.5
    pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(pairs * freqs_cis).flatten(-2) * 2.0 + 1.0


def test_complex_buffers_are_compared_with_their_imaginary_parts():
    """A rotary embedding in complex numbers (Llama's original): the complex buffers were compared
    as float64, which dropped their imaginary parts, and the first mismatch crashed the search
    (``float()`` of a complex)."""
    torch.manual_seed(0)
    angles = torch.outer(torch.arange(12).float(), 1.0 / (10000 ** (torch.arange(0, 16, 2).float() / 16)))
    x = (torch.randn(2, 12, 16), torch.polar(torch.ones(12, 8), angles))
    with ib.faults.bad_lowering("exp", "std::exp({x}) * decltype({x})(1.5)",
                                vectorized="{x}.exp() * decltype({x})(1.5)"):
        report = ib.find_first_divergence(rotary_complex, *x)
    assert report.found and report.culprit_target == "aten.exp.default", report.render()
    first = report.checked[0]
    assert first.node == "view_as_complex" and not first.passed and first.max_abs_error > 1, report.render()
    # The exp is in a buffer no node's value names (view_as_complex's input, realized in its
    # layout), so no comparison saw it; the extern call's line is view_as_complex's alone, and the
    # search takes the nodes upstream that no buffer showed as candidates too.
    assert "exp" in report.unseen_upstream and "before it that no buffer showed" in report.render()


def strided_across_a_break(x: torch.Tensor) -> torch.Tensor:
    every_other = (torch.exp(x) * 2)[:, ::2]
    torch._dynamo.graph_break()
    return torch.tanh(every_other) + 1


def test_a_graph_whose_input_is_a_view_with_gaps_is_replayed_on_the_same_strides():
    """After a graph break the next graph's input is a view with gaps (Longformer's chunked
    attention); its compiled code asserts those strides. The replay's copies of the arguments were
    made contiguous, and the search died on ``assert_size_stride`` before comparing anything."""
    torch.manual_seed(0)
    with ib.faults.bad_lowering("tanh", "std::tanh({x}) * decltype({x})(1.5)",
                                vectorized="{x}.tanh() * decltype({x})(1.5)"):
        report = ib.find_first_divergence(strided_across_a_break, torch.randn(4, 16))
    assert report.found and report.culprit_target == "aten.tanh.default", report.render()
    assert report.graph.endswith("1/0 inference") and report.checked[0].passed, report.render()


def dropout_then_tanh(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = F.dropout(x * 3, p=0.5, training=True) @ w
    return torch.tanh(h) + h


def test_dropout_draws_eagers_numbers_in_every_layer_and_in_the_buffer_replay():
    """Random ops are compared under eager's RNG everywhere: a dropout neither makes the
    decompositions layer look broken nor becomes the "first diverging buffer" of another bug."""
    torch.manual_seed(0)
    x = (torch.randn(64, 32), torch.randn(32, 32))
    layers = ib.find_failing_layer(dropout_then_tanh, *x, layers=("eager", "aot_eager_decomp_partition"))
    assert layers.first_failing is None, layers.render()
    with ib.faults.bad_lowering("tanh", "std::tanh({x}) * decltype({x})(1.5)",
                                vectorized="{x}.tanh() * decltype({x})(1.5)"):
        report = ib.find_first_divergence(dropout_then_tanh, *x)
    assert report.found and report.culprit_target == "aten.tanh.default", report.render()
    assert any(c.passed for c in report.checked), report.render()  # the dropout's buffers matched eager
    line = inspect.getsourcelines(dropout_then_tanh)[1] + 2
    assert report.key_lines and all(k.source.line == line for k in report.key_lines)


def gelu_then_dropout(x: torch.Tensor, w: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    h = F.gelu(x @ w)
    return F.dropout(h, p=0.1, training=True) @ w2


def test_a_value_copied_into_a_fallbacks_layout_is_compared_and_its_store_is_its_nodes():
    """Under ``fallback_random`` dropout is an extern kernel that wants its input in eager's strides:
    Inductor copies the GELU's value into a buffer of its own (``ExternKernel.copy_input``) and names
    it after no FX node. That buffer holds the GELU's result: it is named after the GELU's last node,
    its store line is that node's, and a wrong ``erf`` is found in it, not reported as the dropout's
    ``getitem`` with no kernel line."""
    torch.manual_seed(0)
    x = (torch.randn(16, 32), torch.randn(32, 64), torch.randn(64, 8))
    with ib.capture() as session, torch.no_grad():
        torch.compile(gelu_then_dropout, backend="instrumented", options={"fallback_random": True})(*x)
    graph = session.graphs[0]
    post_grad = {n.name: n for n in graph.post_grad_graph.graph.nodes}
    dropout = next(n for n in post_grad.values() if n.target is torch.ops.aten.native_dropout.default)
    copied = dropout.args[0].name  # the GELU's last node
    assert copied in graph.buffers.values(), graph.buffers
    stores = [line for k in graph.kernels for line in k.lines if "ops.store" in line.ir_ops]
    assert any(line.fx_nodes == [copied] for line in stores), [(line.fx_nodes, line.text) for line in stores]
    assert not any(dropout.name in line.fx_nodes for line in stores)  # the dropout stores nothing itself

    with ib.faults.scaled("erf", 1.001):
        report = ib.find_first_divergence(gelu_then_dropout, *x)
    assert report.found and report.diverging_node == copied, report.render()
    assert report.kernel is not None and report.culprit == "erf", report.render()
    line = inspect.getsourcelines(gelu_then_dropout)[1] + 1
    assert report.key_lines and all(k.source.line == line for k in report.key_lines), report.render()
    assert any("erf" in k.text for k in report.key_lines), report.render()


def drop_path_then_tanh(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Stochastic depth as vision transformers write it: a per-row mask from ``torch.rand`` in x's dtype."""
    keep = (torch.rand(x.shape[0], 1, dtype=x.dtype) + 0.5).floor()
    h = (x * keep / 0.5) @ w
    return torch.tanh(h) + F.dropout(h, p=0.3, training=True)


def test_the_fp64_referee_draws_the_random_numbers_eager_drew():
    """Run in float64, the same seed draws other numbers (``torch.rand`` reads 64 bits of the
    generator per float64, 32 per float32): a drop path's referee dropped other rows than eager,
    its error against eager was that of two different masks, and the accuracy rule let compiled
    code be twice as wrong. The float64 run replays eager's draws: eager's computation, more precise."""
    from instrumented_backend.diagnosis.accuracy import fp64_reference, run_seeded

    torch.manual_seed(0)
    x = (torch.randn(64, 32), torch.randn(32, 32))
    eager = run_seeded(drop_path_then_tanh, x, seed=0)
    reference = fp64_reference(drop_path_then_tanh, x, seed=0)
    assert reference is not None and reference.dtype == torch.float64
    assert (reference - eager.double()).abs().max() < 1e-4  # the same masks: fp32 rounding apart
    drawn_again = run_seeded(drop_path_then_tanh, [v.double() for v in x], seed=0)  # not replayed
    assert (drawn_again - eager.double()).abs().max() > 1.0  # other masks


_GLOBAL_HEAD = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
_GLOBAL_SCALE = torch.linspace(0.5, 1.5, 4)


def _head_of_global_model(x: torch.Tensor) -> torch.Tensor:
    return _GLOBAL_HEAD(x).softmax(-1) * _GLOBAL_SCALE  # a model and a tensor the function reads as globals


def _head_of_token_ids(ids: torch.Tensor) -> torch.Tensor:
    bias = torch.zeros(4, dtype=torch.float32)  # a cast and a factory of its own, at float32
    return _GLOBAL_HEAD(ids.float() / 10).softmax(-1, dtype=torch.float32) + bias


def test_the_fp64_referee_of_a_function_widens_the_model_it_names_and_its_own_casts():
    """``def fn(x): return model(x)`` with a global ``model``, the commonest function a user checks:
    its float64 run met the float32 weights and raised, so it was judged with no referee at all (and
    a function of token ids ran at float32, its "referee" eager itself). The referee reads float64
    copies of the modules and tensors a function names (or an object holding a model holds), and
    its own casts to float32 are to float64; the user's model is left as it was."""
    from instrumented_backend.diagnosis.accuracy import fp64_reference
    from instrumented_backend.diagnosis.widened_casts import WidenedCasts

    weight = _GLOBAL_HEAD[0].weight
    x = torch.randn(8, 16)
    reference = fp64_reference(_head_of_global_model, [x], seed=0)
    assert reference is not None and reference.dtype == torch.float64
    double = copy.deepcopy(_GLOBAL_HEAD).double()
    expected = double(x.double()).softmax(-1) * _GLOBAL_SCALE.double()
    assert torch.equal(reference, expected)
    assert _GLOBAL_HEAD[0].weight is weight and weight.dtype == torch.float32  # the user's model untouched
    ids = torch.randint(0, 50, (8, 16))
    from_ids = fp64_reference(_head_of_token_ids, [ids], seed=0)
    assert from_ids is not None and from_ids.dtype == torch.float64
    assert torch.equal(from_ids, double(ids.double() / 10).softmax(-1))
    assert torch.get_default_dtype() == torch.float32

    class Pipeline:  # an object holding the model, judged by its __call__ and by a method
        def __init__(self) -> None:
            self.model, self.steps = _GLOBAL_HEAD, 1

        def __call__(self, x: torch.Tensor) -> torch.Tensor:
            return self.model(x)

        def logits(self, x: torch.Tensor) -> torch.Tensor:
            return self.model(x)

    pipeline = Pipeline()
    for call in (pipeline, pipeline.logits):
        held = fp64_reference(call, [x], seed=0)
        assert held is not None and torch.equal(held, double(x.double()))
    assert pipeline.model is _GLOBAL_HEAD and weight.dtype == torch.float32
    with WidenedCasts():  # bitcasts and integer casts are left alone
        bits = torch.ones(2).view(torch.int32)
        assert bits.dtype == torch.int32 and torch.ones(2).to(torch.int64).dtype == torch.int64
        assert torch.ones(2, dtype=torch.bfloat16).dtype == torch.float64 and torch.arange(3.0).half().dtype == (
            torch.float64)


def _encode_with_global_model(x: torch.Tensor) -> torch.Tensor:
    return _GLOBAL_HEAD(x)  # a helper of the judged function reads the model


def _model_and_its_helper(x: torch.Tensor) -> torch.Tensor:
    return _GLOBAL_HEAD(x) + _encode_with_global_model(x)


def _predict_through_a_helper(x: torch.Tensor, depth: int = 1) -> torch.Tensor:
    if depth:  # calls itself by its global name once, then the helper
        return _predict_through_a_helper(x, depth - 1) * 2
    return _encode_with_global_model(x).softmax(-1) * _GLOBAL_SCALE


def test_the_fp64_referee_and_the_step_state_look_through_the_helpers_a_function_calls():
    """``predict(x)`` calling ``encode(x)``, which reads a global model: the function itself names
    no model, so its float64 run met the float32 weights (no referee), and a training step written
    so had no parameter judged at all, only its inputs' gradients. The user's own functions it calls
    are looked through, transitively (torch's and the standard library's are not); each helper
    and module is copied once, a recursive call reaches the copy, and the originals stay as they were."""
    from instrumented_backend.diagnosis.accuracy import fp64_function, fp64_reference
    from instrumented_backend.diagnosis.reached_names import is_user_function, reached_names
    from instrumented_backend.diagnosis.step_state import StepState

    x = torch.randn(8, 16)
    reference = fp64_reference(_predict_through_a_helper, [x], seed=0)
    double = copy.deepcopy(_GLOBAL_HEAD).double()
    assert reference is not None and torch.equal(reference, double(x.double()).softmax(-1) * _GLOBAL_SCALE.double() * 2)
    assert _GLOBAL_HEAD[0].weight.dtype == torch.float32  # the user's model and helper untouched
    assert _encode_with_global_model.__globals__["_GLOBAL_HEAD"] is _GLOBAL_HEAD
    widened = fp64_function(_predict_through_a_helper)
    helper = widened.__globals__["_encode_with_global_model"]
    assert widened.__globals__["_predict_through_a_helper"] is widened and helper is not _encode_with_global_model
    assert helper.__globals__["_GLOBAL_HEAD"][0].weight.dtype == torch.float64
    both = fp64_function(_model_and_its_helper)
    assert both.__globals__["_GLOBAL_HEAD"] is both.__globals__["_encode_with_global_model"].__globals__["_GLOBAL_HEAD"]

    def closure_step(x: torch.Tensor) -> torch.Tensor:  # the helper reached through a closure cell
        return F.mse_loss(encode(x), torch.zeros(8, 4))

    encode = _encode_with_global_model
    state = StepState.of(closure_step)
    assert state.modules == [_GLOBAL_HEAD] and len(state.parameters()) == 4
    names = dict(reached_names(closure_step))
    assert names["_GLOBAL_HEAD"] is _GLOBAL_HEAD and "F" in names
    assert is_user_function(_encode_with_global_model) and not is_user_function(F.mse_loss)
    assert not is_user_function(copy.deepcopy) and not is_user_function(fp64_function)


def test_a_function_of_a_global_model_is_judged_with_its_referee():
    """End to end: a wrong GELU in a function of a global model is judged with the referee's RMSE,
    which the report showed as "-" (no referee) before."""
    torch.manual_seed(0)
    with ib.faults.scaled("erf", 1.01):
        report = ib.check_accuracy(_head_of_global_model, torch.randn(8, 16))
    [output] = report.outputs
    assert not report.passed and output.rmse_eager is not None and output.rmse_compiled > 10 * output.rmse_eager


class _Runner:
    """The user's object holding a model, and an object holding it (a pipeline's stage)."""

    def __init__(self, head: torch.nn.Module) -> None:
        self.head = head
        self.stage = types.SimpleNamespace()  # not the user's class: never looked into
        self.inner: "_Runner | None" = None

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(x) if self.inner is None else self.inner.encode(x)


_GLOBAL_RUNNER = _Runner(torch.nn.Identity())
_GLOBAL_RUNNER.inner = _Runner(_GLOBAL_HEAD)


def _predict_through_a_global_object(x: torch.Tensor) -> torch.Tensor:
    return _GLOBAL_RUNNER.encode(x).softmax(-1)


def test_the_users_objects_a_function_reaches_are_looked_into_for_the_referee_and_the_state():
    """A function calling ``runner.encode(x)`` on a global object of the user's class, whose
    ``self.inner.head`` is the model: no closure cell or global names the model, so the float64 run
    met float32 weights (no referee, RMSE "-") and a training step written so judged no parameter.
    The user's objects are looked into, transitively, and copied with float64 models for the
    referee; the originals stay as they were."""
    from instrumented_backend.capture.redirect import target_name
    from instrumented_backend.diagnosis.accuracy import fp64_reference
    from instrumented_backend.diagnosis.reached_names import is_user_object, reached_names
    from instrumented_backend.diagnosis.step_state import StepState

    x = torch.randn(8, 16)
    reference = fp64_reference(_predict_through_a_global_object, [x], seed=0)
    double = copy.deepcopy(_GLOBAL_HEAD).double()
    assert reference is not None and torch.equal(reference, double(x.double()).softmax(-1))
    assert _GLOBAL_RUNNER.inner.head is _GLOBAL_HEAD and _GLOBAL_HEAD[0].weight.dtype == torch.float32
    names = dict(reached_names(_predict_through_a_global_object))
    assert names["_GLOBAL_RUNNER.inner.head"] is _GLOBAL_HEAD and "_GLOBAL_RUNNER.stage" in names
    assert StepState.of(_predict_through_a_global_object).modules == [_GLOBAL_RUNNER.head, _GLOBAL_HEAD]
    assert StepState.of(_GLOBAL_RUNNER.inner.encode).modules == [_GLOBAL_HEAD]  # a bound method: its object
    assert is_user_object(_GLOBAL_RUNNER) and not is_user_object(_GLOBAL_RUNNER.stage)
    assert not is_user_object(_GLOBAL_HEAD) and not is_user_object(x) and not is_user_object(torch.optim.SGD)
    with ib.faults.scaled("erf", 1.01):
        report = ib.check_accuracy(_predict_through_a_global_object, x)
    [output] = report.outputs
    assert not report.passed and output.rmse_eager is not None and output.rmse_compiled > 10 * output.rmse_eager
    # functools.partial(predict, runner): what it binds is looked into, and bound as float64 copies
    bound = functools.partial(_Runner.encode, _GLOBAL_RUNNER)
    assert StepState.of(bound).modules == [_GLOBAL_RUNNER.head, _GLOBAL_HEAD]
    assert torch.equal(fp64_reference(bound, [x], seed=0), double(x.double()))
    assert target_name(bound) == "partial(_Runner.encode)"  # as reports name it (it was "partial")


class _NetWithItsOptimizer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh())
        self.opt = torch.optim.Adam(self.parameters(), lr=0.01)

    def train_step(self, x: torch.Tensor) -> torch.Tensor:
        loss = self.body(x).square().mean()
        loss.backward()
        self.opt.step()
        self.opt.zero_grad()
        return loss.detach()


def test_the_state_of_a_step_includes_what_its_module_and_object_arguments_hold():
    """``@torch.compile`` on a module's ``train_step`` (its optimizer ``self.opt``) is called with
    ``self`` as an argument: the recorded call named no state, so the script's training step was
    judged as inference, and "eager itself raises" in ``loss.backward()`` was its diagnosis. A
    module among the arguments brings its parameters and the optimizers it holds; a user's object
    among them (``step(trainer, x)``) what it holds; a bound method of the module its optimizer."""
    from instrumented_backend.capture.redirect import _step_state
    from instrumented_backend.diagnosis.step_state import StepState

    net = _NetWithItsOptimizer()
    x = torch.randn(2, 4)
    assert StepState.of(_NetWithItsOptimizer.train_step).modules == []  # the function alone names nothing
    state = _step_state(_NetWithItsOptimizer.train_step, (net, x))
    assert state is not None and state.modules == [net] and state.optimizers == [net.opt]
    assert len(state.parameters()) == 2
    bound = StepState.of(net.train_step)
    assert bound.modules == [net] and bound.optimizers == [net.opt]
    holder = _Runner(_GLOBAL_HEAD)
    passed = StepState.of(lambda runner, x: runner.encode(x)).with_arguments([holder, x])
    assert passed.modules == [_GLOBAL_HEAD] and len(passed.parameters()) == 4
    before = [p.detach().clone() for p in state.parameters()]
    with state.kept():  # the step's Adam state and weights put back
        _NetWithItsOptimizer.train_step(net, x)
    assert all(torch.equal(a, b) for a, b in zip(before, state.parameters())) and not net.opt.state


class _Accumulating:
    """A trainer stepping its optimizer every second call: a count the step reassigns."""

    def __init__(self) -> None:
        self.model = torch.nn.Linear(4, 2)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.calls = 0

    def step(self, x: torch.Tensor) -> torch.Tensor:
        loss = self.model(x).square().mean()
        loss.backward()
        self.calls += 1
        if self.calls % 2 == 0:
            self.opt.step()
            self.opt.zero_grad()
        return loss.detach()


_CALLS_SO_FAR = 0


def _counting(x: torch.Tensor) -> torch.Tensor:
    global _CALLS_SO_FAR
    _CALLS_SO_FAR += 1
    return _GLOBAL_HEAD(x) * _CALLS_SO_FAR


def test_the_plain_values_a_step_reassigns_are_put_back_with_its_weights():
    """A step counting its calls (``self.calls += 1``, the optimizer stepped every second call)
    ran its second judging run from another count: eager "was nondeterministic", not judged. The
    plain values of the user's objects it reaches and the globals it reads are saved and put back
    with the weights."""
    from instrumented_backend.diagnosis.step_state import StepState

    global _CALLS_SO_FAR
    trainer = _Accumulating()
    x = torch.randn(3, 4)
    state = StepState.of(trainer.step)
    weights = [p.detach().clone() for p in state.parameters()]
    with state.kept():
        trainer.step(x)
        trainer.step(x)
        assert trainer.calls == 2 and not torch.equal(weights[0], trainer.model.weight)
    assert trainer.calls == 0 and all(torch.equal(a, b) for a, b in zip(weights, state.parameters()))
    assert all(p.grad is None for p in state.parameters())
    _CALLS_SO_FAR = 5
    with StepState.of(_counting).kept():
        _counting(torch.randn(2, 16))
        assert _CALLS_SO_FAR == 6
    assert _CALLS_SO_FAR == 5


_STEP_MODEL: torch.nn.Module
_STEP_OPTIMIZER: torch.optim.Optimizer


def _global_training_step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    loss = F.cross_entropy(_STEP_MODEL(x), y)
    loss.backward()
    _STEP_OPTIMIZER.step()
    _STEP_OPTIMIZER.zero_grad()
    return loss


def test_a_training_step_of_a_global_model_is_judged_with_a_float64_referee_and_left_as_it_was():
    """A training step as scripts write it, a function of a global model and optimizer: its float64
    run "read the same globals", met the float32 weights with float64 inputs and raised, so its
    loss, gradients and updated weights were judged with no referee. The referee now runs on the
    very parameters the step names, widened to float64 in place (the optimizer holds them), and
    puts back their values, gradients and the optimizer's momentum, untouched."""
    from instrumented_backend.diagnosis.training import judge_training

    global _STEP_MODEL, _STEP_OPTIMIZER
    torch.manual_seed(0)
    _STEP_MODEL = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    _STEP_OPTIMIZER = torch.optim.AdamW(_STEP_MODEL.parameters(), lr=0.01)  # on CPU, one tensor at a time
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
    _global_training_step(x, y)  # momentum buffers to put back
    weight = _STEP_MODEL[0].weight
    before = [p.detach().clone() for p in _STEP_MODEL.parameters()]
    moments = {key: value.clone() for key, value in _STEP_OPTIMIZER.state[weight].items()}
    with ib.faults.scaled("erf", 1.1):
        compiled = torch.compile(_global_training_step, backend="instrumented")
        outputs, gradients = judge_training(_global_training_step, compiled, [x, y], 0, None)
    # it drops its gradients (zero_grad): its loss and the weights after its step are judged
    assert not outputs.passed, outputs.render()
    wrong = [o for o in outputs.outputs if not o.passed]
    assert all(o.rmse_eager is not None and o.rmse_compiled > 2 * o.rmse_eager for o in wrong), outputs.render()
    assert _STEP_MODEL[0].weight is weight and weight.dtype == torch.float32 and weight.grad is None
    assert all(torch.equal(p, b) for p, b in zip(_STEP_MODEL.parameters(), before))
    # Adam's moments back as they were, float32 (cast to float64 by the referee's widened casts as
    # they were put back, they met float32 gradients in the compiled step: lerp_ raised), and its
    # step count too (loaded as it is, the referee's run counted it on)
    state = _STEP_OPTIMIZER.state[weight]
    assert all(torch.equal(state[key], value) and state[key].dtype == value.dtype for key, value in moments.items())


def test_a_step_that_drops_its_gradients_and_takes_no_floating_input_runs_its_own_backward():
    """A language model's step: token ids in, ``loss.backward()``, ``optimizer.step()``,
    ``zero_grad()`` last. No gradient was left to see its backward by, so it was differentiated
    again through the graph its own backward had freed: "eager itself raises"."""
    from instrumented_backend.diagnosis.step_state import StepState
    from instrumented_backend.diagnosis.training import training_step

    global _STEP_MODEL, _STEP_OPTIMIZER
    torch.manual_seed(0)
    _STEP_MODEL = torch.nn.Sequential(torch.nn.Embedding(10, 8), torch.nn.Linear(8, 4))
    _STEP_OPTIMIZER = torch.optim.SGD(_STEP_MODEL.parameters(), lr=0.1)

    def step(ids: torch.Tensor) -> torch.Tensor:
        loss = _STEP_MODEL(ids).logsumexp(-1).mean()
        loss.backward()
        _STEP_OPTIMIZER.step()
        _STEP_OPTIMIZER.zero_grad()
        return loss

    ran = training_step(step, [torch.randint(0, 10, (2, 5))], 0, StepState.of(step))
    assert ran.own_backward and set(ran.outputs) == {"output", "updated"}


def test_random_draws_are_replayed_in_order_and_a_run_that_draws_otherwise_diverges():
    from minifier.judge import RandomDraws

    x = torch.randn(8, 8)
    with RandomDraws() as drawn:
        uniform, normal = torch.rand(3), torch.randn(2, 2)
        out, mask = torch.ops.aten.native_dropout(x, 0.5, True)
    with RandomDraws(replay=drawn.draws) as replayed:
        uniform64, normal64 = torch.rand(3, dtype=torch.float64), torch.randn(2, 2, dtype=torch.float64)
        out64, mask64 = torch.ops.aten.native_dropout(x.double(), 0.5, True)
    assert not replayed.diverged
    assert torch.equal(uniform64, uniform.double()) and torch.equal(normal64, normal.double())
    # dropout's mask is eager's, its output recomputed from the float64 input
    assert torch.equal(mask64, mask) and torch.allclose(out64, x.double() * mask * 2.0, rtol=0, atol=1e-15)
    for other in (lambda: torch.rand(4, dtype=torch.float64),  # another shape
                  lambda: torch.randn(3, dtype=torch.float64),  # another op
                  lambda: torch.rand(3, dtype=torch.float64)):  # fewer draws
        with RandomDraws(replay=drawn.draws) as replayed:
            other()
        assert replayed.diverged


class _DropPathMLP(torch.nn.Module):
    """An MLP block behind a drop path (stochastic depth), as a ViT's residual has."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(32, 64), torch.nn.Linear(64, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        keep = (torch.rand(x.shape[0], 1, dtype=x.dtype) + 0.7).floor() / 0.7
        return x + keep * self.fc2(F.gelu(self.fc1(x)))


def test_a_small_error_behind_a_drop_path_is_judged_at_the_tolerance_asked_and_a_pass_says_how_close(tmp_path):
    """A training step behind a drop path, erf 0.001% off: within the default float32 tolerance, and
    a passing diagnosis says how close its nearest gradient came; at tol=1e-7 it is found. Before the
    referee replayed eager's masks, it passed at any tolerance (its RMSE was that of other masks)."""
    torch.manual_seed(0)
    model, x = _DropPathMLP().train(), torch.randn(16, 32)
    with ib.faults.scaled("erf", 1.00001):
        passing = ib.diagnose(model, x, train=True, out_dir=tmp_path / "default", minify=False)
        found = ib.diagnose(model, x, train=True, tol=1e-7, out_dir=tmp_path / "tight", minify=False)
    assert passing.verdict == "passed", passing.render()
    closest = passing.closest_to_failing()
    assert closest.startswith("closest to failing: gradients[")
    assert "% of the tolerance (atol = rtol = 0.0001)" in closest
    assert closest in passing.render()
    assert passing.below_tolerance() == ""  # its outputs and gradients are far above the tolerance
    assert found.found and found.verdict in ("inaccurate", "wrong_gradient"), found.render()
    assert found.divergence is not None and found.divergence.culprit == "erf", found.render()
    assert found.closest_to_failing() == ""


def test_the_culprit_names_its_module_as_named_modules_does():
    """Every GELU's source is ``GELU.forward``: only the module path says which is wrong."""
    torch.manual_seed(0)
    model = Blocks(torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU()),
                   torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU())).eval()
    with ib.faults.scaled("erf", 1.01):
        report = ib.find_first_divergence(model, torch.randn(4, 16))
    assert report.culprit == "erf", report.render()
    assert "blocks.1.1" in dict(model.named_modules())
    assert report.culprit_module == "blocks.1.1 (GELU)", report.render()
    assert "culprit: erf (aten.erf.default) in module blocks.1.1 (GELU)" in report.render()


def collapsed_gelu(x: torch.Tensor) -> torch.Tensor:
    """Activations that collapsed, as a deep net's random weights can make them: every value far below
    float32's absolute tolerance (1e-4)."""
    return F.gelu(x) * 1e-5


def test_outputs_smaller_than_their_tolerance_are_said_to_be_judged_blind_and_looked_inside(tmp_path):
    """Every value below atol: a pass says so and names the output. A 50% wrong erf passed so; such a
    pass now has the buffers inside compared, each at its own scale, which finds it at the default
    tolerance (an unseen MobileViT from a config with random weights pools its features to exact
    zeros: its rsqrt 1% off is found inside), and the blind line is kept; at a tolerance below the
    values the outputs themselves show it."""
    torch.manual_seed(0)
    x = torch.randn(8, 16)
    clean = ib.diagnose(collapsed_gelu, x, out_dir=tmp_path / "clean", minify=False)
    with ib.faults.scaled("erf", 1.5):
        blind = ib.diagnose(collapsed_gelu, x, out_dir=tmp_path / "default", minify=False)
        seen = ib.diagnose(collapsed_gelu, x, tol=1e-7, out_dir=tmp_path / "tight", minify=False)
    assert clean.verdict == "passed" and clean.divergence is None, clean.render()
    line = clean.below_tolerance()
    assert line.startswith("judged blind: 1 of the 1 outputs and gradients judged are smaller than their absolute "
                           "tolerance (atol = 0.0001)"), line
    largest = float(re.search(r"largest \|value\| ([0-9.e-]+)", line).group(1))
    assert 1e-5 < largest < 1e-4  # the output's own largest magnitude
    assert line in clean.render() and "inside" in [s.name for s in clean.steps]  # looked, found nothing
    assert blind.verdict == "inaccurate" and blind.divergence.culprit == "erf", blind.render()
    assert blind.blind_outputs.startswith("judged blind: 1 of the 1 outputs") and blind.outputs.passed
    assert blind.headline == "a value inside the compiled code is wrong, which the outputs are too small to show"
    assert blind.blind_outputs in blind.render() and "wrong at its own scale" in blind.render(), blind.render()
    assert seen.found and seen.divergence is not None and seen.divergence.culprit == "erf", seen.render()
    assert seen.below_tolerance() == "" and seen.blind_outputs == "" and not seen.outputs.passed


class _CollapsedLayer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.lin(x)) * 1e-5


def test_a_training_step_judged_blind_has_its_backward_looked_inside_too(tmp_path):
    """A wrong exp only GELU's backward computes, in a step whose output and gradients are all under
    the absolute tolerance: the forward's buffers match, the backward's (replayed on its saved tensors
    and incoming gradients) hold it, at their own scale, and the repro is minified from there."""
    torch.manual_seed(0)
    with ib.faults.scaled("exp", 1.5):
        result = ib.diagnose(_CollapsedLayer(), torch.randn(8, 16), train=True, out_dir=tmp_path)
    assert result.verdict == "inaccurate", result.render()
    assert result.blind_outputs.startswith("judged blind: 4 of the 4"), result.render()
    assert result.divergence.graph.endswith("backward") and result.divergence.culprit == "exp", result.render()
    assert result.gradients.passed and result.repro_path and "1 nodes" in result.minifier, result.minifier


def softcapped(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x / 50.0) * 50.0 + y  # Gemma-2's attention softcapping


def softcapped_kept(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    capped = torch.tanh(x / 50.0)
    return capped, (capped * 50.0).softmax(-1) + y


def test_a_wrong_op_on_values_under_the_tolerance_is_found_at_their_own_scale():
    """Found on an unseen Gemma-2 training step with tanh 1% off: the softcapping's tanh computes
    values of 1e-5, under the absolute tolerance, so it matched eager in the kernel's probe and
    alone, and the culprit named was the mask's add after it, with "no node of the kernel diverges
    alone". Small values are judged at their own scale against float64: a buffer too (the second
    function returns the tanh, whose buffer is then the first to diverge)."""
    torch.manual_seed(0)
    x, y = torch.randn(8, 64) * 0.1, torch.randn(8, 64)
    with ib.faults.scaled("tanh", 1.01):
        report = ib.find_first_divergence(softcapped, x, y)
        kept = ib.find_first_divergence(softcapped_kept, x, y)
    assert report.culprit_target == "aten.tanh.default", report.render()
    probed = dict(report.probed)
    assert probed["tanh"] and not probed["div"], report.render()
    assert report.narrowed == [("tanh", True)] and not report.note, report.render()
    assert kept.culprit_target == "aten.tanh.default", kept.render()
    first = next(c for c in kept.checked if not c.passed)
    assert first.node == kept.diverging_node and first.small_values is not None and first.small_values < 1e-2
    assert "wrong at its own scale (every |value| under" in kept.render(), kept.render()
    clean = ib.find_first_divergence(softcapped_kept, x, y)
    assert not clean.found and all(c.small_values is None for c in clean.checked), clean.render()


class _Branching(torch.nn.Module):
    """A torch.cond between two branches, a layer before it and a residual after it."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)

    def forward(self, x: torch.Tensor, flag: torch.Tensor) -> torch.Tensor:
        h = self.lin(x)
        h = torch.cond(flag.sum() > 0, lambda t: torch.tanh(t) * 2, lambda t: torch.cos(t) - 1, (h,))
        return h.relu() + x


def test_a_wrong_op_inside_the_torch_cond_branch_that_ran_is_the_culprit():
    """The cond's output (``buf4 = buf3[0]`` after the branch call) was compared only after the
    kernel that reads it, behind that kernel's own output: the residual ``add`` came out first and
    was blamed ("no node of the kernel diverges alone"). It is compared where it is unpacked, and
    the branch that ran is searched, replayed eagerly on its operands: its ``cos`` is named."""
    torch.manual_seed(0)
    model, x = _Branching(), torch.randn(8, 16)
    with ib.faults.scaled("cos", 1.05):
        report = ib.find_first_divergence(model, x, -torch.ones(2))  # the false branch runs
    assert report.checked[-1].dynamo_node == "cond" and not report.checked[-1].passed
    branch = report.culprit.split(".")[0]
    assert report.culprit == f"{branch}.cos" and branch.startswith("false_graph")
    assert any(".cos()" in line.text for line in report.lines)
    assert report.branch is not None and report.branch[0] == branch


def test_a_cond_branchs_culprit_is_diagnosed_and_its_branch_minified(tmp_path):
    torch.manual_seed(0)
    model, x = _Branching(), torch.randn(8, 16)
    with ib.faults.scaled("tanh", 1.05):
        result = ib.diagnose(model, x, torch.ones(2), out_dir=tmp_path, progress=False)
    assert result.found and result.divergence.culprit.endswith(".tanh")
    assert "-> 1 nodes" in result.minifier and result.repro_path  # the branch's subgraph, alone
    assert "torch.tanh(t)" in (tmp_path / "diagnosis.txt").read_text()  # the culprit's source line


class _Refining(torch.nn.Module):
    """A while_loop refining a state four times with a linear layer and a tanh."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from torch._higher_order_ops.while_loop import while_loop

        def body(i: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return i + 1, torch.tanh(self.lin(h)) + h * 0.5

        _, h = while_loop(lambda i, h: i < 4, body, (torch.zeros((), dtype=torch.int64), x))
        return h.sum(-1)


def test_a_wrong_op_inside_a_while_loop_body_is_the_culprit_and_the_body_is_minified(tmp_path):
    """The loop's output diverged and the search stopped there: 'culprit: getitem_1 (getitem)',
    and the minifier could not load a graph calling subgraphs. The body is searched as a cond's
    branch is, run on the loop's inputs (its first iteration): its tanh is named, at the user's
    line in the body, and the body alone is minified to it."""
    torch.manual_seed(0)
    with ib.faults.scaled("tanh", 1.01):
        result = ib.diagnose(_Refining().eval(), torch.randn(8, 16), out_dir=tmp_path, progress=False)
    report = result.divergence
    assert result.found and report.culprit == "while_loop_body_graph_0.tanh", report.render()
    assert report.culprit_target == "aten.tanh.default" and "its first iteration" in report.note
    assert any(".tanh()" in line.text for line in report.lines), report.render()
    assert "-> 1 nodes" in result.minifier and result.repro_path, result.minifier
    line = inspect.getsourcelines(_Refining.forward)[1] + 4
    assert f"test_diagnosis.py:{line}" in (tmp_path / "diagnosis.txt").read_text()


def _sin_then_relu(x: torch.Tensor) -> torch.Tensor:
    return torch.sin(x * 2).relu()


def test_a_compile_error_raised_while_lowering_names_the_node_and_the_users_line(monkeypatch, tmp_path, capsys):
    """An error Inductor raises while lowering a node (not a C++ compiler's: a lowering that
    cannot decide a symbolic comparison, as a ConvNeXt stem's permute under dynamic=True in a
    training compile) said only the error; the diagnosis now names the node being lowered, its op
    and the user's line it came from, and the minifier starts from the Dynamo ops of that line (no
    kernel line names a culprit when lowering itself failed: it searched the whole graph, blind)."""
    from torch._inductor import lowering

    def broken_sin(*args, **kwargs):
        raise TypeError("cannot determine truth value of Relational: s0 < 8")

    monkeypatch.setitem(lowering.lowerings, torch.ops.aten.sin.default, broken_sin)
    result = ib.diagnose(_sin_then_relu, torch.randn(4, 8), out_dir=tmp_path, progress=True)
    assert result.verdict == "compile_error"
    line = inspect.getsourcelines(_sin_then_relu)[1] + 1
    assert result.lowering_at.startswith("post-grad node sin (aten.sin.default), from ")
    assert result.lowering_at.endswith(f"test_diagnosis.py:{line}: return torch.sin(x * 2).relu()")
    assert f"  while lowering: {result.lowering_at}" in result.render()
    # the ops of its line (the minifier's worker, a fresh process where the caller cannot be
    # forked, has no monkeypatched lowering: whether it then shrinks the graph is not asserted)
    assert "minifying from the culprit (mul, sin, relu)" in capsys.readouterr().err


def test_a_frozen_models_divergence_is_searched_past_its_onednn_fusions_and_sourced_inside_torchs_modules(tmp_path):
    """Under freezing, a conv with its ReLU or SiLU becomes one oneDNN call that a post-grad pass
    leaves as a call of an Inductor *lowering* function, which takes IR, not tensors, and the packed
    weights are constants Inductor sets on the module it loads. The search's eager replay died on
    the first ("'Tensor' object has no attribute 'realize'": no buffer compared), its hooked copy of
    the code ran with those constants unset, and the first-call snapshot of a crash warned, unable
    to save an opaque oneDNN tensor. Now such a node takes the compiled code's value, the copy gets
    Inductor's constants, the snapshot says why it has no repro, and the culprit's line is the one
    inside torch's module that a plain instrumented compile gives (the search's own backend was
    not known as instrumented, so it was the module's ``def forward``)."""
    from instrumented_backend.capture.backend import before_calls
    from instrumented_backend.diagnosis.crash import save_first_call
    from instrumented_backend.seams.lowering.lowering_patterns import lowered_only

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(8, 8, 3),
                              torch.nn.SiLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                              torch.nn.Linear(8, 4)).eval()
    x = torch.randn(2, 3, 16, 16)
    with (warnings.catch_warnings(record=True) as caught, torch._inductor.config.patch(freezing=True),
          ib.faults.scaled("truediv", 1.01), before_calls(lambda g, a, o: save_first_call(g, a, o, tmp_path))):
        warnings.simplefilter("always")
        report = ib.find_first_divergence(net, x)
    assert not [str(w.message) for w in caught if issubclass(w.category, ib.InstrumentationWarning)]
    graph = ib.last_capture()
    fused = [n.name for n in graph.post_grad_graph.graph.nodes if lowered_only(n)]
    assert len(fused) == 2, graph.post_grad_graph.code
    # each is known by what its match replaced: the convolution (its line, its module) and the epilogue
    for name in fused:
        node = graph.nodes[name]
        assert node.module_type == "Conv2d" and node.source.code == "return F.conv2d(", node
        assert len(node.dynamo_nodes) == 2, node
    assert report.found and report.diverging_node == "mean", report.render()
    assert report.kernel and report.kernel.startswith("cpp_fused_mean"), report.render()
    sources = {line.source.code for line in report.lines if line.source is not None}
    assert sources == {"return F.adaptive_avg_pool2d(input, self.output_size)"}, report.render()
    (skipped,) = (tmp_path / "first_calls").glob("*.skipped")
    assert "which only Inductor's lowering runs" in skipped.read_text()
    # a fault on an op fused into a oneDNN call reaches no generated code: the note names that call
    from instrumented_backend.diagnosis.fault_notes import unfound_faults

    with ib.faults.scaled("relu", 1.5):
        (relu,) = ib.faults.active_faults()
        (note,) = unfound_faults([(relu, 0)], [graph])
    fused = r"it runs inside the extern call fn\w* \(mkldnn\._convolution_pointwise, relu\) in graph #"
    assert re.search(fused, note), note
