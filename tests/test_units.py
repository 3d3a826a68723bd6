"""Pure-Python units: the kernel finder on every output-code shape, and the torch version gate."""

from __future__ import annotations

import pytest

from instrumented_backend._torch_support import (
    UnsupportedTorchError,
    check_torch_version,
)
from instrumented_backend.provenance.kernels import find_kernels

CPP_AND_EXTERN = '''
from torch._inductor.select_algorithm import extern_kernels
async_compile = AsyncCompile()


cpp_fused_add_0 = async_compile.cpp_pybinding(['const float*', 'float*'], r\'\'\'
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(const float* in_ptr0, float* out_ptr0)
{
    auto tmp0 = in_ptr0[0];
    out_ptr0[0] = tmp0 + 1;
}
\'\'\')


async_compile.wait(globals())

class Runner:
    def call(self, args):
        arg0_1, arg1_1 = args
        buf0 = empty_strided_cpu((4, 4), (4, 1), torch.float32)
        extern_kernels.mm(arg0_1, arg1_1, out=buf0)
        # extern_kernels.bmm(commented, out=nothing)
        cpp_fused_add_0(buf0, buf0)
        buf1 = torch.ops.aten._fft_r2c.default(buf0, [1], 0, True)
        return (buf0, buf1)
'''

TRITON = """
triton_poi_fused_sin_0 = async_compile.triton('triton_poi_fused_sin_0', '''
import triton
@triton.jit
def triton_poi_fused_sin_0(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    tmp0 = tl.load(in_ptr0 + (x0), xmask)
    tl.store(out_ptr0 + (x0), tl.sin(tmp0), xmask)
''', device_str='cuda')

triton_tem_fused_mm_1 = async_compile.triton('triton_tem_fused_mm_1', '''
@triton.jit
def triton_tem_fused_mm_1(arg_A, arg_B, out_ptr0):
    pass
''', device_str='cuda')

def call(args):
    with torch.cuda._DeviceGuard(0):
        triton_poi_fused_sin_0.run(arg0_1, buf0, 16, stream=stream0)
        triton_tem_fused_mm_1.run(buf0, buf0, buf1, stream=stream0)
"""


def test_cpp_and_extern_kernels():
    lines = CPP_AND_EXTERN.splitlines()
    kernels = find_kernels(CPP_AND_EXTERN)
    assert [(k.name, k.kind) for k in kernels] == [
        ("cpp_fused_add_0", "cpp"), ("extern_kernels.mm", "extern"), ("torch.ops.aten._fft_r2c.default", "extern")]
    cpp = kernels[0]
    assert cpp.source.splitlines()[0] == "#include <torch/csrc/inductor/cpp_prefix.h>"
    assert cpp.source.splitlines()[-1] == "}"
    assert lines[cpp.source_start_line - 1] == cpp.source.splitlines()[0]
    assert lines[cpp.end_line - 1] == "''')"
    assert [lines[n - 1].strip() for n in cpp.call_lines] == ["cpp_fused_add_0(buf0, buf0)"]
    mm = kernels[1]
    assert mm.source == "extern_kernels.mm(arg0_1, arg1_1, out=buf0)" and lines[mm.start_line - 1].strip() == mm.source


def test_triton_and_template_kernels():
    lines = TRITON.splitlines()
    sin, mm = find_kernels(TRITON)
    assert (sin.name, sin.kind, mm.name, mm.kind) == (
        "triton_poi_fused_sin_0", "triton", "triton_tem_fused_mm_1", "template")
    assert sin.source.splitlines()[1] == "@triton.jit"
    assert lines[sin.source_start_line - 1] == "import triton"
    assert [lines[n - 1].strip()[:27] for n in sin.call_lines] == ["triton_poi_fused_sin_0.run("]


def test_no_kernels_in_empty_code():
    assert find_kernels("") == []


@pytest.mark.parametrize("version", ["2.13.0", "2.13.0+cpu", "2.13.1+cu130", "2.13.0a0+git1234"])
def test_supported_torch_versions(version):
    check_torch_version(version)


@pytest.mark.parametrize("version", ["2.12.1", "2.14.0", "3.0.0"])
def test_unsupported_torch_versions_fail_clearly(version, monkeypatch):
    monkeypatch.delenv("INSTRUMENTED_BACKEND_ALLOW_UNSUPPORTED_TORCH", raising=False)
    with pytest.raises(UnsupportedTorchError, match=rf"supports torch >=2\.13,<2\.14 but torch {version} is installed"):
        check_torch_version(version)
    monkeypatch.setenv("INSTRUMENTED_BACKEND_ALLOW_UNSUPPORTED_TORCH", "1")
    with pytest.warns(RuntimeWarning, match="to try anyway"):
        check_torch_version(version)


def _fake_template_node(fx_names, *, origin=None, template_name="mm"):
    from types import SimpleNamespace

    origins = [SimpleNamespace(name=n) for n in fx_names]
    buffer = SimpleNamespace(template=SimpleNamespace(name=template_name), origins=origins,
                             get_origin_node=lambda: origin and SimpleNamespace(name=origin))
    return SimpleNamespace(is_template=lambda: True, node=buffer)


def test_template_kernel_lines_without_tags_take_the_template_node():
    """The define_kernel wrapper as a Triton template kernel meets it (no GPU needed: fake nodes).

    The template's text is rendered by formatting, not from one tagged buffer: its epilogue line
    takes the tag it got when it was emitted, every other template line the template's node.
    """
    from types import SimpleNamespace

    from instrumented_backend.recording import recorder as provenance
    from instrumented_backend.seams.codegen.define_kernel import _wrap
    from instrumented_backend.seams.codegen.line_tags import template_origins

    epilogue = SimpleNamespace(is_template=lambda: False, node=None)
    assert template_origins([epilogue]) == []
    assert [o.fx_node for o in template_origins([_fake_template_node(["mm", "permute"])])] == ["mm", "permute"]
    assert [o.fx_node for o in template_origins([_fake_template_node(["mm", "permute"], origin="mm")])] == ["mm"]

    recorder = provenance.LineRecorder()
    relu = provenance.Origin("ops.relu", "relu")
    emitted = "tmp1 = triton_helpers.maximum(tmp0, acc)"
    recorder.tag_entry(emitted, (relu,), fresh=True)
    source = "\n".join([
        "@triton.jit",
        "def triton_tem_fused_mm_relu_0(arg_A, arg_B, out_ptr1):",
        "    acc += tl.dot(a, b)",
        "",
        f"    {emitted}",
    ])
    seen = {}

    def original(self, src_code, node_schedule, kernel):
        seen["src"] = src_code
        return "triton_tem_fused_mm_relu_0"

    define_kernel = _wrap(original, "node_schedule")  # the one wrapper, with its listeners
    previous = provenance.activate(recorder)
    try:
        name = define_kernel(None, source, [_fake_template_node(["mm"], origin="mm", template_name="triton_mm"),
                                            epilogue], None)
    finally:
        provenance.activate(previous)
    assert name == "triton_tem_fused_mm_relu_0" and seen["src"] is source  # Inductor's text, untouched
    [tagged] = recorder.kernels[name]
    by_line = dict(zip(tagged.clean_source.split("\n"), tagged.line_origins))
    assert by_line["    acc += tl.dot(a, b)"] == [provenance.Origin("template:triton_mm", "mm")]
    assert by_line[f"    {emitted}"] == [relu]
    assert by_line[""] == []
    assert recorder.kernel_origins(source)[4] == [], "the pending tags are spent by the kernel that used them"


def test_deferred_fields_compute_once_and_read_as_plain_values():
    import threading

    from instrumented_backend.deferred import Deferred
    from instrumented_backend.graphs import GraphCapture
    from instrumented_backend.records import NodeProvenance

    calls = []

    def produce():
        calls.append(threading.current_thread().name)
        return "class GraphModule: ..."

    text = Deferred(produce, fallback="")
    graph = GraphCapture(index=0, compile_id="0/0", kind="inference", graph_id=None, dynamo_graph_code=text,
                         aot_graph="", post_grad_graph_code="plain", ir_pre_fusion="", ir_post_fusion="",
                         output_code="")
    assert not text.resolved and not calls
    threads = [threading.Thread(target=lambda: graph.dynamo_graph_code) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert graph.dynamo_graph_code == "class GraphModule: ..." and len(calls) == 1
    assert graph.to_dict()["dynamo_graph_code"] == "class GraphModule: ..."
    assert GraphCapture.from_dict(graph.to_dict()) == graph
    with pytest.raises(TypeError, match="post_grad_graph_code"):
        GraphCapture(index=0, compile_id="", kind="inference", graph_id=None, dynamo_graph_code="",  # type: ignore[call-arg]
                     aot_graph="", ir_pre_fusion="", ir_post_fusion="", output_code="")

    errors = []
    line = Deferred(lambda: {"neg": "neg = aten.neg(x)"}[0], fallback="{}").map(str.upper, fallback="")
    node = NodeProvenance(name="neg", target="aten.neg.default", code=line)
    assert NodeProvenance(name="neg", target="aten.neg.default").code == ""
    failing = Deferred(lambda: 1 / 0, fallback="", on_error=errors.append)
    assert failing.get() == "" and failing.get() == "" and len(errors) == 1
    assert isinstance(errors[0], ZeroDivisionError)
    assert node.code == "{}", "a failed source gives its fallback to what is derived from it"


def test_requires_python_admits_no_version_the_code_cannot_run_on():
    """BaseException.add_note (used to name the minifier's repro in errors) is Python 3.11+."""
    import re
    import tomllib

    from conftest import REPO

    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    minimum = tuple(int(part) for part in re.match(r">=\s*(\d+)\.(\d+)", declared).groups())
    uses_add_note = any(".add_note(" in path.read_text()
                        for folder in ("instrumented_backend", "minifier") for path in (REPO / folder).rglob("*.py"))
    assert not uses_add_note or minimum >= (3, 11), f"requires-python {declared!r} but the code calls add_note"
    assert "Python 3.11+" in (REPO / "README.md").read_text()


def test_every_accuracy_table_column_has_a_header():
    from instrumented_backend.diagnosis.accuracy import AccuracyReport

    header = AccuracyReport(passed=True, outputs=[], backend="inductor").render().splitlines()[1]
    columns = [c for c in header.split("  ") if c.strip()]
    assert "verdict" in columns and len(columns) == 10, columns


def test_check_accuracy_and_the_minifier_judge_apply_one_rule():
    """Per output, per dtype: the checks and the minifier never disagree about the same outputs."""
    import torch

    from instrumented_backend.diagnosis.accuracy import compare_outputs
    from minifier.judge import _same

    g = torch.Generator().manual_seed(0)
    eager32, eager16 = torch.randn(64, generator=g), torch.randn(64, generator=g).half()
    fp64 = [eager32.double(), eager16.double()]
    cases = {
        "equal": [eager32.clone(), eager16.clone()],
        "fp32 off by 1e-3 beside an fp16 output": [eager32 + 1e-3, eager16.clone()],
        "fp16 off by 1e-3": [eager32.clone(), eager16 + 1e-3],
        "fp32 doubled": [eager32 * 2, eager16.clone()],
        "int differs": [torch.tensor([1, 2]), torch.tensor([1, 3])],
    }
    verdicts = {}
    for name, compiled in cases.items():
        eager = [torch.tensor([1, 2]), torch.tensor([1, 2])] if name == "int differs" else [eager32, eager16]
        ref64 = None if name == "int differs" else fp64
        report = compare_outputs(compiled, eager, ref64)
        judged = [_same(e, c, r, None) for e, c, r in zip(eager, compiled, ref64 or [None, None])]
        assert [o.passed for o in report.outputs] == judged, name
        verdicts[name] = judged
    assert verdicts["equal"] == [True, True] and verdicts["fp16 off by 1e-3"] == [True, True]
    assert verdicts["fp32 off by 1e-3 beside an fp16 output"] == [False, True]  # fp16's 1e-2 is not fp32's
    assert verdicts["fp32 doubled"] == [False, True] and verdicts["int differs"] == [True, False]


def test_a_small_tensor_is_judged_at_its_own_scale_against_fp64_and_cancellation_is_not_an_error():
    """Under 1, the rule's absolute tolerance passes errors of any relative size: the search for the
    first wrong value judges such a tensor at its own scale. Data that tells the wrong answers apart:
    a value 1% off (wrong), one that is small by cancellation, compiled as far from fp64 as eager
    (right), the same 1% off at a scale of 1 and more (the rule's own business, not this), and no
    reference (never wrong here)."""
    import torch

    from instrumented_backend.diagnosis.accuracy import compare_outputs, wrong_at_its_own_scale

    g = torch.Generator().manual_seed(0)
    exact = torch.randn(256, generator=g, dtype=torch.float64) * 1e-5  # a softcapping's tanh values
    eager = exact.float()
    off = eager * 1.01
    assert compare_outputs(off, eager).passed  # what the rule says: blind
    assert wrong_at_its_own_scale(off, eager, exact)
    assert not wrong_at_its_own_scale(eager.clone(), eager, exact)
    # Zero by construction, each run off by its own rounding: compiled no further from fp64 than eager.
    big = torch.randn(256, generator=g) * 10
    eager_zero, compiled_zero = (big + 1e-6) - big, (big - big) + 1e-6
    truth = torch.full((256,), 1e-6, dtype=torch.float64)
    assert not torch.equal(eager_zero, compiled_zero)
    assert not wrong_at_its_own_scale(compiled_zero, eager_zero, truth)
    assert not wrong_at_its_own_scale(off * 1e6, eager * 1e6, exact * 1e6)  # scale >= 1: the rule decides
    assert not wrong_at_its_own_scale(off, eager, None)
    assert wrong_at_its_own_scale(off, eager, exact, tol=1e-3)
    assert not wrong_at_its_own_scale(off, eager, exact, tol=0.1)


def test_a_few_catastrophic_elements_fail_an_output_whose_rmse_passes():
    """A wrong lowering that hits a few elements (a vectorized ``expm1`` computed as ``exp(x) - 1``)
    leaves the RMSE against fp64 near eager's; those elements, far past the tolerance where eager's
    worst error is tiny, fail the output. An ill-conditioned output, where eager is as far off as
    compiled, still passes: the data tells the two apart."""
    import torch

    from instrumented_backend.diagnosis.accuracy import compare_outputs
    from minifier.judge import _same

    g = torch.Generator().manual_seed(0)
    exact = torch.randn(4096, generator=g, dtype=torch.float64) * 10
    eager = (exact + torch.randn(4096, generator=g, dtype=torch.float64) * 1e-5).float()  # eager's own error
    compiled = eager.clone()
    hit = torch.nonzero(exact.abs() < 0.5).flatten()[:3]  # where the tolerance is about 1e-4
    compiled[hit] += 1e-3
    report = compare_outputs(compiled, eager, exact)
    (output,) = report.outputs
    assert output.rmse_compiled <= 2.0 * output.rmse_eager + 1e-5  # the RMSE half of the rule alone: blind
    assert not report.passed and output.catastrophic == 3
    assert not _same(eager, compiled, exact, None)  # the minifier's judge: the same rule
    # Ill-conditioned: eager is itself 0.05 off fp64 somewhere, so compiled's 0.06 is not 10x worse.
    noisy_eager = eager.clone()
    noisy_eager[[5, 6]] += torch.tensor([0.05, -0.04])
    noisy_compiled = noisy_eager.clone()
    noisy_compiled[[5, 1000]] += torch.tensor([0.01, 0.06])
    assert compare_outputs(noisy_compiled, noisy_eager, exact).outputs[0].catastrophic == 0


def test_an_infinity_or_nan_against_a_finite_value_is_an_infinite_error_in_every_figure():
    import math

    import torch

    from instrumented_backend.diagnosis.accuracy import compare_outputs

    eager = torch.tensor([1.0, 2.0, float("inf"), float("nan")])
    compiled = torch.tensor([1.0, float("inf"), float("inf"), float("nan")])
    (output,) = compare_outputs(compiled, eager, eager.double()).outputs
    assert not output.passed and output.mismatched == 1
    assert math.isinf(output.max_abs_error) and math.isinf(output.max_rel_error)
    assert output.first_bad_index == [1] and "inf" in compare_outputs(compiled, eager).render()
    (nan,) = compare_outputs(torch.tensor([float("nan"), 1.0]), torch.tensor([0.5, 1.0])).outputs
    assert not nan.passed and math.isinf(nan.max_abs_error)
    # the same infinity and NaN on both sides are no error at all
    (alike,) = compare_outputs(eager.clone(), eager).outputs
    assert alike.passed and alike.max_abs_error == 0.0 and alike.tolerance_used == 0.0


def test_an_output_object_is_compared_through_its_tensors_never_by_identity():
    """A model's cache object (transformers' DynamicCache keeps its tensors in its layers'
    attributes) is a fresh object on every run: compared through its tensors, or by type."""
    import torch

    from instrumented_backend.diagnosis.accuracy import compare_outputs

    class Layer:
        def __init__(self, keys: torch.Tensor) -> None:
            self.keys, self.length, self._scratch = keys, keys.shape[0], object()

    class Cache:
        def __init__(self, keys: torch.Tensor) -> None:
            self.layers = [Layer(keys), Layer(keys * 2)]
            self.update = lambda: None  # a per-run callable is not compared

    class Marker:
        pass

    keys = torch.randn(4, 3)
    same = compare_outputs({"logits": keys, "cache": Cache(keys.clone())}, {"logits": keys, "cache": Cache(keys)})
    assert same.passed, same.render()
    assert [o.path for o in same.outputs] == ["['logits']", "['cache'].layers[0].keys", "['cache'].layers[1].keys"]
    differs = compare_outputs({"cache": Cache(keys + 1)}, {"cache": Cache(keys)})
    assert not differs.passed and not differs.outputs[0].passed
    assert compare_outputs(Marker(), Marker()).passed  # no tensor inside: the same type is the same output


def test_an_object_argument_is_copied_for_every_run_its_tensors_widened_for_the_referee():
    """A model's cache passed to a compiled call (empty on a generation's first call, filled in
    place by it) gets its own copy per run, as tensors do; modules, optimizers, callables and
    plain values are passed as they are."""
    import torch

    from instrumented_backend.capture.object_arguments import is_object_argument
    from instrumented_backend.diagnosis.accuracy import to_fp64
    from instrumented_backend.diagnosis.copies import clone_inputs

    class Layer:
        def __init__(self) -> None:
            self.keys = None

    class Cache:
        def __init__(self) -> None:
            self.layers = [Layer()]

        def update(self, keys: torch.Tensor) -> None:
            layer = self.layers[0]
            layer.keys = keys if layer.keys is None else torch.cat([layer.keys, keys])

    empty = Cache()
    model = torch.nn.Linear(2, 2)
    [copy, same_model, same_fn, same_int] = clone_inputs([empty, model, print, 3])
    copy.update(torch.ones(1, 2))
    assert empty.layers[0].keys is None and copy.layers[0].keys.shape == (1, 2)  # the original untouched
    assert same_model is model and same_fn is print and same_int == 3
    assert [is_object_argument(v) for v in (empty, model, torch.optim.SGD(model.parameters()), print, [empty], 3)] == [
        True, False, False, False, False, False]
    wide = to_fp64(copy)
    assert wide is not copy and wide.layers[0].keys.dtype == torch.float64
    assert copy.layers[0].keys.dtype == torch.float32
    method = to_fp64(model.forward)  # a compiled ``model.forward``: its model widened
    assert method.__self__ is not model and method.__self__.weight.dtype == torch.float64


def test_every_record_a_user_receives_is_importable_from_the_package():
    import dataclasses
    import typing

    import instrumented_backend as ib

    exported = {getattr(ib, name) for name in ib.__all__}
    returned = [ib.GraphCapture, ib.ProfileReport, ib.AccuracyReport, ib.LayerReport, ib.DivergenceReport,
                ib.LineCoverage]
    seen, stack = set(), list(returned)
    while stack:  # every dataclass reachable from a returned record's fields
        record = stack.pop()
        if record in seen:
            continue
        seen.add(record)
        for f in dataclasses.fields(record):
            hints = typing.get_type_hints(record, localns=vars(ib))  # names imported for type checking
            for arg in [hints[f.name], *typing.get_args(hints[f.name])]:
                for inner in [arg, *typing.get_args(arg)]:
                    if dataclasses.is_dataclass(inner) and inner.__module__.startswith("instrumented_backend"):
                        stack.append(inner)
    missing = sorted(r.__name__ for r in seen - exported)
    assert not missing, f"returned to users but not exported: {missing}"


def test_a_graph_with_dozens_of_inputs_is_summarized_in_tables_and_kept_whole_in_the_report():
    from instrumented_backend.records import InputInfo, summarize_inputs
    from instrumented_backend.report.tables import INPUTS_SHOWN

    inputs = [InputInfo("tensor", shape=[str(i), "4"], dtype="float32", device="cpu") for i in range(INPUTS_SHOWN + 4)]
    short = summarize_inputs(inputs, limit=INPUTS_SHOWN)
    assert short.endswith(", ... (+4 more)") and short.count("float32[") == INPUTS_SHOWN
    assert summarize_inputs(inputs).count("float32[") == INPUTS_SHOWN + 4
    assert summarize_inputs(inputs[:2], limit=INPUTS_SHOWN) == "float32[0, 4]@cpu, float32[1, 4]@cpu"


def test_kineto_is_quieted_only_while_profiling_and_a_users_level_is_kept(monkeypatch):
    """The level is set for the profiler's start alone: child processes started later inherit
    nothing, and a level the user set is theirs."""
    import os

    from instrumented_backend.profiling import collect

    monkeypatch.delenv(collect.KINETO_LOG_LEVEL, raising=False)
    run = collect.run_profiled(lambda: os.environ.get(collect.KINETO_LOG_LEVEL), active=1, wait=0, warmup=0)
    assert run.step_us and collect.KINETO_LOG_LEVEL not in os.environ
    seen = []
    with collect._kineto_quiet():
        seen.append(os.environ[collect.KINETO_LOG_LEVEL])
    assert seen == ["6"] and collect.KINETO_LOG_LEVEL not in os.environ
    monkeypatch.setenv(collect.KINETO_LOG_LEVEL, "1")
    with collect._kineto_quiet():
        seen.append(os.environ[collect.KINETO_LOG_LEVEL])
    assert seen[-1] == "1" and os.environ[collect.KINETO_LOG_LEVEL] == "1"


_LAZY_PACKAGE = """
import sys
import instrumented_backend as ib
assert "torch" not in sys.modules, "import instrumented_backend imported torch"
import instrumented_backend.capture.backend  # binds the subpackage 'capture' on the package, before any name is read
import torch
assert callable(ib.capture) and ib.report.__name__ == "instrumented_backend.report", (ib.capture, ib.report)
assert "capture" in dir(ib) and set(ib.__all__) <= set(dir(ib))
from instrumented_backend.diagnosis import faults
assert ib._FAULTS_ENV == faults.ENV_VAR  # what a child reads before importing the faults module
print("ok")
"""

_UNSUPPORTED_TORCH = """
import torch
torch.__version__ = "2.99.0"
import instrumented_backend as ib
for attempt in range(2):  # the same error each time a name is read, never a missing attribute
    try:
        ib.capture
    except ib.UnsupportedTorchError as error:
        assert "2.99.0" in str(error)
    else:
        raise AssertionError("no error for an unsupported torch")
print("ok")
"""

_ENTRY_POINT_ONLY = """
import torch
compiled = torch.compile(lambda x: torch.neg(x).relu(), backend="instrumented", options={"check_accuracy": True})
compiled(torch.randn(8))  # the check asks the diagnosis through capture's hooks: registered on the way in
import instrumented_backend as ib
assert ib.last_capture() is not None and ib.last_capture().accuracy.passed
print("ok")
"""


@pytest.mark.parametrize("script", [_LAZY_PACKAGE, _ENTRY_POINT_ONLY, _UNSUPPORTED_TORCH],
                         ids=["lazy_names", "entry_point_only", "unsupported_torch"])
def test_the_package_imports_torch_on_first_use_and_the_backend_works_from_its_entry_point(script, tmp_path):
    """``import instrumented_backend`` imports nothing heavy; the first public name read imports
    them all, and ``ib.capture`` is the function even when the subpackage of that name was imported
    first. ``backend="instrumented"`` found through the entry point, with nothing imported before,
    loads the package, so capture finds the diagnosis it asks (an accuracy check)."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stdout + proc.stderr[-3000:]
