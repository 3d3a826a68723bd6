"""Small versions of the benchmarks, run in CI (the full ones are run by hand: see benchmarks/)."""

from __future__ import annotations

import sys

from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))



def test_provenance_coverage_smoke_prints_its_table():
    import subprocess

    proc = subprocess.run([sys.executable, "benchmarks/provenance_coverage.py", "--smoke"], cwd=REPO,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "gather_scatter" in proc.stdout and "int_bool" in proc.stdout
    assert "targets (identical, equal, 100% kernels, >=99% mapped, >=97% sourced): MET" in proc.stdout


def test_html_report_benchmark_smoke_prints_size_and_time_to_interactive():
    import subprocess

    from browser import require_browser

    require_browser()
    proc = subprocess.run([sys.executable, "benchmarks/html_report.py", "--layers", "2", "--loads", "2"], cwd=REPO,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "MobileBERT (2 layers)" in proc.stdout and "time to interactive" in proc.stdout
    assert "console errors: 0" in proc.stdout


def test_time_to_root_cause_smoke_prints_the_ratio():
    import subprocess

    proc = subprocess.run([sys.executable, "benchmarks/time_to_root_cause.py", "--smoke"], cwd=REPO,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "tutorial doubling neg (forward): diagnose" in proc.stdout and "a = torch.neg(x1)" in proc.stdout


def test_minify_option_benchmark_smoke_prints_both_ratios():
    import subprocess

    proc = subprocess.run([sys.executable, "benchmarks/minify_option.py", "--smoke"], cwd=REPO,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "minify option, first call: median" in proc.stdout and "minify option, process: median" in proc.stdout


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


def test_minifier_benchmark_smoke_prints_its_table():
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "benchmarks/minifier_vs_pytorch.py", "--smoke"], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "tutorial" in proc.stdout and "ours compiles" in proc.stdout


def test_profile_overhead_benchmark_smoke_prints_its_ratio():
    import re
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "benchmarks/profile_overhead.py", "--smoke"], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    ratio = re.search(r"ratio ib.profile / plain torch.profiler: ([0-9.]+)x", proc.stdout)
    assert ratio and float(ratio.group(1)) > 0


def test_compile_overhead_benchmark_smoke_prints_its_ratio():
    import re
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "benchmarks/overhead.py", "--smoke"], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    ratio = re.search(r"instrumented/inductor: ([0-9.]+)x CPU time, ([0-9.]+)x wall time", proc.stdout)
    assert ratio and float(ratio.group(1)) > 0 and float(ratio.group(2)) > 0, proc.stdout


def test_memory_benchmark_smoke_prints_both_backends():
    import subprocess

    proc = subprocess.run([sys.executable, "benchmarks/memory.py", "--smoke"], cwd=REPO, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "inductor RSS" in proc.stdout and "instrumented RSS" in proc.stdout and "capture limit 2" in proc.stdout
