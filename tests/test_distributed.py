"""Multi-rank runs: real processes, 2 ranks, gloo on 127.0.0.1, launched by torchrun; every wait bounded
(the process group's timeout, and the launcher's)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch
from conftest import REPO, scratch_tmpdir_env

import instrumented_backend as ib

SCRIPT = Path(__file__).with_name("distributed_script.py")
TIMEOUT = 300


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def torchrun(*argv: str, cwd: Path = REPO, status: int = 0) -> subprocess.CompletedProcess:
    """Run ``torchrun --nproc-per-node 2`` on 127.0.0.1 (a free port), bounded by TIMEOUT; it must
    exit with ``status``."""
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "2",
               "--master-addr", "127.0.0.1", "--master-port", str(_free_port()), "--max-restarts", "0", *argv]
    with tempfile.TemporaryDirectory(prefix="ib-torchrun-") as scratch:  # torchrun leaves its logs' folder
        env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1", **scratch_tmpdir_env(scratch),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT, env=env)
    assert proc.returncode == status, \
        f"torchrun exited {proc.returncode}, not {status}:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    assert "rank 0 ok" in proc.stdout and "rank 1 ok" in proc.stdout, proc.stdout
    return proc


@pytest.fixture(scope="module")
def all_reduce_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("all_reduce")
    torchrun(str(SCRIPT), "all_reduce", str(out))
    return out


def test_each_rank_dumps_its_own_folder_and_load_reads_them_all(all_reduce_run):
    assert sorted(p.name for p in all_reduce_run.iterdir()) == ["rank_0", "rank_1"]
    session = ib.load(all_reduce_run)
    assert [(g.rank, g.world_size, g.process_group) for g in session] == [(0, 2, "gloo"), (1, 2, "gloo")]
    assert len(ib.load(all_reduce_run / "rank_1")) == 1  # each rank's folder is a normal dump


def test_the_line_map_covers_the_collectives_launch_and_wait(all_reduce_run):
    from instrumented_backend.diagnosis.ranks import collectives

    graph = ib.load(all_reduce_run)[0]
    launch = [line for line in graph.wrapper_lines if "_c10d_functional.all_reduce_" in line.text]
    wait = [line for line in graph.wrapper_lines if "_c10d_functional.wait_tensor" in line.text]
    assert launch and wait, graph.output_code
    for line in launch + wait:
        assert line.fx_nodes and line.source is not None, line
        assert "fc.all_reduce(y" in line.source.code and line.source.file.endswith("distributed_script.py")
    [collective] = collectives(graph)
    assert collective.op == "all_reduce" and collective.shape == "f32[8]"


def test_equal_ranks_compare_equal(all_reduce_run):
    comparison = ib.compare_ranks(all_reduce_run)
    assert comparison.equal, comparison.render()
    assert "all 2 ranks compiled the same graphs" in comparison.render()


def test_a_rank_dependent_branch_is_named_with_its_graph_layer_and_source_line(tmp_path):
    from instrumented_backend.cli import main

    torchrun(str(SCRIPT), "diverge", str(tmp_path))
    comparison = ib.compare_ranks(tmp_path)
    divergence = comparison.first_divergence
    assert divergence is not None and divergence.position == 0 and divergence.graph == "0/0 inference"
    assert divergence.layer == "Dynamo graph" and divergence.ranks == (0, 1)
    assert "torch.sin" in divergence.diff and "torch.cos" in divergence.diff
    assert any("y = torch.cos(x) * 2" in line for line in divergence.source_lines), divergence.source_lines
    assert any("y = torch.sin(x) * 2" in line for line in divergence.source_lines)
    assert not comparison.collective_divergences  # the same all_reduce on both ranks
    assert main(["ranks", str(tmp_path)]) == 1


def _scores(x, weight):
    return torch.tanh(x @ weight).sum(-1)


def test_ranks_that_compiled_for_other_sizes_are_told_so_before_the_diff():
    """A DDP GPT-2 whose ranks got sequences of 16 and 12 tokens: every node of the Dynamo graph
    differed in shape, and the comparison listed 25 source lines, the whole model, before a diff
    whose first line was 3,000 characters of parameters. The inputs that differ lead, by name."""
    from instrumented_backend.diagnosis.ranks import _input_name

    weight = torch.randn(8, 8)
    captures = []
    for rank, length in ((0, 16), (1, 12)):  # each "rank" compiles afresh, as a process does
        torch._dynamo.reset()
        with ib.capture() as session:
            torch.compile(_scores, backend="instrumented")(torch.randn(2, length, 8), weight)
        for graph in session:
            graph.rank = rank
            captures.append(graph)
    comparison = ib.compare_ranks(captures)
    divergence = comparison.first_divergence
    assert divergence is not None and divergence.layer == "Dynamo graph", comparison.render()
    assert divergence.input_differences == ["x: f32[2, 16, 8] on rank 0, f32[2, 12, 8] on rank 1"]
    text = comparison.render()
    assert text.index("the graph's inputs differ in size or dtype") < text.index("--- rank 0")
    assert "torch._dynamo.mark_dynamic" in text
    assert any("torch.tanh(x @ weight)" in line for line in divergence.source_lines), divergence.source_lines
    assert _input_name("L_self_modules_h_modules_0_modules_ln_1_parameters_weight_") == "self.h.0.ln_1.weight"
    assert _input_name("L_input_ids_") == "input_ids" and _input_name("primals_1") == "primals_1"


def test_a_collective_order_divergence_is_named_as_such(tmp_path, capsys):
    from instrumented_backend.cli import main

    torchrun(str(SCRIPT), "order", str(tmp_path))
    comparison = ib.compare_ranks(tmp_path)
    [divergence] = comparison.collective_divergences
    first, second = divergence.sequences[0], divergence.sequences[1]
    assert len(first) == len(second) == 2 and first == list(reversed(second))
    assert main(["ranks", str(tmp_path)]) == 1
    assert "COLLECTIVES DIFFER (hang risk)" in capsys.readouterr().out


def test_ddp_buckets_are_captured_and_labelled(tmp_path):
    torchrun(str(SCRIPT), "ddp", str(tmp_path))
    session = ib.load(tmp_path / "rank_0")
    forwards = [g for g in session if g.kind == "forward"]
    assert sorted(g.ddp_bucket for g in forwards) == [0, 1], [(g.label, g.ddp_bucket) for g in session]
    assert {g.ddp_bucket for g in session if g.kind == "backward"} == {0, 1}
    assert "ddp bucket" in ib.report.format_graphs(session)
    assert ib.compare_ranks(tmp_path).first_divergence is None


def test_diagnose_under_torchrun_judges_each_ranks_model_in_a_folder_of_its_own(tmp_path):
    """Under torchrun every rank runs the command. Both ranks wrote one ``--out``, each deleting
    the other's crash folder as it started (a rank died of SIGBUS reading a file the other had
    removed), and each replayed the DDP wrapper after the script had destroyed its process group.
    Each rank now writes ``OUT/rank_<r>/`` and judges the model DDP wraps, on its own."""
    out = tmp_path / "out"
    proc = torchrun("-m", "instrumented_backend", "diagnose", "--fault", "relu*1.5", "--out", str(out), str(SCRIPT),
                    "ddp_plain", str(tmp_path / "unused"), status=1)  # 1: each rank found the bug
    assert sorted(p.name for p in out.iterdir()) == ["rank_0", "rank_1"]
    assert proc.stderr.count("judged as the TwoBuckets it wraps (its .module), on this rank alone") == 2, proc.stderr
    for rank in (0, 1):
        text = (out / f"rank_{rank}" / "diagnosis.txt").read_text()
        assert "the compiled outputs are wrong" in text and "culprit: relu (aten.relu.default)" in text, text
        assert "h = torch.relu(self.first(x))" in text
        assert list((out / f"rank_{rank}" / "repros").glob("repro_*.py")), text


_EAGER_FAILS = """
import torch

def reshape(x):
    return x.view(3, 7)  # 16 elements: eager raises as the compile does

torch.compile(reshape)(torch.randn(4, 4))
"""


def test_the_python_diagnosis_on_one_rank_of_several_writes_that_ranks_folder(tmp_path, monkeypatch):
    """``ib.diagnose`` and ``diagnose_script`` called on every rank (torchrun's variables set) each
    write under ``out_dir/rank_<r>``, once: a folder already the rank's is not nested again."""
    from instrumented_backend.capture.distributed import rank_out_dir
    from instrumented_backend.diagnosis.script import diagnose_script

    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert rank_out_dir(tmp_path / "a") == rank_out_dir(rank_out_dir(tmp_path / "a")) == tmp_path / "a" / "rank_1"
    result = ib.diagnose(lambda x: x.view(3, 7), torch.randn(4, 4), out_dir=tmp_path / "api", progress=False)
    assert result.verdict == "eager_error"
    assert result.reports["text"] == str(tmp_path / "api" / "rank_1" / "diagnosis.txt")
    assert sorted(p.name for p in (tmp_path / "api").iterdir()) == ["rank_1"]
    script = tmp_path / "fails.py"
    script.write_text(_EAGER_FAILS)
    (scripted,) = diagnose_script(script, out_dir=tmp_path / "script", progress=False, echo=lambda line: None)
    assert scripted.verdict == "eager_error"
    assert (tmp_path / "script" / "rank_1" / "diagnosis.txt").is_file()
    assert sorted(p.name for p in (tmp_path / "script").iterdir()) == ["rank_1"]
    monkeypatch.setenv("WORLD_SIZE", "1")  # one rank alone: no folder of its own
    assert rank_out_dir(tmp_path / "a") == tmp_path / "a"
