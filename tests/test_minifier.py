"""The minifier end to end: real compiles in warm workers, pinned failures, repros that reproduce.

Tests are grouped by injected fault so each group shares one warm worker. Every repro a test
writes lands in ``REPROS``; the last test of the module runs each of them as a script.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import float32_mix_under_autocast
from torch._inductor.decomposition import select_decomp_table
from torch.fx.experimental.proxy_tensor import make_fx

import instrumented_backend as ib
from minifier import AccuracyFailure, CompileFailure, RuntimeFailure, UnbuildableGraph, minify

REPROS: list[tuple[Path, int]] = []  # (repro script, exit status it must give)
OPS = lambda result: [str(n.target) for n in result.graph_module.graph.nodes if n.op == "call_function"]  # noqa: E731


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    return tmp_path_factory.mktemp("repros")


def keep(result, expected_status=1):
    assert result.repro_path is not None and result.repro_path.exists()
    REPROS.append((result.repro_path, expected_status))
    return result


def tutorial(x1, x2):
    a = torch.neg(x1)
    b = torch.maximum(x2, a)
    return (torch.cat([b], dim=0),)


def aten_graph(fn, *args):
    """The ATen graph Inductor receives after AOT autograd: functional and decomposed.

    A bare ``make_fx`` graph keeps in-place ops such as ``div_``; with ``CI`` set in the
    environment Inductor refuses to fall back for an op it has a decomposition for.
    """
    return make_fx(torch.func.functionalize(fn, remove="mutations_and_views"),
                   decomposition_table=select_decomp_table())(*args)


def dynamo_graph(fn, *args, **compile_kwargs):
    """The graph a Dynamo backend receives for ``fn(*args)``, with the real arguments of its call."""
    seen = []

    def backend(gm, example_inputs):
        def run(*real):
            if not seen:
                seen.append((gm, [a.clone() if isinstance(a, torch.Tensor) else a for a in real]))
            return gm.forward(*real)
        return run

    torch._dynamo.reset()
    torch.compile(fn, backend=backend, **compile_kwargs)(*args)
    torch._dynamo.reset()
    return seen[0]


# --------------------------------------------------------------------------- doubling neg

@pytest.fixture(scope="class")
def doubling():
    with ib.faults.doubling_neg():
        yield


@pytest.mark.usefixtures("doubling")
class TestDoublingNeg:
    """One fault, one warm worker for the whole group."""

    def test_tutorial_accuracy_bug_shrinks_to_one_neg_in_at_most_five_compiles(self, out):
        torch.manual_seed(0)
        x1, x2 = torch.randn(1, 8), torch.randn(8390, 8)
        lines = []
        result = keep(
            minify(aten_graph(tutorial, x1, x2), [x1, x2], check=AccuracyFailure(), repro_dir=out, echo=lines.append)
        )
        assert OPS(result) == ["aten.neg.default"]
        assert result.reproduced and result.compiles <= 5
        assert lines[0].startswith("Started off with 3 nodes (2 inputs")
        assert "doubling neg" in "\n".join(lines)  # the fault is carried, and said so
        assert any(line.startswith("SUCCESS: Went from 3 to 1 nodes") for line in lines)
        assert str(result.repro_path) in lines[-1]  # the line that ends the run names the repro
        assert torch.equal(result.inputs[0], x1)


    def test_a_graph_calling_a_custom_op_is_minified_with_the_ops_library_carried(self, out):
        """Workers unpickle each candidate and repros rebuild the graph: both import the module that
        defines the graph's custom ops (before, a worker without it died on the first candidate,
        "crash: exit status 1", and the search minified that crash)."""
        import custom_op_library  # noqa: F401

        def fn(x):
            return torch.ops.ib_tests.scaled_sin(x, 2.0) + torch.neg(x).relu()

        torch.manual_seed(0)
        x = torch.randn(16, 8)
        gm = aten_graph(fn, x)
        assert "ib_tests.scaled_sin.default" in [str(n.target) for n in gm.graph.nodes]
        result = minify(gm, [x], check=AccuracyFailure(), repro_dir=out, echo=lambda s: None)
        assert OPS(result) == ["aten.neg.default"] and result.reproduced
        assert "import custom_op_library  # carried" in result.repro_path.read_text()
        library_home = str(Path(custom_op_library.__file__).parent)  # where a user's package would be installed
        proc = subprocess.run([sys.executable, str(result.repro_path)], capture_output=True, text=True, timeout=300,
                              env={**os.environ, "PYTHONPATH": library_home})
        assert proc.returncode == 1 and "REPRODUCES" in proc.stdout, proc.stderr[-2000:]

    def test_suspected_nodes_are_tried_first(self, out):
        torch.manual_seed(0)
        x1, x2 = torch.randn(1, 8), torch.randn(64, 8)
        lines = []
        result = minify(aten_graph(tutorial, x1, x2), [x1, x2], check=AccuracyFailure(), hint_nodes=["neg"],
                        repro_dir=out, echo=lines.append)
        assert OPS(result) == ["aten.neg.default"] and result.compiles <= 3
        strategies = [line for line in lines if line.startswith("Strategy: ")]
        assert strategies[0].startswith("Strategy: Isolate suspected nodes"), lines

    def test_a_search_past_its_time_budget_judges_no_candidate_and_keeps_the_graph_it_has(self, out):
        """``max_seconds``: a dynamic-shape graph's every compile can take minutes, and a
        diagnosis must end. Past the budget no candidate is judged; the graph found so far (here
        the whole graph, the budget spent in the confirming compile) is re-checked and its repro
        written, and the result says the search stopped and why."""
        from minifier import MinifierError

        torch.manual_seed(0)
        x1, x2 = torch.randn(1, 8), torch.randn(64, 8)
        gm = aten_graph(lambda a, b: tutorial(torch.sin(a), torch.cos(b)), x1, x2)
        lines = []
        result = keep(minify(gm, [x1, x2], check=AccuracyFailure(), max_seconds=1e-3, repro_dir=out,
                             echo=lines.append))
        assert result.reproduced and result.stopped_early == "its time budget of 0.001 s was spent"
        assert result.final_nodes == result.start_nodes == 5 and result.candidates_checked <= 1 + 5  # confirm, probe
        assert any(line.startswith("Search stopped: its time budget") for line in lines), lines
        assert "(search stopped: its time budget of 0.001 s was spent)" in result.summary()
        with pytest.raises(MinifierError, match="max_seconds must be a positive number"):
            minify(gm, [x1, x2], check=AccuracyFailure(), max_seconds=0, repro_dir=out)

    def test_a_caller_that_saw_the_graph_fail_has_it_minified_without_compiling_it(self, out):
        """``assume_failing``: the diagnosis compiled the whole graph and saw it fail, so the
        search starts from the culprit when it fails alone (before: the whole graph compiled
        again first, 8.1 of 8.4 s for a conv net compiled with dynamic=True); a suspect that
        does not fail alone leaves the whole graph confirmed as before."""
        torch.manual_seed(0)
        x1, x2 = torch.randn(1, 8), torch.randn(64, 8)
        lines = []
        result = keep(minify(aten_graph(tutorial, x1, x2), [x1, x2], check=AccuracyFailure(), hint_nodes=["neg"],
                             assume_failing=True, repro_dir=out, echo=lines.append))
        assert OPS(result) == ["aten.neg.default"] and result.reproduced
        assert result.compiles == 2, lines  # the suspect, the re-check: never the 3-node graph
        assert any(line.startswith("Started from the suspected nodes alone (1 of 3 nodes)") for line in lines), lines
        assert not any(line.startswith(("Original failure", "Strategy: ")) for line in lines), lines
        assert result.start_nodes == 3 and "3 -> 1 nodes" in result.summary()

        lines.clear()
        innocent = minify(aten_graph(tutorial, x1, x2), [x1, x2], check=AccuracyFailure(), hint_nodes=["maximum"],
                          assume_failing=True, repro_dir=out, echo=lines.append)
        assert OPS(innocent) == ["aten.neg.default"] and innocent.reproduced
        assert any("The suspected nodes alone give 'pass': confirming the whole graph" in line for line in lines), lines
        assert any(line.startswith("Original failure: accuracy") for line in lines), lines


    def test_a_bug_seen_only_in_what_the_graph_writes_into_its_inputs(self, out):
        """An optimizer step, a cache write: the graph returns nothing wrong, the tensors it
        updates in place are. Compared by outputs alone, the original "did not fail"."""

        def fn(x, cache, state):
            cache[:, :4].add_(torch.neg(x))  # through a view
            state.mul_(0.5).add_(torch.relu(x).sum(1))
            return (x * 2,)

        torch.manual_seed(0)
        args = [torch.randn(8, 4), torch.zeros(8, 16), torch.ones(8)]
        gm, real = dynamo_graph(fn, *[a.clone() for a in args])
        lines = []
        result = keep(minify(gm, real, check=AccuracyFailure(), repro_dir=out, echo=lines.append))
        assert OPS(result) == [str(torch.neg)] and result.reproduced, OPS(result)
        assert any(line.startswith("Inputs updated in place, returned as outputs: 2 ") for line in lines), lines

    def test_several_outputs_and_a_buried_bug(self, out):
        def fn(x, y):
            a = torch.relu(x) * 2
            b = torch.exp(torch.neg(torch.sin(y))) + 1
            return a.sum(), b * a, torch.cos(a)

        torch.manual_seed(0)
        x, y = torch.randn(16, 16), torch.randn(16, 16)
        result = keep(minify(aten_graph(fn, x, y), [x, y], check=AccuracyFailure(), repro_dir=out, echo=lambda s: None))
        assert OPS(result) == ["aten.neg.default"]


    def test_torch_level_graph_with_in_place_ops(self, out):
        def fn(x):
            y = x.clone()
            y.add_(1)
            y.mul_(torch.neg(x))
            return y.relu()

        x = torch.randn(32, 8)
        gm, args = dynamo_graph(fn, x)
        result = keep(minify(gm, args, check=AccuracyFailure(), repro_dir=out, echo=lambda s: None))
        assert result.level == "torch"
        assert len(result.graph_module.graph.find_nodes(op="call_function", target=torch.neg)) == 1
        assert result.final_nodes == 1


    def test_random_ops_do_not_count_as_inaccuracy(self, out):
        def fn(x):
            noise = torch.rand_like(x)
            return torch.neg(x) + noise, torch.nn.functional.dropout(x, 0.5, training=True)

        x = torch.randn(64, 8)
        result = minify(aten_graph(fn, x), [x], check=AccuracyFailure(), repro_dir=out, echo=lambda s: None)
        assert OPS(result) == ["aten.neg.default"]


    def test_the_every_node_probe_confirms_the_original_failure_in_one_compile(self, out, monkeypatch):
        """The probe computes every value of the original graph, its outputs included: when those
        disagree with eager it confirms the failure, so the original is never compiled on its own,
        and the result is unchanged."""
        from minifier.workers import pool

        def fn(x, y):
            h = torch.sin(x) * torch.cos(y)
            return (torch.exp(torch.neg(h)) + h.sum(),)

        outputs, real_judge = [], pool.judge

        def judge(setup, module, inputs, spec, timeout, slot=0):
            nodes = sum(1 for n in module.graph.nodes if n.op not in ("placeholder", "output", "get_attr"))
            outputs.append((nodes, len(module.graph.find_nodes(op="output")[0].args[0])))
            return real_judge(setup, module, inputs, spec, timeout, slot=slot)

        monkeypatch.setattr(pool, "judge", judge)
        x, y = torch.randn(32, 8), torch.randn(32, 8)
        lines = []
        result = minify(aten_graph(fn, x, y), [x, y], check=AccuracyFailure(), repro_dir=out, echo=lines.append,
                        workers=1)  # one worker: no speculative judgements beside the probe
        assert OPS(result) == ["aten.neg.default"] and result.reproduced and result.compiles <= 4
        assert outputs[0] == (result.start_nodes, result.start_nodes)  # first the probe: every node an output
        assert (result.start_nodes, 1) not in outputs  # the original alone: never compiled
        assert result.original.is_accuracy and result.original.failing == (0,)  # the original's own output
        assert any(line.startswith("Confirmed by the every-node probe") for line in lines)

    def test_spare_workers_judge_single_nodes_while_the_probe_compiles(self, out, monkeypatch):
        """On a small graph a second worker judges single nodes, in graph order, while the probe
        compiles; the search then reads the isolated neg's answer instead of compiling it again,
        and ends where the one-worker search ends."""
        from minifier.workers import pool

        judged, real_judge = [], pool.judge

        def judge(setup, module, inputs, spec, timeout, slot=0):
            targets = [str(n.target) for n in module.graph.nodes if n.op == "call_function"]
            judged.append((slot, targets))
            return real_judge(setup, module, inputs, spec, timeout, slot=slot)

        monkeypatch.setattr(pool, "judge", judge)
        torch.manual_seed(0)
        x1, x2 = torch.randn(1, 8), torch.randn(256, 8)
        lines = []
        result = minify(aten_graph(tutorial, x1, x2), [x1, x2], check=AccuracyFailure(), repro_dir=out,
                        echo=lines.append, workers=2)
        assert OPS(result) == ["aten.neg.default"] and result.reproduced
        assert any(line.startswith("Judged alongside the probe") for line in lines)
        neg_alone = [slot for slot, targets in judged if targets == ["aten.neg.default"]]
        assert neg_alone == [2, 0]  # once speculatively (the worker slot after the search's two), once re-checked
        monkeypatch.setattr(pool, "judge", real_judge)
        alone = minify(aten_graph(tutorial, x1, x2), [x1, x2], check=AccuracyFailure(), repro_dir=out,
                       echo=lambda line: None, workers=1)
        assert OPS(alone) == OPS(result) and alone.final_nodes == result.final_nodes

    def test_on_a_larger_graph_a_spare_worker_probes_the_first_half_and_isolates_what_it_finds(self, out,
                                                                                               monkeypatch):
        """Beyond a few nodes, the spare worker probes the graph's first half while the whole probe
        compiles, then judges the earliest diverging node alone; the search reads that answer
        instead of compiling it after the probe, and ends where the one-worker search ends."""
        import threading

        from minifier.workers import pool

        judged, real_judge = [], pool.judge
        guessed = threading.Event()

        def judge(setup, module, inputs, spec, timeout, slot=0):
            targets = [str(n.target) for n in module.graph.nodes if n.op == "call_function"]
            outputs = len(module.graph.find_nodes(op="output")[0].args[0])
            judged.append((slot, targets, outputs))
            if slot == 2 and len(targets) == 1:
                guessed.set()
            result = real_judge(setup, module, inputs, spec, timeout, slot=slot)
            if slot == 0 and outputs == len(targets) > 8:  # the whole probe: answered once a guess is under way
                guessed.wait(timeout=120)
            return result

        def fn(x, y):
            h = torch.neg(torch.tanh(x)) * y  # the doubled neg: early in the graph
            for _ in range(4):
                h = torch.sigmoid(h) + torch.cos(h) * 0.5
            return (h,)

        monkeypatch.setattr(pool, "judge", judge)
        torch.manual_seed(0)
        x, y = torch.randn(16, 8), torch.randn(16, 8)
        lines = []
        result = minify(aten_graph(fn, x, y), [x, y], check=AccuracyFailure(), repro_dir=out, echo=lines.append,
                        workers=2)
        assert OPS(result) == ["aten.neg.default"] and result.reproduced
        assert any(line.startswith("Judged alongside the probe") and "first half" in line for line in lines)
        probes = [(slot, len(targets)) for slot, targets, outputs in judged if outputs == len(targets) > 1]
        whole = result.start_nodes
        assert sorted(probes) == [(0, whole), (2, whole // 2)]  # the whole probe, and its first half beside it
        neg_alone = [slot for slot, targets, _ in judged if targets == ["aten.neg.default"]]
        assert neg_alone == [2, 0]  # once guessed beside the probe, once re-checked: never judged in between
        monkeypatch.setattr(pool, "judge", real_judge)
        alone = minify(aten_graph(fn, x, y), [x, y], check=AccuracyFailure(), repro_dir=out, echo=lambda line: None,
                       workers=1)
        assert OPS(alone) == OPS(result) and alone.final_nodes == result.final_nodes

    def test_a_failure_the_probe_does_not_show_is_confirmed_on_the_original(self, out, monkeypatch):
        """When the every-node probe's outputs agree with eager (a fusion-dependent bug would), the
        original graph is compiled on its own to confirm the failure."""
        import minifier.search as search

        monkeypatch.setattr(search, "_original_seen_in_probe", lambda full, probe, result: None)
        x = torch.randn(16, 8)
        lines = []
        result = minify(aten_graph(lambda x: (torch.exp(torch.neg(x)) * 2,), x), [x], check=AccuracyFailure(),
                        repro_dir=out, echo=lines.append)
        assert OPS(result) == ["aten.neg.default"] and result.reproduced
        assert not any(line.startswith("Confirmed by the every-node probe") for line in lines)

    def test_symbolic_shapes_and_int_inputs_are_kept(self, out):
        def fn(x, n):
            return torch.neg(x[:n]) * n

        gm, args = dynamo_graph(fn, torch.randn(12, 4), 6, dynamic=True)
        assert any(isinstance(a, int) for a in args)  # SymInt inputs arrive as ints
        result = keep(minify(gm, args, check=AccuracyFailure(), repro_dir=out, echo=lambda s: None))
        assert result.reproduced
        text = result.repro_path.read_text()
        spec_line = next(line for line in text.splitlines() if line.startswith("SPEC = "))
        assert "'dynamic': {}" not in spec_line or "'dynamic_ints': []" not in spec_line


def test_nondeterministic_graphs_are_reported_not_minified(out):
    @torch.library.custom_op("minifier_test::noisy", mutates_args=())
    def noisy(x: torch.Tensor) -> torch.Tensor:
        return x + random.random()

    @noisy.register_fake
    def _(x):
        return torch.empty_like(x)

    x = torch.randn(8)
    gm = make_fx(lambda x: (torch.neg(torch.ops.minifier_test.noisy(x)),))(x)
    lines = []
    result = minify(gm, [x], check=AccuracyFailure(), isolate=False, repro_dir=out, echo=lines.append)
    assert result.status == "nondeterministic" and result.repro_path is None
    assert "nondeterministic" in lines[-1]


def test_a_graph_that_does_not_fail_is_a_clear_error(out):
    from minifier.workers import pool

    crashes = pool.crashes
    x = torch.randn(8)
    with pytest.raises(ib_not_failing(), match="does not fail as AccuracyFailure"):
        minify(make_fx(lambda x: (torch.exp(torch.neg(x)),))(x), [x], check=AccuracyFailure(), repro_dir=out,
               echo=lambda s: None)
    assert pool.crashes == crashes


def test_an_undecomposed_aten_graph_under_ci_names_the_cause(out, monkeypatch):
    """Inductor refuses, only when ``CI`` is set, to fall back for an op it could decompose."""
    from torch._inductor.lowering import lowerings

    aten = torch.ops.aten
    fresh = [op for op in (aten.lerp_.Scalar, aten.addcmul_.default, aten.div_.Scalar) if op not in lowerings]
    assert fresh, "every candidate op already has a lowering in this process; pick another in-place op"
    op = fresh[0]
    args = {aten.lerp_.Scalar: lambda y: (y, 0.5), aten.addcmul_.default: lambda y: (y, y),
            aten.div_.Scalar: lambda y: (2.0,)}[op]

    def fn(x):
        y = x.clone()
        op(y, *args(y))
        return (torch.neg(y),)

    monkeypatch.setenv("CI", "1")
    x = torch.randn(8)
    with pytest.raises(ib_not_failing(), match="only while the CI environment variable is set"):
        minify(make_fx(fn)(x), [x], check=AccuracyFailure(), isolate=False, repro_dir=out, echo=lambda s: None)


def ib_not_failing():
    from minifier import NotFailingError

    return NotFailingError


# --------------------------------------------------------------------------- compile error

def test_compile_error_shrinks_to_neg_and_maximum_at_torch_level(out):
    torch.manual_seed(0)
    x1 = torch.randint(256, (1, 8), dtype=torch.uint8)
    x2 = torch.randint(256, (8390, 8), dtype=torch.uint8)
    gm, args = dynamo_graph(tutorial, x1, x2)
    with ib.faults.cast_dropping_neg():
        result = keep(minify(gm, args, check=CompileFailure(pattern="max_propagate_nan"), repro_dir=out,
                             echo=lambda s: None))
    assert sorted(n.target.__name__ for n in result.graph_module.graph.nodes if n.op == "call_function") == [
        "maximum",
        "neg",
    ]
    assert result.original.signature.startswith("CppCompileError: no matching function for call to")
    assert "'cpp.simdlen': 1" in result.repro_path.read_text()  # the fault's config is carried


# --------------------------------------------------------------------------- an error too small where it is made

def _softcapped_block(x, y):
    a = torch.sin(y) + 1.0
    capped = torch.tanh(x / 50.0) * 50.0  # Gemma-2's softcapping: tanh of values around 1e-3
    return ((capped + a).cos() * a,)


def test_a_suspect_that_matches_eager_alone_grows_downstream_until_it_fails(out):
    """A tanh 1% off on values under the tolerance passes alone; with the ``* 50`` its value flows
    into, it fails. Given the tanh as the suspect of a graph the caller saw fail, the search starts
    from the suspect grown one step downstream: on an unseen Gemma-2 training step, 274 -> 2 nodes
    in 6 compiles and 1.6 s, where it searched the whole graph before, 50 compiles and 63 s."""
    torch.manual_seed(0)
    x, y = torch.randn(8, 64) * 0.1, torch.randn(8, 64)
    gm = aten_graph(_softcapped_block, x, y)
    lines = []
    with ib.faults.scaled("tanh", 1.01):
        result = keep(minify(gm, [x, y], check=AccuracyFailure(), hint_nodes=["tanh"], assume_failing=True,
                             repro_dir=out, echo=lines.append))
    assert OPS(result) == ["aten.tanh.default", "aten.mul.Tensor"] and result.reproduced, lines
    assert any("The suspected nodes alone match eager; with the nodes their values flow into (2 of" in line
               for line in lines), lines
    assert not any(line.startswith("Original failure") for line in lines), lines  # the whole graph: never compiled
    assert result.compiles <= 6, lines  # the suspect, it grown, the search of those 2 nodes, the re-check


def test_values_recorded_under_the_callers_autocast_are_the_ones_a_worker_computes(out):
    """A post-AOT graph holds autocast's casts: a worker runs it with autocast off, as Inductor
    does. Called under ``torch.autocast`` (as ``diagnose`` replays a mixed-precision training
    loop), the minifier recorded the suspect's input with autocast on: the float32 ``bmm`` gave
    bfloat16, the ``tanh`` 1% off alone passed at bfloat16's tolerance, and a BERT step's search
    fell back to the whole graph (33 s instead of 0.8 s)."""
    from instrumented_backend.capture.backend import keep_call_args

    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 12, 8) for _ in range(3))
    lines = []
    with ib.faults.scaled("tanh", 1.01), torch.autocast("cpu", dtype=torch.bfloat16):
        with ib.capture() as session, keep_call_args(), torch.no_grad():
            torch.compile(float32_mix_under_autocast, backend="instrumented")(q, k, v)
        graph = session.graphs[0]
        tanh = next(n for n in graph.post_grad_graph.graph.nodes if n.name == "tanh")
        assert tanh.args[0].meta["val"].dtype == torch.float32
        result = keep(minify(graph.post_grad_graph, graph.call_args, check=AccuracyFailure(), hint_nodes=["tanh"],
                             assume_failing=True, repro_dir=out, echo=lines.append))
        assert torch.is_autocast_enabled("cpu")  # the caller's autocast, as it was
    assert OPS(result) == ["aten.tanh.default"] and result.reproduced, lines
    assert any(line.startswith("Started from the suspected nodes alone") for line in lines), lines
    assert result.inputs[0].dtype == torch.float32  # the float32 bmm's value, as the worker computes it


# --------------------------------------------------------------------------- training graphs, symbolic inputs

def _fail_on_a_backward_op(graph: torch.fx.Graph) -> None:
    """An Inductor joint-graph pass that breaks only a training compile: ``cos`` is in the joint
    graph of ``sin`` (its derivative) when an input requires grad, never in an inference graph."""
    if any(node.target is torch.ops.aten.cos.default for node in graph.nodes):
        raise RuntimeError("joint pass refuses the backward of sin")


def _scaled_sin_step(x, w):
    return torch.sin(x * w).relu() + x


def _backend_inputs(fn, *args, **compile_kwargs):
    """The graph and example inputs a Dynamo backend receives (SymInts under dynamic=True), under
    the grad mode of this call."""
    seen = []

    def backend(gm, example_inputs):
        seen.append((gm, list(example_inputs)))
        return gm.forward

    torch._dynamo.reset()
    torch.compile(fn, backend=backend, **compile_kwargs)(*args)
    torch._dynamo.reset()
    return seen[0]


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_a_failure_only_a_training_compile_shows_is_minified_as_a_training_graph(out, dynamic):
    """A graph whose inputs require grad compiles, under grad mode, as a training graph: other
    decompositions, a joint graph, the partitioner (a real one: a ConvNeXt stem under
    dynamic=True fails to lower only so, "cannot determine truth value of Relational"). Candidates
    were compiled as inference graphs and the minifier answered "does not fail"; and under
    dynamic=True the backend's example inputs hold SymInts, which could not be sent to a worker."""
    import torch._inductor.config as inductor_config

    from minifier import NotFailingError

    x, w = torch.randn(6, 8), torch.randn(8, requires_grad=True)
    gm, inputs = _backend_inputs(_scaled_sin_step, x, w, dynamic=dynamic)
    assert any(isinstance(value, torch.SymInt) for value in inputs) == dynamic
    with inductor_config.patch(joint_custom_post_pass=_fail_on_a_backward_op):
        lines = []
        result = minify(gm, inputs, check=CompileFailure(pattern="refuses the backward"), isolate=False,
                        repro_dir=out, echo=lines.append)
        assert [n for n in OPS(result) if "sin" in n] and "relu" not in " ".join(OPS(result))
        assert result.original.signature.endswith("joint pass refuses the backward of sin")
        assert any(line.startswith("Compiled as a training graph") for line in lines), lines
        assert "'requires_grad': [" in result.repro_path.read_text()
        with pytest.raises(NotFailingError):  # the same graph compiled for inference passes
            minify(gm, inputs, check=CompileFailure(), isolate=False, requires_grad=[], repro_dir=out,
                   echo=lambda line: None)


# --------------------------------------------------------------------------- from the backend

def _noted_repro(error):
    notes = [n for n in getattr(error, "__notes__", []) if n.startswith("minifier: minified")]
    assert len(notes) == 1, getattr(error, "__notes__", None)
    path = Path(notes[0].rsplit("repro: ", 1)[1])
    assert path.exists()
    return path


def test_the_backend_minifies_an_accuracy_failure_and_names_the_repro(out, monkeypatch):
    monkeypatch.setenv("INSTRUMENTED_BACKEND_MINIFY_DIR", str(out / "backend"))
    torch.manual_seed(0)
    x1, x2 = torch.randn(1, 8), torch.randn(64, 8)
    with ib.faults.doubling_neg():
        with pytest.raises(ib.AccuracyError) as caught:
            torch.compile(tutorial, backend="instrumented", options={"minify": True, "check_accuracy": True})(x1, x2)
    path = _noted_repro(caught.value)
    assert "= torch.neg(" in path.read_text()
    REPROS.append((path, 1))


def test_a_compile_error_with_the_minify_option_names_the_repro_in_its_first_lines(out, monkeypatch):
    """The compiler's log is a file, not the message: the explanation and the repro come first."""
    import traceback

    monkeypatch.setenv("INSTRUMENTED_BACKEND_MINIFY_DIR", str(out / "backend_compile"))
    with ib.faults.cast_dropping_neg():
        with pytest.raises(Exception) as caught:
            torch.compile(tutorial, backend="instrumented", options={"minify": True})(
                torch.randint(0, 255, (1, 8), dtype=torch.uint8), torch.randint(0, 255, (64, 8), dtype=torch.uint8))
    path = _noted_repro(caught.value)
    shown = "".join(traceback.format_exception_only(caught.value)).splitlines()
    assert shown[0].startswith("torch._inductor.exc.InductorError") and "C++ compile error in kernel" in shown[0]
    assert any(str(path) in line for line in shown[:40]), shown[:40]
    assert len(shown) < 60, "the compiler's full log must not be in the message"
    REPROS.append((path, 1))


def test_the_minify_option_starts_no_worker_for_a_compile_that_does_not_fail(monkeypatch):
    """A function that compiles and runs correctly pays nothing for the option: no worker starts
    (one started ahead of need slowed the first call 1.25x on 2 cores)."""
    from minifier.workers import pool

    started = []
    real_get = pool.get
    monkeypatch.setattr(pool, "get", lambda setup, slot=0: started.append(setup) or real_get(setup, slot))
    torch._dynamo.reset()
    result = torch.compile(lambda x: torch.relu(x) + 1, backend="instrumented",
                           options={"minify": True, "check_accuracy": True})(torch.randn(4))
    torch._dynamo.reset()
    assert result.shape == (4,) and started == []


def test_the_environment_variable_minifies_a_compile_failure(out, monkeypatch):
    monkeypatch.setenv("INSTRUMENTED_BACKEND_MINIFY", "1")
    monkeypatch.setenv("INSTRUMENTED_BACKEND_MINIFY_DIR", str(out / "backend"))
    x1 = torch.randint(256, (1, 8), dtype=torch.uint8)
    x2 = torch.randint(256, (64, 8), dtype=torch.uint8)
    with ib.faults.cast_dropping_neg():
        with pytest.raises(Exception) as caught:
            torch.compile(tutorial, backend="instrumented")(x1, x2)
    path = _noted_repro(caught.value)
    text = path.read_text()
    assert "torch.ops.aten.neg.default" in text and "torch.ops.aten.maximum.default" in text
    assert "max_propagate_nan" in text  # pinned to the C++ error, not to an artefact of where it ran
    REPROS.append((path, 1))


# --------------------------------------------------------------------------- crashes and hangs

def _neg_in_the_middle(x):
    return (torch.exp(torch.neg(torch.relu(x))) + 1,)


class _ScriptTensor(torch.Tensor):
    """Pickled by reference as ``__main__._ScriptTensor``: a worker's ``__main__`` has no such class."""


def test_a_candidate_a_worker_cannot_load_is_refused_with_the_reason_not_minified_as_a_crash(out, monkeypatch):
    """The worker unpickles each candidate; one it cannot (a class or op from a module it never
    imported) is answered with the reason. Before, the worker died ('crash: exit status 1'), and a
    CompileFailure check accepted that crash as the failure and minified it."""
    import __main__

    monkeypatch.setattr(_ScriptTensor, "__module__", "__main__")
    monkeypatch.setattr(__main__, "_ScriptTensor", _ScriptTensor, raising=False)
    x = torch.randn(8).as_subclass(_ScriptTensor)
    with pytest.raises(UnbuildableGraph, match=r"cannot load this graph \(AttributeError: "):
        minify(torch.fx.symbolic_trace(lambda v: (torch.neg(v),)), [x], check=CompileFailure(), repro_dir=out,
               echo=lambda s: None)


def test_segfaulting_candidates_cost_a_worker_not_the_process(out):
    x = torch.randn(64)
    crash = ib.faults.bad_lowering("neg", "decltype({x})(*(volatile int*)nullptr)", config={"cpp.simdlen": 1},
                                   name="segfaulting neg")
    with crash:
        result = keep(minify(aten_graph(_neg_in_the_middle, x), [x], check=RuntimeFailure(), hint_nodes=["neg"],
                             repro_dir=out, echo=lambda s: None))
    assert result.original.kind == "crash" and result.original.signature == "signal SIGSEGV"
    assert OPS(result) == ["aten.neg.default"] and result.reproduced
    assert result.crashes >= 2  # the original and the isolated neg both killed their worker


def test_hanging_candidates_are_killed_after_the_timeout(out):
    x = torch.randn(64)
    hang = ib.faults.bad_lowering(
        "neg",
        "decltype({x})([&]{{ volatile int spin = 1; while (spin) {{}} return {x}; }}())",
        config={"cpp.simdlen": 1},
        name="hanging neg",
    )
    with hang:
        result = keep(minify(aten_graph(_neg_in_the_middle, x), [x], check=RuntimeFailure(), hint_nodes=["neg"],
                             timeout=8, repro_dir=out, echo=lambda s: None))
    assert result.original.kind == "timeout"
    assert OPS(result) == ["aten.neg.default"] and result.reproduced
    # Before the kill the worker wrote where it hung: the compiled graph's call, run by the judge.
    assert "where it was" in result.original.message, result.original.message
    assert "in call" in result.original.message and "in run_seeded" in result.original.message


# --------------------------------------------------------------------------- repros and CLI

def test_the_cli_shrinks_a_saved_repro_again(out):
    first = next(path for path, status in REPROS if status == 1)
    proc = subprocess.run([sys.executable, "-m", "minifier", str(first), "--out", str(out / "again")],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "minified" in proc.stdout and "Started off with" in proc.stderr
    REPROS.extend((path, 1) for path in (out / "again").glob("*.py"))


def test_the_cli_starts_the_worker_a_repro_needs_before_it_imports_torch(out):
    """The CLI reads the repro's carried setup torch-free; ``minify`` must then ask for the same worker."""
    path = next(p for p, status in REPROS if status == 1 and "doubling neg" in p.read_text())
    script = f"""
import sys
from pathlib import Path
from minifier._carried import read_carried
from minifier.workers import WorkerSetup
imports, env = read_carried(Path({str(path)!r}).read_text())
early = WorkerSetup(imports=imports, env=env).key
assert "torch" not in sys.modules, "the CLI's early worker start imported torch"
from minifier.saved import load_repro
from minifier import current_context
load_repro(Path({str(path)!r}))
print(early == WorkerSetup.for_context(current_context()).key, early[0])
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={k: v for k, v in os.environ.items() if k != ib.faults.ENV_VAR})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["True", "('instrumented_backend',)"]


def test_the_cli_starts_its_worker_at_normal_priority(out):
    """The CLI waits for that worker from the moment the repro is loaded: a niced start (as a
    prewarmed worker's) would only give it the cycles this process's own imports leave."""
    path = next(p for p, status in REPROS if status == 1 and "doubling neg" in p.read_text())
    script = f"""
from pathlib import Path
from minifier._carried import read_carried
from minifier.__main__ import start_worker_early
from minifier.workers import WorkerSetup, pool
assert start_worker_early(Path({str(path)!r}))
imports, env = read_carried(Path({str(path)!r}).read_text())
worker = pool.get(WorkerSetup(imports=imports, env=env, warm=False))
started = getattr(worker, "zygote", worker)  # where workers are forked, the process the CLI started
started.wait_ready()
print(started.setup_nice)
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={k: v for k, v in os.environ.items() if k != ib.faults.ENV_VAR})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split()[-1] == "0"


def test_every_repro_the_suite_wrote_reproduces(out):
    from concurrent.futures import ThreadPoolExecutor

    assert len(REPROS) >= 6

    def run(path: Path) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=600)

    with ThreadPoolExecutor(max_workers=2) as runner:  # two at a time: each is mostly one busy core
        finished = list(runner.map(run, [path for path, _ in REPROS]))
    for (path, status), proc in zip(REPROS, finished):
        assert proc.returncode == status, f"{path}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}"
        assert "REPRODUCES" in proc.stdout


def test_a_repro_passes_once_the_bug_is_gone(out):
    path = next(p for p, status in REPROS if status == 1 and "doubling neg" in p.read_text())
    fixed = out / "fixed_repro.py"
    fixed.write_text("\n".join("ENV = {}" if line.startswith("ENV = ") else line
                               for line in path.read_text().splitlines()))
    env = {k: v for k, v in os.environ.items() if k != ib.faults.ENV_VAR}
    proc = subprocess.run([sys.executable, str(fixed)], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]


def _two_attentions(q, k, v):
    a = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    return torch.nn.functional.scaled_dot_product_attention(torch.neg(a) * 2, k, v)


def test_a_post_grad_graph_with_ordering_wrappers_is_minified_with_them_inlined(out):
    """Under ``fallback_random`` Inductor's post-grad passes chain random ops (each attention) with
    ``control_deps``, a higher-order op calling a subgraph: every transformer's post-grad graph
    was refused ("calls subgraphs"), so diagnose had no repro for a GPT-2 under ``dynamic=True``,
    whose Dynamo graph FX cannot re-trace either."""
    from instrumented_backend.capture.backend import keep_call_args

    x = [torch.randn(1, 2, 8, 4) for _ in range(3)]
    with ib.faults.doubling_neg():
        with ib.capture() as session, keep_call_args(), torch.no_grad():
            torch.compile(_two_attentions, backend="instrumented", options={"fallback_random": True})(*x)
        graph = session.graphs[0]
        assert "control_deps" in [str(n.target) for n in graph.post_grad_graph.graph.nodes]
        result = keep(minify(graph.post_grad_graph, graph.call_args, check=AccuracyFailure(), repro_dir=out,
                             echo=lambda s: None))
    assert OPS(result) == ["aten.neg.default"] and result.reproduced
    assert "control_deps" in [str(n.target) for n in graph.post_grad_graph.graph.nodes]  # the caller's graph as it was


def _checkpointed_blocks(x: torch.Tensor) -> torch.Tensor:
    y = torch.utils.checkpoint.checkpoint(lambda v: torch.tanh(v * 2) + v, x, use_reentrant=False)
    return torch.utils.checkpoint.checkpoint(lambda v: torch.maximum(torch.neg(v), v.sin()) * 3, y, use_reentrant=False)


def test_a_dynamo_graph_with_activation_checkpoints_is_minified_to_the_op_in_its_block(out):
    """Dynamo puts each ``torch.utils.checkpoint`` body in a subgraph: such a graph was refused
    ("calls subgraphs"), so ``diagnose`` on a checkpointed training model ended without a repro.
    Inlined, it shrinks to the faulty op, found by the hint ``wrap_body_1.neg``, the name the
    capture's line map gives it."""
    graphs = []
    torch._dynamo.reset()
    x = torch.randn(4, 8, requires_grad=True)
    torch.compile(_checkpointed_blocks, backend=lambda gm, example: (graphs.append(gm), gm.forward)[1])(x)
    (graph,) = graphs
    with ib.faults.doubling_neg():
        result = keep(minify(graph, [x.detach()], check=AccuracyFailure(), hint_nodes=["wrap_body_1.neg"],
                             repro_dir=out, echo=lambda s: None))
    assert OPS(result) == [str(torch.neg)] and result.reproduced, OPS(result)
    assert "tag_activation_checkpoint" in [str(n.target) for n in graph.graph.nodes]  # the caller's graph as it was
