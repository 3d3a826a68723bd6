"""Fidelity and line-map coverage on the real-model corpus (``tests/corpus/``).

Each backend runs the cases in a fresh process, caches off; plain Inductor's process never
imports this package. For every case: the output code of every graph (forward, backward, each
graph of a break, each recompile) is byte-identical to plain Inductor's, taken raw from
Inductor's own ``GraphLowering.save_output_code`` hook; outputs and gradients are equal
(``torch.equal``); no capture has a problem and no InstrumentationWarning is raised; and the
line map reaches its targets: every kernel tagged, >= 99% of computation lines with an IR op and
an FX node, >= 97% with a user source line. Where plain Inductor is itself not bit-reproducible
(``NONDETERMINISTIC``: atomic adds in an embedding backward), it is run twice and what differs
between its own two runs is compared with a tolerance.

`make test` runs ``DEFAULT_CASES`` (the gather repro of the CSE bug, training graphs, dynamic
shapes, ...); the Hugging Face and remaining models are marked slow (`make test-all`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "corpus"))
from cases import CASES, DEFAULT_CASES, NONDETERMINISTIC  # noqa: E402
from compare import CaseResult, run_and_compare  # noqa: E402

SLOW_CASES = tuple(name for name in CASES if name not in DEFAULT_CASES)
MAPPED_TARGET, SOURCED_TARGET = 99.0, 97.0
# Both backends' processes build their C++ in this test run's own Inductor cache (fresh per run,
# set by conftest): its vector-ISA probe libraries are built once per run, not again here. Their caches of
# generated code are off, so each process generates its own code.
RUN_CACHE = Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])


def _needs_transformers(cases: tuple[str, ...]) -> None:
    if any(name in ("bert", "bert_train", "gpt2", "gpt2_train", "t5", "vit", "llama", "llama_train")
           for name in cases):
        pytest.importorskip("transformers", reason="the model corpus needs the test extra (transformers)")


@pytest.fixture(scope="module")
def default_results(tmp_path_factory) -> dict[str, CaseResult]:
    _needs_transformers(DEFAULT_CASES)
    results = run_and_compare(list(DEFAULT_CASES), tmp_path_factory.mktemp("corpus"), side_by_side=True,
                              cache_dir=RUN_CACHE)
    return {r.case: r for r in results}


@pytest.fixture(scope="module")
def slow_results(tmp_path_factory) -> dict[str, CaseResult]:
    _needs_transformers(SLOW_CASES)
    results = run_and_compare(list(SLOW_CASES), tmp_path_factory.mktemp("corpus_slow"), side_by_side=True,
                              cache_dir=RUN_CACHE)
    return {r.case: r for r in results}


def _check(result: CaseResult) -> None:
    assert result.graphs >= 1
    assert result.codes_identical, f"output code differs from plain Inductor's:\n{result.first_difference}"
    assert result.captured_codes_identical, "a capture's output_code is not the code Inductor loaded"
    assert result.outputs_equal, "outputs differ from plain Inductor's"
    assert result.grads_equal, "gradients differ from plain Inductor's"
    if result.case in NONDETERMINISTIC:
        # Plain Inductor, run twice, may disagree with itself on the gradients its atomic adds
        # accumulate (those are compared with a tolerance); never on the forward outputs.
        assert not result.unstable_outputs, (NONDETERMINISTIC[result.case], result.unstable_outputs)
    assert not result.problems, result.problems
    assert not result.warnings, result.warnings
    coverage = result.coverage
    assert coverage["kernels tagged %"] == 100.0, coverage
    assert coverage["with IR op + FX node %"] >= MAPPED_TARGET, (coverage, result.unmapped)
    assert coverage["with source line %"] >= SOURCED_TARGET, (coverage, result.unsourced_nodes)


@pytest.mark.parametrize("case", DEFAULT_CASES)
def test_corpus_case(default_results, case):
    _check(default_results[case])


@pytest.mark.slow
@pytest.mark.parametrize("case", SLOW_CASES)
def test_corpus_case_slow(slow_results, case):
    _check(slow_results[case])


def test_the_default_cases_cover_the_text_keyed_paths():
    """The CSE class of bug needs vectorized indirect loads and training graphs to show."""
    assert {"gather_scatter", "bert_train", "resnet_train", "dynamic_softmax"} <= set(DEFAULT_CASES)
    assert set(DEFAULT_CASES) <= set(CASES)
