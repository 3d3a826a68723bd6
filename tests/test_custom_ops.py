"""Custom ops registered wrongly: a fake implementation that returns the wrong shape, a mutation
the schema does not declare. torch.compile trusts both; the diagnosis checks them and says so."""

from __future__ import annotations

import torch

import instrumented_backend as ib
from instrumented_backend.diagnosis.custom_ops import check_custom_ops


@torch.library.custom_op("ib_registration_tests::rowsum", mutates_args=())
def rowsum(x: torch.Tensor) -> torch.Tensor:
    return x.sum(-1, keepdim=True)


@rowsum.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return x.new_empty(x.shape[:-1])  # wrong: the kept dimension is dropped


@torch.library.custom_op("ib_registration_tests::double_", mutates_args=())
def double_(x: torch.Tensor) -> torch.Tensor:
    x.mul_(2)  # changes its input; the schema says it does not
    return x + 1


@double_.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


@torch.library.custom_op("ib_registration_tests::triple", mutates_args=())
def triple(x: torch.Tensor) -> torch.Tensor:
    return x * 3


@triple.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


def with_wrong_fake(x: torch.Tensor) -> torch.Tensor:
    y = torch.sin(x)
    return (rowsum(y) * 2 + x).relu()


def with_undeclared_mutation(x: torch.Tensor) -> torch.Tensor:
    y = torch.sin(x)
    z = double_(y)
    return torch.cos(y) + triple(z)


def test_each_custom_op_is_checked_on_the_arguments_of_its_first_call():
    checks = check_custom_ops(lambda x: with_wrong_fake(x) + with_undeclared_mutation(x), [torch.randn(8, 16)])
    by_op = {c.op: c for c in checks}
    assert list(by_op) == ["ib_registration_tests::rowsum", "ib_registration_tests::double_",
                           "ib_registration_tests::triple"]  # failures first
    assert list(by_op["ib_registration_tests::rowsum"].failures) == ["test_faketensor"]
    assert "the op itself returns float32 (8, 1)" in by_op["ib_registration_tests::rowsum"].failures["test_faketensor"]
    assert list(by_op["ib_registration_tests::double_"].failures) == ["test_schema"]
    assert "not defined as mutable but was mutated" in by_op["ib_registration_tests::double_"].failures["test_schema"]
    assert by_op["ib_registration_tests::triple"].passed and by_op["ib_registration_tests::triple"].calls == 1
    assert check_custom_ops(torch.sin, [torch.randn(3)]) == []  # PyTorch's own ops are not checked


def test_a_wrong_fake_is_named_beside_the_error_dynamo_raises_and_the_line_it_traced(tmp_path):
    """The compile fails in Dynamo, at the broadcast after the op, with "RuntimeError when making
    fake tensor call": that first line was all the diagnosis said, and its layers blamed Dynamo."""
    result = ib.diagnose(with_wrong_fake, torch.randn(8, 16), out_dir=tmp_path, minify=False, progress=False)
    assert result.verdict == "compile_error"
    assert "Attempting to broadcast" in result.error_detail
    line = with_wrong_fake.__code__.co_firstlineno + 2
    assert result.error_at == f"{__file__}:{line}: return (rowsum(y) * 2 + x).relu()", result.error_at
    [check] = result.custom_ops
    assert check.op == "ib_registration_tests::rowsum" and "test_faketensor" in check.failures
    text = result.render()
    assert "== custom ops it calls, checked with torch.library.opcheck ==" in text
    assert "its fake implementation (register_fake) must return what the op returns" in text
    assert "while tracing: " in text and (tmp_path / "diagnosis.json").read_text().count("test_faketensor") == 1


_WRONG_FAKE_SCRIPT = """\
import torch


@torch.library.custom_op("script_tests::rowsum", mutates_args=())
def rowsum(x: torch.Tensor) -> torch.Tensor:
    return x.sum(-1, keepdim=True)


@rowsum.register_fake
def _(x):
    return x.new_empty(x.shape[:-1])


def f(x):
    return (rowsum(torch.sin(x)) * 2 + x).relu()


torch.compile(f)(torch.randn(8, 16))
"""


def test_the_fake_tensor_tracebacks_of_its_replays_are_left_out(tmp_path):
    """Each compile whose fake raises logs a forty-line traceback: the diagnosis compiles the
    target again at each step, and printed it three times more after the script's own run."""
    import subprocess
    import sys

    script = tmp_path / "wrong_fake.py"
    script.write_text(_WRONG_FAKE_SCRIPT)
    run = subprocess.run([sys.executable, "-m", "instrumented_backend", "diagnose", "--no-minify", "--out",
                          str(tmp_path / "out"), str(script)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stderr[-2000:]
    assert "script_tests::rowsum (1 call): FAIL" in run.stdout
    assert run.stderr.count("failed while attempting to run meta") == 1, run.stderr[-3000:]  # the script's own


def test_an_undeclared_mutation_is_named_where_inductor_alone_would_be_blamed(tmp_path):
    """Functionalization trusts the schema: the compiled code reads the input as the op left it
    unchanged, so the outputs are wrong and the Inductor layer fails with every buffer matching."""
    result = ib.diagnose(with_undeclared_mutation, torch.randn(8, 16), out_dir=tmp_path, minify=False,
                         progress=False)
    assert result.verdict == "inaccurate"
    failing = [c for c in result.custom_ops if not c.passed]
    assert [c.op for c in failing] == ["ib_registration_tests::double_"] and "test_schema" in failing[0].failures
    assert [c.op for c in result.custom_ops if c.passed] == ["ib_registration_tests::triple"]
    assert "custom ops" in [s.name for s in result.steps]
    assert "a custom op registered wrongly is not Inductor's bug" in result.render()


def test_a_bug_without_custom_ops_has_no_custom_op_section(tmp_path):
    with ib.faults.scaled("tanh", 1.05):
        result = ib.diagnose(lambda x: torch.tanh(x) * 2, torch.randn(4), minify=False, progress=False,
                             out_dir=tmp_path)
    assert result.verdict == "inaccurate" and result.custom_ops == []
    assert "custom ops" not in result.render() and "custom ops" not in [s.name for s in result.steps]


def test_the_traced_error_is_read_off_dynamos_message():
    from instrumented_backend.diagnosis.error_origin import traced_error

    message = ("RuntimeError when making fake tensor call\n  Explanation: Dynamo failed to run FX node: got "
               "RuntimeError('bad')\n  Hint: ...\n\nfrom user code:\n   File \"/m/model.py\", line 7, in forward\n"
               "    return self.block(x)\n   File \"/m/block.py\", line 12, in forward\n    y = op(x) + x\n\n"
               "Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace")
    assert traced_error(RuntimeError(message)) == ("Dynamo failed to run FX node: got RuntimeError('bad')",
                                                    "/m/block.py:12: y = op(x) + x")
    assert traced_error(RuntimeError("plain")) == ("", "")
    # a custom op without a fake: Dynamo's innermost frame is the op's __call__, in torch
    torch_frame = f'   File "{torch.__file__.rsplit("/", 1)[0]}/_library/custom_ops.py", line 863, in __call__\n' \
                  "    return self._opoverload(*args, **kwargs)\n"
    message = f"E\nfrom user code:\n   File \"/m/f.py\", line 6, in f\n    return torch.sin(op(x))\n{torch_frame}"
    assert traced_error(RuntimeError(message))[1] == "/m/f.py:6: return torch.sin(op(x))"


_LIBRARY = torch.library.Library("ib_registration_tests_lib", "DEF")  # a TORCH_LIBRARY-style op: no autograd
_LIBRARY.define("halve(Tensor x) -> Tensor")
_LIBRARY.impl("halve", lambda x: x * 0.5, "CPU")
torch.library.register_fake("ib_registration_tests_lib::halve", lambda x: torch.empty_like(x), lib=_LIBRARY)


def test_a_training_step_checks_autograd_only_where_the_op_is_on_the_gradient_path():
    """An op without an autograd kernel fails the check where its input requires grad; used on a
    constant in the same training step it needs none (every floating argument was made to
    require grad before: a false failure)."""
    fc = torch.nn.Linear(16, 16)
    constant = torch.randn(16)

    def on_the_gradient_path(x):
        return torch.ops.ib_registration_tests_lib.halve(fc(x)).sum()

    def on_a_constant(x):
        return (fc(x) + torch.ops.ib_registration_tests_lib.halve(constant)).sum()

    [failing] = check_custom_ops(on_the_gradient_path, [torch.randn(4, 16)], train=True)
    assert list(failing.failures) == ["test_autograd_registration"]
    [passing] = check_custom_ops(on_a_constant, [torch.randn(4, 16)], train=True)
    assert passing.op == "ib_registration_tests_lib::halve" and passing.passed
    assert check_custom_ops(on_the_gradient_path, [torch.randn(4, 16)])[0].passed  # inference: no autograd
