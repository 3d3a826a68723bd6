"""Line-level provenance: every kernel line back to its IR op, FX node, Dynamo node and source line."""

from __future__ import annotations

import inspect
import re

import pytest
import torch
from conftest import compile_and_run, foo1, tutorial_inputs

import instrumented_backend as ib

FOO1_LINE = inspect.getsourcelines(foo1)[1]
NEG_LINE, MAX_LINE = FOO1_LINE + 2, FOO1_LINE + 3  # a = torch.neg(x1); b = torch.maximum(x2, a)


def _compile(fn, *inputs, options=None):
    with ib.capture() as session:
        result, (code,) = compile_and_run(fn, *inputs, options=options)
    ref, (ref_code,) = compile_and_run(fn, *inputs, backend="inductor", options=options)
    return session[-1], result, code, ref, ref_code


@pytest.fixture(scope="module", params=["vectorized", "scalar"])
def tutorial(request):
    options = {"cpp.simdlen": 1} if request.param == "scalar" else None
    return request.param, _compile(foo1, *tutorial_inputs(), options=options)


def test_generated_code_unchanged_by_tagging(tutorial):
    _, (cap, result, code, ref, ref_code) = tutorial
    assert code == ref_code and torch.equal(result, ref)
    assert "/*@ib" not in cap.output_code and cap.complete


def test_neg_line_maps_to_the_tutorial_chain(tutorial):
    mode, (cap, *_) = tutorial
    expected = "auto tmp2 = tmp1.neg();" if mode == "vectorized" else "auto tmp2 = decltype(tmp1)(-tmp1);"
    (kernel,) = cap.kernels
    (line,) = [line for line in kernel.lines if line.text.strip() == expected]
    assert line.ir_ops == ["ops.neg"]
    assert line.fx_nodes == ["neg"]
    assert line.dynamo_nodes == ["a"]
    assert line.source.line == NEG_LINE and line.source.file.endswith("conftest.py")
    assert line.source.code == "a = torch.neg(x1)"
    assert cap.output_code.splitlines()[line.number - 1] == line.text
    assert cap.nodes["neg"].target == "aten.neg.default" and cap.nodes["neg"].attribution == "from_node"


def test_maximum_and_store_lines(tutorial):
    _, (cap, *_) = tutorial
    (maximum,) = [line for line in cap.kernels[0].lines if "ops.maximum" in line.ir_ops]
    assert "max" in maximum.text and maximum.fx_nodes == ["maximum"] and maximum.dynamo_nodes == ["b"]
    stores = [line for line in cap.kernels[0].lines if "ops.store" in line.ir_ops]
    assert stores and all(s.fx_nodes == ["maximum"] and "out_ptr0" in s.text for s in stores)


def test_reverse_queries(tutorial):
    _, (cap, *_) = tutorial
    by_fx = cap.lines_for("neg")
    assert by_fx == cap.lines_for("a")  # Dynamo name finds the same lines
    kernel_lines = [line for line in by_fx if line.kernel != "call"]
    assert {tuple(line.ir_ops) for line in kernel_lines} == {("ops.load",), ("ops.neg",)}
    # ... and the wrapper line that launches the fused kernel
    launches = [line for line in by_fx if line.kernel == "call" and line.number in cap.kernels[0].call_lines]
    assert len(launches) == 1 and launches[0].text.strip().startswith(f"{cap.kernels[0].name}(")
    assert cap.lines_for(source=f"conftest.py:{NEG_LINE}") == by_fx
    assert cap.lines_for(source=f"tests/conftest.py:{MAX_LINE}") == cap.lines_for("maximum")
    assert cap.lines_for(source="conftest.py:1") == []
    with pytest.raises(KeyError, match="no FX node 'nope'.*maximum"):
        cap.lines_for("nope")
    with pytest.raises(ValueError, match="exactly one"):
        cap.lines_for()


def test_explain_and_annotated_output_code(tutorial):
    mode, (cap, *_) = tutorial
    text = cap.explain("a")
    assert "a = torch.neg(x1)" in text and "aten.neg.default" in text and "-> ops.neg" in text
    assert ("tmp1.neg()" if mode == "vectorized" else "decltype(tmp1)(-tmp1)") in text
    annotated = cap.annotated_output_code
    comment = "// Corresponding FX code line: neg = torch.ops.aten.neg.default(arg0_1);  arg0_1 = None"
    assert comment in annotated
    without_comments = "\n".join(line for line in annotated.splitlines() if "Corresponding FX code line" not in line)
    assert without_comments + "\n" == cap.output_code


def _reduce(x: torch.Tensor) -> torch.Tensor:
    centered = x - x.mean(dim=-1, keepdim=True)
    return centered.abs().amax(dim=-1)


@pytest.fixture(scope="module")
def reduction():
    return _compile(_reduce, torch.randn(64, 100))


def test_reduction_lines_including_accumulator_setup(reduction):
    cap, result, code, ref, ref_code = reduction
    assert code == ref_code and torch.equal(result, ref)
    tagged = [line for k in cap.kernels for line in k.tagged_lines]
    ops = {op for line in tagged for op in line.ir_ops}
    assert {"ops.reduction", "ops.store_reduction", "ops.abs", "ops.sub"} <= ops, ops
    nodes = {n for line in tagged for n in line.fx_nodes}
    assert {"mean", "sub", "abs_1", "amax"} & nodes == {"sub", "amax"} | ({"mean"} & nodes) | ({"abs_1"} & nodes)
    declarations = [line for k in cap.kernels for line in k.lines
                    if re.match(r"^[\w:<>]+ tmp_acc\d+(_vec)? = ", line.text.strip())]
    assert declarations, "the kernel should declare reduction accumulators"
    assert all(line.ir_ops == ["ops.reduction"] and line.fx_nodes for line in declarations), \
        "accumulator declarations must be attributed to their reduction"
    assert all(line.source is not None for line in tagged)


def _bf16_reduce(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return (x * 2).sum(dim=-1), torch.relu(x).amax(dim=0)


def test_lines_a_codegen_pass_inserts_are_attributed_by_data_flow():
    """The C++ backend legalizes bf16 math after lowering: it inserts a ``to_dtype`` after each bf16
    load straight into the loop body's graph, past the tracer, so those nodes carry no FX origin;
    their lines get the origin of the value they convert."""
    cap, result, code, ref, ref_code = _compile(_bf16_reduce, torch.randn(16, 40).to(torch.bfloat16))
    assert code == ref_code and all(map(torch.equal, result, ref))
    upcasts = [line for k in cap.kernels for line in k.lines if re.search(r"convert<float\b", line.text)]
    assert upcasts, "bf16 loads should be upcast to float in the kernel"
    assert all(line.ir_ops == ["ops.to_dtype"] and line.fx_nodes and set(line.fx_nodes) <= {"mul", "relu"}
               for line in upcasts), [(line.ir_ops, line.fx_nodes, line.text) for line in upcasts]
    coverage = ib.line_coverage([cap])
    assert coverage.mapped_percent == 100.0, coverage.unmapped


def _with_cond(x: torch.Tensor) -> torch.Tensor:
    y = torch.sin(x) * 3
    z = torch.cond(x.sum() > 0, lambda v: v.sin() * 2, lambda v: v.cos() - 1, (x,))
    return z + y


def test_subgraph_lines_map_to_their_own_nodes_not_the_root_graphs_namesakes():
    """A torch.cond branch is lowered from its own FX graph, whose node names (``sin``, ``mul``)
    repeat the root graph's: its lines are labelled by submodule path and reach the branch's line."""
    cap, result, code, ref, ref_code = _compile(_with_cond, torch.randn(6))
    assert code == ref_code and torch.equal(result, ref)
    first = inspect.getsourcelines(_with_cond)[1]
    root_line, cond_line = first + 1, first + 2
    by_node: dict[str, set[int]] = {}
    for kernel in cap.kernels:
        for line in kernel.tagged_lines:
            for name in line.fx_nodes:
                by_node.setdefault(name, set()).add(line.source.line if line.source else -1)
    assert by_node["sin"] == by_node["mul"] == {root_line}, by_node
    assert by_node["true_graph_0.sin"] == by_node["true_graph_0.mul"] == {cond_line}, by_node
    assert by_node["false_graph_0.cos"] == by_node["false_graph_0.sub"] == {cond_line}, by_node
    branch = cap.nodes["true_graph_0.mul"]
    assert branch.target == "aten.mul.Tensor" and branch.code.startswith("mul = torch.ops.aten.mul.Tensor(sin, 2)")
    assert branch.dynamo_nodes and all(d.endswith(".mul") for d in branch.dynamo_nodes), branch.dynamo_nodes
    coverage = ib.line_coverage([cap])
    assert coverage.mapped_percent == coverage.sourced_percent == 100.0, coverage.unsourced_nodes
    # The report's graph panes link each printed line to the node it defines, branch or root.
    from instrumented_backend.report.page import graph_page

    panes = {pane.key: pane for pane in graph_page(cap).panes}
    for key, prefix, branch_mul in (("post_grad", "p", "true_graph_0.mul"), ("dynamo", "d", "cond_true_0.mul")):
        ids = [ident for line in panes[key].lines for ident in line.ids]
        assert f"{prefix}:{branch_mul}" in ids and len(ids) == len(set(ids)), (key, ids)


def test_training_backward_lines_map_to_forward_source():
    def loss(x, w):
        h = torch.tanh(x * w)
        return (h * h).sum()

    w = torch.randn(32, requires_grad=True)
    torch._dynamo.reset()
    with ib.capture() as session:
        torch.compile(loss, backend="instrumented")(torch.randn(8, 32), w).backward()
    forward, backward = session.graphs
    for graph in (forward, backward):
        tagged = [line for k in graph.kernels for line in k.tagged_lines]
        assert tagged and all(line.fx_nodes for line in tagged)
    tanh_line = inspect.getsourcelines(loss)[1] + 1
    backward_tagged = [line for k in backward.kernels for line in k.tagged_lines]
    assert any(line.source and line.source.line == tanh_line for line in backward_tagged), \
        "backward kernels should point back at the forward source line of tanh"


def _two_checkpoints(x: torch.Tensor) -> torch.Tensor:
    y = torch.utils.checkpoint.checkpoint(lambda v: torch.sin(v) * 2, x, use_reentrant=False)
    z = torch.utils.checkpoint.checkpoint(lambda v: torch.sin(v) * 3, y + 1, use_reentrant=False)
    return z.sum()


def test_checkpointed_ops_map_to_their_own_blocks_node_forward_and_backward():
    """Each ``torch.utils.checkpoint`` body is a Dynamo subgraph (``wrap_body_0``, ``wrap_body_1``)
    that AOTAutograd traces into the root graph, and recomputes in the backward. Each op maps to
    its own body's node, not to every node on the checkpoint call's line (before: the first body's
    ``sin`` mapped to both bodies' nodes and the calls around them, 14 nodes in a two-block model)."""
    torch._dynamo.reset()
    with ib.capture() as session:
        torch.compile(_two_checkpoints, backend="instrumented")(torch.randn(16, requires_grad=True)).backward()
    forward, backward = session.graphs
    first = inspect.getsourcelines(_two_checkpoints)[1]
    for graph in (forward, backward):
        sines = sorted((n for n in graph.nodes.values() if n.target == "aten.sin.default"), key=lambda n: n.name)
        assert [n.dynamo_nodes for n in sines] == [["wrap_body_0.sin"], ["wrap_body_1.sin"]][:len(sines)], sines
        assert [n.source.line for n in sines] == [first + 1, first + 2][:len(sines)]
    assert len([n for n in forward.nodes.values() if n.target == "aten.sin.default"]) == 2
    # the gradient formulas (cos of each sin) take the op they differentiate, of its own block
    cosines = {n.source.line: n.dynamo_nodes for n in backward.nodes.values() if n.target == "aten.cos.default"}
    assert cosines == {first + 1: ["wrap_body_0.sin"], first + 2: ["wrap_body_1.sin"]}, cosines
    for graph in (forward, backward):
        lines = [line for kernel in graph.kernels for line in kernel.tagged_lines if "sin" in line.text]
        assert lines and all(len({d.split(".")[0] for d in line.dynamo_nodes if "wrap_body" in d}) == 1
                             for line in lines), [(line.text, line.dynamo_nodes) for line in lines]


def test_line_map_survives_dump_and_load(reduction, tmp_path):
    cap = reduction[0]
    (loaded,) = ib.load(cap.dump(tmp_path)).graphs
    assert loaded.kernels == cap.kernels and loaded.nodes == cap.nodes
    assert loaded.annotated_output_code == cap.annotated_output_code
    assert loaded.explain("amax") == cap.explain("amax")


def test_lines_for_an_aten_op_finds_every_node_of_it():
    """Two LayerNorms make ``rsqrt`` and ``rsqrt_1``: a user asking for the op gets both blocks'
    lines, however the op is written; a node name still names one node."""
    import torch

    import instrumented_backend as ib

    class TwoNorms(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.first, self.second = torch.nn.LayerNorm(8), torch.nn.LayerNorm(8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.second(self.first(x).relu())

    torch.compiler.reset()
    with ib.capture() as session:
        torch.compile(TwoNorms(), backend="instrumented")(torch.randn(4, 8))
    cap = session.graphs[0]
    every = cap.lines_for(op="rsqrt")
    assert {n for line in every for n in line.fx_nodes if n.startswith("rsqrt")} == {"rsqrt", "rsqrt_1"}
    assert every == cap.lines_for(op="aten.rsqrt") == cap.lines_for(op="aten.rsqrt.default")
    assert set(map(id, cap.lines_for("rsqrt"))) < set(map(id, every))
    with pytest.raises(KeyError, match="no node of op 'nope'.*aten.rsqrt.default"):
        cap.lines_for(op="nope")
    with pytest.raises(ValueError, match="exactly one"):
        cap.lines_for("rsqrt", op="rsqrt")


def test_a_torch_function_compiled_directly_is_sourced_to_the_line_that_calls_it():
    """``torch.compile(torch.min)``: Dynamo traces ``torch.min`` inside a frame of its own
    (``torch/_dynamo/external_utils.py``), no line of the program; every op of the graph is put on
    the line that called the compiled function, and the report names it ``torch.min``."""
    import torch._dynamo

    from instrumented_backend.capture.redirect import target_name

    torch._dynamo.reset()
    x = torch.tensor([5, 1, 100, 3], dtype=torch.int8)
    with ib.capture() as session:
        here = inspect.currentframe().f_lineno + 1
        torch.compile(torch.min, backend="instrumented")(x)
    [graph] = session.graphs
    sources = {str(line.source) for k in graph.kernels for line in k.lines if line.fx_nodes}
    assert sources == {f"{__file__}:{here}"}, sources
    assert "external_utils" not in graph.explain("min_1")
    assert target_name(torch.min) == "torch.min"
