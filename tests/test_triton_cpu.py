"""Inductor's Triton kernels on this CPU machine: the line map, byte-identical output code, the
queries, the HTML report, dump and load, and faults found by ``diagnose``, with every kernel run
through Triton's interpreter (``tests/triton_cpu.py``).

The cases run once, in a fresh process (``tests/triton_cases.py``): Triton's interpreter only
works when ``TRITON_INTERPRET=1`` is set before triton is first imported, which this process did
long ago. They need the ``triton`` extra; CI installs it and sets ``IB_REQUIRE_TRITON=1``, which
makes its absence a failure rather than a skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from triton_cpu import triton_available

import instrumented_backend as ib

HERE = Path(__file__).resolve().parent


def _require_triton() -> None:
    """Skip without the triton extra, or fail where CI requires it (``IB_REQUIRE_TRITON=1``)."""
    if not triton_available(run_kernels=True):
        if os.environ.get("IB_REQUIRE_TRITON") == "1":
            pytest.fail("IB_REQUIRE_TRITON=1 but triton (and numpy) are not installed: pip install -e '.[triton]'")
        pytest.skip("triton is not installed (the triton extra: pip install -e '.[triton]')")


@pytest.fixture(scope="module")
def triton_run(tmp_path_factory) -> dict[str, Any]:
    _require_triton()
    folder = tmp_path_factory.mktemp("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1", "TORCHINDUCTOR_CACHE_DIR": str(folder / "inductor_cache"),
           "TRITON_CACHE_DIR": str(folder / "triton_cache")}
    result = subprocess.run([sys.executable, str(HERE / "triton_cases.py"), str(folder / "out.json")], env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    return json.loads((folder / "out.json").read_text())


# Corpus cases (tests/corpus/cases.py) run on Triton, both backends side by side: indirect loads,
# integer and boolean kernels, a softmax under dynamic shapes, a graph break, RNG, a conv net's
# training step (2-d tiled kernels, batch norm's reductions, its backward).
CORPUS_CASES = ("gather_scatter", "int_bool", "dynamic_softmax", "graph_break", "dropout_rng", "resnet_train")


@pytest.fixture(scope="module")
def corpus_results(tmp_path_factory) -> dict[str, Any]:
    _require_triton()
    sys.path.insert(0, str(HERE / "corpus"))
    from compare import run_and_compare

    folder = tmp_path_factory.mktemp("triton_corpus")
    results = run_and_compare(list(CORPUS_CASES), folder, side_by_side=True, cache_dir=folder / "cache", triton=True)
    import torch

    codes = {name: torch.load(folder / "instrumented" / f"{name}.pt", weights_only=False)["codes"]
             for name in CORPUS_CASES}
    return {r.case: (r, codes[r.case]) for r in results}


@pytest.mark.parametrize("name", CORPUS_CASES)
def test_corpus_models_on_triton_are_identical_to_inductor_and_fully_mapped(corpus_results, name):
    result, codes = corpus_results[name]
    assert all("async_compile.triton(" in code and "async_compile.cpp" not in code for code in codes)
    assert result.codes_identical and result.captured_codes_identical, result.first_difference
    assert result.outputs_equal and result.grads_equal, result.first_difference
    assert not result.problems and not result.warnings, (result.problems, result.warnings)
    coverage = result.coverage
    assert coverage["kernels tagged %"] == 100.0 and coverage["statements mapped"] == coverage["statement lines"], (
        result.unmapped)
    assert coverage["statements sourced"] == coverage["statement lines"], result.unsourced_nodes


def _line_of(code: str) -> int:
    """The line number of ``code`` in tests/triton_cases.py."""
    lines = (HERE / "triton_cases.py").read_text().splitlines()
    return next(number for number, text in enumerate(lines, 1) if text.strip() == code)


def _case(run: dict[str, Any], name: str) -> dict[str, Any]:
    return next(case for case in run["cases"] if case["name"] == name)


@pytest.mark.parametrize("name", ["pointwise", "looped_reduction", "persistent_reduction", "training_backward",
                                  "dynamic_shapes"])
def test_every_statement_line_of_every_triton_kernel_is_tagged(triton_run, name):
    case = _case(triton_run, name)
    assert case["triton_kernels"] == case["kernels"] >= 1, case
    assert case["statements"] == case["mapped"] == case["sourced"] > 0, case["untagged"]
    assert not case["problems"], case["problems"]


@pytest.mark.parametrize("name", ["pointwise", "looped_reduction", "persistent_reduction", "training_backward",
                                  "dynamic_shapes"])
def test_triton_output_code_is_identical_to_inductors_and_runs_right(triton_run, name):
    case = _case(triton_run, name)
    assert case["identical"], "output code must be byte-identical to plain Inductor's on the Triton path"
    assert case["matches_eager"] and case["plain_matches_eager"]


def test_the_kinds_of_triton_kernel_are_all_there(triton_run):
    chains = {case["name"]: case["chains"] for case in triton_run["cases"]}
    texts = {name: " ".join(c["text"] for c in lines) for name, lines in chains.items()}
    assert "for r0_offset" not in texts["looped_reduction"]  # loop headers are structure, not statements
    assert "tl.sum(_tmp" in texts["looped_reduction"]  # a looped reduction's accumulator
    assert "tl.sum(tmp" in texts["persistent_reduction"] and "libdevice.exp" in texts["persistent_reduction"]
    assert _case(triton_run, "training_backward")["kinds"] == ["forward", "backward"]
    assert "libdevice.erf" in texts["training_backward"]  # GELU's forward, and its backward's kernels


def test_a_triton_line_reaches_its_ir_op_fx_node_and_source_line(triton_run):
    (neg,) = [c for c in _case(triton_run, "pointwise")["chains"] if c["text"] == "tmp2 = -tmp1"]
    assert neg["ir_ops"] == ["ops.neg"] and neg["fx_nodes"] == ["neg"]
    assert neg["code"] == "a = torch.neg(x1)"
    assert neg["source"].endswith(f"triton_cases.py:{_line_of('a = torch.neg(x1)')}")
    (symbolic,) = [c for c in _case(triton_run, "dynamic_shapes")["chains"] if c["text"] == "tmp2 = -tmp1"]
    assert symbolic["fx_nodes"] == ["neg"]


def test_queries_report_dump_and_load_on_a_triton_kernel(triton_run):
    queries = triton_run["queries"]
    assert "tmp2 = -tmp1" in queries["lines_for_neg"]
    assert "aten.neg.default" in queries["explain_neg"] and "tmp2 = -tmp1" in queries["explain_neg"]
    assert "# Corresponding FX code line: neg = torch.ops.aten.neg.default(arg0_1)" in queries["annotated"]
    assert "@triton.jit" in queries["annotated"]
    assert queries["loaded_same_lines"] and queries["loaded_same_code"]
    assert "triton_poi_fused_maximum_neg_0" in queries["html"] and "tmp2 = -tmp1" in queries["html"]


def test_a_fault_in_a_triton_lowering_is_found_down_to_its_line(triton_run):
    doubled = triton_run["faults"]["doubling_neg"]
    assert doubled["verdict"] == "inaccurate" and doubled["culprit"] == "neg", doubled["text"]
    assert doubled["culprit_lines"] == ["tmp2 = (2 * tmp1)"] and doubled["culprit_source"] == ["a = torch.neg(x1)"]
    assert doubled["layer"] == "inductor" and doubled["repro"], doubled["text"]
    neg_at = f"neg at triton_cases.py:{_line_of('a = torch.neg(x1)')}"
    assert any(op.startswith(neg_at) for op in doubled["repro_ops"]), doubled["repro_ops"]
    scaled = triton_run["faults"]["scaled_sin"]  # an op Triton kernels route (fp64 to libdevice)
    assert scaled["verdict"] == "inaccurate" and scaled["culprit"] == "sin", scaled["text"]
    assert scaled["culprit_lines"] == ["tmp1 = ((tl_math.sin(tmp0)) * 1.01)"], scaled["text"]


def test_a_triton_kernel_that_fails_is_explained_down_to_its_line(triton_run):
    """A syntax error fails as Inductor loads the kernel: a compile error; an undefined name fails
    in Triton's compiler on a GPU, and here where the interpreter runs the kernel."""
    for label, verdict, stage in (("syntax_error", "compile_error", "compile"),
                                  ("undefined_name", "runtime_error", "run")):
        fault = triton_run["faults"][label]
        assert fault["verdict"] == fault["expected"] == verdict, fault["text"]
        assert fault["culprit_source"] == ["a = torch.neg(x1)"], fault["text"]
        assert f"Triton {stage} error in kernel triton_poi_fused_maximum_neg_0" in fault["text"]
        assert "<- ops.neg <- aten.neg.default (neg) <- a = torch.neg(x1)" in fault["text"]
    assert triton_run["faults"]["syntax_error"]["culprit_lines"] == ["tmp2 = (-tmp1"]
    assert triton_run["faults"]["undefined_name"]["culprit_lines"] == ["tmp2 = no_such_function(tmp1)"]
    assert "SyntaxError: '(' was never closed" in triton_run["faults"]["syntax_error"]["text"]


def test_a_fault_replaces_the_triton_lowering_and_puts_it_back():
    """No triton needed: Inductor's Triton code generator imports without it. Its fp64-sensitive
    ops (sin) are routers over TritonOverrides' once a kernel was generated, which read the
    operand's dtype: the operand here is a float32 stand-in named ``x``."""
    import torch
    from torch._inductor.codegen.triton import TritonKernelOverrides

    from instrumented_backend.seams.codegen import cpp_overrides

    class Operand:
        dtype = torch.float32

        def __str__(self) -> str:
            return "x"

    x = Operand()
    assert cpp_overrides.overrides_class(cpp_overrides.TRITON) is TritonKernelOverrides  # routers set up
    before = TritonKernelOverrides.sin(x), TritonKernelOverrides.neg(x)
    with ib.faults.scaled("sin", 1.5), ib.faults.doubling_neg(reset_dynamo=False):
        assert TritonKernelOverrides.sin(x) == "((tl_math.sin(x)) * 1.5)"
        assert TritonKernelOverrides.neg(x) == "(2 * x)"
    assert (TritonKernelOverrides.sin(x), TritonKernelOverrides.neg(x)) == before
    with ib.faults.bad_lowering("neg", "-{x}", config={"cpp.simdlen": 1}):  # no triton template: left alone
        assert TritonKernelOverrides.neg(x) == before[1]
    with pytest.raises(ValueError, match="triton template"):
        ib.faults.bad_lowering("neg", "-{x}", config={"cpp.simdlen": 1}, triton="{y}")


def test_the_gpu_check_reads_the_cases_as_checks_and_runs_nothing_without_a_gpu(triton_run):
    """``benchmarks/gpu_check.py`` turns the same cases, run on CUDA, into one line per check."""
    sys.path.insert(0, str(HERE.parent / "benchmarks"))
    import gpu_check

    checks = gpu_check._checks(triton_run)
    assert len(checks) == 3 * len(triton_run["cases"]) + len(triton_run["faults"])
    assert all(passed for _, passed, _ in checks), [c for c in checks if not c[1]]
    result = subprocess.run([sys.executable, str(HERE.parent / "benchmarks" / "gpu_check.py")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "no CUDA device" in result.stdout, result.stdout + result.stderr
