"""``ib.diagnose`` and ``python -m instrumented_backend diagnose``: from a failing function or script to the
failing layer, the culprit kernel line, the user's source line and a repro that reproduces."""

from __future__ import annotations

import base64
import io
import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from conftest import foo1, tutorial_inputs

import instrumented_backend as ib


def _reproduces(path: str) -> bool:
    proc = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=600)
    return proc.returncode == 1 and "REPRODUCES" in proc.stdout


def test_the_tutorials_doubling_neg_is_traced_to_its_source_line_and_a_repro(tmp_path):
    x1, x2 = tutorial_inputs(torch.float32)
    with ib.faults.doubling_neg():
        result = ib.diagnose(foo1, x1, x2, out_dir=tmp_path)
        assert _reproduces(result.repro_path)  # under the same bug
    assert result.verdict == "inaccurate" and result.found
    assert result.layers.first_failing == "inductor"
    assert result.divergence.culprit == "neg" and result.divergence.kernel.startswith("cpp_fused")
    [line] = result.culprit_lines
    assert line.source.code == "a = torch.neg(x1)" and "ops.neg" in line.ir_ops
    text = (tmp_path / "diagnosis.txt").read_text()
    assert "culprit: neg (aten.neg.default)" in text and "time to root cause" in text
    assert Path(result.reports["html"]).exists() and (tmp_path / "diagnosis.json").exists()
    assert [s.name for s in result.steps] == ["eager", "compile and judge", "layer", "divergence", "minify"]


class _MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.fc1(x))
        return self.fc2(h)


def test_a_backward_only_bug_is_found_from_the_gradient(tmp_path):
    """``where`` appears only in the backward graph (relu's gradient): the forward is right, the
    gradients are not, and the culprit is named by its backward kernel line and forward source line."""
    torch.manual_seed(0)
    model, x = _MLP(), torch.randn(4, 16)
    with ib.faults.bad_lowering("where", "{a} ? {c} : {b}", config={"cpp.simdlen": 1}):  # branches swapped
        result = ib.diagnose(model, x, train=True, out_dir=tmp_path)
        assert _reproduces(result.repro_path)
    assert result.verdict == "wrong_gradient" and result.outputs.passed
    assert result.layers.first_failing == "inductor"
    assert result.divergence.graph.endswith("backward") and result.divergence.culprit == "where"
    [line] = result.culprit_lines
    assert "?" in line.text and line.source.code == "h = torch.relu(self.fc1(x))"
    # Started from the culprit, which fails alone: the backward graph the diagnosis saw fail is
    # not compiled again (3 compiles before: the graph, the culprit, the re-check).
    assert "minified" in result.minifier and "-> 1 nodes" in result.minifier and " 2 compiles" in result.minifier


class _LayerScaled(torch.nn.Module):
    """A residual branch behind a 1e-6 layer scale (ConvNeXt's, CaiT's): what the branch computes
    barely moves the output, but the scale's gradient is the branch's output itself."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(16, 32), torch.nn.Linear(32, 16)
        self.gamma = torch.nn.Parameter(torch.full((16,), 1e-6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.gamma * self.fc2(torch.tanh(self.fc1(x)))


def test_a_wrong_tensor_the_forward_saves_is_found_when_only_gradients_show_it(tmp_path):
    """A broken tanh: the output stays within tolerance (the 1e-6 scale), the gradients do not.
    The backward, replayed on the forward's (wrong) saved tanh, matches eager in every buffer; the
    forward's replay finds the tanh (before, no diverging buffer, no culprit and no repro)."""
    torch.manual_seed(0)
    model, x = _LayerScaled(), torch.randn(8, 16)
    with ib.faults.bad_lowering("tanh", "std::tanh({x}) * decltype({x})(1.5)",
                                vectorized="{x}.tanh() * decltype({x})(1.5)"):
        result = ib.diagnose(model, x, train=True, out_dir=tmp_path)
        assert _reproduces(result.repro_path)
    assert result.verdict == "wrong_gradient" and result.outputs.passed
    assert result.divergence.graph.endswith("forward") and result.divergence.culprit == "tanh", result.divergence
    assert any(line.source.code == "return x + self.gamma * self.fc2(torch.tanh(self.fc1(x)))"
               for line in result.culprit_lines)
    assert "minified" in result.minifier


def _per_sample_grads(w: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    def loss(w: torch.Tensor, xi: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
        return ((xi @ w).tanh() - yi).pow(2).sum()

    return torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0, 0))(w, x, y)


def test_a_dynamo_graph_fx_cannot_retrace_is_minified_from_its_post_aot_graph(tmp_path):
    """``torch.func.vmap(grad(...))``: the Dynamo graph calls functorch's batching functions,
    which refuse FX proxies, so a worker could not load it and the diagnosis had no repro ("it
    gives 'invalid'"). The minifier now says why (UnbuildableGraph) and diagnose minifies the
    post-AOT graph of the same computation instead."""
    torch.manual_seed(0)
    x = (torch.randn(8, 4), torch.randn(5, 8), torch.randn(5, 4))
    with ib.faults.bad_lowering("tanh", "std::tanh({x}) * decltype({x})(1.5)",
                                vectorized="{x}.tanh() * decltype({x})(1.5)"):
        result = ib.diagnose(_per_sample_grads, *x, out_dir=tmp_path)
        assert _reproduces(result.repro_path), result.minifier
    assert result.divergence.culprit == "tanh", result.divergence
    assert "minified the post-AOT graph instead" in result.minifier and "_add_batch_dim" in result.minifier


class _Checkpointed(torch.nn.Module):
    """Two blocks of torch's own modules, each under ``torch.utils.checkpoint``."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList(torch.nn.Sequential(torch.nn.LayerNorm(16), torch.nn.Linear(16, 32),
                                                              torch.nn.GELU(), torch.nn.Linear(32, 16))
                                          for _ in range(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = x + torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
        return torch.tanh(x)


def test_a_checkpointed_training_step_is_traced_to_the_block_and_minified(tmp_path):
    """Activation checkpointing puts each block in a Dynamo subgraph: the diverging buffer was
    blamed on every node of the checkpoint call's line (both blocks, 14 nodes) and the minifier
    refused the graph ("calls subgraphs"), so no repro. Now: the first block's GELU, and a repro."""
    torch.manual_seed(0)
    model, x = _Checkpointed(), torch.randn(2, 4, 16)
    with ib.faults.scaled("erf", 1.01):
        result = ib.diagnose(model, x, train=True, out_dir=tmp_path)
        assert _reproduces(result.repro_path), result.minifier
    assert result.found and result.divergence.culprit.startswith("erf"), result.divergence
    assert "-> 1 nodes" in result.minifier and "post-AOT" not in result.minifier, result.minifier
    [line] = result.culprit_lines
    # both blocks run the one kernel Inductor wrote for their identical code: the gelu of each
    assert line.dynamo_nodes == ["wrap_body_0.input_3", "wrap_body_1.input_3"], line.dynamo_nodes
    diverging = next(check for check in result.divergence.checked if check.node == result.divergence.diverging_node)
    assert diverging.dynamo_node == "wrap_body_0.input_3", diverging  # the buffer: the first block's
    assert "checkpoint(block, x" in line.source.code


def test_the_minifier_gets_the_arguments_of_the_graph_that_diverged_not_of_the_nth_compiled():
    """Dynamo can compile a graph and discard it (a GPT-2 under dynamic=True compiles two graphs
    and runs only the second): the diverging graph's first call is found by its code, not by its
    position among the compiled graphs (the discarded graph's record is empty: no repro from it)."""
    from types import SimpleNamespace

    from instrumented_backend.diagnosis.judged_compile import GraphCall, first_call

    ran = SimpleNamespace(dynamo_graph=SimpleNamespace(code="def forward(self, s0, x): ..."))
    calls = [GraphCall([], [], "def forward(self, x): ..."),
             GraphCall([], [3, "tensor"], "def forward(self, s0, x): ...")]
    assert first_call(ran, calls) == [3, "tensor"]
    assert first_call(SimpleNamespace(dynamo_graph=None), calls) == []


def test_a_compile_error_is_explained_and_minified(tmp_path):
    x1, x2 = tutorial_inputs()
    with ib.faults.cast_dropping_neg():
        result = ib.diagnose(foo1, x1, x2, out_dir=tmp_path)
    assert result.verdict == "compile_error"
    [line] = result.culprit_lines
    assert "max_propagate_nan" in line.text and line.source.code == "b = torch.maximum(x2, a)"
    assert result.layers.first_failing == "inductor" and result.repro_path


def test_a_compile_error_in_a_model_called_with_keywords_names_the_module_as_the_model_does(tmp_path):
    """A model called with keyword arguments (a transformers model's ``pixel_values=``) is judged
    through a wrapper holding it as ``target``: the compile error's lines named its modules
    ``target.1.1 (GELU)``, which the user's model does not have."""
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU()))
    with ib.faults.bad_lowering("erf", "no_such_function({x})", vectorized="no_such_function({x})"):
        result = ib.diagnose(model, kwargs={"input": torch.randn(4, 8)}, out_dir=tmp_path, minify=False,
                             progress=False)
    assert result.verdict == "compile_error", result.render()
    [failing] = [item for item in result.compile_error.lines if item.role == "error"]
    assert failing.module == "1.1 (GELU)", failing
    assert "in module 1.1 (GELU)" in result.render() and "target." not in result.render()
    # its bound forward (``model.forward = torch.compile(model.forward)``, then generate()): named
    # ``__self__.1.1 (GELU)`` after the wrapper's attribute, the bound method's ``__self__`` left in
    with ib.faults.bad_lowering("erf", "no_such_function({x})", vectorized="no_such_function({x})"):
        result = ib.diagnose(model.forward, kwargs={"input": torch.randn(4, 8)}, out_dir=tmp_path, minify=False,
                             progress=False)
    [failing] = [item for item in result.compile_error.lines if item.role == "error"]
    assert failing.module == "1.1 (GELU)" and "__self__" not in result.render(), result.render()


class _GeluMLP(_MLP):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.nn.functional.gelu(self.fc1(x)))


def test_a_backward_only_compile_error_is_found_in_the_training_step_and_minified(tmp_path):
    """GELU's forward is erf, its gradient exp: a broken ``exp`` lowering fails only the backward's
    compile. The layers run the training step (a forward alone passes every layer), and the repro
    is minified from the backward graph (the Dynamo graph, compiled alone, compiles)."""
    torch.manual_seed(0)
    model, x = _GeluMLP(), torch.randn(4, 16)
    with ib.faults.bad_lowering("exp", "std::not_exp({x})", vectorized="{x}.not_exp()"):
        result = ib.diagnose(model, x, train=True, out_dir=tmp_path)
        assert _reproduces(result.repro_path)
    assert result.verdict == "compile_error" and result.graphs[-1].endswith("backward")
    assert result.layers.first_failing == "inductor", result.layers
    # Top down: Inductor's layer fails, the decompositions' passes, so the two below it are not run.
    assert [layer.status for layer in result.layers.layers] == ["skipped", "skipped", "ok", "error"]
    assert any("not_exp" in line.text for line in result.culprit_lines)
    assert "minified" in result.minifier and "exp" in Path(result.repro_path).read_text()


def test_inputs_made_up_for_a_failed_graph_are_valid_indices():
    """A backward graph whose compile failed is minified from inputs made like its placeholders;
    the minifier runs it in eager, so its saved indices (a topk's, an embedding's ids, a router's
    expert choice) must index their dimension. Random integers in [0, 100) did not (a Mixtral
    training step: "index 84 is out of bounds for dimension 0 with size 64")."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from instrumented_backend.diagnosis.judged_compile import inputs_like_placeholders

    def pick(x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        return torch.ops.aten.index_select.default(x, 0, rows) * 2

    graph = make_fx(pick, tracing_mode="fake")(torch.randn(3, 4), torch.tensor([0, 2, 1, 1, 0]))
    inputs = inputs_like_placeholders(graph)
    assert inputs[1].dtype == torch.int64 and inputs[1].shape == (5,)
    assert graph(*inputs).shape == (5, 4)


def _breaks_the_graph(x: torch.Tensor) -> torch.Tensor:
    y = torch.sin(x)
    torch._dynamo.graph_break()
    return y * 2


def test_fullgraph_reaches_every_layer_so_a_graph_break_is_blamed_on_dynamo(tmp_path):
    """Compiled with fullgraph=True, a graph break fails the user's compile; every layer the
    diagnosis compiles uses fullgraph too, so the first failing layer is Dynamo's (eager), not
    none (before, only the first compile used it and every layer passed)."""
    result = ib.diagnose(_breaks_the_graph, torch.randn(8), compile_kwargs={"fullgraph": True}, out_dir=tmp_path,
                         minify=False)
    assert result.found and result.compiled_with == {"fullgraph": True}
    assert result.layers.first_failing == "eager"
    assert all(layer.status == "error" for layer in result.layers.layers)


_calls = {"n": 0}


def _drifts(x: torch.Tensor) -> torch.Tensor:
    _calls["n"] += 1  # each eager call differs from the last
    return x * _calls["n"]


def test_a_nondeterministic_function_is_not_reported_as_a_bug(tmp_path, monkeypatch):
    """Nothing is minified, so the minifier's worker, started as the diagnosis starts, is closed."""
    import importlib

    from minifier.workers import pool

    diagnose_module = importlib.import_module("instrumented_backend.diagnosis.pipeline")

    released = []

    def release(setup):
        released.append((setup, setup is not None and pool.has(setup)))
        release_worker(setup)

    release_worker = diagnose_module.release_worker
    monkeypatch.setattr(diagnose_module, "release_worker", release)
    result = ib.diagnose(_drifts, torch.randn(8), out_dir=tmp_path)
    assert result.verdict == "nondeterministic" and not result.found and not result.repro_path
    ((setup, running),) = released
    assert running and not pool.has(setup)


def _cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "instrumented_backend", "diagnose", *argv], cwd=cwd,
                          capture_output=True, text=True, timeout=900)


_OPTIMIZER_STEP_SCRIPT = """\
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=True)


@torch.compile
def step():
    optimizer.step()


for _ in range(2):
    model(torch.randn(4, 16)).pow(2).mean().backward()
    step()
    optimizer.zero_grad()
print("weights", sum(p.sum().item() for p in model.parameters()))
"""


_RMSPROP_MODEL = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
_RMSPROP = torch.optim.RMSprop(_RMSPROP_MODEL.parameters(), lr=1e-4)


def _rmsprop_step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    loss = torch.nn.functional.mse_loss(_RMSPROP_MODEL(x), y)
    loss.backward()
    _RMSPROP.step()
    _RMSPROP.zero_grad()
    return loss.detach()


def test_a_training_steps_update_is_judged_at_its_own_scale_not_only_the_weights_it_leaves(tmp_path):
    """RMSprop at lr 1e-4 moves each weight by 1e-3: its ``sqrt`` 1% off moves it 1e-5 less, which the
    weights' tolerance (1e-4) cannot see, nor the loss or the gradients: "no bug found" (and a ViT
    step's AdamW the same). The update, the weights after less before, is judged at its own scale,
    and the search judges the weights the optimizer's graph updates in place the same way: the
    culprit is RMSprop's ``sqrt``, at its line in torch. Without the fault the step passes."""
    torch.manual_seed(0)
    x, y = torch.randn(8, 16), torch.randn(8, 4)
    with ib.faults.scaled("sqrt", 1.01):
        result = ib.diagnose(_rmsprop_step, x, y, train=True, out_dir=tmp_path, minify=False, progress=False)
    assert result.verdict == "inaccurate", result.render()
    failing = {o.path for o in result.outputs.failing}
    assert failing == {f"['update']['{name}']" for name, _ in _RMSPROP_MODEL.named_parameters()}, failing
    assert all(o.passed for o in result.outputs.outputs if o.path.startswith("['updated']")), result.render()
    assert result.layers.first_failing == "inductor", result.layers
    assert result.divergence.culprit_target == "aten.sqrt.default", result.render()
    assert "updated wrongly at the update's own scale (eager changed it by at most 0.001" in result.render()
    assert any(line.source is not None and line.source.code == "avg = square_avg.sqrt()"
               for line in result.culprit_lines), result.render()
    weights = [p.detach().clone() for p in _RMSPROP_MODEL.parameters()]
    fine = ib.diagnose(_rmsprop_step, x, y, train=True, out_dir=tmp_path / "fine", minify=False, progress=False)
    assert fine.verdict == "passed", fine.render()
    assert all(torch.equal(a, b) for a, b in zip(weights, _RMSPROP_MODEL.parameters()))  # put back


def _rmsprop_update(optimizer: torch.optim.Optimizer) -> None:
    optimizer.step()


def test_a_compiled_optimizer_steps_update_is_judged_at_its_own_scale(tmp_path):
    """``torch.compile`` around ``optimizer.step()`` alone is judged by the tensors it updates in
    place: at lr 1e-4 a 1%-wrong ``sqrt`` passed the weights' tolerance there too."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
    optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-4)
    model(torch.randn(4, 16)).pow(2).mean().backward()
    with ib.faults.scaled("sqrt", 1.01):
        result = ib.diagnose(_rmsprop_update, optimizer, out_dir=tmp_path, minify=False, progress=False)
    assert result.verdict == "inaccurate", result.render()
    failing = [o.path for o in result.outputs.failing]
    assert failing and all(path.startswith("['update']") for path in failing), result.render()
    assert result.layers.first_failing == "inductor" and result.divergence.culprit_target == "aten.sqrt.default"


def test_an_update_is_wrong_past_its_scale_and_its_weights_rounding_only():
    from instrumented_backend.diagnosis.optimizer_updates import update_is_wrong

    torch.manual_seed(0)
    before = torch.rand(256) * 4 - 2  # weights up to 2 in size
    step = torch.full((256,), 1e-4)
    fp64 = before.double() - step.double()
    eager = before - step
    assert update_is_wrong(before - 1.01 * step, eager, fp64, before)  # 1% off: 1e-6, under the weights' 1e-4
    # the same update computed in another order rounds some weights one unit in the last place the other way
    other_order = torch.where(torch.arange(256) % 3 == 0, torch.nextafter(eager, torch.full_like(eager, 9)), eager)
    assert not update_is_wrong(other_order, eager, fp64, before)
    assert not update_is_wrong(before - 1.01 * step, eager, None, before)  # no float64 run: not judged


def test_the_command_judges_a_compiled_optimizer_step_by_the_weights_it_updates(tmp_path):
    """``torch.compile`` around ``optimizer.step()`` returns None and updates every weight and
    moment in place: judged by its outputs, a wrong update passed; and replayed after the script's
    ``zero_grad()`` it had no gradient to apply ("graphs checked: none"). Now the step runs from
    the state of its first call, and the weights it updates are judged like outputs."""
    script = tmp_path / "train.py"
    script.write_text(_OPTIMIZER_STEP_SCRIPT)
    proc = _cli("--fault", "reciprocal*1.1", str(script), cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "the compiled outputs are wrong" in proc.stdout, proc.stdout
    assert "judged with the 16 tensor(s) the call updates in place" in proc.stdout, proc.stdout
    failing = re.findall(r"\['updated'\]\['(.+?)'\]\s+float32\s+\S+\s+FAIL", proc.stdout)
    assert failing == ["model.0.weight", "model.0.bias", "model.2.weight", "model.2.bias"], proc.stdout
    assert "first failing layer: inductor" in proc.stdout
    # The search replays the step's post-grad graph (reinplaced foreach ops: ``_foreach_add_``
    # returns nothing eagerly, yet its items are read) and reads the weights it updates when it
    # returns: before, "could not be replayed", no culprit and no repro.
    assert re.search(r"first diverging buffer: copy_\S* ", proc.stdout), proc.stdout
    assert "culprit: _foreach_reciprocal (aten._foreach_reciprocal.default)" in proc.stdout, proc.stdout
    assert "(4 lines alike)" in proc.stdout  # the foreach kernel's line for each of the 4 weights, shown once
    assert re.search(r"culprit source line: \S+/torch/optim/adam\.py:\d+: torch\._foreach_reciprocal_",
                     proc.stdout), proc.stdout
    # the minifier returns the updates the Dynamo graph makes to the optimizer's state
    repro = re.search(r"run it: python (\S+)", proc.stdout)
    assert repro and "minified: " in proc.stdout and " -> 2 nodes" in proc.stdout, proc.stdout
    source = (tmp_path / repro.group(1)).read_text()
    assert "torch._foreach_reciprocal(" in source and "_foreach_addcdiv" not in source, source
    rerun = subprocess.run([sys.executable, repro.group(1)], cwd=tmp_path, capture_output=True, text=True,
                           timeout=300)
    assert rerun.returncode == 1 and "REPRODUCES" in rerun.stdout, rerun.stdout + rerun.stderr
    fine = _cli(str(script), cwd=tmp_path)  # no fault: the same step, judged the same way, passes
    assert fine.returncode == 0 and "no bug found" in fine.stdout, fine.stdout + fine.stderr
    assert "judged with the 16 tensor(s)" in fine.stdout


def test_the_command_on_a_script_without_a_bug_exits_zero_and_minifies_nothing(tmp_path):
    script = tmp_path / "fine.py"
    script.write_text("import torch\nstep = torch.compile(lambda x: torch.tanh(x) * 2 + 1)\n"
                      "print(step(torch.randn(16, 16)).shape)\n")
    proc = _cli("--tol", "1e-3", str(script), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no bug found" in proc.stdout and "checked 1 compiled target(s), graphs: #" in proc.stdout
    # how close it came, at the tolerance asked (or, were compiled and eager equal, that they are)
    assert re.search(r"^closest to failing: (the output \(float32\), max \|err\| \S+: \S+% of the tolerance "
                     r"\(atol = rtol = 0\.001\)|none; every output and gradient judged equals eager's exactly)",
                     proc.stdout, re.MULTILINE), proc.stdout
    assert not (tmp_path / "diagnosis" / "repros").exists()
    # no root cause was found, so none is timed: the time is the verdict's
    assert "time to a verdict: " in proc.stdout and "time to root cause" not in proc.stdout, proc.stdout
    assert "[diagnose" not in proc.stderr  # quiet when piped
    refused = _cli("--tol", "0", str(script), cwd=tmp_path)
    assert refused.returncode == 2 and "--tol: must be a positive number, got 0" in refused.stderr, refused.stderr
    refused = _cli("--minify-seconds", "-5", str(script), cwd=tmp_path)
    assert refused.returncode == 2 and "--minify-seconds: must be a positive number, got -5" in refused.stderr


_SEGFAULTING_SCRIPT = """\
import torch
import instrumented_backend as ib


def decoder(z):
    h = z * 2.0
    return torch.tanh(h) + 1.0


null_tanh = ib.faults.bad_lowering("tanh", "decltype({x})(*(volatile int*)nullptr)",
                                   vectorized="decltype({x})(*(volatile int*)nullptr)")
with null_tanh:
    print(torch.compile(decoder)(torch.randn(8, 16)).sum())
"""


def test_the_command_names_the_kernel_and_lines_of_compiled_code_that_segfaults(tmp_path):
    """The script's compiled kernel dereferences null: the command died with it (exit -11, no
    word). The diagnosis now runs in a forked child; the fault traceback's line of the output
    code is mapped to the kernel it launches and the source lines of that kernel's nodes. The
    child saved the graph's first call before it ran: the crash is minified from it, in workers,
    to the one node that crashes (the kernel fused three), its source line and a repro (re-checked
    by the minifier before it is named)."""
    script = tmp_path / "segfaults.py"
    script.write_text(_SEGFAULTING_SCRIPT)
    proc = _cli("--out", "out", str(script), cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "the compiled code killed the process (SIGSEGV)" in proc.stdout, proc.stdout + proc.stderr
    assert re.search(r"kernel: cpp_fused\w*tanh\w* \(graph #\d+ 0/0 inference\)", proc.stdout), proc.stdout
    assert "segfaults.py:7: return torch.tanh(h) + 1.0" in proc.stdout, proc.stdout
    runnable = re.search(r"the graph, runnable: (\S+)", proc.stdout)[1]
    assert (tmp_path / runnable).is_file() and (tmp_path / "out" / "crash" / "fault_traceback.txt").is_file()
    assert re.search(r"minified: 3 -> 1 nodes", proc.stdout), proc.stdout + proc.stderr
    assert "culprit: tanh (the smallest graph that still crashes)" in proc.stdout, proc.stdout
    culprit_line = r"culprit source line: \S*segfaults\.py:7: return torch\.tanh\(h\) \+ 1\.0"
    assert re.search(culprit_line, proc.stdout), proc.stdout
    repro = re.search(r"run it: python (\S+)", proc.stdout)[1]
    assert "torch.ops.aten.tanh.default" in (tmp_path / repro).read_text()
    saved = json.loads((tmp_path / "out" / "diagnosis.json").read_text())  # what a CI gate reads
    assert saved["verdict"] == "crashed" and saved["found"] and saved["culprit_nodes"] == ["tanh"], saved
    assert saved["repro_path"] == repro and saved["culprit_sources"][0].endswith("return torch.tanh(h) + 1.0")
    assert "the compiled code killed the process (SIGSEGV)" in (tmp_path / "out" / "diagnosis.txt").read_text()


_LATER_CALL_SEGFAULT_SCRIPT = """\
import torch
import instrumented_backend as ib


def decoder(z):
    h = z * 2.0
    return torch.tanh(h) + 1.0


# tanh dereferences null on a value over 100, in the scalar and the vectorized kernel
scalar = "({x} > 100 ? decltype({x})(*(volatile int*)nullptr) : std::tanh({x}))"
none_over = "(({x} > decltype({x})(100)).zero_mask() == (1 << decltype({x})::size()) - 1)"
vectorized = ("({x}.tanh() + decltype({x})(0.0f * *(volatile float*)(" + none_over
              + " ? (const void*)\\"zzzz\\" : nullptr)))")
with ib.faults.bad_lowering("tanh", scalar, vectorized=vectorized):
    decode = torch.compile(decoder)
    for step in range(4):
        z = torch.randn(8 + step, 16)  # the second call recompiles the graph with a symbolic size
        if step == 2:
            z[3, 5] = 1000.0
        print(step, decode(z).sum())
"""


def test_the_command_minifies_a_crash_in_a_graphs_later_call_from_that_calls_arguments(tmp_path):
    """The script's second call recompiles its graph with a symbolic size; that graph's second call
    segfaults on one value. The crash was located but not minified ("the graph does not fail ...
    it gives 'pass'": the saved first call does not crash). Each later call's arguments are now
    kept before it runs, and the crash is minified from the call that crashed, whose repro is
    named. Both repros compile the graph with its size symbolic, as it crashed (they compiled it
    static: the repro's graph has no meta values, so sizes inside it were not known symbolic)."""
    script = tmp_path / "later.py"
    script.write_text(_LATER_CALL_SEGFAULT_SCRIPT)
    proc = _cli("--out", "out", str(script), cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "the compiled code killed the process (SIGSEGV)" in proc.stdout and "\n1 tensor(" in proc.stdout
    call_repro = re.search(r"the graph on the arguments of call 2 \(the one that crashed\), as a repro: (\S+)",
                           proc.stdout)
    assert call_repro, proc.stdout + proc.stderr
    call_text = (tmp_path / call_repro[1]).read_text()
    assert "Tensor(shape=(10, 16)" in call_text and "'dynamic': {1: [0]}, 'dynamic_ints': [0]" in call_text
    assert re.search(r"minified: 3 -> 1 nodes", proc.stdout), proc.stdout + proc.stderr
    assert "culprit: tanh (the smallest graph that still crashes)" in proc.stdout, proc.stdout
    assert re.search(r"culprit source line: \S*later\.py:7: return torch\.tanh\(h\) \+ 1\.0", proc.stdout)
    repro = (tmp_path / re.search(r"run it: python (\S+)", proc.stdout)[1]).read_text()
    inputs = [torch.load(io.BytesIO(base64.b64decode(line.split("'")[1])), weights_only=True)["inputs"]
              for line in repro.splitlines() if line.startswith("DATA = '")]
    assert inputs and any(float(t.max()) > 100 for t in inputs[0] if isinstance(t, torch.Tensor))
    assert "'dynamic': {0: [0]}" in repro, repro[:2000]  # the culprit's input keeps its symbolic size


def test_a_later_call_is_kept_over_the_one_before_and_never_left_stale(tmp_path, monkeypatch):
    """Only a graph's latest later call is kept (a crash is in the last call it made); one over
    the size limit, or with an argument the snapshot cannot hold, leaves a note in place of the
    call before, which must not be minified as if it had crashed."""
    from types import SimpleNamespace

    from instrumented_backend.diagnosis import crash
    from instrumented_backend.diagnosis.call_snapshot import read_snapshot

    monkeypatch.setattr(crash, "SNAPSHOT_LIMIT", 1 << 10)
    monkeypatch.setattr(crash, "_snapshots", {})
    graph = SimpleNamespace(post_grad_graph=object(), index=0, compile_id="0/0", kind="inference")
    kept, note = tmp_path / "later_calls" / "000_0-0_inference", tmp_path / "later_calls" / "000_0-0_inference.skipped"
    crash.save_later_call(graph, 2, [torch.ones(4), 3], tmp_path)
    number, args = read_snapshot(kept)
    assert number == 2 and torch.equal(args[0], torch.ones(4)) and args[1] == 3
    crash.save_later_call(graph, 3, [torch.ones(1024)], tmp_path)
    assert read_snapshot(kept) is None and "its call 3 hold" in note.read_text()
    assert crash._crashing_call_repro(tmp_path, "000_0-0_inference")[1:] == (None, note.read_text().strip())
    crash.save_later_call(graph, 4, [torch.zeros(2)], tmp_path)
    assert not note.exists() and read_snapshot(kept)[0] == 4
    crash.save_later_call(graph, 5, [torch.zeros(2), object()], tmp_path)
    assert read_snapshot(kept) is None and "its call 5 could not be kept: argument 1 is a object" in note.read_text()
    crash.save_later_call(graph, 6, [torch.zeros(2)], tmp_path)
    assert crash._crashing_call_repro(tmp_path, "000_0-0_inference")[1] is None  # no first call: nothing to copy
    from instrumented_backend.diagnosis.call_snapshot import CallSnapshot

    def disk_full(self, number, args):
        raise OSError("No space left on device")

    monkeypatch.setattr(CallSnapshot, "write", disk_full)  # call 6 kept, call 7 fails half-way
    crash.save_later_call(graph, 7, [torch.zeros(2)], tmp_path)
    assert read_snapshot(kept) is None and "call 7 could not be kept: OSError: No space" in note.read_text()


_SCOPED_FAULT_SCRIPT = """\
import torch
import instrumented_backend as ib


def scaled(x):
    return torch.neg(x) * 2.0 + torch.relu(x)


with ib.faults.doubling_neg(), torch._inductor.config.patch(epilogue_fusion=False):
    compiled = torch.compile(scaled)
    for _ in range(2):
        print(compiled(torch.randn(4, 8)).sum())
"""


def test_a_fault_and_config_set_around_the_scripts_loop_are_on_again_for_its_diagnosis(tmp_path):
    """The script compiles and runs inside ``with`` blocks that inject a fault and patch Inductor's
    config; the diagnosis runs after the script, with both off: "no bug found". What was in effect
    at the target's first call is now on again for its diagnosis, and said so."""
    from instrumented_backend.diagnosis.script import diagnose_script

    script = tmp_path / "scoped.py"
    script.write_text(_SCOPED_FAULT_SCRIPT)
    said: list[str] = []
    results = diagnose_script(script, out_dir=tmp_path / "out", minify=False, progress=False, echo=said.append)
    assert len(results) == 1 and results[0].verdict == "inaccurate", said
    assert results[0].reapplied == ["fault doubling neg", "Inductor config epilogue_fusion=False"]
    assert "re-applied as at its first call (off when the script ended): fault doubling neg; Inductor config " \
           "epilogue_fusion=False" in (tmp_path / "out" / "diagnosis.txt").read_text()
    assert any("on again for its diagnosis: fault doubling neg" in line for line in said), said
    assert results[0].divergence.culprit == "neg", results[0].render()
    assert not ib.faults.active_faults()  # off again after the diagnosis


def test_what_was_on_at_a_first_call_is_on_in_the_block_and_off_after():
    """Only what differs is re-applied: a fault still in effect is not entered twice, a config
    value unchanged since is not patched."""
    from types import SimpleNamespace

    import torch._inductor.config as inductor_config

    from instrumented_backend.diagnosis.script import _as_at_first_call

    shifted_exp = ib.faults.bad_lowering("exp", "std::exp({x} + 1)", vectorized="({x} + decltype({x})(1)).exp()",
                                         name="shifted exp")
    first_call = SimpleNamespace(faults=[ib.faults.doubling_neg().fault, shifted_exp.fault],
                                 inductor_config={"epilogue_fusion": False, "max_fusion_size": 64},
                                 autocast=[("cpu", torch.bfloat16)])
    with shifted_exp:
        with _as_at_first_call(first_call) as restored:
            assert restored == ["fault doubling neg", "torch.autocast('cpu', dtype=torch.bfloat16)",
                                "Inductor config epilogue_fusion=False"]
            assert [f.name for f in ib.faults.active_faults()] == ["shifted exp", "doubling neg"]
            assert inductor_config.epilogue_fusion is False
            assert torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16
        assert [f.name for f in ib.faults.active_faults()] == ["shifted exp"]
    assert inductor_config.epilogue_fusion is True and not ib.faults.active_faults()
    assert not torch.is_autocast_enabled("cpu")
    with torch.autocast("cpu", dtype=torch.bfloat16), _as_at_first_call(first_call) as restored:
        assert "torch.autocast('cpu', dtype=torch.bfloat16)" not in restored  # on already, as it was


_OUT_OF_RANGE_SCRIPT = """\
import torch

torch.set_num_threads(2)  # the lookup kernel runs on OpenMP threads: its bounds check aborts there
table = torch.randn(1000, 64)


def lookup(ids):
    return torch.nn.functional.embedding(ids, table).relu().sum(-1)


compiled = torch.compile(lookup)
for step in range(3):
    ids = torch.randint(0, 1000, ({rows}, {cols}))
    if step == 2:
        ids[{rows} - 1, 7] = 1200  # past the table
    print(step, compiled(ids).sum().item())
"""


def test_an_index_out_of_range_in_a_later_call_is_the_scripts_error_raised_or_aborted(tmp_path):
    """The third call looks up an id past the table. On a small batch the kernel's bounds check
    raises: the diagnosis replayed the first call ("no bug found", "depends on something on only
    while the script ran"); it now replays the call that raised, where eager raises too, and names
    the line. On a large batch the check fires on an OpenMP thread and aborts the process: the
    crash's repro on that call's arguments ran into the minifier's eager run ("IndexError: index
    out of range in self" as the reason it was not minified); it now says eager raises there too,
    at which node and line."""
    from instrumented_backend.diagnosis.script import diagnose_script

    small = tmp_path / "small.py"
    small.write_text(_OUT_OF_RANGE_SCRIPT.format(rows=1, cols=8))
    said: list[str] = []
    threads = torch.get_num_threads()
    try:  # in this process: the script's set_num_threads must not outlive it
        results = diagnose_script(small, out_dir=tmp_path / "small", progress=False, echo=said.append)
    finally:
        torch.set_num_threads(threads)
    assert any("lookup (1 args, inference, its call 3: the first that raised)" in line for line in said), said
    assert len(results) == 1 and not results[0].found and results[0].verdict == "eager_error", said
    text = results[0].render()
    assert "diagnose lookup: eager itself raises on these arguments" in text
    assert "replayed its call 3, the first that raised in the script" in text
    assert "error: IndexError: index out of range in self" in text
    assert re.search(r"raised at: \S*small\.py:8: return torch\.nn\.functional\.embedding\(ids, table\)", text)
    assert text in (tmp_path / "small" / "diagnosis.txt").read_text()

    large = tmp_path / "large.py"
    large.write_text(_OUT_OF_RANGE_SCRIPT.format(rows=64, cols=256))
    proc = _cli("--out", "large", str(large), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # the program's error, as the small batch's verdict
    assert "the compiled code killed the process (SIGABRT)" in proc.stdout, proc.stdout + proc.stderr
    saved = json.loads((tmp_path / "large" / "diagnosis.json").read_text())
    assert saved["verdict"] == "eager_error" and not saved["found"], saved
    assert "the graph on the arguments of call 3 (the one that crashed)" in proc.stdout
    assert re.search(r"eager raises on the same arguments: IndexError: index out of range in self "
                     r"\(at embedding: aten\.embedding\.default\)", proc.stdout), proc.stdout
    assert re.search(r"culprit source line: \S*large\.py:8: return torch\.nn\.functional\.embedding", proc.stdout)
    assert "not minified" not in proc.stdout


def test_a_crash_repro_is_run_eagerly_to_tell_the_programs_error_from_the_compilers(tmp_path):
    """The node where eager raises on a repro's arguments, with the error; None when eager runs
    it through (then the crash is the compiler's to minify)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from instrumented_backend.diagnosis.crash import _eager_failure, _loaded
    from minifier.context import CarriedContext
    from minifier.repro import write_repro

    def lookup(table, ids):
        return (torch.ops.aten.embedding.default(table, ids).relu(),)

    table = torch.randn(10, 4)
    gm = make_fx(lookup)(table, torch.tensor([1, 2]))
    paths = [write_repro(gm, [table, ids], spec={"level": "aten"}, pattern=None, context=CarriedContext(),
                         expected={"kind": "crash", "signature": "signal SIGABRT", "failing": []},
                         path=tmp_path / f"{name}.py")
             for name, ids in (("good", torch.tensor([1, 9])), ("bad", torch.tensor([1, 12])))]
    assert _eager_failure(*_loaded(paths[0])) is None
    node, error = _eager_failure(*_loaded(paths[1]))
    assert node.startswith("embedding") and error == "IndexError: index out of range in self"


_RMS_NORM_SCRIPT = """\
import torch


class RMSNorm(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(width))

    def forward(self, x):
        scale = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        return x * scale * self.weight


norm = torch.compile(RMSNorm(64))
with torch.no_grad():
    print(norm(torch.randn(8, 64)).sum())
"""


def test_the_command_injects_any_op_scaled_to_try_itself_on_a_users_model(tmp_path):
    """``--fault OP*FACTOR``: a bug in an op the tutorial never had, on a model of the user's, with
    no C++ written (beside another fault, in an op the model lacks: every one is injected); a
    fault it cannot read is refused with what it accepts, wherever it is on the line."""
    script = tmp_path / "rms_norm.py"
    script.write_text(_RMS_NORM_SCRIPT)
    proc = _cli("--fault", "doubling_neg", "--fault", "rsqrt*1.01", "--no-minify", str(script), cwd=tmp_path)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    assert "first failing layer: inductor" in output and "culprit: rsqrt" in output
    assert "scale = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)" in output
    refused = _cli("--fault", "rsqrt*1.01", "--fault", "rsqrtt*1.01", str(script), cwd=tmp_path)
    assert refused.returncode == 2 and "did you mean 'rsqrt'" in refused.stderr, refused.stdout + refused.stderr


_KEYWORD_SCRIPT = """\
import torch


class Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.linspace(0.5, 1.5, 8))

    def forward(self, x, *, floor, mode="neg"):
        a = torch.neg(x) if mode == "neg" else x
        return torch.maximum(a * self.w, floor)


step = torch.compile(Scaled())
with torch.no_grad():
    print(step(x=torch.randn(4, 8), floor=torch.zeros(8), mode="neg").shape)
"""


def test_the_command_replays_keyword_arguments(tmp_path):
    """Models are mostly called by keyword (``model(input_ids=ids)``): tensors passed by keyword
    are inputs like positional ones, and the other keyword arguments are passed as given."""
    script = tmp_path / "keywords.py"
    script.write_text(_KEYWORD_SCRIPT)
    proc = _cli("--fault", "doubling_neg", "--no-minify", str(script), cwd=tmp_path)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    assert "keyword arguments x, floor" in output and "not replayed" not in output
    assert "culprit: neg" in output and 'a = torch.neg(x) if mode == "neg" else x' in output
    # the model's own module, not the keyword call's wrapper holding it ("in module target (Scaled)")
    assert "module target" not in output, output


def test_the_command_compiles_as_the_script_did(tmp_path):
    """A bug only in the scalar kernels the script asked for (``cpp.simdlen=1``): the diagnosis
    compiles with the script's options in every step, else it would find nothing."""
    import os

    script = tmp_path / "scalar.py"
    script.write_text("import torch\n\n\ndef step(x):\n    return torch.tanh(x) * 2 + 1\n\n\n"
                      "compiled = torch.compile(step, options={'cpp.simdlen': 1}, dynamic=False)\n"
                      "print(compiled(torch.randn(64, 32)).sum())\n")
    with ib.faults.bad_lowering("tanh", "std::tanh({x}) * decltype({x})(1.5)", vectorized="{x}.tanh()"):
        fault_env = os.environ[ib.faults.ENV_VAR]
    proc = subprocess.run([sys.executable, "-m", "instrumented_backend", "diagnose", "--no-minify", str(script)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=900,
                          env={**os.environ, ib.faults.ENV_VAR: fault_env})
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    assert "every step compiles as torch.compile(..., dynamic=False, options={'cpp.simdlen': 1}) did" in output
    assert "first failing layer: inductor" in output and "culprit: tanh" in output
    assert "std::tanh(tmp0) * decltype(tmp0)(1.5)" in output  # the scalar kernel line


def test_keyword_call_makes_tensor_keywords_inputs_and_keeps_the_parameters():
    from instrumented_backend.diagnosis.keyword_call import keyword_call

    module = torch.nn.Linear(3, 2)
    fn, inputs = keyword_call(module, (), {"input": torch.ones(1, 3)})
    assert len(inputs) == 1 and list(fn.parameters()) == list(module.parameters())
    torch.testing.assert_close(fn(*inputs), module(torch.ones(1, 3)))
    from instrumented_backend.diagnosis.effects import parameter_labels
    from instrumented_backend.diagnosis.step_state import StepState

    # gradients are named as the model names its parameters, not through the wrapper ('target.weight')
    assert parameter_labels(StepState.of(fn)) == ["weight", "bias"]

    def scaled(x, *, by, times=1):
        return x * by * times

    fn, inputs = keyword_call(scaled, (torch.ones(2),), {"by": torch.full((2,), 3.0), "times": 2})
    assert len(inputs) == 2 and torch.equal(fn(*inputs), torch.full((2,), 6.0))
    with pytest.raises(TypeError, match="kwargs must be a dict"):
        ib.diagnose(scaled, torch.ones(2), kwargs=[("by", 1)])


@pytest.mark.parametrize("verdict", ["passed", "inaccurate"])
def test_a_diagnosis_renders_and_serializes_without_a_compile(verdict):
    result = ib.Diagnosis(target="f", verdict=verdict, graphs=["#0 0/0 inference"])
    assert result.found == (verdict != "passed")
    assert result.to_dict()["verdict"] == verdict and "diagnose f" in result.render()


def test_a_recorded_first_call_is_a_copy_the_script_cannot_change_later():
    """Tensors inside lists and dicts are copied too, with requires_grad kept: a script that updates
    its tensors in place after the first call (a cache, an optimizer step) replays the first call."""
    from instrumented_backend.capture.redirect import CompiledCall, record_compiled_calls

    calls: list[CompiledCall] = []
    undo = record_compiled_calls(calls)
    try:
        step = torch.compile(lambda xs, scale: (xs[0] + xs[1]) * scale["by"])
        xs, weight = [torch.ones(4), torch.ones(4)], torch.ones(4, requires_grad=True)
        step(xs, {"by": weight})
    finally:
        undo()
    xs[0].add_(5)
    with torch.no_grad():
        weight.mul_(3)
    (call,) = calls
    assert torch.equal(call.args[0][0], torch.ones(4)) and torch.equal(call.args[1]["by"], torch.ones(4))
    assert call.args[1]["by"].requires_grad and not call.args[0][0].requires_grad


def test_a_crash_outside_compiled_code_or_without_a_traceback_is_said_so(tmp_path):
    from instrumented_backend.diagnosis.crash import explain_crash

    killed = explain_crash(9, tmp_path / "absent.txt", tmp_path / "graphs")
    assert not killed.located and "SIGKILL" in killed.render() and "out-of-memory" in killed.render()
    log = tmp_path / "fault.txt"
    log.write_text('Fatal Python error: Segmentation fault\n\nCurrent thread 0x1 (most recent call first):\n'
                   f'  File "{tmp_path / "user.py"}", line 3 in step\n')
    elsewhere = explain_crash(11, log, tmp_path / "graphs")
    assert elsewhere.signal == "SIGSEGV" and not elsewhere.located
    assert "the crash was elsewhere" in elsewhere.render() and "user.py" in elsewhere.render()


def test_a_script_error_raised_outside_its_compiled_calls_is_said_to_be_the_scripts(tmp_path):
    """The script fails after its compiled call ran through, outside it: "no bug found" alone read
    as if the script's error were not there, and "did not recur ... a fault or config set around
    the call" blamed what was never involved. The command names the error, its line, and says it
    came from outside the compiled functions."""
    from instrumented_backend.diagnosis.script import diagnose_script

    script = tmp_path / "late.py"
    script.write_text("import torch\n\n\ndef f(x):\n    return torch.maximum(torch.neg(x), x)\n\n\n"
                      "print(torch.compile(f)(torch.arange(8.0)).sum())\n"
                      "raise FileNotFoundError('checkpoint.pt')\n")
    said: list[str] = []
    results = diagnose_script(script, out_dir=tmp_path / "out", minify=False, progress=False, echo=said.append)
    assert len(results) == 1 and not results[0].found
    assert any("FileNotFoundError: checkpoint.pt at " in line and "late.py:9" in line
               and "came from outside the functions it compiled" in line for line in said), said
    assert not any("did not recur" in line for line in said), said


_STEP_INSIDE_SCRIPT = """\
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


@torch.compile
def train_step(x, y):
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(torch.neg(x)), y)
    loss.backward()
    optimizer.step()
    return loss


for _ in range(2):
    train_step(torch.randn(8, 16), torch.randn(8, 4))
"""


_ZERO_GRAD_LAST = _STEP_INSIDE_SCRIPT.replace("    optimizer.zero_grad()\n", "").replace(
    "    optimizer.step()\n", "    optimizer.step()\n    optimizer.zero_grad()\n")


@pytest.mark.parametrize("text", [_STEP_INSIDE_SCRIPT, _ZERO_GRAD_LAST], ids=["zero_grad_first", "zero_grad_last"])
def test_a_compiled_training_step_that_runs_its_own_backward_is_diagnosed(tmp_path, text):
    """The compiled function is the whole step: a global model, ``loss.backward()`` and the
    optimizer inside. Judged as inference, under no_grad, its eager run died in ``backward()``
    and the command with it. Now it is a training step: each run starts from the same weights and
    optimizer state, and its parameters' gradients are compared. A step that drops its gradients
    at its end (``zero_grad()`` last) left none to see the backward by: it is seen as it happens."""
    from instrumented_backend.diagnosis.script import diagnose_script

    assert text.index("optimizer.zero_grad()") > text.index("optimizer.step()") or text is _STEP_INSIDE_SCRIPT
    script = tmp_path / "step.py"
    script.write_text(text)
    said: list[str] = []
    with ib.faults.doubling_neg():
        results = diagnose_script(script, out_dir=tmp_path / "out", minify=False, progress=False, echo=said.append)
    (result,) = results
    assert "train_step (2 args, training step)" in said[0], said
    assert result.found and result.gradients is not None
    # the model's four parameters; x and y, as the script passes them, need no gradient
    assert [o.path for o in result.gradients.outputs] == ["['0.weight']", "['0.bias']", "['2.weight']", "['2.bias']"]
    if text is _ZERO_GRAD_LAST:  # the step drops its gradients: its loss and the weights it updated show the bug
        assert result.gradients.passed and not result.outputs.passed, result.render()
    else:
        assert not result.gradients.passed, result.render()
    assert result.layers.first_failing == "inductor" and result.divergence.culprit == "neg"
    neg_line = 1 + text.splitlines().index("    loss = torch.nn.functional.mse_loss(model(torch.neg(x)), y)")
    assert any(line.source and line.source.line == neg_line for line in result.culprit_lines)


_TRAINER_SCRIPT = """\
import torch


class Trainer:
    def __init__(self):
        torch.manual_seed(0)
        self.model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)

    def loss(self, x, y):
        return torch.nn.functional.mse_loss(self.model(torch.neg(x)), y)

    def step(self, x, y):
        loss = self.loss(x, y)
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad()
        return loss.detach()


trainer = Trainer()
step = torch.compile(trainer.step)
for _ in range(2):
    step(torch.randn(8, 16), torch.randn(8, 4))
"""


def test_a_compiled_method_of_the_users_trainer_object_is_judged_as_the_training_step_it_is(tmp_path, monkeypatch):
    """``torch.compile(trainer.step)``: the model and optimizer are the ``Trainer``'s attributes,
    which no closure cell or global names. The step was judged as inference, under no_grad, and
    "eager itself raises" in ``loss.backward()`` was the whole diagnosis. The object a method is
    bound to is looked into (its attributes, and the methods it calls on itself): a training step,
    its parameters judged by name and put back after each run. The graph resumed after the step
    (``return loss.detach()``, no op for Inductor to compile) costs no warning either.
    ``minify=SECONDS`` is the minifier's time budget (:func:`minifier.minify`'s ``max_seconds``)."""
    import minifier
    from instrumented_backend.diagnosis.script import diagnose_script
    from instrumented_backend.fail_soft import InstrumentationWarning, reset_warnings

    budgets: list[float] = []
    real_minify = minifier.minify

    def minify(*args, max_seconds=None, **kwargs):
        budgets.append(max_seconds)
        return real_minify(*args, max_seconds=max_seconds, **kwargs)

    monkeypatch.setattr(minifier, "minify", minify)
    script = tmp_path / "trainer.py"
    script.write_text(_TRAINER_SCRIPT)
    said: list[str] = []
    reset_warnings()
    with warnings.catch_warnings(record=True) as caught, ib.faults.doubling_neg():
        warnings.simplefilter("always")
        (result,) = diagnose_script(script, out_dir=tmp_path / "out", minify=90, progress=False, echo=said.append)
    assert "Trainer.step (2 args, training step)" in said[0], said
    assert budgets == [90.0] and "minified: 5 -> 1 nodes" in result.minifier, (budgets, result.minifier)
    with pytest.raises(ValueError, match="minify must be True, False or a positive number of seconds, got -1"):
        ib.diagnose(lambda x: x.sin(), torch.randn(4), minify=-1)
    # its gradients, of the model's four parameters (x and y need none), dropped by zero_grad() at the
    # step's end: its loss and the weights it updated show the bug
    assert result.found and len(result.gradients.outputs) == 4 and not result.outputs.passed, result.render()
    assert result.layers.first_failing == "inductor" and result.divergence.culprit == "neg"
    assert not [w for w in caught if issubclass(w.category, InstrumentationWarning)], [str(w.message) for w in caught]


def test_the_weights_a_training_step_updates_are_judged_beside_its_gradients(tmp_path):
    """A step running its own backward and ``optimizer.step()``, the optimizer compiled as a graph
    of its own: a bug in the update (Adam's reciprocal) leaves the loss and the gradients right, so
    the step was 'no bug found'. The weights after the step are judged too, by name."""
    from instrumented_backend.diagnosis.script import diagnose_script

    script = tmp_path / "step.py"
    script.write_text(_STEP_INSIDE_SCRIPT.replace("torch.optim.SGD(model.parameters(), lr=0.1)",
                                                  "torch.optim.AdamW(model.parameters(), lr=0.01, foreach=True)")
                      .replace("model(torch.neg(x))", "model(x)"))
    with ib.faults.from_spec("reciprocal*1.1"):
        (result,) = diagnose_script(script, out_dir=tmp_path / "out", minify=False, progress=False,
                                    echo=lambda line: None)
    assert result.train and result.verdict == "inaccurate", result.render()
    assert result.gradients.passed and result.outputs.outputs[0].passed  # the loss and the gradients
    assert [o.path for o in result.outputs.failing] == [f"['updated']['{name}']" for name in
                                                        ("0.weight", "0.bias", "2.weight", "2.bias")]
    assert result.layers.first_failing == "inductor"


def test_the_state_a_training_step_names_is_put_back_after_each_run():
    from instrumented_backend.diagnosis.step_state import StepState

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    scale = torch.ones(4, requires_grad=True)

    def step(x):
        optimizer.zero_grad()
        (model(x) * scale).sum().backward()
        optimizer.step()

    state = StepState.of(step)
    assert state.modules == [model] and state.optimizers == [optimizer] and state.tensors == [scale]
    assert len(state.parameters()) == 5  # the linear's two, the norm's two, scale
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with state.kept():
        marks = state.gradient_marks()
        assert not state.backward_since(marks)
        step(torch.randn(8, 4))
        assert optimizer.state and not torch.equal(model[0].weight, before["0.weight"])
        assert state.backward_since(marks)
        marks = state.gradient_marks()
        (model(torch.randn(8, 4)) * scale).sum().backward()  # accumulated into the same gradients
        assert state.backward_since(marks)
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())  # running stats too
    assert not optimizer.state and model[0].weight.grad is None and scale.grad is None
    assert StepState.of(len).parameters() == []


def test_judging_a_modules_training_step_leaves_its_weights_statistics_and_gradients_as_they_were():
    """A module target is its own state: the judge's runs (eager twice, fp64, compiled) used to
    advance its BatchNorm statistics and now would have cleared its gradients; both are put back."""
    from instrumented_backend.diagnosis.training import training_step

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4)).train()
    for param in model.parameters():
        param.grad = torch.full_like(param, 7.0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    step = training_step(model, [torch.randn(8, 4, requires_grad=True)], seed=0)
    assert len(step.grads) == 4 + 1 and all(g is not None for g in step.grads) and not step.own_backward
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())  # running stats too
    assert all(torch.equal(p.grad, torch.full_like(p, 7.0)) for p in model.parameters())


def test_a_crash_on_a_thread_without_python_frames_is_located_by_the_thread_that_launched_it(tmp_path):
    """A large kernel runs on OpenMP threads: the one that faults has no Python frame, and the
    fault handler wrote only that thread's (nothing), so GPT-2's crashing GELU kernel was
    "elsewhere". Every thread's traceback is written now: the launching thread is in call()."""
    from instrumented_backend.diagnosis.crash import run_surviving_crashes

    code = tmp_path / "output_code.py"
    code.write_text("import ctypes\nimport threading\n\nasync_compile = None\n\n\ndef call(args):\n"
                    "    worker = threading.Thread(target=ctypes.string_at, args=(0,))  # reads address 0\n"
                    "    worker.start()\n    worker.join()\n")

    def work() -> int:
        namespace: dict = {}
        exec(compile(code.read_text(), str(code), "exec"), namespace)  # noqa: S102 - the test's own file
        namespace["call"]([])
        return 0

    status, report = run_surviving_crashes(work, tmp_path / "out")
    assert status == 1 and report is not None and report.signal == "SIGSEGV"
    assert report.located and report.code_path == str(code), report.fault_traceback
    assert (report.line, report.statement) in ((9, "worker.start()"), (10, "worker.join()"))  # it may not be back


def test_a_crashing_graphs_nodes_are_named_as_in_the_capture_after_the_repro_folds_constants(tmp_path):
    """Tracing a saved repro renames each call after its op and folds calls without tensor
    inputs (GPT-2's position ``iota``) into constants: matching by position named GPT-2's culprit
    ``tanh_default``, with no source line. Calls are matched to the next post-grad call of the op."""
    from types import SimpleNamespace

    from torch.fx.experimental.proxy_tensor import make_fx

    from instrumented_backend.diagnosis.crash import _first_call_path, _renamed, save_first_call

    def graph(x):
        positions = torch.ops.prims.iota.default(8, start=0, step=1, dtype=torch.int64, device=torch.device("cpu"),
                                                 requires_grad=False)
        shifted = torch.ops.aten.unsqueeze.default(positions, 0)
        return (torch.ops.aten.tanh.default(torch.ops.aten.add.Tensor(x, shifted)),)

    gm = make_fx(graph)(torch.randn(2, 8))
    capture = SimpleNamespace(post_grad_graph=gm, index=0, compile_id="0/0", kind="inference")
    save_first_call(capture, [torch.randn(2, 8)], {}, tmp_path)
    renamed = _renamed(_first_call_path(tmp_path, "000_0-0_inference"))
    originals = {n.name for n in gm.graph.nodes if n.op == "call_function"}
    assert set(renamed.values()) == originals - {"iota", "unsqueeze"}, renamed
    assert renamed[next(k for k, v in renamed.items() if v == "tanh")].startswith("tanh")


def _relu_plus_one(x: torch.Tensor) -> torch.Tensor:
    return torch.relu(x) + 1


def _silu_twice(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.silu(x) * 2


def _softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


def test_an_injected_fault_that_finds_no_bug_is_said_why(tmp_path):
    """Trying the tool with a fault: one on an op the graph never computes in generated code, and
    one a softmax normalises away (a scaled exp), both rightly find no bug; the diagnosis says which."""
    with ib.faults.doubling_neg():
        result = ib.diagnose(_relu_plus_one, torch.randn(8, 8), out_dir=tmp_path, minify=False)
    assert not result.found
    (note,) = result.fault_notes
    assert "fault (doubling neg) was in effect, but no kernel compiled here computes neg" in note
    assert f"note: {note}" in result.render()
    # SiLU is lowered as x / (1 + exp(-x)): a scaled sigmoid never reaches a Llama MLP's kernel;
    # the note names the ops the kernels do compute, and which to scale instead.
    with ib.faults.scaled("sigmoid", 1.01):
        result = ib.diagnose(_silu_twice, torch.randn(8, 8), out_dir=tmp_path, minify=False)
    (note,) = result.fault_notes
    assert "computes sigmoid" in note and "the generated kernels compute exp" in note, note
    assert "(--fault 'exp*1.01')" in note, note
    with ib.faults.bad_lowering("exp", "std::exp({x}) * decltype({x})(1.01)",
                                vectorized="{x}.exp() * decltype({x})(1.01)"):
        result = ib.diagnose(_softmax, torch.randn(8, 8), out_dir=tmp_path, minify=False)
    assert not result.found and "generated expression(s) of exp, yet every result matches eager" in \
        result.fault_notes[0], result.render()


_WARM_UP_THEN_TRAIN = """\
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.fc(torch.neg(x)).relu()


torch.manual_seed(0)
model = torch.compile(Net())
model(torch.randn(4, 8))  # a warm-up call, grad on, its output dropped
for _ in range(2):
    model(torch.randn(4, 8)).sum().backward()
"""
_INFERENCE_WITH_GRAD_ON = _WARM_UP_THEN_TRAIN.split("for _ in")[0]


@pytest.mark.parametrize("text, judged", [(_INFERENCE_WITH_GRAD_ON, "inference: grad was on, but no backward reached"),
                                          (_WARM_UP_THEN_TRAIN, "training step")], ids=["inference", "warm_up"])
def test_a_module_is_judged_for_training_only_when_a_backward_reached_it(tmp_path, text, judged):
    """A compiled module with trainable parameters, called with grad on, was always judged as a
    training step: an inference script that never left grad mode paid for a backward compile and
    was told about gradients it never takes (a ResNet-shaped net compiled with dynamic=True: 25.4 s
    to the culprit, 15.2 s judged as inference). Now it is inference unless a backward reached the
    outputs of one of its calls, a later call's too (a warm-up call first, then the training loop)."""
    from instrumented_backend.diagnosis.script import diagnose_script

    script = tmp_path / "net.py"
    script.write_text(text)
    said: list[str] = []
    with ib.faults.doubling_neg():
        (result,) = diagnose_script(script, out_dir=tmp_path / "out", minify=False, progress=False, echo=said.append)
    assert f"Net (1 args, {judged}" in said[0], said
    assert result.train == (judged == "training step") and (result.gradients is not None) == result.train
    assert result.found and result.divergence.culprit == "neg"
    if result.train:  # the gradients the script's backward took: not of its input, which needs none
        # (judged with one, the graphs compiled and judged were not the script's own)
        assert [o.path for o in result.gradients.outputs] == ["['fc.weight']", "['fc.bias']"], result.render()


_GENERATE_SCRIPT = """\
import torch
from transformers import GPT2Config, GPT2LMHeadModel

torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=128, n_positions=64)).eval()
model.forward = torch.compile(model.forward, fullgraph=True)
with torch.no_grad():
    model.generate(torch.randint(0, 128, (1, 8)), max_new_tokens=4, do_sample=False, pad_token_id=0)
"""


def test_a_compiled_model_forward_in_generate_is_diagnosed_on_its_first_calls_cache(tmp_path):
    """``model.forward = torch.compile(model.forward)`` then ``generate``: the first call gets an
    empty ``DynamicCache``, which it fills, and the later calls extend. The diagnosis replayed the
    cache as the script left it (11 positions, not the first call's 0) and every run extended it
    again, so eager disagreed with itself: "eager itself is nondeterministic: not judged", no bug
    found. Object arguments are now copied at the first call and for every run, and the float64
    referee widens the model behind a bound ``forward`` (it ran the float32 model: eager's RMSE 0),
    without changing what is compiled (``fullgraph=True``: binding the method inside the compiled
    wrapper was "Unsupported: Unsupported function call")."""
    pytest.importorskip("transformers", reason="needs the test extra (transformers)")
    from instrumented_backend.diagnosis.script import diagnose_script

    script = tmp_path / "generate.py"
    script.write_text(_GENERATE_SCRIPT)
    said: list[str] = []
    with ib.faults.scaled("tanh", 1.05):
        (result,) = diagnose_script(script, out_dir=tmp_path / "out", minify=False, progress=False, echo=said.append)
    assert "GPT2LMHeadModel.forward (0 args, keyword arguments input_ids, past_key_values" in said[0], said
    assert result.verdict == "inaccurate" and result.divergence.culprit == "tanh", result.render()
    rows = {o.path: o for o in result.outputs.outputs}
    assert rows["['past_key_values'].layers[0].keys"].shape == [1, 2, 8, 16]  # the prompt's 8 positions
    assert not rows["['logits']"].passed and rows["['logits']"].rmse_eager > 0  # a float64 referee


_AUTOCAST_SCRIPT = """\
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(16, 32)

    def forward(self, x):
        return torch.neg(self.fc(x)).sum(-1)


torch.manual_seed(0)
model = torch.compile(Net().eval())
with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
    print(model(torch.randn(4, 16)).dtype)
"""


def test_a_call_made_under_autocast_is_diagnosed_under_it(tmp_path):
    """The script ran its compiled model under ``torch.autocast("cpu", dtype=torch.bfloat16)``;
    the diagnosis, made after the script ended, replayed it in float32: another program, other
    kernels (a bug of the bfloat16 casts could not show). Autocast is now on again as at the first
    call, said so, and the repro is minified from the post-AOT graph, whose casts are explicit."""
    from instrumented_backend.diagnosis.script import diagnose_script

    script = tmp_path / "amp.py"
    script.write_text(_AUTOCAST_SCRIPT)
    said: list[str] = []
    with ib.faults.doubling_neg():
        (result,) = diagnose_script(script, out_dir=tmp_path / "out", progress=False, echo=said.append)
        assert _reproduces(result.repro_path), result.minifier
    assert any("on again for its diagnosis: torch.autocast('cpu', dtype=torch.bfloat16)" in line for line in said), said
    assert result.verdict == "inaccurate" and result.divergence.culprit == "neg"
    assert [o.dtype for o in result.outputs.outputs] == ["bfloat16"]  # as the script computed it
    assert "dtype=torch.bfloat16)" in Path(result.repro_path).read_text()  # the repro's input: the bf16 matmul


def test_a_module_compile_that_compiles_nothing_names_the_frames_dynamo_skipped_and_what_traces_it(tmp_path):
    """``model.compile()`` on an ``nn.Sequential`` of torch's modules compiles its bound
    ``_call_impl``, and Dynamo skips every frame under it (all torch's own code): the program runs
    eagerly, and a bug in Inductor cannot show. The diagnosis said only "nothing was compiled"; it
    names the skipped frames and the compile that does trace the module, and that advice holds."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU())
    x = torch.randn(4, 8)
    with ib.faults.scaled("erf", 1.5):
        skipped = ib.diagnose(model._call_impl, x, out_dir=tmp_path / "skipped", minify=False)
        traced = ib.diagnose(model, x, out_dir=tmp_path / "traced", minify=False)
    assert skipped.target == "Sequential" and skipped.verdict == "passed" and not skipped.graphs
    text = skipped.render()
    assert "Dynamo skipped every frame it was handed" in text
    assert "forward (torch/nn/modules/container.py:" in text and "skipfiles" in text, text
    assert "torch.compile(model) traces the Sequential instead" in text
    saved = json.loads((tmp_path / "skipped" / "diagnosis.json").read_text())
    assert any("container.py" in frame["file"] for frame in saved["left_out"]["nothing_compiled"]["frames"])
    assert traced.verdict == "inaccurate" and traced.graphs  # the advice: the same module, traced and judged


class _Tagger(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gru = torch.nn.GRU(8, 8, batch_first=True)
        self.head = torch.nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, _ = self.gru(x)
        return torch.sigmoid(self.head(h))


def test_a_frame_whose_compile_failed_is_named_with_its_error_and_dynamos_hint(tmp_path):
    """A module calling ``nn.GRU``, which Dynamo does not trace: its forward's compile fails and runs
    eagerly, and Dynamo notes the frame only as "an error was suppressed during compilation", all
    the diagnosis said of it. It names the error, Dynamo's hint and the line, first of the frames."""
    torch.manual_seed(0)
    torch.compiler.reset()  # Dynamo notes a frame only the first time it skips it
    result = ib.diagnose(_Tagger(), torch.randn(2, 5, 8), out_dir=tmp_path, minify=False)
    assert result.verdict == "passed" and not result.graphs
    first = result.left_out.nothing_compiled.frames[0]
    assert first.name == "forward" and first.file == __file__, result.render()
    assert first.reason.startswith("its compile failed: Unsupported: Attempted to wrap RNN, GRU, or LSTM"), first
    assert "allow_rnn=True" in first.reason and f"(at {__file__}:" in first.reason, first
    assert "an error was suppressed" not in result.render() and "allow_rnn=True" in result.render()


class _Head(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 2)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.fc(h))


class _TaggerWithAHead(_Tagger):
    def __init__(self) -> None:
        super().__init__()
        self.head = _Head()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, _ = self.gru(x)
        return self.head(torch.neg(h))


def test_a_frame_whose_compile_failed_while_the_head_it_calls_compiled_is_named_as_not_judged(tmp_path):
    """The tagger's own forward (calling ``nn.GRU``) fails to compile and runs eagerly; its head, a
    module of the user's, compiles and is judged. "no bug found" on the head's graph said nothing of
    the forward, whose ``neg`` (doubled by the fault) is eager's own code: the diagnosis names it as
    not judged, with Dynamo's error."""
    torch.manual_seed(0)
    with ib.faults.doubling_neg():
        result = ib.diagnose(_TaggerWithAHead(), torch.randn(2, 5, 8), out_dir=tmp_path, minify=False)
    assert result.verdict == "passed" and result.graphs and result.left_out.nothing_compiled is None, result.render()
    [frame] = result.left_out.failed_frames
    assert (frame.name, frame.file) == ("forward", __file__), frame
    assert frame.reason.startswith("its compile failed: Unsupported: Attempted to wrap RNN, GRU, or LSTM"), frame
    assert "Dynamo's compile of 1 frame(s) failed, and they ran eagerly, not judged" in result.render()
    saved = json.loads((tmp_path / "diagnosis.json").read_text())
    assert saved["left_out"]["failed_frames"][0]["reason"] == frame.reason


_RECOMPILING_SCRIPT = """\
import torch


def act(x):
    if x.shape[-1] > 64:  # a wide input takes another path: Dynamo recompiles for it
        return torch.tanh(x) * 2
    return torch.sigmoid(x) * 2


compiled = torch.compile(act)
for width in (32, 128):
    x = torch.randn(8, width)
    assert torch.allclose(compiled(x), act(x), atol=1e-5), f"wrong at width {width}"
"""


def test_a_bug_in_a_graph_only_a_later_call_compiles_is_found_on_that_call(tmp_path):
    """The script's second call recompiles (a wide input takes another branch) and its result is
    wrong; the first call is right. Judging the first call alone said "no bug found" (and blamed
    the script's own assert on state only the script had). The first later call that compiles a
    graph is kept, copied before it ran, and judged after the first, which is replayed before it."""
    from instrumented_backend.diagnosis.script import diagnose_script

    script = tmp_path / "act.py"
    script.write_text(_RECOMPILING_SCRIPT)
    said: list[str] = []
    with ib.faults.scaled("tanh", 1.05):
        first, recompiled = diagnose_script(script, out_dir=tmp_path / "out", minify=False, progress=False,
                                            echo=said.append)
    assert first.verdict == "passed" and not first.replayed_call
    assert any("act, its call 2: the first that compiled a new graph" in line for line in said), said
    assert recompiled.found and recompiled.replayed_call == 2 and recompiled.replayed_recompile
    assert recompiled.divergence.culprit == "tanh" and recompiled.divergence.graph.endswith("0/1 inference")
    text = (tmp_path / "out" / "diagnosis.txt").read_text()
    assert "replayed its call 2, the first that compiled a new graph" in text
    # the HTML report says so too: drawn again once the note was known (it was drawn before)
    assert recompiled.reports["html"] == str(tmp_path / "out" / "report.html")
    assert "replayed its call 2, the first that compiled a new graph" in (tmp_path / "out" / "report.html").read_text()
    assert "captures" not in recompiled.to_dict()


def test_a_bug_only_the_second_recompile_compiles_is_found_after_the_calls_before_it(tmp_path):
    """Three widths: the second call recompiles with the width symbolic (still the sigmoid path,
    right), the third takes the tanh path (a third graph, wrong). Judging only the first recompile
    said "no bug found"; each kept recompile is judged in turn, after the calls that compiled before it."""
    from instrumented_backend.diagnosis.script import diagnose_script

    script = tmp_path / "act.py"
    script.write_text(_RECOMPILING_SCRIPT.replace("for width in (32, 128):", "for width in (32, 48, 128):"))
    said: list[str] = []
    with ib.faults.scaled("tanh", 1.05):
        results = diagnose_script(script, out_dir=tmp_path / "out", minify=False, progress=False, echo=said.append)
    assert [r.verdict for r in results] == ["passed", "passed", "inaccurate"], [r.render() for r in results]
    second, third = results[1:]
    assert (second.replayed_call, second.replayed_recompile, second.replayed_before) == (2, 1, [1])
    assert (third.replayed_call, third.replayed_recompile, third.replayed_before) == (3, 2, [1, 2])
    assert any("act, its call 3: the second call that compiled a new graph (a recompile), replayed after calls 1 and 2"
               in line for line in said), said
    assert third.divergence.culprit == "tanh" and third.divergence.graph.endswith("0/2 inference")
    text = (tmp_path / "out" / "diagnosis.txt").read_text()
    assert "replayed its call 3, the second call that compiled a new graph in the script (a recompile), after " \
           "calls 1 and 2, on which it passed" in text


def test_calls_before_make_the_judged_call_recompile_with_symbolic_sizes_as_the_script_did(tmp_path):
    """A second width makes Dynamo recompile with the width symbolic; judged alone, the same call
    compiles with static sizes, other code. ``calls_before`` replays the first call first."""
    def fn(x):
        return torch.tanh(x).sum(-1)

    result = ib.diagnose(fn, torch.randn(4, 48), calls_before=[((torch.randn(4, 32),), {})], out_dir=tmp_path,
                         minify=False)
    assert result.verdict == "passed" and [label.split()[1] for label in result.graphs] == ["0/0", "0/1"]
    judged = ib.captures()[-1]
    assert judged.label == result.graphs[-1] and any(not dim.isdigit() for dim in judged.inputs[-1].shape), \
        judged.inputs
    with pytest.raises(TypeError, match=r"each of calls_before is \(args, kwargs\)"):
        ib.diagnose(fn, torch.randn(4, 48), calls_before=[(torch.randn(4, 32),)], out_dir=tmp_path, minify=False)


def test_a_module_passed_to_a_compiled_function_has_its_parameters_judged_by_name(tmp_path):
    """``@torch.compile`` on a module's ``forward`` in its class: the compiled target is a function
    whose ``self`` is an argument. Its parameters were left out of the training judgement (only
    ``x``'s gradient was compared, called ``[0]``): a wrong weight gradient went unseen."""
    def forward(module, x):
        return torch.tanh(module.fc(x)) * 2

    block = torch.nn.Module()
    block.fc = torch.nn.Linear(8, 8)
    before = block.fc.weight.detach().clone()
    result = ib.diagnose(forward, block, torch.randn(4, 8), train=True, out_dir=tmp_path, minify=False)
    assert result.verdict == "passed"
    assert [row.path for row in result.gradients.outputs] == ["['fc.weight']", "['fc.bias']", "['input 1']"]
    assert torch.equal(block.fc.weight, before) and block.fc.weight.grad is None  # put back after each run
