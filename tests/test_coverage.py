"""Training (forward + lazy backward), graph breaks, recompiles, dynamic shapes, threads."""

from __future__ import annotations

import threading

import pytest
import torch
from conftest import reset_aot_counter

import instrumented_backend as ib


class SmallMLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.norm = torch.nn.LayerNorm(32)
        self.fc2 = torch.nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.nn.functional.gelu(self.norm(self.fc1(x)))).softmax(-1)


def _train_step(backend: str):
    torch.manual_seed(0)
    model = SmallMLP()
    x = torch.randn(8, 16)
    torch._dynamo.reset()
    reset_aot_counter(2000)
    compiled = torch.compile(model, backend=backend)
    with ib.capture() as session:
        out = compiled(x)
        before_backward = len(session)
        out.sum().backward()
    return out.detach(), [p.grad.clone() for p in model.parameters()], session, before_backward


@pytest.fixture(scope="module")
def training():
    ref_out, ref_grads, _, _ = _train_step("inductor")
    out, grads, session, before_backward = _train_step("instrumented")
    return dict(ref_out=ref_out, ref_grads=ref_grads, out=out, grads=grads, session=session,
                before_backward=before_backward)


def test_training_records_forward_then_lazy_backward(training):
    session = training["session"]
    assert training["before_backward"] == 1, "backward must be compiled lazily, on .backward()"
    assert [g.kind for g in session] == ["forward", "backward"]
    forward, backward = session.graphs
    assert forward.compile_id == backward.compile_id
    assert session.by_compile_id(forward.compile_id) == [forward, backward]
    assert session.by_kind("backward") == [backward]
    for graph in session:
        assert graph.complete and graph.output_code and graph.ir_pre_fusion and graph.ir_post_fusion
        assert graph.kernels and graph.aot_graph and graph.post_grad_graph_code
    assert "tangents_1" in backward.aot_graph and "tangents_1" not in forward.aot_graph
    assert any(k.kind == "extern" and "mm" in k.name for k in backward.kernels)
    assert "self.fc1" in forward.dynamo_graph_code or "l_self_modules_fc1" in forward.dynamo_graph_code
    with pytest.raises(ValueError, match="unknown graph kind"):
        session.by_kind("backwards")


def test_training_results_identical_to_inductor(training):
    assert torch.equal(training["out"], training["ref_out"])
    for ours, theirs in zip(training["grads"], training["ref_grads"]):
        assert torch.equal(ours, theirs)


def _with_break(x: torch.Tensor) -> torch.Tensor:
    y = torch.sin(x) + 1
    torch._dynamo.graph_break()
    return torch.cos(y) * 2


def test_graph_break_gives_one_record_per_graph():
    torch._dynamo.reset()
    x = torch.randn(6)
    with ib.capture() as session:
        out = torch.compile(_with_break, backend="instrumented")(x)
    torch.testing.assert_close(out, _with_break(x))
    assert len(session) == 2
    first, second = session.graphs
    assert first.compile_id.split("/")[0] != second.compile_id.split("/")[0]
    assert "torch.sin" in first.dynamo_graph_code and "torch.cos" in second.dynamo_graph_code


def _scale(x: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x) * x.shape[0]


def test_recompile_on_new_shape_and_dynamic_shapes():
    torch._dynamo.reset()
    compiled = torch.compile(_scale, backend="instrumented", dynamic=False)
    with ib.capture() as static:
        compiled(torch.randn(4))
        compiled(torch.randn(5))
    assert [g.compile_id for g in static] == ["0/0", "0/1"]
    assert [g.inputs[0].shape for g in static] == [["4"], ["5"]]

    torch._dynamo.reset()
    with ib.capture() as dynamic:
        out = torch.compile(_scale, backend="instrumented", dynamic=True)(torch.randn(7))
    torch.testing.assert_close(out, _scale(torch.randn(7)) * 0 + out)  # ran
    (graph,) = dynamic.graphs
    symbols = [i for i in graph.inputs if i.kind == "symint"]
    assert symbols, f"dynamic graph should take a SymInt input: {graph.inputs}"
    tensor = next(i for i in graph.inputs if i.kind == "tensor")
    assert tensor.shape[0].startswith("s"), tensor.shape
    assert tensor.shape[0] in graph.output_code and tensor.shape[0] in graph.ir_pre_fusion


def test_several_functions_and_two_threads_do_not_mix():
    torch._dynamo.reset()
    sessions: dict[str, ib.CaptureSession] = {}
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def worker(name: str, op) -> None:
        try:
            fn = torch.compile(lambda x: op(x) + 1, backend="instrumented")
            barrier.wait()
            with ib.capture() as session:
                fn(torch.randn(32))
            sessions[name] = session
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=("exp", torch.exp), name="exp-thread"),
               threading.Thread(target=worker, args=("erf", torch.erf), name="erf-thread")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    (exp_graph,) = sessions["exp"].graphs
    (erf_graph,) = sessions["erf"].graphs
    assert "torch.exp" in exp_graph.dynamo_graph_code and "torch.erf" not in exp_graph.dynamo_graph_code
    assert "torch.erf" in erf_graph.dynamo_graph_code and "torch.exp" not in erf_graph.dynamo_graph_code
    assert "exp" in exp_graph.ir_pre_fusion and "erf" not in exp_graph.ir_pre_fusion
    assert "erf" in erf_graph.ir_pre_fusion and "exp" not in erf_graph.ir_pre_fusion
    assert exp_graph.thread_name == "exp-thread" and erf_graph.thread_name == "erf-thread"


def test_a_model_of_torch_modules_only_is_sourced_to_the_line_in_each_modules_forward():
    """Dynamo records no frame inside torch/nn/modules, so an nn.Sequential of torch's own modules
    has no user frame at all: its lines were sourced to each module's ``def forward``. The frame
    Dynamo was tracing when it made each node is kept (seams.dynamo.dynamo_frames): the line in the
    module's forward that calls the op, told apart by module."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4), torch.nn.Tanh())
    x = torch.randn(4, 8)
    torch._dynamo.reset()
    with ib.capture() as session:
        out = torch.compile(model, backend="instrumented")(x)
    torch.testing.assert_close(out, model(x))
    (graph,) = session.graphs
    assert not any(n.meta.get("stack_trace") for n in graph.dynamo_graph.graph.nodes), "Dynamo recorded a frame"
    coverage = ib.line_coverage([graph])
    assert coverage.statements and coverage.sourced_percent == 100.0, coverage.unsourced_nodes
    functions = {line.source.function for k in graph.kernels for line in k.lines if line.source is not None}
    assert {"ReLU.forward", "Tanh.forward"} <= functions, functions
    codes = set()
    for line in (line for k in graph.kernels for line in k.lines if line.source is not None):
        assert "torch/nn/modules/" in line.source.file.replace("\\", "/")
        assert not line.source.code.startswith("def forward"), line.source
        codes.add(line.source.code)
    assert {"return F.relu(input, inplace=self.inplace)", "return torch.tanh(input)"} <= codes, codes
    modules = {graph.nodes[name].module for name in ("relu", "tanh") if name in graph.nodes}
    assert len(modules) == 2 and all(m for m in modules), modules
