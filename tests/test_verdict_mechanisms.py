"""The verdict on kinds of code real bug reports hold and injected faults never reach: memory no
op wrote, a check only eager makes, a call made with grad on, a script that fails on its own.
Each test fails if its mechanism breaks; the real reports themselves are in ``test_real_bugs``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import instrumented_backend as ib
from instrumented_backend.diagnosis.script import diagnose_script


class _GumbelHead(torch.nn.Module):
    """``F.gumbel_softmax`` fills a ``torch.empty_like`` buffer; its outputs are small, so the
    diagnosis compares the buffers inside the graph, the ``empty`` one among them."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(16, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gumbel_softmax(self.proj(x), tau=0.5) * 1e-5


def test_memory_no_op_wrote_is_never_evidence(tmp_path):
    torch.manual_seed(0)  # fallback_random: eager's random numbers, as a comparing program sets it
    result = ib.diagnose(_GumbelHead(), torch.randn(4, 16), out_dir=tmp_path, progress=False, minify=False,
                         compile_kwargs={"options": {"fallback_random": True}})
    assert result.below_tolerance()  # the outputs are judged blind: the buffers inside were compared
    assert result.verdict == "passed", result.render()


def test_an_output_read_from_unwritten_memory_is_nondeterministic_not_a_bug(tmp_path):
    def reads_unwritten(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty(8)
        out[:4] = x[:4] * 2  # the upper half is never written
        return out

    result = ib.diagnose(reads_unwritten, torch.randn(8), out_dir=tmp_path, progress=False, minify=False)
    assert result.verdict == "nondeterministic" and not result.found


def test_eager_raising_where_compiled_returns_is_a_bug_of_the_compiled_program(tmp_path):
    def loss(p: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.binary_cross_entropy(p, y)  # eager checks every p is in [0, 1]

    p, y = torch.rand(8) * 2, torch.rand(8)
    result = ib.diagnose(loss, p, y, out_dir=tmp_path, progress=False, minify=False)
    assert result.verdict == "skipped_error" and result.found
    assert result.graphs and "between 0 and 1" in result.error
    assert "loss" in result.eager_error_at or "binary_cross_entropy" in result.eager_error_at
    text = result.render()
    assert "the compiled code returns a value: it skips a check eager makes" in text
    # both raise: the program's own error, no compiler bug
    both = ib.diagnose(lambda x: x.view(3, 7), torch.randn(4, 4), out_dir=tmp_path / "both", progress=False)
    assert both.verdict == "eager_error" and not both.found
    assert "and so does the compiled code" in both.render()


_GRAD_ON_SCRIPT = """
import torch

class Scale(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(8, 16))

    def forward(self, x):
        return torch.cumprod(x * self.w, dim=1)

model = torch.compile(Scale())
print(model(torch.randn(8, 16)).sum().item())  # grad on, no backward
"""


def test_a_call_made_with_grad_on_is_judged_with_grad_on(tmp_path):
    """AOTAutograd compiles another graph for a call made with grad on (a training forward,
    partitioned) than under no_grad: the judged graph is the one the script ran."""
    script = tmp_path / "grad_on.py"
    script.write_text(_GRAD_ON_SCRIPT)
    said: list[str] = []
    (result,) = diagnose_script(script, out_dir=tmp_path / "out", progress=False, echo=said.append, minify=False)
    assert any("inference: grad was on, but no backward reached its outputs" in line for line in said), said
    assert result.verdict == "passed" and result.graphs == [g for g in result.graphs if g.endswith(" forward")]
    assert "judged as the program called it: grad on" in result.render()
    assert result.judged_in == "grad on"


def _cli(tmp_path: Path, script: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "instrumented_backend", "diagnose", "--no-minify",
                           "--out", str(tmp_path / "out"), str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)


def test_a_script_that_fails_before_compiling_exits_2_and_says_why(tmp_path):
    script = tmp_path / "broken.py"
    script.write_text("import torch\ndef f(x)\n    return x\n")
    proc = _cli(tmp_path, script)
    assert proc.returncode == 2, proc.stderr
    assert "failed before it compiled anything (SyntaxError" in proc.stderr
    assert "exit status" in subprocess.run([sys.executable, "-m", "instrumented_backend", "diagnose", "--help"],
                                           capture_output=True, text=True, timeout=120).stdout


def test_the_scripts_own_error_outside_compiled_code_is_named_as_such(tmp_path):
    script = tmp_path / "own_error.py"
    script.write_text("import torch\nf = torch.compile(lambda x: x.sin() + 1)\nf(torch.randn(8))\n"
                      "raise ValueError('bad config')\n")
    said: list[str] = []
    (result,) = diagnose_script(script, out_dir=tmp_path / "out", progress=False, echo=said.append, minify=False)
    assert result.verdict == "passed"
    assert any("ValueError: bad config at " in line and "own_error.py:4" in line
               and "came from outside the functions it compiled" in line for line in said), said
    assert not any("depends on something on only while the script ran" in line for line in said), said


def test_a_difference_only_from_fused_casts_is_named_with_its_casts_and_the_option(tmp_path):
    """Compiled ``z.to(float16) + x.to(float16)`` rounds once where eager rounds at each cast: 1 ulp
    off eager, within tolerance. The verdict names both casts and their line, and says
    ``emulate_precision_casts`` makes them match (it does: 0 elements differ then)."""
    def f(x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        z = torch.where(c, torch.full_like(x, 0.5), torch.full_like(x, -0.5))
        return z.to(torch.float16) + x.to(torch.float16)

    x = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4) / 10
    c = (torch.arange(24) % 5 == 0).reshape(2, 3, 4)
    result = ib.diagnose(f, x, c, out_dir=tmp_path, progress=False, minify=False)
    assert result.verdict == "precision_casts" and not result.found, result.render()
    designed = result.by_design
    assert designed.option == "emulate_precision_casts" and designed.unequal > 0 and designed.option_unequal == 0
    assert [op.op for op in designed.ops] == ["to float16", "to float16"]  # the explicit casts, not the add
    assert {op.source.code for op in designed.ops} == {"return z.to(torch.float16) + x.to(torch.float16)"}
    assert "emulate_precision_casts=True" in result.render()


def test_a_python_float_eager_rounds_and_compiled_code_keeps_is_a_bug_named_with_its_op_and_line(tmp_path):
    """pytorch#183083's mechanism: eager rounds ``3.14`` to float16 (3.140625) before ``remainder``,
    compiled code computes with 3.14 in float32: 1 ulp off eager, within tolerance, and 6.2e-4 where
    eager gives 0. Compiled with the float rounded, it matches eager; the verdict is a bug, the op,
    both values and the line named. ``mul`` by a float, which eager does not round, is no such bug."""
    def rem(x: torch.Tensor) -> torch.Tensor:
        return torch.remainder(x, 3.14)

    def scaled(x: torch.Tensor) -> torch.Tensor:
        return x * 0.1

    x = torch.tensor([-4.0, -1.5, 0.1, 1.0, 3.140625, 8.0], dtype=torch.float16)
    result = ib.diagnose(rem, x, out_dir=tmp_path / "rem", progress=False, minify=False)
    assert result.verdict == "inaccurate" and result.found, result.render()
    found = result.unrounded_scalars
    assert [(op.op, op.written, op.rounded, op.dtype) for op in found.ops] == [
        ("remainder.Scalar", 3.14, 3.140625, "float16")]
    assert found.ops[0].source.code == "return torch.remainder(x, 3.14)"
    assert found.unequal > 0 and found.rounded_unequal == 0
    assert "3.140625 in float16 as eager rounds it" in result.render()
    other = ib.diagnose(scaled, x, out_dir=tmp_path / "mul", progress=False, minify=False)
    assert other.unrounded_scalars is None and not other.found, other.render()


def test_a_difference_only_in_random_numbers_is_named_with_its_ops_and_the_option(tmp_path):
    def noisy(x: torch.Tensor) -> torch.Tensor:
        return x + torch.rand(x.shape)

    result = ib.diagnose(noisy, torch.randn(64), out_dir=tmp_path, progress=False, minify=False)
    assert result.verdict == "random_draws" and not result.found, result.render()
    designed = result.by_design
    assert designed.option == "fallback_random" and designed.unequal > 0 and designed.option_unequal == 0
    assert [op.op for op in designed.ops] == ["rand.default"]
    assert designed.ops[0].source.code == "return x + torch.rand(x.shape)"


def test_a_real_bug_beside_a_cast_is_not_explained_away(tmp_path):
    """A wrong result that emulating the casts does not fix stays a bug."""
    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.neg(x.to(torch.float16)).float() * 3

    with ib.faults.doubling_neg():
        result = ib.diagnose(f, torch.randn(64), out_dir=tmp_path, progress=False, minify=False)
    assert result.verdict == "inaccurate" and result.found


def test_when_no_node_diverges_alone_the_chain_is_named_with_where_it_starts_and_what_amplifies(tmp_path):
    """``sin`` 2e-5 off (under its tolerance) feeds ``1 / (sin(x) - 0.5)`` near sin(x) = 0.5: no node
    of the kernel diverges compiled alone on eager inputs, the chain does. The culprit is where
    the difference starts (sin), the amplifier is said (reciprocal), never the kernel's last node."""
    def f(x: torch.Tensor) -> torch.Tensor:
        return 1.0 / (torch.sin(x) - 0.5)

    x = torch.full((64,), 0.5236) + torch.linspace(-1e-3, 1e-3, 64)
    with ib.faults.from_spec("sin*1.00002"):
        result = ib.diagnose(f, x, out_dir=tmp_path, progress=False, minify=False)
    divergence = result.divergence
    assert result.verdict == "inaccurate" and not any(diverges for _, diverges in divergence.narrowed)
    assert [node for node, _ in divergence.chain][:3] == ["sin", "sub", "reciprocal"]
    assert divergence.culprit == "sin" and divergence.amplifier == "reciprocal"
    assert divergence.chain[0][1] < 1.0 < divergence.chain[2][1]  # under the tolerance, then far past it
    text = result.render()
    assert "the difference starts at sin and reciprocal amplifies it past the tolerance" in text
    assert "culprit source line:" in text and "return 1.0 / (torch.sin(x) - 0.5)" in text


def test_the_fp64_referee_takes_a_python_float_rounded_as_eager_rounds_it():
    """Eager subtracts ``1.7`` from bfloat16 values as 1.703125; the float64 referee computed with
    1.7 and sided with compiled code that skips that rounding (a margin ranking loss's mask flipped).
    A float32 op's float is left as written."""
    from instrumented_backend.diagnosis.accuracy import fp64_reference

    x = torch.tensor([1.703125, 0.5], dtype=torch.bfloat16)
    assert (x - 1.7)[0].item() == 0.0  # eager: 1.703125 - 1.703125
    assert fp64_reference(lambda v: v - 1.7, [x], seed=0)[0].item() == 0.0
    assert fp64_reference(lambda v: v.float() - 1.7, [x], seed=0)[0].item() == pytest.approx(0.003125)


_MARGIN_SCRIPT = """
import torch

x = torch.tensor([1.703125, 1.703125], dtype=torch.bfloat16, requires_grad=True)
y = torch.zeros(2, dtype=torch.bfloat16, requires_grad=True)
t = torch.ones(2, dtype=torch.bfloat16)

def loss(x, y, t):
    return torch.nn.functional.margin_ranking_loss(x, y, t, margin=1.7)

torch.compile(loss)(x, y, t).backward()
"""


def test_a_gradient_wrong_by_a_skipped_scalar_rounding_names_the_add_and_the_mask_it_flips(tmp_path):
    """pytorch#185517: compiled code adds the margin unrounded, the ``clamp_min`` mask flips and the
    gradients are 0 where eager's are -0.5. Found as a wrong gradient, the chain named."""
    script = tmp_path / "margin.py"
    script.write_text(_MARGIN_SCRIPT)
    (result,) = diagnose_script(script, out_dir=tmp_path / "out", progress=False, echo=lambda line: None,
                                minify=False)
    assert result.verdict == "wrong_gradient", result.render()
    assert result.divergence.culprit == "add" and result.divergence.amplifier == "ge"


def test_a_graph_wrong_before_code_generation_is_said_so_and_its_minimal_repro_names_the_ops(tmp_path):
    """pytorch#189799: a graph pass drops ``v + zeros_like(v)``, so -0.0 stays -0.0 and its
    reciprocal is -inf where eager's is inf. Every buffer matches the post-grad graph run eagerly:
    the command says the graph it was given is wrong, and the minimal repro's ops are named."""
    def f(v: torch.Tensor) -> torch.Tensor:
        v = torch.add(v, torch.zeros_like(v))
        return torch.reciprocal(v)

    result = ib.diagnose(f, torch.tensor([-0.0, -0.0, -0.0]), out_dir=tmp_path, progress=False)
    assert result.verdict == "inaccurate" and not result.divergence.found
    assert "the bug is in that graph, made by a decomposition or a graph pass" in result.divergence.note
    assert result.repro_path and [op.split(" at ")[0] for op in result.repro_ops][-2:] == ["add", "reciprocal"]
    assert "it holds: reciprocal at test_verdict_mechanisms.py:" in result.render()


class _EluReciprocal(torch.nn.Module):
    """pytorch#189803: ``reciprocal(elu + exp(elu))`` is ill-conditioned near elu = -0.567, where
    eager is as far off fp64 as compiled code; Inductor's vectorized ``expm1`` is ``exp(x) - 1``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        elu = F.elu(x, alpha=1.24)
        return torch.reciprocal(elu + torch.exp(elu))


class _ConstantGroupNorm(torch.nn.Module):
    """pytorch#181696: group-normalizing constant values, then ``log(clamp(t, 1e-6))``: eager's
    float32 group norm leaves 3.6e-6 of rounding where fp64 and compiled code give 0."""

    def __init__(self) -> None:
        super().__init__()
        self.bn, self.gn = torch.nn.BatchNorm1d(10).eval(), torch.nn.GroupNorm(10, 10).eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(torch.clamp(self.gn(F.elu(self.bn(x))), min=1e-6))


def test_an_op_less_accurate_than_eagers_is_found_where_an_ill_conditioned_output_hides_it(tmp_path):
    torch.manual_seed(42)
    result = ib.diagnose(_EluReciprocal(), torch.randn(24, 57, 37), out_dir=tmp_path, progress=False, minify=False)
    assert result.verdict == "inaccurate" and result.hidden_by_conditioning, result.render()
    divergence = result.divergence
    assert divergence.culprit == "expm1" and divergence.relative_errors[0] > 1e3 * divergence.relative_errors[1]
    assert any("exp()" in line.text and "ops.expm1" in line.ir_ops for line in divergence.key_lines)


def test_rounding_an_ill_conditioned_program_amplifies_is_its_own_verdict_and_no_bug(tmp_path):
    """Where compiled code is the accurate one and the program amplifies eager's rounding past the
    tolerance (pytorch#181696), the verdict says so, exits as no bug, and says where they part (the
    decomposed group norm, exact on constant values, against eager's kernel) and what amplifies."""
    with torch.no_grad():
        exact = ib.diagnose(_ConstantGroupNorm(), torch.ones(6, 10, 12), out_dir=tmp_path / "gn", progress=False,
                            minify=False)
    assert exact.verdict == "amplified_rounding" and not exact.found, exact.render()
    amplified = exact.amplified
    assert amplified.max_abs_error > 1.0 and amplified.rmse_compiled < 1e-3 < amplified.rmse_eager
    # the user's ops: the decomposed group norm parts from eager's kernel, log amplifies it
    assert amplified.before_codegen and [step.op for step in amplified.chain] == ["group_norm", "clamp", "log"]
    assert amplified.start.op == "group_norm" and amplified.amplifier.op == "log"
    assert amplified.start.used < 1.0 < amplified.amplifier.used
    assert amplified.amplifier.source.code == "return torch.log(torch.clamp(self.gn(F.elu(self.bn(x))), min=1e-6))"
    text = exact.render()
    assert "passed because its error against the fp64 reference" in text
    assert "the difference starts at" in text and "amplifies it past" in text
    assert exact.to_dict()["amplified"]["output"] == "the output"


def test_a_float64_replay_that_loses_an_exact_tie_is_no_referee_for_what_follows(tmp_path):
    """pytorch#186799: the compiled backward of ``atan2(x, y).amin(-1)`` drops the gradient at the
    minimum. The backward compares ``atan2`` recomputed with the saved minimum, equal in eager by
    construction; replayed in float64 from the saved float32 minimum the tie is lost, the replay
    drops the gradient too and sided with compiled code: "no diverging buffer". The buffers after a
    lost tie are judged against eager: the wrong gradient's buffer is found, on the user's line."""
    from instrumented_backend.diagnosis.divergence import _ties_lost

    def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.atan2(x, y).amin(dim=-1)

    torch.manual_seed(0)
    x, y = torch.randn(2, 3).requires_grad_(), torch.randn(2, 3)
    result = ib.diagnose(f, x, y, train=True, out_dir=tmp_path, progress=False, minify=False)
    divergence = result.divergence
    assert result.verdict == "wrong_gradient" and divergence.found, result.render()
    assert "backward" in divergence.graph and divergence.culprit, divergence.render()
    assert "return torch.atan2(x, y).amin(dim=-1)" in result.render()
    # the rule alone: a tie eager holds and the replay loses marks that node and all it reaches
    graph = torch.fx.symbolic_trace(lambda a, b: (torch.ops.aten.eq.Tensor(a, b) * 2.0).sum())
    eq, mul, total = [n for n in graph.graph.nodes if n.op in ("call_function", "call_method")]
    tie, lost = torch.tensor([True, False]), torch.tensor([False, False])
    assert _ties_lost(graph, {eq.name: tie}, {eq.name: lost}) == {eq.name, mul.name, total.name, "output"}
    assert _ties_lost(graph, {eq.name: tie}, {eq.name: tie}) == set()


_SIZES_LOOP = """
import torch

def double(x):
    return x * 2

for n in (3, 5):
    torch.compile(double)(torch.ones(n))
"""


def test_a_function_compiled_anew_for_each_size_is_judged_as_the_script_compiled_it(tmp_path):
    """pytorch#184893's script compiles one function anew for each size: Dynamo keys its cache on
    the code, so from the second size on the script ran a graph with the size dynamic. The second
    target is judged after the first's call, so the graph judged is that recompile (frame 0/1)."""
    script = tmp_path / "sizes.py"
    script.write_text(_SIZES_LOOP)
    said: list[str] = []
    results = diagnose_script(script, out_dir=tmp_path / "out", progress=False, echo=said.append, minify=False)
    assert [r.verdict for r in results] == ["passed", "passed"], said
    assert any("[1] double: judged after the first call of [0], the same code on other shapes" in line
               for line in said), said
    assert not any("0/1" in label for label in results[0].graphs)
    assert any("0/1" in label for label in results[1].graphs), results[1].graphs


def test_a_buffer_a_later_in_place_op_writes_is_no_evidence_and_the_users_op_the_graph_gets_wrong_is_named(tmp_path):
    """pytorch#183986 (torch 2.13.0): Inductor's reinplacing turns ``zeros(1, 8).expand(4, -1).index_add(...)``
    into an ``index_put_`` through the stride-0 view, fused into the kernel that writes the zeros. The
    zeros' buffer holds the index_put's rows by the time it is read: never blamed. Every buffer left
    matches the post-grad graph run eagerly, so that graph is wrong, and the first of the user's ops it
    computes otherwise than eager is named: ``index_add``, with its line."""
    def add_rows(src: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        x = torch.zeros(1, 8).expand(4, -1)
        return x.index_add(0, idx, src)

    result = ib.diagnose(add_rows, torch.ones(3, 8), torch.tensor([0, 1, 0]), out_dir=tmp_path, progress=False,
                         minify=False)
    assert result.verdict == "inaccurate", result.render()
    divergence = result.divergence
    assert not divergence.found and "full" not in [check.node for check in divergence.checked]
    assert (divergence.given_wrong_op, divergence.given_wrong_held_by) == ("index_add", "index_put")
    assert divergence.given_wrong_source.code == "return x.index_add(0, idx, src)"
