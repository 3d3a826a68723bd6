"""``diagnose`` on public PyTorch issue reports (``tests/real_bugs/cases``): each script as its
author wrote it, each verdict the one the maintainers' discussion supports (decided from the
thread, written in the case's header). A smoke subset, one case of each verdict, runs by default;
`make test-all` runs every case. ``benchmarks/real_bugs.py`` prints the table with the times."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "real_bugs"))
from corpus import NOT_A_BUG, diagnose_case, load_cases  # noqa: E402

CASES = {case.name: case for case in load_cases()}
# One case of each verdict, the fastest of its kind
SMOKE = ("gh197895_float_floor_divide", "gh186799_atan2_amin_grad", "gh185885_index_add_negative_index",
         "gh182131_fp16_cast_before_add", "gh118735_generator_manual_seed_rand", "ok_mlp")


def test_the_corpus_holds_30_bugs_and_10_reports_that_are_none_each_citing_its_issue():
    bugs = [c for c in CASES.values() if c.expected == "bug"]
    others = [c for c in CASES.values() if c.expected == "not_a_bug"]
    assert len(bugs) >= 30 and len(others) >= 10, (len(bugs), len(others))
    for case in CASES.values():
        assert case.verdict, f"{case.name}: no expected verdict"
        assert (case.verdict in NOT_A_BUG) == (case.expected == "not_a_bug"), case.name
        if not case.name.startswith("ok_"):
            assert case.number.startswith("#"), f"{case.name}: no issue cited"
    assert set(SMOKE) <= set(CASES)


# Reports where diagnose's verdict and the thread's disagree, and why: kept as expected failures.
DISAGREES: dict[str, str] = {}


def _check(name: str) -> None:
    run = diagnose_case(CASES[name], minify=False, check_repro=False)
    assert run.right, f"{name}: expected {run.case.verdict}, diagnose said {run.verdict}\n{run.output_tail}"
    assert run.exit_code == (0 if run.case.expected == "not_a_bug" else 1), run.output_tail


@pytest.mark.parametrize("name", SMOKE)
def test_a_real_report_gets_the_verdict_its_discussion_supports(name):
    _check(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", [
    pytest.param(name, marks=pytest.mark.xfail(reason=DISAGREES[name], strict=True)) if name in DISAGREES else name
    for name in sorted(set(CASES) - set(SMOKE))])
def test_every_real_report_gets_the_verdict_its_discussion_supports(name):
    _check(name)
