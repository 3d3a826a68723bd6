"""The README and the docs are a contract: every Python block in them runs, and every command line.

Python blocks run as written, in a namespace that defines the names the README leaves to the
reader (``fn``, ``inputs``, ``x1``/``x2``, ``model``, ``gm``, ``example_inputs``; ``cap`` is the
capture of the tutorial's ``foo1``), in a scratch working directory. Command lines run as written
with their placeholders filled in (``script.py``, ``DIR``, ``[...]`` options, ``<repro>.py``).
Three kinds are not run here, and are checked instead: ``make demo``/``make test`` (a dry run:
CI runs the real ones), and the full benchmarks (``--help``: their smoke versions run in
``test_benchmark_smoke.py``).
"""

from __future__ import annotations

import linecache
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch
from conftest import REPO, foo1, scratch_tmpdir_env, tutorial_inputs

import instrumented_backend as ib

# The README and the documentation site's pages: one contract
DOC_FILES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
README = "\n".join(path.read_text() for path in DOC_FILES)
PYTHON_BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)
BASH_LINES = [line.split("#", 1)[0].strip() for block in re.findall(r"```bash\n(.*?)```", README, re.S)
              for line in block.splitlines() if line.split("#", 1)[0].strip()]
# Command lines quoted in the prose; a bare "python -m minifier" naming the tool is not one.
INLINE_COMMANDS = [span for span in re.findall(r"`((?:\.venv/bin/)?python [^`]+)`", README)
                   if (span.split()[1] == "-m" and any(t.endswith(".py") for t in span.split()[3:]))
                   or span.startswith("python <")
                   or span.split()[1] == "benchmarks/minifier_vs_pytorch.py"]
BENCHMARKS_RUN_BY_HAND = ("benchmarks/provenance_coverage.py", "benchmarks/overhead.py",
                          "benchmarks/minifier_vs_pytorch.py", "benchmarks/html_report.py",
                          "benchmarks/time_to_root_cause.py", "benchmarks/minify_option.py",
                          "benchmarks/real_bugs.py", "benchmarks/profile_overhead.py", "benchmarks/memory.py",
                          "benchmarks/gpu_check.py")


def _namespace() -> dict:
    x1, x2 = tutorial_inputs(torch.float32)
    return {"torch": torch, "ib": ib, "fn": foo1, "inputs": (x1, x2), "x1": x1, "x2": x2, "model": foo1,
            "gm": torch.fx.symbolic_trace(foo1), "example_inputs": [x1, x2]}


@pytest.fixture(scope="module")
def foo1_capture():
    torch.compiler.reset()
    x1, x2 = tutorial_inputs(torch.float32)
    with ib.capture() as session:
        torch.compile(foo1, backend="instrumented")(x1, x2)
    return session.graphs[0]


def test_the_readme_has_what_these_tests_expect():
    assert len(PYTHON_BLOCKS) >= 5 and any("make demo" in line for line in BASH_LINES)
    assert any("instrumented_backend run" in line for line in BASH_LINES)
    assert any("python -m minifier" in span for span in INLINE_COMMANDS)


@pytest.mark.parametrize("index", range(len(PYTHON_BLOCKS)), ids=lambda i: PYTHON_BLOCKS[i].split("\n", 1)[0][:40])
def test_python_block_runs_as_written(index, foo1_capture, tmp_path, monkeypatch):
    block = PYTHON_BLOCKS[index]
    monkeypatch.chdir(tmp_path)
    namespace = {**_namespace(), "cap": foo1_capture}
    filename = f"README.md python block {index}"
    linecache.cache[filename] = (len(block), None, block.splitlines(keepends=True), filename)  # as a file's lines
    code = compile(block, filename, "exec")
    if "minify(gm" in block:  # the block shrinks a failing graph: give it one
        with ib.faults.doubling_neg():
            exec(code, namespace)
        assert namespace["result"].repro_path is not None
    else:
        exec(code, namespace)
    if "cap.explain" in block:
        assert "torch.neg" in namespace["cap"].explain("a")
    if "ib.diagnose(exported" in block:  # what its comments say it prints
        result = namespace["result"]
        assert result.package.verdict == "inaccurate" and "fails alike" in result.package.python_wrapper
        assert result.divergence.culprit.startswith("tanh"), result.render()


@pytest.fixture(scope="module")
def placeholders(tmp_path_factory):
    """Real things for the README's placeholders: a script, a dump folder, a repro."""
    work = tmp_path_factory.mktemp("readme_cli")
    script = work / "script.py"
    script.write_text(
        "import sys, torch\n"
        "known = {'--flag', 'v', '--out', 'ckpt'}\n"
        "assert set(sys.argv[1:]) <= known, sys.argv\n"
        "step = torch.compile(lambda x: torch.tanh(x) * 2 + 1)\n"
        "print('result', step(torch.randn(32, 32)).shape)\n")
    (work / "train.py").write_text(script.read_text())
    with ib.faults.doubling_neg():
        from minifier import AccuracyFailure, minify

        x = tutorial_inputs(torch.float32)
        repro = minify(torch.fx.symbolic_trace(foo1), list(x), check=AccuracyFailure(),
                       repro_dir=str(work)).repro_path
    return {"work": work, "script": script, "dir": work / "dump", "repro": Path(repro)}


def _filled(command: str, things: dict) -> str:
    command = command.replace("[script args]", "--flag v").replace("[--kernels]", "--kernels")
    command = command.replace("[--out DIR]", "--out DIR").replace("<repro>.py", str(things["repro"]))
    command = re.sub(r"\bDIR\b", str(things["dir"]), command)
    return command.replace(".venv/bin/python", sys.executable).replace(".venv/bin/pip", f"{sys.executable} -m pip")


def _run(command: str, cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    argv = shlex.split(command)
    if argv[0] == "python":
        argv[0] = sys.executable
    elif argv[0] == "torchrun":  # the launcher torch installs, as the venv's python runs it
        argv[:1] = [sys.executable, "-m", "torch.distributed.run"]
    with tempfile.TemporaryDirectory(prefix="ib-readme-") as scratch:  # e.g. torchrun's logs' folder
        env = {**os.environ, **scratch_tmpdir_env(scratch),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


COMMANDS = BASH_LINES + INLINE_COMMANDS


@pytest.mark.parametrize("command", COMMANDS)
def test_command_line_runs_as_written(command, placeholders):
    if command.startswith("make "):
        target = command.split()[1]
        proc = subprocess.run(["make", "-n", target], cwd=REPO, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr  # CI runs `make test` for real; test_examples runs the demo
        return
    if any(bench in command for bench in BENCHMARKS_RUN_BY_HAND):
        script = next(bench for bench in BENCHMARKS_RUN_BY_HAND if bench in command)
        proc = _run(f"python {REPO / script} --help", REPO)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return
    filled = _filled(command, placeholders)
    if {"show", "html"} & set(filled.split()) and not placeholders["dir"].exists():  # they read a dump
        _run(_filled("python -m instrumented_backend run script.py --dump DIR", placeholders), placeholders["work"])
    if "ranks" in filled.split() and not (placeholders["dir"] / "rank_1").exists():
        torchrun = next(line for line in COMMANDS if line.startswith("torchrun"))
        _run(_filled(torchrun, placeholders), placeholders["work"])
    in_repo = command.startswith(".venv/") or " examples/" in command or " benchmarks/" in command
    proc = _run(filled, REPO if in_repo else placeholders["work"])
    if " diagnose " in f" {filled} ":  # exits 1 when it finds a bug, 0 when there is none
        expected = 1 if "--fault" in filled else 0
        assert proc.returncode == expected, f"{filled}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
        assert ("culprit source line" in proc.stdout) == bool(expected) and "checked 1 compiled target" in proc.stdout
        if "examples/tutorial_model.py" in filled:  # the demo's last step: the tutorial's script, unchanged
            assert "first failing layer: inductor" in proc.stdout and "a = torch.neg(x1)" in proc.stdout, proc.stdout
            repro = re.search(r"run it: python (diagnosis/repros/repro_\S+\.py)", proc.stdout)
            assert repro and (REPO / repro.group(1)).is_file(), proc.stdout
        return
    repro_command = str(placeholders["repro"]) in filled
    if repro_command and "-m minifier" not in filled:
        assert proc.returncode == 1 and "REPRODUCES" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
        return
    assert proc.returncode == 0, f"{filled}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    if " run " in f" {filled} ":
        assert "captured 1 graph(s)" in proc.stderr
        if "--dump" in filled.split():
            assert ib.load(placeholders["dir"]).graphs
        if "--html" in filled.split():
            page = placeholders["work"] / filled.split("--html")[1].split()[0]
            assert "<html" in page.read_text()[:2000].lower()
    if filled.startswith("torchrun"):
        assert {g.rank for g in ib.load(placeholders["dir"])} >= {0, 1}
    if " profile " in f" {filled} " and "--out" in filled:
        out = placeholders["work"] / filled.split("--out")[1].split()[0]  # the first --out is ours
        assert (out / "profile_0.json").exists() and (out / "trace_0.json").exists()


def test_every_picture_in_the_docs_is_a_browser_tests_screenshot():
    """The README's and the docs' pictures exist, and each is a screenshot the browser tests take
    (``_shot(browser, name)`` in tests/test_html_report.py), which ``make screenshots`` takes again."""
    pictures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", README)
    assert pictures, "the README shows the HTML report"
    shots = set(re.findall(r'_shot\(browser, "(\w+)"\)', (REPO / "tests" / "test_html_report.py").read_text()))
    for picture in pictures:
        path = REPO / picture if picture.startswith("docs/") else REPO / "docs" / picture
        assert path.is_file() and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", picture
        assert path.stem in shots, f"{picture} is not a screenshot the browser tests take"
    make = subprocess.run(["make", "-n", "screenshots"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert make.returncode == 0 and "IB_ARTIFACTS=docs/images" in make.stdout, make.stderr
