"""The fast IR formatter writes exactly Inductor's ir_*_fusion.txt text, and says so when it cannot."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from instrumented_backend.seams import SeamMoved
from instrumented_backend.seams.aot.caches import autograd_cache_disabled
from instrumented_backend.seams.lowering import ir_format, ir_logging, sympy_linear_text


def busy_graph(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Reductions, a masked (padded) load, index arithmetic and a cat: most LoopBody shapes."""
    h = F.layer_norm(x @ w, (x.shape[-1],))
    h = torch.softmax(h, dim=-1) + torch.arange(h.shape[-1], dtype=h.dtype)
    h = F.pad(h, (1, 2))[..., 2:]
    return torch.cat([h.amax(-1, keepdim=True), torch.nn.functional.gelu(h)], dim=-1)


def _both_formats_at_log_time(dynamic: bool) -> list[tuple[str, str, str]]:
    """Compile ``busy_graph`` with plain Inductor, formatting each IR log both ways as it happens."""
    from torch._inductor.debug import DebugFormatter

    ir_logging.install()
    ir_format.install()
    seen: list[tuple[str, str, str]] = []

    memo = ir_format.IrTextMemo()  # shared by both stages, as a capture does

    def listener(stage, nodes):
        seen.append((stage, ir_format.format_ir(nodes, memo), DebugFormatter._write_ir(nodes)))

    torch._dynamo.reset()
    previous = ir_logging.set_listener(listener)
    try:
        compiled = torch.compile(busy_graph, backend="inductor", dynamic=dynamic, options={"fx_graph_cache": False})
        with autograd_cache_disabled(), torch.no_grad():
            compiled(torch.randn(6, 16), torch.randn(16, 16))
    finally:
        ir_logging.set_listener(previous)
        torch._dynamo.reset()
    return seen


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_fast_format_is_byte_identical_to_inductors(dynamic):
    import sympy.printing.str as sympy_str

    before = sympy_str.sstr
    seen = _both_formats_at_log_time(dynamic)
    assert {stage for stage, _, _ in seen} == {"pre_fusion", "post_fusion"}
    for stage, fast, slow in seen:
        assert "def body(" in fast  # LoopBody blocks were formatted, through the fast path
        assert fast == slow, stage
    if dynamic:
        assert any("s" in fast and "var_ranges" in fast for _, fast, _ in seen)
    assert sympy_str.sstr is before  # taken out again after the logs


@pytest.mark.parametrize("case", ["gpt2_train", "resnet_train"])
def test_fast_format_is_byte_identical_on_training_models(case, monkeypatch):
    """Every IR log of a forward and a backward graph of a real model, both ways, as it happens; the
    flat pformat path wrote most dependency lists and layouts (one line and one item per line)."""
    import sympy
    from torch._inductor.debug import DebugFormatter

    from tests.corpus.cases import build

    left: list = []
    flat = {"one line": 0, "item per line": 0, "left to pprint": 0}
    original_flat = ir_format._flat_pformat

    def counting_flat(obj):
        text = original_flat(obj)
        flat["left to pprint" if text is None else "item per line" if "\n" in text else "one line"] += 1
        return text

    monkeypatch.setattr(ir_format, "_flat_pformat", counting_flat)
    linear = {"written directly": 0, "left to sympy": 0}
    original_linear = sympy_linear_text.linear_text

    def counting_linear(expr):
        text = original_linear(expr)
        if isinstance(expr, sympy.Add):  # the sums sympy's printer orders slowly
            linear["left to sympy" if text is None else "written directly"] += 1
            if text is None:
                left.append(expr)
        return text

    monkeypatch.setattr(sympy_linear_text, "linear_text", counting_linear)
    ir_logging.install()
    ir_format.install()
    workload = build(case)
    memos: dict[str, ir_format.IrTextMemo] = {}
    differing: list[str] = []

    def listener(stage, nodes):
        graph = str(id(nodes[0].scheduler)) if nodes else ""
        fast = ir_format.format_ir(nodes, memos.setdefault(graph, ir_format.IrTextMemo()))
        if fast != DebugFormatter._write_ir(nodes):
            differing.append(stage)

    torch._dynamo.reset()
    previous = ir_logging.set_listener(listener)
    try:
        compiled = torch.compile(workload.model, backend="inductor", options={"fx_graph_cache": False},
                                 **workload.compile_kwargs)
        with autograd_cache_disabled():
            workload.loss(compiled(*workload.calls[0], **workload.kwargs)).backward()
    finally:
        ir_logging.set_listener(previous)
        torch._dynamo.reset()
    assert len(memos) >= 2 and not differing  # a forward and a backward scheduler, every log identical
    assert flat["one line"] > 50 and flat["item per line"] > 5 and flat["left to pprint"] < flat["one line"]
    assert linear["written directly"] > 20 and linear["written directly"] > linear["left to sympy"], left


def test_linear_index_text_is_sympys_on_random_forms():
    """30k random linear forms of symbols made as Inductor makes them: every one the fast path writes
    is sympy's own text; the ones it must leave to sympy (a power, a product of symbols, a rational,
    a subclass of Symbol, two symbols of one name) it leaves."""
    import random

    import sympy

    names = ["c0", "c1", "c2", "c10", "p0", "p1", "p10", "x0", "tmp0", "tmp12", "ks0", "s0", "r0_0", "x"]
    symbols = {name: sympy.Symbol(name, integer=True, nonnegative=True) for name in names}
    rng = random.Random(0)
    coefficients = [1, -1, 2, -2, 3, 64, -768, 10 ** 18, -(10 ** 25)]
    written = 0
    for _ in range(30000):
        form = sum(rng.choice(coefficients) * symbols[name] for name in rng.sample(names, rng.randint(1, 5)))
        if rng.random() < 0.6:
            form += rng.choice([1, -1, 5, -5, 64, 10 ** 18, -(10 ** 19)])
        text = sympy_linear_text.linear_text(form)
        if text is not None:
            written += 1
            assert text == sympy.sstr(form, order=None)
    assert written > 29000  # every linear form is written directly
    c0 = symbols["c0"]
    for other in (c0 ** 2 + 1, c0 * symbols["c1"] + 2, c0 + sympy.Rational(1, 2), sympy.Dummy("d") + c0,
                  sympy.Symbol("c0") + c0, sympy.Float(2.5) * c0 + 1):
        assert sympy_linear_text.linear_text(other) is None, other


def test_a_sympy_that_orders_terms_differently_is_reported(monkeypatch):
    from sympy.printing.str import StrPrinter

    sympy_linear_text.check()
    original = StrPrinter._print_Add
    monkeypatch.setattr(StrPrinter, "_print_Add", lambda self, expr, order=None: original(self, expr, order="rev-lex"))
    with pytest.raises(SeamMoved, match="term order or layout moved"):
        sympy_linear_text.check()


def test_a_layout_text_is_reused_only_while_the_layout_is_unchanged():
    import sympy
    from torch._inductor.ir import FixedLayout, Layout

    ir_format.install()
    original = inspect.unwrap(Layout.__str__)
    s0 = sympy.Symbol("s0", positive=True, integer=True)
    layout = FixedLayout(torch.device("cpu"), torch.float32, [2, s0], [s0, 1])
    with ir_format.formatting(ir_format.IrTextMemo()):
        first = str(layout)
        assert first == original(layout) and repr(layout) is first and str(layout) is first  # reused
        layout.stride = [1, 2]  # replaced, as padding strides does
        assert str(layout) == original(layout) == first.replace("stride=[s0, 1]", "stride=[1, 2]")
        layout.size[0] = 5  # edited in place
        assert str(layout) == original(layout) and "size=[5, s0]" in str(layout)
        fixed = FixedLayout(torch.device("cpu"), torch.float32, [4], [1], offset=s0)
        assert str(fixed) == original(fixed) and "offset=s0" in str(fixed)


def test_a_changed_pprint_layout_is_reported(monkeypatch):
    import pprint

    monkeypatch.setattr(pprint, "pformat", lambda obj, indent=1: repr(obj))  # never one item per line
    with pytest.raises(SeamMoved, match="pprint.pformat no longer lays out"):
        ir_format.check()


def test_a_scheduler_pformat_that_no_longer_sorts_and_indents_is_reported(monkeypatch):
    import pprint

    from torch._inductor import scheduler

    monkeypatch.setattr(scheduler, "pformat", lambda obj: pprint.pformat(obj, indent=2))
    with pytest.raises(SeamMoved, match="the scheduler's pformat no longer does"):
        ir_format.check()


def test_a_layout_text_reading_something_new_is_reported(monkeypatch):
    from torch._inductor.ir import Layout

    def text(self):
        return f"{self.size} {self.layout_note}"

    monkeypatch.setattr(Layout, "__str__", text)
    with pytest.raises(SeamMoved, match="Layout's text now reads"):
        ir_format.check()


def test_fast_paths_are_in_place_only_while_formatting():
    import threading

    import sympy.printing.str as sympy_str
    from sympy import Symbol
    from torch._inductor.loop_body import LoopBodyBlock

    originals = (sympy_str.sstr, LoopBodyBlock.debug_str)
    ir_format.install()
    assert (sympy_str.sstr, LoopBodyBlock.debug_str) == originals  # nothing patched yet
    expr = Symbol("s0") * 2 + 1
    memo = ir_format.IrTextMemo()
    with ir_format.formatting(memo):
        assert sympy_str.sstr is not originals[0] and LoopBodyBlock.debug_str is not originals[1]
        assert LoopBodyBlock.debug_str.__wrapped__ is originals[1]
        first = str(expr)
        assert first == repr(expr) == "2*s0 + 1" and str(expr) is first  # memoised by identity
        assert sympy_str.sstr(expr, order="lex") == "2*s0 + 1"  # other settings: printed afresh
        with ir_format.formatting(ir_format.IrTextMemo()):  # nested (or another thread): still in place
            pass
        assert sympy_str.sstr is not originals[0]
        elsewhere: list[bool] = []
        thread = threading.Thread(target=lambda: elsewhere.append(getattr(ir_format._state, "memo", None) is None))
        thread.start()
        thread.join()
        assert elsewhere == [True]  # another thread delegates to the originals
    assert (sympy_str.sstr, LoopBodyBlock.debug_str) == originals  # all put back
    assert str(expr) == repr(expr) == "2*s0 + 1"
    assert getattr(ir_format._state, "memo", None) is None  # nothing memoised outside


def test_scheduler_buffers_write_in_bulk_only_on_the_formatting_thread():
    import threading

    from torch._inductor import scheduler
    from torch._inductor.utils import IndentedBuffer

    text = "  a:\n    b\n\n  c"
    plain = IndentedBuffer()
    plain.splice(text)
    indented = "    x\n\tnot under x\n    y"  # no common margin: Inductor's dedent decides
    plain.splice(indented)
    with ir_format.formatting(ir_format.IrTextMemo()):
        bulk = scheduler.IndentedBuffer
        assert bulk is not IndentedBuffer and issubclass(bulk, IndentedBuffer)
        here = bulk()
        here.splice(text)
        here.splice(indented)
        assert here._lines == plain._lines
        assert here.getrawvalue() == plain.getrawvalue() == "a:\n  b\n\nc\n    x\n\tnot under x\n    y\n"
        seen: list[list[str]] = []

        def elsewhere() -> None:  # same class, another thread: Inductor's own methods, so its hooks run
            calls: list[str] = []
            buffer = bulk()
            original = IndentedBuffer.writeline
            IndentedBuffer.writeline = lambda self, line: (calls.append(line), original(self, line))[1]
            try:
                buffer.splice(text)
            finally:
                IndentedBuffer.writeline = original
            seen.append(calls)

        thread = threading.Thread(target=elsewhere)
        thread.start()
        thread.join()
        assert seen == [["a:", "  b", "", "c"]]
    assert scheduler.IndentedBuffer is IndentedBuffer  # put back


def test_a_buffer_that_writes_differently_is_reported(monkeypatch):
    from torch._inductor.utils import IndentedBuffer

    original = IndentedBuffer.splice

    def splice(self, other_code, strip=False):  # no longer dedents a text
        if isinstance(other_code, str):
            for line in other_code.rstrip().split("\n"):
                IndentedBuffer.writeline(self, line)
            return None
        return original(self, other_code, strip)

    monkeypatch.setattr(IndentedBuffer, "splice", splice)
    with pytest.raises(SeamMoved, match="ir_text_buffer: IndentedBuffer no longer writes"):
        ir_format.check()


def test_a_scheduler_writing_its_text_elsewhere_is_reported(monkeypatch):
    from torch._inductor import scheduler

    monkeypatch.setattr(scheduler, "IndentedBuffer", type("OtherBuffer", (), {}))
    with pytest.raises(SeamMoved, match="ir_text_buffer: the scheduler no longer writes its debug text"):
        ir_format.check()


def test_a_changed_loop_body_formatter_is_reported(monkeypatch):
    from torch._inductor.loop_body import LoopBodyBlock

    def debug_str(self, name="block"):
        return f"{name}: {self.graph}"

    monkeypatch.setattr(LoopBodyBlock, "debug_str", debug_str)
    with pytest.raises(SeamMoved, match="LoopBodyBlock.debug_str no longer formats"):
        ir_format.check()


def test_a_dependency_class_that_is_no_longer_frozen_is_reported(monkeypatch):
    """Dependency reprs are memoised by identity only while the classes are immutable."""
    from types import SimpleNamespace

    from torch._inductor.dependencies import StarDep

    monkeypatch.setattr(StarDep, "__dataclass_params__", SimpleNamespace(frozen=False))
    with pytest.raises(SeamMoved, match=r"\['StarDep'\] are gone or no longer frozen dataclasses"):
        ir_format.check()


def test_fx_nodes_that_no_longer_keep_their_arguments_are_reported(monkeypatch):
    """The loop-body memo holds each node's argument tuples; a Node that stores them elsewhere must say so."""
    import torch.fx

    monkeypatch.setattr(torch.fx.Node, "args", property(lambda self: list(self._args)))
    with pytest.raises(SeamMoved, match="no longer keeps its args/kwargs in _args/_kwargs"):
        ir_format.check()


def test_a_block_edited_in_place_is_formatted_again():
    """The memo reuses a block's text only while its graph is unchanged, even by an in-place edit."""
    from types import SimpleNamespace

    from torch._inductor.loop_body import LoopBodyBlock

    ir_format.install()
    graph = torch.fx.Graph()
    ops = graph.placeholder("ops")
    load = graph.call_method("load", (ops, "buf0", "index0"))
    neg = graph.call_method("neg", (ops, load))
    graph.call_method("store", (ops, "buf1", "index0", neg, None))
    graph.output(None)
    block = SimpleNamespace(graph=graph, body=SimpleNamespace(submodules={}))
    original = inspect.unwrap(LoopBodyBlock.debug_str)

    memo = ir_format.IrTextMemo()
    with ir_format.formatting(memo):
        first = LoopBodyBlock.debug_str(block, "body")
        assert first == original(block, "body") and "ops.neg(load)" in first
        assert LoopBodyBlock.debug_str(block, "body") is first  # unchanged: reused
        neg.target = "abs"
        neg.args = (ops, load)
        second = LoopBodyBlock.debug_str(block, "body")
        assert second == original(block, "body") and "ops.abs(load)" in second
        const = graph.call_method("constant", (ops, 0.0, torch.float32))
        const.args = (ops, -0.0, torch.float32)  # equal to 0.0, prints differently
        third = LoopBodyBlock.debug_str(block, "body")
    assert third == original(block, "body") and "-0.0" in third


def test_a_scheduler_node_text_is_reused_only_while_what_it_prints_is_unchanged():
    """Post-fusion, a node's pre-fusion text is reused; a node edited in place (as fusion's loop
    reordering and dependency pruning do) is formatted again, byte-identical to Inductor's."""
    from torch._inductor.debug import DebugFormatter
    from torch._inductor.scheduler import SchedulerNode

    ir_logging.install()
    ir_format.install()
    memo = ir_format.IrTextMemo()
    results: dict[str, bool] = {}

    def node_text(node):
        with ir_format.formatting(memo):
            return node.debug_str()

    def listener(stage, nodes):
        ir_format.format_ir(nodes, memo)
        if stage != "post_fusion":
            return
        snodes = [n for node in nodes for n in (getattr(node, "snodes", None) or [node]) if type(n) is SchedulerNode]
        texts = {id(n): memo.node_text[id(n)][2] for n in snodes}
        results["reused"] = bool(snodes) and all(node_text(n) is texts[id(n)] for n in snodes)  # the very same str
        victim = snodes[0]
        victim.min_input_distance += 7  # edited in place
        victim.unmet_dependencies.add(next(iter(victim.read_writes.reads)))
        results["identical after edits"] = ir_format.format_ir(nodes, memo) == DebugFormatter._write_ir(nodes)
        results["edited one formatted again"] = node_text(victim) is not texts[id(victim)]

    torch._dynamo.reset()
    previous = ir_logging.set_listener(listener)
    try:
        compiled = torch.compile(busy_graph, backend="inductor", options={"fx_graph_cache": False})
        with autograd_cache_disabled(), torch.no_grad():
            compiled(torch.randn(6, 16), torch.randn(16, 16))
    finally:
        ir_logging.set_listener(previous)
        torch._dynamo.reset()
    assert results == {"reused": True, "identical after edits": True, "edited one formatted again": True}


def test_a_scheduler_node_printing_something_new_is_reported(monkeypatch):
    from torch._inductor.scheduler import BaseSchedulerNode

    def debug_str(self):
        return f"{self.get_name()} {self.last_usage}"

    monkeypatch.setattr(BaseSchedulerNode, "debug_str", debug_str)
    with pytest.raises(SeamMoved, match=r"BaseSchedulerNode.debug_str now prints \['last_usage'\]"):
        ir_format.check()


def test_block_code_writes_fx_text_and_leaves_other_shapes_to_fx():
    from instrumented_backend.seams.lowering import fx_block_code

    for graph in fx_block_code._probe_graphs():
        ours = fx_block_code.block_code(graph)
        fx = graph.python_code(root_module="self").src.strip()
        assert ours is not None and ours.split("\n") == [line.split(";  ")[0] for line in fx.split("\n")]
    graph = torch.fx.Graph()
    x = graph.placeholder("ops")
    graph.output(graph.call_function(torch.neg, (x,)))  # not a LoopBody shape: FX formats it
    assert fx_block_code.block_code(graph) is None
    counted = torch.fx.Graph()  # a string FX would take for its node counter: FX formats it
    ops = counted.placeholder("ops")
    counted.output(counted.call_method("load", (ops, "buf0 # COUNTER: 3", 0)))
    assert fx_block_code.block_code(counted) is None


def test_a_block_text_cut_at_semicolons_as_inductor_cuts_it():
    """LoopBodyBlock.debug_str cuts every line at its first ``;`` (FX's ``;  x = None``), even
    inside a string argument: the fast path cuts where it cuts."""
    from torch._inductor.loop_body import LoopBodyBlock

    from instrumented_backend.seams.lowering.ir_format import _block_text

    graph = torch.fx.Graph()
    ops = graph.placeholder("ops")
    load = graph.call_method("load", (ops, "buf;0", 0))
    graph.output(graph.call_method("store", (ops, "buf1", 0, load, None)))
    block = LoopBodyBlock.__new__(LoopBodyBlock)
    block.graph, block.body = graph, SimpleNamespace(submodules={})
    text = _block_text(graph, "body")
    assert text == inspect.unwrap(LoopBodyBlock.debug_str)(block, "body") and "buf;" not in text


def test_a_changed_fx_code_generator_is_reported(monkeypatch):
    """FX writing keyword arguments as ``k=v`` one day (it writes ``k = v``) is caught by check()."""
    import dataclasses

    from instrumented_backend.seams.lowering import fx_block_code

    original = torch.fx.Graph.python_code

    def python_code(self, *args, **kwargs):
        code = original(self, *args, **kwargs)
        return dataclasses.replace(code, src=code.src.replace(" = torch.float16", "=torch.float16"))

    monkeypatch.setattr(torch.fx.Graph, "python_code", python_code)
    with pytest.raises(SeamMoved, match="fx_block_code: FX now writes a LoopBody block differently"):
        fx_block_code.check()
