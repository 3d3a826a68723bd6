"""GEMMs after freezing: the mkl linear call line, and the C++ GEMM template with its fused epilogue.

With ``torch._inductor.config.freezing`` set when Dynamo traces (it lifts parameters as
constants only then; ``options={"freezing": True}`` is too late, as with plain Inductor), the
linear becomes ``torch.ops.mkl._mkl_linear`` in the wrapper; with ``max_autotune`` and the CPP
GEMM backend it becomes a C++ template kernel whose relu/mul epilogue is fused into it.
"""

from __future__ import annotations

import re

import pytest
import torch

import instrumented_backend as ib

LINEAR_LINE = "y = self.lin(x)"
EPILOGUE_LINE = "return torch.relu(y) * 2.0"


class LinearRelu(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(64, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x)
        return torch.relu(y) * 2.0


def _line_of(text: str) -> int:
    with open(__file__) as handle:
        return next(i for i, line in enumerate(handle, 1) if line.strip() == text)


def _compile(**inductor_config):
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = LinearRelu().eval()
    x = torch.randn(16, 64)
    with torch._inductor.config.patch(freezing=True, **inductor_config), torch.no_grad():
        out = torch.compile(model, backend="instrumented")(x)
        expected = model(x)
    torch._dynamo.reset()
    return ib.last_capture(), out, expected


def _statements(kernel):
    """The kernel's C++ statement lines: code that computes, not braces, declarations or pragmas."""
    return [line for line in kernel.lines
            if line.text.strip().endswith(";") and not line.text.strip().startswith(("#", "//"))]


@pytest.fixture(scope="module")
def frozen():
    return _compile()


@pytest.fixture(scope="module")
def gemm_template():
    return _compile(max_autotune=True, max_autotune_gemm_backends="CPP")


def test_mkl_linear_call_line_maps_to_the_linear_source_line(frozen):
    cap, out, expected = frozen
    torch.testing.assert_close(out, expected)
    assert not cap.problems
    [call] = [w for w in cap.wrapper_lines if "torch.ops.mkl._mkl_linear.default(" in w.text]
    assert call.ir_ops == ["torch.ops.mkl._mkl_linear.default"]
    [node] = call.fx_nodes
    assert cap.nodes[node].target.endswith("_mkl_linear")
    assert call.source.line == _line_of(LINEAR_LINE) and call.source.code == LINEAR_LINE
    assert call.dynamo_nodes == ["y"]
    by_source = cap.lines_for(source=f"test_gemm_provenance.py:{_line_of(LINEAR_LINE)}")
    assert any("torch.ops.mkl._mkl_linear.default(" in line.text for line in by_source)
    assert any("tmp0 + tmp1" in line.text for line in by_source)  # the bias add fused into the kernel
    assert "torch.ops.mkl._mkl_linear.default" in cap.explain(node)


def test_gemm_template_lines_map_to_the_linear_and_its_epilogue(gemm_template):
    cap, out, expected = gemm_template
    torch.testing.assert_close(out, expected)
    assert not cap.problems, cap.problems
    [kernel] = [k for k in cap.kernels if "micro_gemm" in k.source]
    statements = _statements(kernel)
    untagged = [line.text.strip() for line in statements if not line.fx_nodes]
    assert not untagged, untagged[:5]

    template_lines = [line for line in kernel.lines if any(op.startswith("template:") for op in line.ir_ops)]
    assert len(template_lines) > 100  # the micro-GEMM and its loops
    assert {line.source.line for line in template_lines} == {_line_of(LINEAR_LINE)}
    # the lines whose text define_kernel renamed (Placeholder.KERNEL_NAME_micro_gemm -> kernel_micro_gemm)
    assert any(re.search(r"\w+_micro_gemm\b", line.text) for line in template_lines)

    relu = [line for line in statements if "relu" in line.fx_nodes]
    assert any("ops.relu" in line.ir_ops for line in relu)
    assert {line.source.line for line in relu} == {_line_of(EPILOGUE_LINE)}
    stores = [line for line in statements if "ops.store" in line.ir_ops]
    assert stores and all(line.fx_nodes == ["mul"] for line in stores)  # the stored value's node

    call = next(w for w in cap.wrapper_lines if w.text.strip().startswith(kernel.name + "("))
    assert {"relu", "mul"} <= set(call.fx_nodes)
