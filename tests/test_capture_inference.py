"""Inference capture of the tutorial's foo1, checked against what TORCH_COMPILE_DEBUG writes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from conftest import compile_and_run, foo1, reset_aot_counter, tutorial_inputs

import instrumented_backend as ib

# Config lines that only say how the reference was produced (trace dir, cache switches).
_PROVENANCE_CONFIG = re.compile(
    r"^(torch\._inductor\.config\.(trace\.\w+|fx_graph_cache|fx_graph_remote_cache)"
    r"|torch\._functorch\.config\.enable(_remote)?_autograd_cache) = .*\n",
    re.M,
)


@pytest.fixture(scope="module")
def tutorial(tmp_path_factory):
    inputs = tutorial_inputs()
    eager = foo1(*inputs)
    inductor_result, inductor_code = compile_and_run(foo1, *inputs, backend="inductor")

    debug_dir = tmp_path_factory.mktemp("torch_compile_debug")
    torch._dynamo.reset()
    reset_aot_counter(1000)
    with torch._inductor.config.patch({"trace.enabled": True, "trace.debug_dir": str(debug_dir),
                                       "fx_graph_cache": False}), \
            torch._functorch.config.patch(enable_autograd_cache=False):
        torch.compile(foo1)(*inputs)
    (trace_folder,) = {p.parent for p in Path(debug_dir).rglob("output_code.py")}

    with ib.capture() as session:
        result, code = compile_and_run(foo1, *inputs, backend="instrumented")
    return dict(inputs=inputs, eager=eager, inductor_result=inductor_result, inductor_code=inductor_code,
                trace=trace_folder, result=result, code=code, session=session)


def test_result_and_output_code_identical_to_inductor(tutorial):
    assert torch.equal(tutorial["result"], tutorial["eager"])
    assert torch.equal(tutorial["result"], tutorial["inductor_result"])
    (cap,) = tutorial["session"].graphs
    assert tutorial["code"] == [cap.output_code]
    assert cap.output_code == tutorial["inductor_code"][0], "output code must be byte-identical to inductor"


def test_texts_match_torch_compile_debug_files(tutorial):
    (cap,) = tutorial["session"].graphs
    trace = tutorial["trace"]
    assert cap.output_code == (trace / "output_code.py").read_text()
    assert cap.ir_pre_fusion == (trace / "ir_pre_fusion.txt").read_text()
    assert cap.ir_post_fusion == (trace / "ir_post_fusion.txt").read_text()
    assert cap.post_grad_graph_code == (trace / "fx_graph_transformed.py").read_text()
    ours = _PROVENANCE_CONFIG.sub("", cap.aot_graph)
    theirs = _PROVENANCE_CONFIG.sub("", (trace / "fx_graph_runnable.py").read_text())
    assert ours == theirs


def test_record_fields(tutorial):
    (cap,) = tutorial["session"].graphs
    assert cap is ib.last_capture()
    assert cap.kind == "inference" and cap.complete and not cap.failed
    assert re.fullmatch(r"\d+/\d+", cap.compile_id)
    assert "torch.neg(l_x1_)" in cap.dynamo_graph_code
    assert isinstance(cap.dynamo_graph, torch.fx.GraphModule)
    assert [n.target for n in cap.dynamo_graph.graph.nodes if n.op == "call_function"] == [
        torch.neg, torch.maximum, torch.cat]
    assert "class Repro(torch.nn.Module)" in cap.aot_graph and "aten.neg.default" in cap.aot_graph
    assert isinstance(cap.post_grad_graph, torch.fx.GraphModule)
    assert "torch.ops.aten.maximum.default" in cap.post_grad_graph_code
    assert "ops.neg(" in cap.ir_pre_fusion and "SchedulerNode" in cap.ir_post_fusion
    assert cap.node_counts == {"dynamo": 6, "aot": 5, "post_grad": 5}
    assert [(i.dtype, i.shape) for i in cap.inputs] == [("uint8", ["1", "8"]), ("uint8", ["8390", "8"])]
    assert cap.compile_seconds > 0


def test_kernels_located_in_output_code(tutorial):
    (cap,) = tutorial["session"].graphs
    lines = cap.output_code.splitlines()
    (kernel,) = cap.kernels
    assert kernel.kind == "cpp" and "neg" in kernel.name and "maximum" in kernel.name
    assert lines[kernel.start_line - 1].startswith(f"{kernel.name} = async_compile.cpp")
    src = kernel.source_lines
    assert lines[kernel.source_start_line - 1: kernel.source_start_line - 1 + len(src)] == src
    assert lines[kernel.end_line - 1].startswith("'''")
    assert any("tmp1.neg()" in line or "-tmp1" in line for line in src)
    (call,) = kernel.call_lines
    assert lines[call - 1].strip().startswith(f"{kernel.name}(")
    assert cap.kernel(kernel.name) is kernel
    with pytest.raises(KeyError, match="no kernel 'nope'.*cpp_fused"):
        cap.kernel("nope")


def test_last_capture_and_captures_are_process_wide(tutorial):
    (cap,) = tutorial["session"].graphs
    assert cap in ib.captures().graphs
    assert ib.captures()[-1] is ib.last_capture()
