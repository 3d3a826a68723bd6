"""Provenance beyond generated kernels: extern kernels, the wrapper's lines, backward seq_nr, dynamic shapes."""

from __future__ import annotations

import inspect

import pytest
import torch
from conftest import compile_and_run

import instrumented_backend as ib

LINEAR = torch.nn.Linear(8, 4)


def linear_bmm(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    y = LINEAR(x)
    z = torch.relu(y) * 2
    w = torch.bmm(x.view(1, 2, 8), x.view(1, 8, 2))
    return z, w


FIRST = inspect.getsourcelines(linear_bmm)[1]


@pytest.fixture(scope="module")
def extern_capture():
    with torch.no_grad(), ib.capture() as session:
        result, (code,) = compile_and_run(linear_bmm, torch.randn(2, 8))
    with torch.no_grad():
        ref, (ref_code,) = compile_and_run(linear_bmm, torch.randn(2, 8), backend="inductor")
    return session[-1], code, ref_code


def test_extern_kernels_map_to_their_fx_node_and_source(extern_capture):
    cap, code, ref_code = extern_capture
    assert code == ref_code and cap.complete
    addmm = cap.kernel("extern_kernels.addmm")
    (line,) = addmm.lines
    assert line.ir_ops == ["extern_kernels.addmm"] and "addmm" in line.fx_nodes
    assert line.dynamo_nodes == ["y"] and line.source.code == "y = LINEAR(x)" and line.source.line == FIRST + 1
    assert cap.output_code.splitlines()[line.number - 1] == line.text
    (bmm_line,) = cap.kernel("extern_kernels.bmm").lines
    assert "bmm" in bmm_line.fx_nodes and bmm_line.source.line == FIRST + 3
    assert bmm_line in cap.lines_for(source=f"test_wrapper_provenance.py:{FIRST + 3}")


def _normed_linear(x: torch.Tensor) -> torch.Tensor:
    h = torch.nn.functional.layer_norm(x + 1, (8,))
    return LINEAR(h.transpose(0, 1).contiguous().view(-1, 8))


def test_an_extern_call_is_sourced_to_its_own_node_not_to_what_feeds_it():
    """Inductor lists, among the addmm buffer's origins, every node lowered into its input: the
    views folded into its arguments, and the layer norm its input was realized from. The call line
    is the linear's, read from the node the buffer is the value of; the norm's nodes, which the
    fused C++ kernel computes (and whose lines carry them), are not on it: asking for the norm's
    lines no longer lists the GEMM, nor the GEMM's allocation."""
    with torch.no_grad(), ib.capture() as session:
        compile_and_run(_normed_linear, torch.randn(4, 2, 8))
    cap = session[-1]
    (line,) = cap.kernel("extern_kernels.addmm").lines
    assert line.fx_nodes[0] == "addmm" and not {"add", "var_mean"} & set(line.fx_nodes), line.fx_nodes
    assert line.source.line == inspect.getsourcelines(_normed_linear)[1] + 2, line.source
    norm_lines = cap.lines_for("var_mean")
    assert norm_lines and all("addmm" not in ln.text for ln in norm_lines), [ln.text for ln in norm_lines]
    assert any(ln.text.strip().startswith("cpp_fused") for ln in norm_lines)  # its kernel's launch stays


CONV = torch.nn.Conv2d(4, 4, 3, padding=1, groups=4)


def _conv_then_channel_norm(x: torch.Tensor) -> torch.Tensor:
    y = CONV(x).permute(0, 2, 3, 1)  # ConvNeXt's block: a depthwise conv, then a norm over channels
    return torch.nn.functional.layer_norm(y, (4,)).tanh().sum()


def test_a_fallbacks_line_is_its_op_even_when_its_input_was_realized_in_its_own_lowering():
    """A convolution's backward needs its gradient in a layout of its own, so the norm backward
    feeding it is realized while the backward itself is lowered: Inductor puts the convolution
    among that buffer's origins, and the fallback (a multi-output kernel) names no ``origin_node``.
    Every node looked computed by a generated kernel, the filter kept them all, and ConvNeXt's
    profile listed ``convolution_backward, permute_26, mul_47, div_11 (+9)`` for the call: the
    norm backward's nodes, which the fused kernel before it computes. The line is the op's and
    the view it reads the gradient through."""
    x = torch.randn(2, 4, 6, 6, requires_grad=True)
    with ib.capture() as session:
        torch.compile(_conv_then_channel_norm, backend="instrumented")(x).backward()
    backward = next(cap for cap in session if cap.kind == "backward")
    lines = [ln for ln in backward.wrapper_lines if "convolution_backward.default(" in ln.text]
    assert lines, backward.output_code
    for line in lines:
        assert line.fx_nodes[0].startswith("convolution_backward"), line.fx_nodes
        computed = [n for n in line.fx_nodes[1:] if not n.startswith(("permute", "view", "convolution_backward"))]
        assert not computed, line.fx_nodes
        assert line.source.code == "y = CONV(x).permute(0, 2, 3, 1)  # ConvNeXt's block: a depthwise conv, then " \
            "a norm over channels", line.source
    in_kernels = {n for kernel in backward.kernels if kernel.kind == "cpp" for ln in kernel.lines for n in ln.fx_nodes}
    on_both = in_kernels & {n for line in lines for n in line.fx_nodes[1:]}
    assert not on_both, on_both  # lines_for(a norm backward node) lists its kernel's lines, not the call


def _looped(x: torch.Tensor) -> torch.Tensor:
    from torch._higher_order_ops.while_loop import while_loop

    start = torch.zeros((), dtype=torch.int64)
    _, out = while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y.sin() * 2), (start, x))
    return out.cos()


@pytest.fixture(scope="module")
def looped():
    with ib.capture() as session:
        compile_and_run(_looped, torch.randn(6))
    return session[-1]


def test_a_buffer_without_an_origin_node_leads_with_the_op_it_computes(looped):
    """A while_loop's result buffer names no origin node; its origins (the loop and the zeros fed to
    it) are listed latest in the graph first, so its statements are sourced to the loop's line."""
    lines = [line for line in looped.wrapper_lines if line.text.strip().startswith("buf1[")]
    assert lines and all(line.fx_nodes[0] == "while_loop" for line in lines), [ln.fx_nodes for ln in lines]
    assert all(line.source.line == inspect.getsourcelines(_looped)[1] + 4 for line in lines)


def test_a_helper_the_wrapper_declares_takes_the_tags_of_what_it_serves(looped):
    """Statements that name no buffer but a helper: the loop's flag (``should_loop = ...``, ``while
    should_loop:``) is read from the condition's result, so it serves the while_loop."""
    lines = [line for line in looped.wrapper_lines if "should_loop" in line.text]
    assert len(lines) >= 3 and all(line.fx_nodes[:1] == ["while_loop"] for line in lines), \
        [(ln.text.strip(), ln.fx_nodes) for ln in lines]


def _nonzero_count(x: torch.Tensor) -> torch.Tensor:
    return x.nonzero().float().sum() + x.sum()


def test_the_runtime_checks_of_an_unbacked_size_serve_the_op_that_made_it():
    """``if not (u0 >= 0): raise ...`` checks a size only known at run time (nonzero's): it reads
    ``u0``, computed by the nonzero's statement, and takes its node and source line."""
    with ib.capture() as session, torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        compile_and_run(_nonzero_count, torch.tensor([0.0, 1.0, 2.0, 0.0]))
    checks = [line for line in session[-1].wrapper_lines if line.text.strip().startswith(("if not (u", "raise"))]
    assert len(checks) >= 2 and all(line.fx_nodes == ["nonzero"] for line in checks), \
        [(ln.text.strip(), ln.fx_nodes) for ln in checks]
    assert all(line.source.code == "return x.nonzero().float().sum() + x.sum()" for line in checks)


def test_wrapper_lines_allocations_launches_and_inputs(extern_capture):
    cap, *_ = extern_capture
    by_text = {line.text.strip(): line for line in cap.wrapper_lines}
    (kernel,) = [k for k in cap.kernels if k.kind == "cpp"]
    (launch,) = [line for line in cap.wrapper_lines if line.number in kernel.call_lines]
    assert set(launch.fx_nodes) == {"relu", "mul"} and launch.source.line == FIRST + 2
    (alloc,) = [line for text, line in by_text.items() if text.startswith("buf0 = empty_strided_cpu")]
    assert "addmm" in alloc.fx_nodes and alloc.dynamo_nodes == ["y"]
    asserts = [line for text, line in by_text.items() if text.startswith("assert_size_stride(")]
    assert asserts and all(len(a.fx_nodes) == 1 and a.fx_nodes[0] in cap.nodes for a in asserts)
    assert all(cap.nodes[a.fx_nodes[0]].attribution == "input" for a in asserts)
    assert not [text for text in by_text if text.startswith("return") or text.endswith("= args")]
    explained = cap.explain("y")
    assert "extern_kernels.addmm" in explained and "(wrapper code)" in explained
    annotated = cap.annotated_output_code
    assert "        # Corresponding FX code line: addmm = torch.ops.aten.addmm.default(" in annotated


def test_wrapper_lines_survive_dump_and_load(extern_capture, tmp_path):
    cap, *_ = extern_capture
    (loaded,) = ib.load(cap.dump(tmp_path / "dump"))
    assert loaded.wrapper_lines == cap.wrapper_lines and loaded.kernels == cap.kernels


def test_backward_nodes_without_provenance_fall_back_to_forward_seq_nr():
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8), torch.nn.GELU())
    with ib.capture() as session:
        compiled = torch.compile(model, backend="instrumented")
        compiled(torch.randn(4, 8, requires_grad=True)).sum().backward()
    forward, backward = session.by_kind("forward")[0], session.by_kind("backward")[0]
    by_seq_nr = {n.meta.get("seq_nr"): forward.nodes[n.name] for n in forward.post_grad_graph.graph.nodes
                 if n.op == "call_function" and forward.nodes[n.name].dynamo_nodes}
    fallbacks = [n for n in backward.post_grad_graph.graph.nodes
                 if n.op == "call_function" and backward.nodes[n.name].attribution == "seq_nr"]
    assert fallbacks, "expected gradient-formula nodes attributed through seq_nr"
    for node in fallbacks:
        assert backward.nodes[node.name].dynamo_nodes == by_seq_nr[node.meta["seq_nr"]].dynamo_nodes
    assert all(info.attribution != "none" for info in backward.nodes.values())
    # every generated backward kernel has attributed lines, and they reach a Dynamo node
    for kernel in (k for k in backward.kernels if k.kind == "cpp"):
        assert any(line.dynamo_nodes for line in kernel.lines), kernel.name


def scaled_softmax(x: torch.Tensor) -> torch.Tensor:
    s = torch.softmax(x * 2, dim=-1)
    return s + 1


def test_dynamic_shapes_keep_line_provenance():
    first = inspect.getsourcelines(scaled_softmax)[1]
    x = torch.randn(5, 7)
    with ib.capture() as session:
        result, _ = compile_and_run(scaled_softmax, x, dynamic=True)
    cap = session[-1]
    assert any(i.kind == "symint" for i in cap.inputs), "expected a symbolic-shape graph"
    torch.testing.assert_close(result, scaled_softmax(x))
    lines = cap.lines_for(source=f"test_wrapper_provenance.py:{first + 1}")
    kernel_lines = [line for line in lines if line.kernel != "call"]
    assert kernel_lines and {"ops.exp", "ops.reduction"} <= {op for line in kernel_lines for op in line.ir_ops}
    assert cap.lines_for(source=f"test_wrapper_provenance.py:{first + 2}")
    for kernel in (k for k in cap.kernels if k.kind == "cpp"):
        statements = [line for line in kernel.lines if line.text.strip().endswith(";")]
        assert sum(line.tagged for line in statements) >= 0.9 * len(statements), kernel.name
