"""A target the user already compiled is judged and profiled as written.

``ib.diagnose(torch.compile(model), x)`` ran Inductor's code on the eager side too: a wrong
lowering was on both sides, matched itself and came back "no bug found"; a profile compared
compiled with compiled. The wrappers come off for the call, and go back on after it.
"""

from __future__ import annotations

import torch

import instrumented_backend as ib
from instrumented_backend.capture.as_written import as_written
from instrumented_backend.seams.dynamo import compile_wrappers


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.fc(x))


class Stack(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first, self.second, self.third = Block(), Block(), Block()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.third(self.second(self.first(x)))


def _every_compile_kind() -> tuple[Stack, list]:
    """A stack with each way of compiling a part of it; and how to see each is back."""
    model = Stack()
    model.first.compile(backend="eager")  # in place
    model.second = torch.compile(model.second, backend="eager")  # a child replaced by its wrapper
    model.third.forward = torch.compile(model.third.forward, backend="eager")  # forward replaced
    second, third_forward = model.second, model.third.forward

    def back() -> bool:
        return (compile_wrappers.compiled_in_place(model.first) is not None and model.second is second
                and model.third.forward is third_forward)

    return model, [back]


def test_every_wrapper_comes_off_inside_and_goes_back_on_after():
    model, (back,) = _every_compile_kind()
    compiled = torch.compile(model, backend="eager")
    with as_written(compiled) as (plain, notes):
        assert plain is model
        assert compile_wrappers.compiled_in_place(model.first) is None
        assert type(model.second) is Block
        assert compile_wrappers.compiled_original(model.third.forward) is None
        assert "compiled with torch.compile (an OptimizedModule)" in notes[0]
        assert "3 part(s) inside it compiled with torch.compile ran as written" in notes[1]
        assert "first, second, third.forward" in notes[1]
        assert [name for name, _ in model.named_parameters()][:2] == ["first.fc.weight", "first.fc.bias"]
    assert back()


def test_wrappers_go_back_on_when_the_call_raises():
    model, (back,) = _every_compile_kind()
    try:
        with as_written(model):
            raise RuntimeError("the diagnosis failed")
    except RuntimeError:
        pass
    assert back()


def test_a_disabled_function_and_a_plain_one_are_left_as_they_are():
    def plain(x):
        return x + 1

    disabled = torch.compiler.disable(plain)
    for target in (plain, disabled):
        with as_written(target) as (same, notes):
            assert same is target and notes == []


def test_a_module_compiled_in_place_is_noted_as_the_target_but_its_call_impl_is_not():
    """``model.compile()`` compiles the bound ``_call_impl``: a script's diagnosis of that target
    says nothing about it (it is what the script compiled); the module handed over says so."""
    model = Block()
    model.compile(backend="eager")
    with as_written(model) as (plain, notes):
        assert plain is model and compile_wrappers.compiled_in_place(model) is None
        assert notes == [notes[0]] and "compiled with torch.compile (module.compile())" in notes[0]
    with as_written(model._call_impl) as (plain, notes):
        assert compile_wrappers.compiled_in_place(model) is None and notes == []
    assert compile_wrappers.compiled_in_place(model) is not None


def test_a_compiled_bound_forward_unwraps_to_its_module():
    model = Block()
    with as_written(torch.compile(model.forward, backend="eager")) as (plain, notes):
        assert plain.__self__ is model and "a compiled function" in notes[0]


def test_a_bug_in_an_already_compiled_model_is_found_not_matched_against_itself(tmp_path):
    """Before: eager ran the compiled stack too, the scaled tanh on both sides: "no bug found"."""
    torch.manual_seed(0)
    model, (back,) = _every_compile_kind()
    compiled = torch.compile(model)
    with ib.faults.scaled("tanh", 1.05):
        result = ib.diagnose(compiled, torch.randn(4, 8), minify=False, progress=False, out_dir=tmp_path)
    assert result.target == "Stack" and result.verdict == "inaccurate", result.render()
    assert result.divergence.culprit == "tanh"
    assert any("compiled with torch.compile (an OptimizedModule)" in note for note in result.as_written)
    assert "note: the target was compiled with torch.compile" in (tmp_path / "diagnosis.txt").read_text()
    assert back()


def test_an_already_compiled_function_is_profiled_against_eager_not_against_itself():
    def gelu_twice(x):
        return torch.nn.functional.gelu(x) * 2

    compiled = torch.compile(gelu_twice)
    x = torch.randn(64, 64)
    compiled(x)
    report = ib.profile(compiled, x, warmup=1, iters=3, active=2, bandwidth=False)
    eager_ops = {op.name for op in report.eager_ops}
    assert "aten::gelu" in eager_ops and "aten::mul" in eager_ops, eager_ops  # eager ran op by op
    assert report.kernels and "a compiled function" in report.render()


@torch.compile(backend="instrumented")
def _compiled_helper(x: torch.Tensor) -> torch.Tensor:
    return torch.neg(x) * 2


def _calls_a_compiled_helper(x: torch.Tensor) -> torch.Tensor:
    return _compiled_helper(x).sin() + 1


def test_an_eager_reference_stays_eager_past_a_compiled_helper_it_calls():
    """A plain function calling a module-level ``@torch.compile`` helper shows no wrapper to take
    off: its eager reference ran the helper's compiled code, bug and all, and the bug matched
    itself ("passed"). The reference runs with every torch.compile eager; the stance goes back."""
    x = torch.randn(8, 8)
    with ib.faults.doubling_neg():
        report = ib.check_accuracy(_calls_a_compiled_helper, x)
    assert report.passed is False, report
    with ib.capture() as session:  # torch.compile compiles again once the reference is done
        torch.compile(lambda t: t.cos() * 3, backend="instrumented")(x)
    assert len(list(session)) == 1


@torch.compile
def _compiled_gelu(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x) * 2


def _calls_compiled_gelu(x: torch.Tensor) -> torch.Tensor:
    return _compiled_gelu(x).sin() + 1


def test_a_profile_times_a_compiled_helper_eagerly_on_its_eager_side():
    """No wrapper shows on ``_calls_compiled_gelu``: its eager side ran the compiled helper, timed
    as eager (the speed-up understated). It runs under the force_eager stance now, entered outside
    each timed call: the helper's own op is an eager op, and nothing compiled ran on that side."""
    report = ib.profile(_calls_compiled_gelu, torch.randn(64, 64), warmup=1, iters=3, active=2, bandwidth=False)
    assert "aten::gelu" in {op.name for op in report.eager_ops}
    assert "eager-ran-compiled" not in [f.kind for f in report.findings]
    assert report.graphs and report.kernels  # the compiled side compiled the helper with the rest
    with ib.capture() as session:  # the stance went back: torch.compile compiles again
        torch.compile(lambda t: t.cos() * 3, backend="instrumented")(torch.randn(4))
    assert len(list(session)) == 1


def test_a_profile_whose_eager_side_ran_a_compiled_graph_says_so():
    """A graph compiled by Inductor and called as a function (``torch._inductor.compile``'s
    result) runs compiled whatever torch.compile's stance: the report says its eager side was
    partly compiled instead of calling that eager."""
    from torch.fx.experimental.proxy_tensor import make_fx

    x = torch.randn(64, 64)
    inner = torch._inductor.compile(make_fx(lambda t: (torch.nn.functional.gelu(t) * 2,))(x), [x])

    def calls_compiled_graph(t: torch.Tensor) -> torch.Tensor:
        return inner(t)[0].sin() + 1

    report = ib.profile(calls_compiled_graph, x, warmup=1, iters=3, active=2, bandwidth=False)
    [finding] = [f for f in report.findings if f.kind == "eager-ran-compiled"]
    assert finding.evidence["compiled_calls"] >= 2 and "called directly" in finding.message
    plain = ib.profile(lambda t: torch.nn.functional.gelu(t).sin(), x, warmup=1, iters=3, active=2, bandwidth=False)
    assert "eager-ran-compiled" not in [f.kind for f in plain.findings]


def _negated_sine(x: torch.Tensor) -> torch.Tensor:
    return torch.neg(x).sin() * 2


def test_an_already_compiled_target_is_compiled_with_the_settings_it_was_given(tmp_path):
    """``ib.diagnose(torch.compile(fn, dynamic=True, options=...), x)`` compiled ``fn`` static and
    with default options (a bug only those settings reach was not looked for): its wrapper's
    settings are read and used, and said; ``profile`` takes its options the same way."""
    import re

    x = torch.randn(64, 64)
    target = torch.compile(_negated_sine, dynamic=True, options={"cpp.simdlen": 1})  # simdlen 1: scalar C++
    with ib.faults.doubling_neg():
        result = ib.diagnose(target, x, minify=False, progress=False, out_dir=tmp_path)
    assert result.found and result.compiled_with == {"dynamic": True, "options": {"cpp.simdlen": 1}}
    assert any("settings its torch.compile was given: dynamic=True" in note for note in result.as_written)
    judged = result.captures[0].output_code
    assert re.search(r"\bk?s\d+\b", judged) and "Vectorized" not in judged  # symbolic sizes, scalar code
    report = ib.profile(torch.compile(_negated_sine, options={"cpp.simdlen": 1}), x, warmup=1, iters=2, active=1,
                        bandwidth=False)
    assert all("Vectorized" not in c.output_code for c in report.captures)
    assert any("options={'cpp.simdlen': 1}" in note for note in report.as_written)


def test_settings_are_read_from_every_kind_of_compiled_target():
    from instrumented_backend.capture.as_written import settings_as_written

    assert settings_as_written(_negated_sine) == ({}, [])
    assert settings_as_written(torch.compile(_negated_sine))[0] == {}
    settings, _ = settings_as_written(torch.compile(_negated_sine, mode="max-autotune-no-cudagraphs"))
    assert settings["options"]["max_autotune"] is True  # the mode, as the options Inductor folds it into
    module = torch.nn.Linear(4, 4)
    module.compile(fullgraph=True)
    assert settings_as_written(module)[0] == {"fullgraph": True}
    assert settings_as_written(torch.compile(torch.nn.Linear(4, 4), dynamic=False))[0] == {"dynamic": False}
    settings, notes = settings_as_written(torch.compile(_negated_sine, backend="aot_eager", dynamic=True,
                                                        options={"not_inductor": 1}))
    assert settings == {"dynamic": True} and "backend='aot_eager'" in notes[-1]  # its options are not Inductor's
    settings, _ = settings_as_written(torch.compile(_negated_sine, backend="instrumented", options={"cpp.simdlen": 1}))
    assert settings == {"options": {"cpp.simdlen": 1}}
    ours = torch.compile(_negated_sine, backend="instrumented", mode="max-autotune-no-cudagraphs")
    assert settings_as_written(ours)[0] == {"mode": "max-autotune-no-cudagraphs"}  # diagnose takes a mode
    settings, _ = settings_as_written(ours, keys=("options",))  # profile and the checks take options only
    assert settings["options"]["max_autotune"] is True
    assert settings_as_written(torch.compiler.disable(_negated_sine)) == ({}, [])  # not a compile


def test_the_layer_and_accuracy_checks_take_the_options_a_compiled_target_was_given():
    """A bug only in scalar kernels (``cpp.simdlen=1``): the compiled target asks for them, and
    check_accuracy, find_failing_layer and find_first_divergence compile it so, as given."""
    x = torch.randn(64, 64)  # 4096 elements: no scalar tail in the vectorized kernels
    scalar_kernels = torch.compile(_negated_sine, options={"cpp.simdlen": 1})
    with ib.faults.bad_lowering("neg", "decltype({x})(2 * {x})", vectorized="{original}"):  # scalar kernels only
        assert ib.check_accuracy(_negated_sine, x).passed  # vectorized kernels: right
        assert not ib.check_accuracy(scalar_kernels, x).passed
        assert ib.find_failing_layer(scalar_kernels, x, top_down=True).first_failing == "inductor"
        assert ib.find_first_divergence(scalar_kernels, x).culprit == "neg"
