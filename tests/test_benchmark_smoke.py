"""Small versions of the benchmarks, run in CI (the full ones are run by hand: see benchmarks/)."""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterator

import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))


def run_benchmark(script: str, *argv: str, timeout: int = 900) -> str:
    """Run ``benchmarks/<script> argv`` from the repository root; its stdout (fails on a non-zero exit)."""
    import subprocess

    proc = subprocess.run([sys.executable, f"benchmarks/{script}", *argv], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc.stdout


# Each smoke run is a fresh process that mostly compiles; the longest first. A run is named by its
# script, and its options where a script runs twice.
SMOKE_RUNS = {
    "minifier_vs_pytorch.py": ("--smoke",),
    "memory.py": ("--smoke",),
    "provenance_coverage.py": ("--smoke",),
    "minify_option.py": ("--smoke",),
    "html_report.py": ("--layers", "1", "--loads", "2"),
    "overhead.py": ("--smoke",),
    "overhead.py --chunk-cache": ("--smoke", "--chunk-cache"),
    "time_to_root_cause.py": ("--smoke",),
    "profile_overhead.py": ("--smoke",),
}


@pytest.fixture(scope="module")
def smoke() -> Iterator[Callable[[str], str]]:
    """The stdout of each smoke run, all started at once and run two at a time (the machines have
    two cores and the test process only waits): the module takes about half its sequential time.
    A smoke run checks that a benchmark runs and prints its table, not its figures."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = {name: pool.submit(run_benchmark, name.split()[0], *argv) for name, argv in SMOKE_RUNS.items()}
        yield lambda name: runs[name].result()


def test_provenance_coverage_smoke_prints_its_table(smoke):
    stdout = smoke("provenance_coverage.py")
    assert "int_bool" in stdout
    assert "targets (identical, equal, 100% kernels, >=99% mapped, >=97% sourced): MET" in stdout


def test_html_report_benchmark_smoke_prints_size_and_time_to_interactive(smoke):
    from browser import require_browser

    require_browser()
    stdout = smoke("html_report.py")
    assert "MobileBERT (1 layer)" in stdout and "time to interactive" in stdout
    assert "console errors: 0" in stdout


def test_time_to_root_cause_smoke_prints_the_ratio(smoke):
    stdout = smoke("time_to_root_cause.py")
    assert "tutorial doubling neg (forward): diagnose" in stdout and "a = torch.neg(x1)" in stdout


def test_minify_option_benchmark_smoke_prints_both_ratios(smoke):
    stdout = smoke("minify_option.py")
    assert "minify option, first call: median" in stdout and "minify option, process: median" in stdout


def test_minify_option_summary_bootstraps_over_several_pairs():
    """The smoke run has one pair; a real run's interval is resampled over its pairs."""
    from minify_option import summary

    line = summary("first call", [1.0, 1.1, 0.9, 1.0, 1.2])
    assert line.startswith("minify option, first call: median 1.000x") and "over 5 pair(s)" in line
    low, high = (float(part.rstrip("x")) for part in line.split("interval ")[1].split(" over")[0].split(" - "))
    assert 0.9 <= low <= 1.0 <= high <= 1.2


def test_statement_filter_keeps_computation_and_drops_structure():
    from instrumented_backend.provenance.coverage import statement_lines
    from instrumented_backend.records import KernelLine

    lines = [
        KernelLine("k", i, text)
        for i, text in enumerate(
            [
                "    {",
                "    for(int64_t x0=0; x0<8; x0+=1)",
                "    #pragma omp for",
                "        auto tmp0 = in_ptr0[x0];",
                "        tmp_acc0 = tmp_acc0 + tmp0;",
                "        out_ptr0[x0] = tmp0;",
                'extern "C"  void  kernel(const float* in_ptr0,',
            ]
        )
    ]
    assert [line.text.strip() for line in statement_lines(lines)] == [
        "auto tmp0 = in_ptr0[x0];", "tmp_acc0 = tmp_acc0 + tmp0;", "out_ptr0[x0] = tmp0;"]


def test_minifier_benchmark_smoke_prints_its_table(smoke):
    import re

    stdout = smoke("minifier_vs_pytorch.py")
    assert "tutorial" in stdout and "ours compiles" in stdout and "ours warm s" in stdout
    assert "1 check cold s" in stdout  # one fresh-process check of the whole graph, beside ours cold
    assert "speed-up vs 1 worker(s)" in stdout  # the scaling table: one and two workers
    # started by the call, the zygote was a fork of the benchmark's process, not a fresh interpreter
    assert "ours spawned s" in stdout and re.search(r"^tutorial\b.* fork ", stdout, re.MULTILINE), stdout


def test_pytorch_runs_get_the_fault_only_where_torch_is_imported(tmp_path):
    """PyTorch's cold runs carry the case's fault in a ``sitecustomize`` beside its repro. A
    process that never imports torch (Inductor's vector-ISA probe loads a test library in a bare
    ``python -c`` child, one per ISA) must start as it would for a user, not import this package
    and torch (seconds each); one that imports torch gets the fault."""
    import subprocess

    import minifier_vs_pytorch

    env = minifier_vs_pytorch.pytorch_environment("tutorial", tmp_path)  # what the benchmark's run gets

    def child(code: str) -> str:
        proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return proc.stdout.strip()

    assert child("import sys; print(sorted({'torch', 'instrumented_backend'} & set(sys.modules)))") == "[]"
    assert child("import torch\nfrom instrumented_backend.diagnosis.faults import active_faults\n"
                 "print([fault.op for fault in active_faults()])") == "['neg']"


def test_profile_overhead_benchmark_smoke_prints_its_ratio(smoke):
    import re

    stdout = smoke("profile_overhead.py")
    ratio = re.search(r"ratio ib.profile / plain torch.profiler: ([0-9.]+)x", stdout)
    assert ratio and float(ratio.group(1)) > 0


def test_compile_overhead_benchmark_smoke_prints_its_ratio(smoke):
    import re

    for name in ("overhead.py", "overhead.py --chunk-cache"):
        stdout = smoke(name)
        ratio = re.search(r"instrumented/inductor: ([0-9.]+)x CPU time over ([0-9]+) pairs", stdout)
        assert ratio and float(ratio.group(1)) > 0 and float(ratio.group(2)) > 0, stdout
        # the measuring process checks it ran with the cache exactly when asked, and the table says so
        assert ("block (chunk cache)" in stdout) == name.endswith("--chunk-cache"), stdout


def test_compile_overhead_instruction_counts_are_read_from_callgrind_dumps(tmp_path, monkeypatch):
    """``overhead.py --instructions`` reads one count per compile from callgrind's dumps (the run
    itself takes minutes under valgrind: by hand), and says what it needs when valgrind is missing."""
    import overhead

    def dump(number: int, backend: str, total: int) -> None:
        (tmp_path / f"callgrind.out.4242.{number}").write_text(
            f"# callgrind format\nversion: 1\ncreator: callgrind-3.19.0\ndesc: Trigger: dump {backend}\n"
            f"events: Ir\nsummary: 0\n\nfl=(1) python\nfn=(1) main\n0 {total}\n\ntotals: {total}\n")

    for number, backend, total in ((1, "inductor", 1000), (2, "instrumented", 1031), (3, "instrumented", 1029),
                                   (4, "inductor", 998), (10, "inductor", 1001)):
        dump(number, backend, total)
    (tmp_path / "callgrind.out.4242").write_text("desc: Trigger: Program termination\ntotals: 99999\n")
    assert overhead.dumped_instructions(tmp_path) == {"inductor": [1000, 998, 1001], "instrumented": [1031, 1029]}
    monkeypatch.setattr("shutil.which", lambda name: None)
    with pytest.raises(SystemExit, match="needs valgrind"):
        overhead.measure_instructions("block", 1, 1)


def test_instruction_counting_processes_hash_strings_the_same_way(monkeypatch):
    """Counting processes get a fixed PYTHONHASHSEED (set and dict orders pick code paths), unless
    the user chose one; the rest of the environment passes through."""
    import overhead

    monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    monkeypatch.setenv("OVERHEAD_PROBE", "kept")
    env = overhead.counting_environment()
    assert env["PYTHONHASHSEED"] == "0" and env["OVERHEAD_PROBE"] == "kept"
    monkeypatch.setenv("PYTHONHASHSEED", "7")
    assert overhead.counting_environment()["PYTHONHASHSEED"] == "7"


def test_compile_overhead_pairs_cover_one_frame_stack_chunk_evenly():
    """Each process's pairs start from stack paddings spread evenly over one CPython frame-stack
    chunk (in random order), and a padding is a frame that many slots larger that calls through."""
    import overhead

    phases = overhead.stack_phases(16, seed=3)
    assert len(set(phases)) == 16 and all(0 <= p < overhead.CHUNK_SLOTS for p in phases)
    assert phases != sorted(phases)  # shuffled: a slow drift of the machine is not aligned with depth
    ordered = sorted(phases)
    gaps = [b - a for a, b in zip(ordered, ordered[1:])] + [ordered[0] + overhead.CHUNK_SLOTS - ordered[-1]]
    assert max(gaps) - min(gaps) <= 1 and sum(gaps) == overhead.CHUNK_SLOTS
    assert overhead.stack_phases(16, seed=4) != phases  # each process its own offset
    pad = overhead.stack_padded(700)
    assert pad.__code__.co_nlocals == 701 and pad(lambda: "through") == "through"


# A child that calls a tiny function 300 times from every stack padding (8 slots apart), and prints
# the most minor page faults one padding's 300 calls took, and whether the chunk cache is loaded.
_BOUNDARY_CALLS = """
import resource, sys
sys.path.insert(0, "benchmarks")
import overhead
def leaf():
    return None
def hot():
    for _ in range(300):
        leaf()
worst = 0
for slots in range(0, overhead.CHUNK_SLOTS, 8):
    pad = overhead.stack_padded(slots)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    pad(hot)
    worst = max(worst, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(worst, overhead.chunk_cache_loaded())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="LD_PRELOAD and /proc: Linux only")
def test_chunk_cache_takes_the_frame_stack_chunk_thrash_away(tmp_path):
    """``overhead.py --chunk-cache``'s library, built as the benchmark builds it: without it, a call
    that lands on a chunk boundary faults in a fresh chunk every time (gh-142183, CPython before
    3.13); preloaded, the freed chunk is kept and the same calls take almost no faults; the measuring
    process sees whether it is loaded."""
    import os
    import subprocess

    import overhead

    library = overhead.build_chunk_cache(tmp_path)

    def worst_faults(preload: bool) -> int:
        env = {**os.environ, **({"LD_PRELOAD": str(library)} if preload else {})}
        proc = subprocess.run([sys.executable, "-c", _BOUNDARY_CALLS], cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        faults, loaded = proc.stdout.split()[-2:]
        assert loaded == str(preload)  # the child sees whether it runs with the cache
        return int(faults)

    unloaded = worst_faults(preload=False)
    if sys.version_info < (3, 13):  # the bug is there to see
        assert unloaded >= 290
    assert worst_faults(preload=True) <= 30


def test_instruction_counts_build_kernels_valgrind_can_run():
    """Under ``--instructions`` the kernels are built for AVX2 at most: valgrind stops at the first
    AVX-512 instruction. Fails loudly if Inductor's config keys move."""
    import platform

    import overhead
    import torch._inductor.config as inductor_config

    with overhead.kernels_valgrind_can_run():
        if platform.machine() in ("x86_64", "AMD64"):
            assert (inductor_config.cpp.simdlen, inductor_config.cpp.march) == (256, "x86-64-v3")
    assert inductor_config.cpp.simdlen is None  # restored for the rest of the process


def test_memory_benchmark_smoke_prints_both_backends(smoke):
    stdout = smoke("memory.py")
    assert "inductor RSS" in stdout and "instrumented RSS" in stdout and "capture limit 1" in stdout
    assert "full gc.collect()" in stdout and "instrumented, captures cleared" in stdout


def test_paired_medians_are_medians_of_each_side_and_the_range_of_single_pairs():
    """``--repeats``: a slow outlier on either side moves a mean, not the median; the range is of
    the pairs' own ratios, not of the medians'."""
    from minifier_vs_pytorch import paired_medians

    pairs = [({"seconds": 1.0}, {"seconds": 3.0, "ok": True}), ({"seconds": 4.0}, {"seconds": 3.3, "ok": True}),
             ({"seconds": 1.1}, {"seconds": 9.0, "ok": True})]
    summary = paired_medians(pairs)
    assert summary["ours"]["seconds"] == 1.1 and summary["theirs"]["seconds"] == 3.3
    assert summary["ratio"] == pytest.approx(3.0)
    low, high = summary["pair range"]
    assert low == 3.3 / 4.0 and high == 9.0 / 1.1
    pairs[1][1]["ok"] = False  # one of PyTorch's runs did not finish: no ratio
    assert paired_medians(pairs)["ratio"] is None and paired_medians(pairs)["pair range"] is None
