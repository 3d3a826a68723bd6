"""Fault injection: scalar and vectorized lowerings patched, restored, cache-proof, inherited by children."""

from __future__ import annotations

import json
import os

import pytest
import torch
from conftest import compile_and_run, foo1, run_python, tutorial_inputs

import instrumented_backend as ib
from instrumented_backend.seams.aot.caches import cache_counters


def test_unknown_op_and_bad_template_are_named():
    with pytest.raises(ib.faults.UnknownOpError, match="'negg'.*did you mean 'neg'"):
        ib.faults.bad_lowering("negg", "-{x}")
    with pytest.raises(ValueError, match=r"uses 'x'.*\['a', 'b'\]"):
        ib.faults.bad_lowering("maximum", "{x}")
    assert {"neg", "maximum", "exp", "add"} <= set(ib.faults.patchable_ops())


def test_an_op_inductor_decomposes_is_refused_with_the_op_to_name_instead():
    """``--fault 'softplus*1.01'`` said only "no C++ lowering named 'softplus'": Inductor decomposes
    it before lowering, so the error names what it becomes, and the suggested op is the one the
    compiled code then computes (the fault reaches its kernel)."""
    with pytest.raises(ib.faults.UnknownOpError) as refused:
        ib.faults.from_spec("softplus*1.01")
    message = str(refused.value)
    assert "Inductor decomposes aten.softplus before it lowers anything, into exp, log1p" in message, message
    assert "'log1p', say" in message and "did you mean" not in message, message
    for op, suggested in (("gelu", "erf"), ("aten.silu", "exp"), ("layer_norm", "rsqrt"), ("log_softmax", "log")):
        with pytest.raises(ib.faults.UnknownOpError, match=f"'{suggested}', say"):
            ib.faults.from_spec(f"{op}*1.01")
    with pytest.raises(ib.faults.UnknownOpError) as refused:  # a reduction decomposes into itself: no hint
        ib.faults.from_spec("var*1.01")
    assert "decomposes" not in str(refused.value), refused.value
    fault = ib.faults.from_spec("log1p*1.01")
    x = torch.linspace(-3, 3, 64)
    with fault:
        out = torch.compile(torch.nn.functional.softplus, backend="instrumented")(x)
    assert ib.faults.lowering_uses(fault.fault) > 0
    torch.testing.assert_close(out, 1.01 * torch.nn.functional.softplus(x))


def test_a_fault_without_a_vectorized_template_is_refused_with_what_to_write():
    with pytest.raises(ValueError, match=r"(?s)also needs the vectorized lowering.*vectorized='same'.*cpp.simdlen"):
        ib.faults.bad_lowering("neg", "decltype({x})(2 * {x})")
    assert ib.faults.bad_lowering("neg", "-{x}", vectorized="same").fault.vectorized == "-{x}"
    assert ib.faults.bad_lowering("neg", "-{x}", config={"cpp.simdlen": 1}).fault.vectorized is None


@pytest.mark.parametrize("options", [None, {"cpp.simdlen": 1}], ids=["vectorized", "scalar"])
def test_doubling_neg_patches_both_code_generators_and_restores_them(options):
    x = tutorial_inputs(torch.float32)
    _, (before,) = compile_and_run(foo1, *x, backend="inductor", options=options)
    with ib.faults.doubling_neg():
        result, (code,) = compile_and_run(foo1, *x, backend="inductor", options=options)
    _, (after,) = compile_and_run(foo1, *x, backend="inductor", options=options)
    expected = "decltype(tmp1)(2 * tmp1)" if options else "decltype(tmp1)(tmp1 + tmp1)"
    assert expected in code and expected not in before
    assert torch.equal(result, torch.maximum(x[1], 2 * x[0]))
    assert after == before  # the original lowering is back, byte for byte


def _rms_norm(x: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


def test_a_fault_reaches_a_vectorized_kernel_that_falls_back_to_the_scalar_lowering():
    """In a vectorized kernel, ``rsqrt`` of a row's mean (a scalar operand) falls back to the scalar
    lowering, which Inductor finds by the vectorized function's name: the fault's own function
    must carry the op's name (it was 'lowering', and the compile failed with an AttributeError)."""
    x = torch.randn(8, 64)
    with ib.faults.bad_lowering("rsqrt", "1 / std::sqrt({x}) * decltype({x})(2)",
                                vectorized="{x}.rsqrt() * decltype({x})(2)"):
        result, (code,) = compile_and_run(_rms_norm, x, backend="inductor")
    assert "1 / std::sqrt(" in code and "* decltype(" in code
    torch.testing.assert_close(result, _rms_norm(x) * 2)


@pytest.mark.parametrize("options", [None, {"cpp.simdlen": 1}], ids=["vectorized", "scalar"])
def test_a_scaled_fault_wraps_the_ops_own_lowering_without_its_cpp_being_written(options):
    """``{original}`` is what the replaced lowering writes for the same operands, so ``scaled``
    makes any op wrong by a factor in both code generators (and the scalar fallback of a
    vectorized kernel: rsqrt of a row's mean) without anyone writing that op's C++."""
    x = torch.randn(8, 64)
    _, (before,) = compile_and_run(_rms_norm, x, backend="inductor", options=options)
    with ib.faults.scaled("rsqrt", 2.0) as fault:
        result, (code,) = compile_and_run(_rms_norm, x, backend="inductor", options=options)
    assert fault.name == "rsqrt scaled by 2" and fault.scalar == "{original} * decltype({original})(2.0)"
    torch.testing.assert_close(result, _rms_norm(x) * 2)
    assert "rsqrt" in code and "(2.0)" in code and "(2.0)" not in before
    with ib.faults.doubling_neg(), ib.faults.scaled("neg", 3.0):  # stacked: it wraps the fault below it
        stacked, _ = compile_and_run(_neg_and_exp, x, backend="inductor", options=options)
    torch.testing.assert_close(stacked, 6 * x + torch.exp(x))


def _block_lowered_ops(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return torch.sign(x), torch.asinh(x), torch.special.i1(x)


@pytest.mark.parametrize("options", [None, {"cpp.simdlen": 1}], ids=["vectorized", "scalar"])
def test_a_scaled_fault_wraps_an_op_whose_lowering_writes_a_block_of_code(options):
    """``sign`` (both code generators), ``asinh`` (vectorized) and every special function a
    vectorized kernel computes element by element (``i1``) are lowered to a C++ lambda block, not
    an expression: pasted into the one-line template, the block's Python repr was written into the
    kernel ("<class '...BracesBuffer'>([&]()") and the compile failed. Each is now kept whole and
    scaled through a local."""
    x = torch.randn(37, 19)  # a vectorized body and its tail
    with ib.faults.scaled("sign", 2.0), ib.faults.scaled("asinh", 3.0), ib.faults.scaled("i1", 5.0):
        (sign, asinh, i1), (code,) = compile_and_run(_block_lowered_ops, x, backend="inductor", options=options)
    assert "BracesBuffer" not in code and "original_value" in code
    expected = _block_lowered_ops(x)
    torch.testing.assert_close(sign, 2 * expected[0])
    torch.testing.assert_close(asinh, 3 * expected[1])
    torch.testing.assert_close(i1, 5 * expected[2])


def test_a_fault_named_on_the_command_line_is_a_preset_or_op_times_factor():
    assert ib.faults.from_spec("doubling_neg").fault.name == "doubling neg"
    assert ib.faults.from_spec("exp*1.5").fault.name == "exp scaled by 1.5"
    for bad in ("exp", "exp*", "*2", "exp*two", "exp*nan"):
        with pytest.raises(ValueError, match="OP\\*FACTOR|finite"):
            ib.faults.from_spec(bad)
    with pytest.raises(ib.faults.UnknownOpError, match="did you mean 'rsqrt'"):
        ib.faults.from_spec("rsqrtt*2")


def test_fault_never_served_from_or_written_into_the_caches():
    x = tutorial_inputs(torch.float32)
    compile_and_run(foo1, *x, backend="inductor")  # a cache entry for the good build may exist now
    counters = cache_counters()
    with ib.faults.doubling_neg():
        result, _ = compile_and_run(foo1, *x, backend="inductor")
    assert cache_counters() == counters  # neither looked up nor stored
    assert not torch.equal(result, foo1(*x))
    good, _ = compile_and_run(foo1, *x, backend="inductor")
    assert torch.equal(good, foo1(*x))


def test_environment_variable_and_decorator():
    assert ib.faults.ENV_VAR not in os.environ

    @ib.faults.doubling_neg()
    def inside() -> list[dict]:
        return json.loads(os.environ[ib.faults.ENV_VAR])

    (fault,) = inside()
    assert fault["op"] == "neg" and fault["name"] == "doubling neg"
    assert ib.faults.ENV_VAR not in os.environ and ib.faults.active_faults() == []


def test_child_process_inherits_the_fault():
    with ib.faults.doubling_neg():
        env = {ib.faults.ENV_VAR: os.environ[ib.faults.ENV_VAR]}
    code = (
        "import torch, instrumented_backend as ib\n"
        "x = torch.tensor([1.0, -2.0])\n"
        "print(ib.faults.active_faults()[0].name)\n"
        "print(torch.compile(lambda t: torch.neg(t))(x).tolist())\n"
    )
    out = run_python(code, env=env).splitlines()
    assert out[-2:] == ["doubling neg", "[2.0, -4.0]"]


def test_a_fault_entered_without_keeping_its_object_stays_on_until_exited():
    """``ib.faults.doubling_neg().__enter__()`` in a script keeps no reference to the object; its
    collection closed the generator-based context inside it, which silently turned the fault off."""
    import gc
    import weakref

    collected = weakref.ref(ib.faults.doubling_neg(reset_dynamo=False))
    ib.faults.doubling_neg(reset_dynamo=False).__enter__()
    gc.collect()
    try:
        assert collected() is None  # (what a script's temporary is)
        assert [f.name for f in ib.faults.active_faults()] == ["doubling neg"]
        assert ib.faults.ENV_VAR in os.environ
    finally:
        from instrumented_backend.diagnosis.faults import _entered

        while _entered:  # nothing public reaches a fault whose object is gone: the test's own cleanup
            _entered.pop().__exit__(None, None, None)
    assert ib.faults.active_faults() == [] and ib.faults.ENV_VAR not in os.environ


def _neg_and_exp(x: torch.Tensor) -> torch.Tensor:
    return torch.neg(x) + torch.exp(x)


def test_faults_stack_on_other_ops_and_on_the_same_op_innermost_first():
    """With one fault on, a second one (on another op, or on the same op) was refused by the seam
    check ('CppOverrides.neg(x) changed its signature'): the installed lowering had lost the
    parameter names it replaced. So ``faults.reapplied`` with two faults failed too."""
    x = torch.tensor([0.5, -1.0, 2.0])
    with ib.faults.doubling_neg():
        with ib.faults.bad_lowering("exp", "decltype({x})(3 * {x})", vectorized="{x} * decltype({x})(3)"):
            both, _ = compile_and_run(_neg_and_exp, x, backend="inductor")
            assert [f.name or f.op for f in ib.faults.active_faults()] == ["doubling neg", "exp"]
            assert len(json.loads(os.environ[ib.faults.ENV_VAR])) == 2
            with ib.faults.bad_lowering("neg", "decltype({x})(0)", vectorized="{x} * decltype({x})(0)"):
                innermost, _ = compile_and_run(_neg_and_exp, x, backend="inductor")
            outer_again, _ = compile_and_run(_neg_and_exp, x, backend="inductor")
    plain, _ = compile_and_run(_neg_and_exp, x, backend="inductor")
    torch.testing.assert_close(both, 2 * x + 3 * x)
    torch.testing.assert_close(innermost, 3 * x)
    torch.testing.assert_close(outer_again, both)
    torch.testing.assert_close(plain, _neg_and_exp(x))
