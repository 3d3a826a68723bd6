"""The examples a user copies run end to end and print the diagnosis (each in a fresh process)."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Iterator

import pytest
from conftest import REPO

RUNS = {  # each example with the arguments its test gives it
    "neg_compile_error": ("neg_compile_error.py",),
    "neg_accuracy": ("neg_accuracy.py", "--no-bisect"),
    "profile_pointwise": ("profile_pointwise.py", "--rows", "2048", "--warmup", "2", "--iters", "5"),
    "mobilebert_train": ("profile_mobilebert.py", "--small", "--train"),
}


def _run_example(name: str, *args: str) -> str:
    proc = subprocess.run([sys.executable, str(REPO / "examples" / name), *args], capture_output=True,
                          text=True, timeout=600, cwd=str(REPO))
    assert proc.returncode == 0, f"{name} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="module")
def example() -> Iterator[Callable[[str], str]]:
    """The stdout of each example run, all started at once and run two at a time (two cores; this
    process only waits). The tests check what the examples print, never their timings."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs: dict[str, Future] = {key: pool.submit(_run_example, *argv) for key, argv in RUNS.items()}
        yield lambda key: runs[key].result()


def test_neg_compile_error_example(example):
    out = example("neg_compile_error")
    assert "failing line" in out and "auto tmp3 = max_propagate_nan(tmp0, tmp2);" in out
    assert "<- ops.neg <- aten.neg.default (neg) <- a = torch.neg(x1)" in out
    assert "first failing layer: inductor" in out
    report = out.split("HTML report (the failing line highlighted, every pane linked): ")[1].split("\n")[0]
    assert "max_propagate_nan" in Path(report).read_text()


def test_neg_accuracy_example(example):
    out = example("neg_accuracy")
    assert "FAIL (1 of 1 outputs)" in out and "first failing layer: inductor" in out
    assert "culprit: neg (aten.neg.default)" in out and "<- ops.neg <- a = torch.neg(x1)" in out


def test_profile_pointwise_example_states_the_lower_bound(example):
    out = example("profile_pointwise")
    assert "speed-up:" in out and "cpp_fused_add_mul_0" in out
    assert f"Lower bound for cpp_fused_add_mul_0: {(3 * 2048 * 512 * 4 + 3 * 512 * 4) / 1e6:.2f} MB" in out
    assert "of the" in out and "GB/s this machine copies at" in out


def test_profile_mobilebert_example_profiles_a_training_step(example):
    """The README's MobileBERT story as a training step. Its forward is the graph an inference run
    profiles, so no inference run is made: GEMMs as extern kernels, eager ops beside them."""
    out = example("mobilebert_train")
    header = out.split("\n", 1)[0]
    assert "forward and backward per step" in header and header.endswith("#1 0/0 backward")
    backward = out.split("Backward: ", 1)[1]
    assert " kernels, " in backward and "modeling_mobilebert.py:" in backward.split("\n", 1)[0]
    assert "extern_kernels.addmm" in out and "aten::linear" in out
    assert "GEMM-like ops: eager" in out and "Diagnosis:" in out
