"""AOTInductor: ``ib.aoti_compile_and_package`` runs PyTorch's own call with the graph captured."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
import torch

import instrumented_backend as ib


class _MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(16, 32), torch.nn.Linear(32, 8)
        self.gain = torch.nn.Parameter(torch.linspace(0.5, 1.5, 8))  # a constant a generated kernel loads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.neg(torch.relu(self.fc1(x)))
        return self.fc2(h) * self.gain


def _sources(package: str) -> dict[str, bytes]:
    """The generated C++ sources in a package, without the ``// Compile cmd`` trailer the build
    appends to a file it compiles (there or not depending on whether this package's build or an
    earlier one compiled that file: a build record, not generated code)."""
    with zipfile.ZipFile(package) as archive:
        return {Path(name).name: archive.read(name).split(b"\n// Compile cmd\n")[0]
                for name in archive.namelist() if name.endswith(".cpp")}


@pytest.fixture(scope="module")
def packages(tmp_path_factory):
    torch.manual_seed(0)
    model, x = _MLP().eval(), torch.randn(4, 16)
    exported = torch.export.export(model, (x,))
    out = tmp_path_factory.mktemp("aoti")
    with torch._inductor.config.patch(fx_graph_cache=False):  # both generate, neither reads a cache
        plain = torch._inductor.aoti_compile_and_package(exported, package_path=str(out / "plain.pt2"))
    ours = ib.aoti_compile_and_package(exported, package_path=str(out / "ours.pt2"))
    return model, x, plain, ours, ib.last_capture()


def test_the_package_is_pytorchs_and_runs(packages):
    model, x, plain, ours, _ = packages
    assert _sources(ours) and _sources(ours) == _sources(plain)
    loaded = torch._inductor.aoti_load_package(ours)
    assert torch.allclose(loaded(x), model(x))


def test_the_aot_graph_is_captured_with_kernels_and_source_lines(packages):
    capture = packages[4]
    assert capture.complete and capture.kind == "inference", capture.problems
    assert "AOTInductorModel::run_impl" in capture.output_code
    generated = [k for k in capture.kernels if k.kind == "cpp"]
    externs = [k for k in capture.kernels if k.kind == "extern"]
    assert generated and externs and all(k.name.startswith("aoti_torch_cpu_") for k in externs)
    [neg] = [line for k in generated for line in k.lines if "ops.neg" in line.ir_ops]
    assert neg.fx_nodes == ["neg"] and neg.source.code == "h = torch.neg(torch.relu(self.fc1(x)))"
    launch = [line for line in capture.wrapper_lines if line.number in generated[0].call_lines]
    assert launch and "neg" in launch[0].fx_nodes
    assert "fc1" in capture.dynamo_graph_code  # the exported program's graph stands for the Dynamo graph
    # The weights are constants in an exported graph (get_attr nodes): a line loading one is
    # sourced to the line that first uses it, as a graph input's is.
    coverage = ib.line_coverage([capture])
    assert coverage.sourced_percent == 100.0, coverage.unsourced_nodes
    # Library calls (aoti_torch_cpu_addmm_out) map to their node and line, through the buffers
    # the wrapper names, read when AOTInductor compiles it into the package.
    assert coverage.extern_calls_tagged_percent == 100.0
    first = [k.lines[0] for k in externs][0]
    assert first.fx_nodes[0] == "addmm" and first.source.code == "h = torch.neg(torch.relu(self.fc1(x)))"
    assert capture.nodes["gain"].attribution == "constant" and capture.nodes["gain"].first_use is not None
    # A constant's reference (``auto& fc1_weight = constants_->at(0);``) and the size arrays serve
    # the statement that first uses them: the wrapper's statements are tagged but for boilerplate.
    [weight] = [line for line in capture.wrapper_lines if "fc1_weight = constants_" in line.text]
    assert weight.fx_nodes[0] == "addmm", weight
    assert coverage.wrapper_statements_tagged_percent >= 90.0, \
        [line.text.strip() for line in capture.wrapper_lines if not line.tagged]
