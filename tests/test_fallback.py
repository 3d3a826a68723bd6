"""Instrumentation failures degrade to plain Inductor with one warning; Inductor's own errors propagate."""

from __future__ import annotations

import warnings

import pytest
import torch
from conftest import compile_and_run

import instrumented_backend as ib
from instrumented_backend.capture import backend as backend_module
from instrumented_backend.capture.builder import CaptureBuilder
from instrumented_backend.records import CaptureProblem
from instrumented_backend.seams.lowering import ir_format


def _fn(x: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(x) * 3 - 1


X = torch.randn(64)


@pytest.fixture(autouse=True)
def _no_earlier_captures(monkeypatch):
    """Each test starts from an empty process-wide capture list. It keeps the newest 100: a
    compile here past that evicts the oldest capture an earlier module left, and eviction prints
    its graphs and assembles its line map first. With a step patched to fail, that old capture
    warned, or was counted as assembled, inside a compile that must do neither (a run in which
    this module came after 100 captures failed so)."""
    from instrumented_backend.capture import registry

    monkeypatch.setattr(registry, "_all", [])


def _instrumentation_warnings(record) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, ib.InstrumentationWarning)]


def _compile_watching(*inputs_list):
    """Compile and run _fn on each input; return (first result, first code, session, warnings)."""
    with warnings.catch_warnings(record=True) as record, ib.capture() as session:
        warnings.simplefilter("always")
        runs = [compile_and_run(_fn, inputs) for inputs in inputs_list]
    result, (code,) = runs[0]
    return result, code, session, _instrumentation_warnings(record)


@pytest.fixture(scope="module")
def reference():
    result, (code,) = compile_and_run(_fn, X, backend="inductor")
    return result, code


def test_failing_capture_step_keeps_compile_identical_and_warns_once(reference, monkeypatch):
    def broken_format(nodes, memo=None):
        raise RuntimeError("formatter exploded")

    monkeypatch.setattr(ir_format, "format_ir", broken_format)
    # a second compile with the same failure must not warn again
    result, code, session, messages = _compile_watching(X, X * 2)
    assert torch.equal(result, reference[0])
    assert code == reference[1]
    assert len([m for m in messages if "ir_pre_fusion" in m]) == 1, messages
    assert "formatter exploded" in messages[0] and "compiled code is unaffected" in messages[0]
    graph = session[0]
    assert not graph.complete
    assert {p.part for p in graph.problems} == {"ir_pre_fusion", "ir_post_fusion"}
    assert graph.ir_pre_fusion == "" and graph.output_code == code  # everything else still captured


def test_instrumentation_breaking_the_compile_retries_plain_inductor(reference, monkeypatch):
    original_guard = CaptureBuilder.guard

    def guard_that_leaks(self, part, step):
        if part == "ir_pre_fusion":  # record the problem, then let it escape into Inductor
            self.problems.append(CaptureProblem(part=part, error="ValueError: hook leaked"))
            raise ValueError("hook leaked")
        return original_guard(self, part, step)

    monkeypatch.setattr(CaptureBuilder, "guard", guard_that_leaks)
    result, code, session, messages = _compile_watching(X)
    assert torch.equal(result, reference[0])
    assert code == reference[1], "the plain retry must produce Inductor's code"
    assert len(messages) == 1 and "recompiled with plain Inductor" in messages[0] and "ir_pre_fusion" in messages[0]
    assert len(session) == 0, "no capture is claimed for a graph compiled without instrumentation"


def test_failure_starting_the_job_falls_back(reference, monkeypatch):
    def broken_clone(gm):  # the copy of the Dynamo graph, taken as the job starts
        raise MemoryError("no room for a copy")

    monkeypatch.setattr(backend_module, "GraphSnapshot", broken_clone)
    result, code, session, messages = _compile_watching(X)
    assert torch.equal(result, reference[0]) and code == reference[1]
    assert len(messages) == 1 and "no room for a copy" in messages[0]
    assert len(session) == 0


def test_hooks_that_cannot_be_put_in_place_leave_the_compile_untagged_not_broken(reference, monkeypatch):
    from instrumented_backend.seams.codegen import line_tags

    def cannot_hook():
        raise TypeError("IndentedBuffer is read-only here")

    monkeypatch.setattr(line_tags, "tagging", cannot_hook)
    result, code, session, messages = _compile_watching(X)
    assert torch.equal(result, reference[0]) and code == reference[1]
    assert len(messages) == 1 and "IndentedBuffer is read-only here" in messages[0]
    assert len(session) == 1  # captured, its kernel lines without origins


def test_inductor_errors_propagate_and_keep_a_partial_capture(monkeypatch):
    import torch._inductor.compile_fx as compile_fx_module

    def failing_inner(gm, example_inputs, **kwargs):
        raise RuntimeError("inductor says no")

    monkeypatch.setattr(compile_fx_module, "compile_fx_inner", failing_inner)
    torch._dynamo.reset()
    with warnings.catch_warnings(record=True) as record, ib.capture() as session:
        warnings.simplefilter("always")
        with pytest.raises(Exception, match="inductor says no"):
            torch.compile(_fn, backend="instrumented")(X)
    assert not _instrumentation_warnings(record), "a genuine Inductor error is not an instrumentation problem"
    (graph,) = session.graphs
    assert graph.failed and "inductor says no" in graph.compile_error
    assert "class Repro" in graph.aot_graph and "aten.sigmoid" in graph.aot_graph
    assert graph.output_code == "" and graph.kernels == []


@pytest.mark.parametrize(
    "options, message",
    [
        ({"no_such_option": 1}, r"unknown option\(s\) \['no_such_option'\]"),
        ({"dump_dir": 3}, "dump_dir must be a path"),
        ({"max_autotune": "yes"}, "Unexpected type of attr max_autotune"),
    ],
)
def test_bad_options_raise_clear_errors(options, message):
    torch._dynamo.reset()
    with pytest.raises(Exception, match=message):
        torch.compile(_fn, backend="instrumented", options=options)(X)


def test_inductor_options_are_forwarded(monkeypatch):
    inputs = (torch.randn(1, 8), torch.randn(8390, 8))

    def fn(a, b):
        return torch.maximum(b, torch.neg(a))

    options = {"cpp.simdlen": 1}
    ref, (ref_code,) = compile_and_run(fn, *inputs, backend="inductor", options=options)
    with ib.capture() as session:
        out, (code,) = compile_and_run(fn, *inputs, options=options)
    (graph,) = session.graphs
    assert "Vectorized" not in graph.kernels[0].source and "decltype(tmp1)(-tmp1)" in graph.kernels[0].source
    assert graph.config_patches == {"cpp.simdlen": "1"}
    assert torch.equal(out, ref)
    assert code == ref_code


def test_mode_presets_come_from_inductor():
    from instrumented_backend.capture.options import parse_options

    patches = parse_options("max-autotune-no-cudagraphs", None).inductor_patches
    assert patches == {"max_autotune": True, "coordinate_descent_tuning": True}
    assert parse_options(None, {"dump_dir": "x"}).inductor_patches == {}


def test_graphs_are_printed_on_first_read_and_a_late_failure_degrades(reference, monkeypatch):
    """The compile prints no graph Inductor itself does not; printing later may fail softly."""
    printed = []
    original_print = torch.fx.GraphModule.print_readable

    def counting_print(self, *args, **kwargs):
        printed.append(type(self).__name__)
        return original_print(self, *args, **kwargs)

    monkeypatch.setattr(torch.fx.GraphModule, "print_readable", counting_print)
    compile_and_run(_fn, X, backend="inductor", options={"fx_graph_cache": False})  # a cache hit prints nothing
    inductor_prints = len(printed)
    printed.clear()
    result, code, session, messages = _compile_watching(X)
    assert torch.equal(result, reference[0]) and code == reference[1]
    assert len(printed) == inductor_prints, "the instrumented compile printed a graph nobody asked for"

    graph = session[0]
    assert "torch.sigmoid" in graph.dynamo_graph_code and len(printed) == inductor_prints + 1
    assert "aten.sigmoid" in graph.nodes["sigmoid"].code  # its line of the printed post-grad graph
    assert "= torch.ops.aten.sigmoid.default(arg0_1)" in graph.post_grad_graph_code
    assert len(printed) == inductor_prints + 2, "the post-grad graph is printed once, for both reads"
    assert not messages

    with ib.capture() as session:
        compile_and_run(_fn, X)
    graph = session[0]

    def broken_print(*args, **kwargs):
        raise RuntimeError("printer on fire")

    monkeypatch.setattr(graph.post_grad_graph, "print_readable", broken_print)  # fails after the compile
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert graph.post_grad_graph_code == "" and graph.nodes["sigmoid"].code == ""
        assert graph.post_grad_graph_code == ""
    messages = _instrumentation_warnings(record)
    assert len(messages) == 1 and "post_grad_graph" in messages[0] and "printer on fire" in messages[0]
    assert graph.to_dict()["post_grad_graph_code"] == "" and graph.kernels  # the rest is intact
    assert "torch.sigmoid" in graph.dynamo_graph_code


def test_line_maps_are_assembled_on_first_read_and_a_failing_step_degrades(reference, monkeypatch):
    from instrumented_backend.provenance import assemble as mapping

    assembled = []
    original_map_lines = mapping.map_lines

    def counting_map_lines(**inputs):
        assembled.append(inputs["output_code"])
        return original_map_lines(**inputs)

    def broken_attach(kernels, recorder, nodes):
        raise RuntimeError("line map on fire")

    monkeypatch.setattr(mapping, "map_lines", counting_map_lines)
    monkeypatch.setattr(mapping, "attach_lines", broken_attach)
    result, code, session, messages = _compile_watching(X)
    assert torch.equal(result, reference[0]) and code == reference[1]
    assert not assembled and not messages, "nothing is assembled, and nothing warns, inside the compile"

    graph = session[0]
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert [k.kind for k in graph.kernels] == ["cpp"]  # found, though its lines could not be mapped
        assert graph.nodes["sigmoid"].target == "aten.sigmoid.default" and graph.wrapper_lines
        assert [p.part for p in graph.problems] == ["line_map"] and not graph.complete
    assert len(assembled) == 1, "one assembly serves every field"
    late = _instrumentation_warnings(record)
    assert len(late) == 1 and "line map on fire" in late[0] and "line_map" in late[0]


def test_a_failing_first_call_hook_costs_one_warning_not_the_call(reference):
    """The diagnose command's child saves each graph's first call for a crash report; a hook that
    fails there warns once and the call runs and returns what plain Inductor's does."""
    seen: list[tuple[str, int, dict]] = []

    def hook(graph, args, options):
        seen.append((graph.kind, len(args), dict(options)))
        raise OSError("disk full")

    with backend_module.before_calls(hook), warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        result, _ = compile_and_run(_fn, X)
        again, _ = compile_and_run(_fn, X)  # a new compile: the hook runs once per graph's first call
    assert torch.equal(result, reference[0]) and torch.equal(again, reference[0])
    assert [kind for kind, _, _ in seen] == ["inference", "inference"] and seen[0][1] == 1
    messages = _instrumentation_warnings(record)
    assert len(messages) == 1 and "before the first call of graph" in messages[0] and "disk full" in messages[0]
