"""Dump/load round trips, the dump_dir option, and the CLI (run and show)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import torch
from conftest import REPO, recompiling_script

import instrumented_backend as ib
from instrumented_backend.capture import dump as dump_module
from instrumented_backend.capture.dump import TEXT_FILES, DumpError
from instrumented_backend.cli import main


def _step(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.silu(x @ w).mean()


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    auto_dir = tmp_path_factory.mktemp("auto_dump")
    torch._dynamo.reset()
    w = torch.randn(8, 8, requires_grad=True)
    with ib.capture() as session:
        torch.compile(_step, backend="instrumented", options={"dump_dir": str(auto_dir)})(
            torch.randn(4, 8), w
        ).backward()
    return session, auto_dir


def test_session_dump_and_load_round_trip(trained, tmp_path):
    session, _ = trained
    root = session.dump(tmp_path / "dump")
    index = json.loads((root / "index.json").read_text())
    assert index["format"] == "instrumented-backend/1" and len(index["graphs"]) == 2
    for folder, graph in zip(index["graphs"], session):
        for field_name, file_name in TEXT_FILES.items():
            assert (root / folder / file_name).read_text() == getattr(graph, field_name)
    assert {"fx_graph_runnable.py", "fx_graph_transformed.py", "ir_pre_fusion.txt", "ir_post_fusion.txt",
            "output_code.py"} <= {p.name for p in (root / index["graphs"][0]).iterdir()}
    loaded = ib.load(root)
    assert loaded.graphs == session.graphs  # every serialized field, kernels and inputs included
    assert [g.kind for g in loaded] == ["forward", "backward"]
    assert loaded[0].dynamo_graph is None and loaded[0].compiled is None  # live objects are not saved
    single = ib.load(root / index["graphs"][1])
    assert single.graphs == [session[1]]


def test_dump_dir_option_writes_forward_and_lazy_backward(trained):
    session, auto_dir = trained
    assert ib.load(auto_dir).graphs == session.graphs


def test_load_rejects_what_is_not_a_dump(tmp_path):
    with pytest.raises(DumpError, match="no dump at"):
        ib.load(tmp_path / "missing")
    with pytest.raises(DumpError, match="neither index.json nor capture.json"):
        ib.load(tmp_path)
    (tmp_path / "index.json").write_text(json.dumps({"format": "other", "graphs": []}))
    with pytest.raises(DumpError, match="not an instrumented-backend dump"):
        ib.load(tmp_path)


def test_an_unreadable_dump_names_the_file_and_the_problem(trained, tmp_path):
    session, _ = trained
    root = session.dump(tmp_path / "dump")
    capture_json = next(root.glob("*/capture.json"))
    good = capture_json.read_text()
    capture_json.write_text(good[:27] + "\x01" + good[28:200])  # truncated, a control character in it
    with pytest.raises(DumpError, match=f"{re.escape(str(capture_json))}: is not valid JSON"):
        ib.load(root)
    capture_json.write_text("{}")
    with pytest.raises(DumpError, match="lacks index, compile_id, kind, graph_id"):
        ib.load(root)
    capture_json.write_text(json.dumps({**json.loads(good), "kernels": [{"name": 3}]}))
    with pytest.raises(DumpError, match="does not describe a capture"):
        ib.load(root)
    capture_json.write_text(good)
    assert ib.load(root)
    (capture_json.parent / "output_code.py").unlink()  # loaded as '' beside its kernels, and reported from
    with pytest.raises(DumpError, match="output_code.py: is missing: every dump writes it"):
        ib.load(root)
    assert main(["html", str(root), "-o", str(tmp_path / "r.html")]) == 2 and not (tmp_path / "r.html").exists()
    assert issubclass(DumpError, ValueError)


def test_a_redump_replaces_the_folder_and_a_failed_write_leaves_nothing_that_loads(trained, tmp_path, monkeypatch):
    session, _ = trained
    root = session.dump(tmp_path / "dump")
    assert len(ib.load(root)) == 2
    session.graphs[0].dump(root)  # one graph now: the backward's folder must go
    assert [p.name for p in root.iterdir() if p.is_dir()] == [dump_module.graph_folder_name(session[0])]
    assert len(ib.load(root)) == 1

    def fail_midway(path, data):
        raise OSError("disk full")

    monkeypatch.setattr(dump_module, "_write_json", fail_midway)
    with pytest.raises(OSError, match="disk full"):
        session.graphs[1].dump(tmp_path / "crashed")
    assert not any((tmp_path / "crashed").iterdir()), "no half-written graph folder is left behind"


def test_cli_show(trained, tmp_path, capsys):
    session, _ = trained
    session.dump(tmp_path)
    assert main(["show", str(tmp_path), "--kernels"]) == 0
    out = capsys.readouterr().out
    assert "forward" in out and "backward" in out and "dynamo nodes" in out
    for graph in session:
        for kernel in graph.kernels:
            assert kernel.name in out
    assert main(["show", str(tmp_path / "nope")]) == 2
    assert "no dump at" in capsys.readouterr().err


@pytest.mark.parametrize("argv, own, script_args", [
    (["run", "--dump", "D", "s.py", "a"], {"dump": "D"}, ["a"]),
    (["run", "s.py", "a", "--dump", "D", "b"], {"dump": "D"}, ["a", "b"]),
    (["run", "s.py", "--dump=D"], {"dump": "D"}, []),
    (["run", "s.py", "--", "--dump", "x"], {"dump": None}, ["--dump", "x"]),
    (["profile", "s.py", "--out", "O", "--iters", "3", "-v"], {"out": "O", "iters": 3, "warmup": 10}, ["-v"]),
    (["profile", "--warmup", "1", "s.py", "--", "--out", "mine"], {"out": None, "warmup": 1}, ["--out", "mine"]),
    (["profile", "s.py", "--ou", "x"], {"out": None}, ["--ou", "x"]),  # no abbreviations after the script
    (["diagnose", "--fault", "a", "s.py", "-v", "--fault", "b*2", "--fault=c"], {"fault": ["a", "b*2", "c"]}, ["-v"]),
    (["diagnose", "s.py", "--fault", "a"], {"fault": ["a"], "out": "diagnosis"}, []),
])
def test_script_commands_take_their_options_before_or_after_the_script(argv, own, script_args):
    from instrumented_backend.cli import parse_command_line

    args = parse_command_line(argv)
    assert args.script == "s.py" and args.script_args == script_args
    for name, value in own.items():
        assert getattr(args, name) == value, name


def test_cli_show_into_a_closed_pipe_ends_quietly(trained, tmp_path):
    import subprocess

    session, _ = trained
    session.dump(tmp_path)
    proc = subprocess.Popen(f"{sys.executable} -m instrumented_backend show {tmp_path} --kernels | head -n 1",
                            shell=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=300)
    assert out.strip() and "Traceback" not in err and "BrokenPipeError" not in err, err


def test_cli_run_redirects_torch_compile_and_dumps(tmp_path):
    script = tmp_path / "user_script.py"
    script.write_text(
        "import sys, torch\n"
        "print('argv', sys.argv[1:])\n"
        "fn = torch.compile(lambda x: torch.cos(x) + 1)\n"
        "fn(torch.randn(16))\n"
        "sys.exit(3)\n"
    )
    dump = tmp_path / "dump"
    proc = subprocess.run(
        [sys.executable, "-m", "instrumented_backend", "run", str(script), "--flag", "v", "--dump", str(dump)],
        capture_output=True, text=True, cwd=str(REPO), timeout=300,
    )
    assert proc.returncode == 3, proc.stderr
    assert "argv ['--flag', 'v']" in proc.stdout
    assert "captured 1 graph(s)" in proc.stderr
    (graph,) = ib.load(dump).graphs
    assert "torch.cos" in graph.dynamo_graph_code and graph.kernels


def test_cli_run_still_dumps_and_reports_when_the_script_raises(tmp_path, capsys):
    """A script that dies in a compile is when the dump is wanted most: ``run`` let the error end
    the command before it wrote anything ("no dump at this path"). It prints the traceback, writes
    the dump and the report of what compiled, the graph that failed included, and exits 1."""
    from instrumented_backend.cli import main

    script = tmp_path / "failing_script.py"
    script.write_text(
        "import torch\nimport instrumented_backend as ib\n"
        "torch.compile(lambda x: torch.cos(x) + 1)(torch.randn(8))\n"
        "with ib.faults.bad_lowering('sin', 'no_such_function({x})', vectorized='no_such_function({x})'):\n"
        "    torch.compile(lambda x: torch.sin(x) * 3)(torch.randn(8))\n"
    )
    dump, page = tmp_path / "dump", tmp_path / "report.html"
    assert main(["run", "--dump", str(dump), "--html", str(page), str(script)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and "the script raised InductorError" in err and f"wrote 2 graph(s) to {dump}" in err
    ok, failed = ib.load(dump).graphs
    assert not ok.failed and ok.kernels and "torch.cos" in ok.dynamo_graph_code
    assert failed.failed and "no_such_function" in failed.compile_error and "torch.sin" in failed.dynamo_graph_code
    assert page.is_file() and "no_such_function" in page.read_text()


def test_cli_run_honours_the_dump_dir_variable(tmp_path):
    """A script compiling with the default backend, run under `run` with the variable set."""
    script = tmp_path / "plain_script.py"
    script.write_text("import torch\ntorch.compile(lambda x: torch.sin(x) * 2)(torch.randn(8))\n")
    dump = tmp_path / "from_env"
    proc = subprocess.run([sys.executable, "-m", "instrumented_backend", "run", str(script)], capture_output=True,
                          text=True, cwd=str(REPO), timeout=300,
                          env={**__import__("os").environ, "INSTRUMENTED_BACKEND_DUMP_DIR": str(dump)})
    assert proc.returncode == 0, proc.stderr
    (graph,) = ib.load(dump).graphs
    assert "torch.sin" in graph.dynamo_graph_code


def _report_sections(path) -> list[dict]:
    """The run sections of the HTML report at ``path``, from its embedded data."""
    payload = re.search(r'<script id="report-data" type="application/json">(.*?)</script>', path.read_text(), re.S)
    return json.loads(payload.group(1).replace("<\\/", "</"))["sections"]


def test_cli_run_says_when_what_the_script_compiled_handed_no_graph_to_inductor(tmp_path, capsys):
    """``model.compile()`` on an ``nn.Sequential`` of torch's modules runs eagerly (Dynamo skips
    every frame under it): "captured 0 graph(s)" alone read like a broken tool."""
    from instrumented_backend.cli import main

    script = tmp_path / "sequential_script.py"
    script.write_text("import torch\nmodel = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())\n"
                      "model.compile()\nmodel(torch.randn(2, 4))\n")
    report = tmp_path / "report.html"
    assert main(["run", "--html", str(report), str(script)]) == 0
    err = capsys.readouterr().err
    assert "captured 0 graph(s)" in err
    assert "the script compiled Sequential with torch.compile, yet Dynamo handed no graph to Inductor" in err
    # and why, as diagnose says it: the frames Dynamo skipped, and what to do instead
    assert "torch.compile(model) traces the Sequential instead" in err, err
    # the HTML report, empty of graphs, says the same on top rather than showing a blank page
    [section] = [s for s in _report_sections(report) if s["title"] == "Nothing was compiled"]
    assert "torch.compile(model) traces the Sequential instead" in section["text"], section


_TAGGER_SCRIPT = """import torch

class Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 3)

    def forward(self, h):
        return self.fc(torch.tanh(h))

class Tagger(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.GRU(4, 8, batch_first=True)
        self.head = Head()

    def forward(self, x):
        return self.head(self.rnn(x)[0])

print(torch.compile(Tagger())(torch.randn(2, 3, 4)).shape)
"""


def test_cli_run_names_a_frame_whose_compile_failed_while_the_frames_it_calls_compiled(tmp_path, capsys):
    """The tagger's forward calls ``nn.GRU``, which Dynamo does not trace: that frame runs eagerly and
    only the head it calls compiles. "captured 1 graph(s)" hid that the model's own forward was never
    compiled; the command names the frame and Dynamo's error."""
    from instrumented_backend.cli import main

    script = tmp_path / "tagger.py"
    script.write_text(_TAGGER_SCRIPT)
    report = tmp_path / "report.html"
    assert main(["run", "--html", str(report), str(script)]) == 0
    err = capsys.readouterr().err
    assert "captured 1 graph(s)" in err
    line = 1 + _TAGGER_SCRIPT.splitlines().index("    def forward(self, x):")
    assert f"Dynamo's compile of 1 frame(s) failed, and they ran eagerly:\n  forward ({script}:{line}): its compile " \
           "failed: Unsupported: Attempted to wrap RNN, GRU, or LSTM" in err, err
    # the HTML report shows the head's graph, and says on top that the model's own forward is not among them
    [section] = [s for s in _report_sections(report) if s["title"] == "Frames that ran eagerly"]
    assert f"forward ({script}:{line}): its compile failed: Unsupported: Attempted to wrap RNN" in section["text"]


def test_cli_run_says_how_often_a_frame_recompiled_and_that_the_limit_stopped_it(tmp_path, capsys):
    """A string argument guarded as a constant recompiled the model's forward on each new value
    until the recompile limit, then its calls ran eagerly: "captured 2 graph(s)" said none of it."""
    from instrumented_backend.cli import main

    script = recompiling_script(tmp_path / "modes.py", as_module=True)
    report = tmp_path / "report.html"
    # the script lowers the limit for this process: put back after it (config.patch, not monkeypatch,
    # whose undo deletes a config entry it did not find in the module's __dict__)
    with torch._dynamo.config.patch(recompile_limit=torch._dynamo.config.recompile_limit):
        assert main(["run", "--html", str(report), str(script)]) == 0
    err = capsys.readouterr().err
    assert "captured 2 graph(s)" in err
    said = f"forward ({script}:5) was compiled 2 times, 1 of them recompiles (each a compile of its own), as these " \
           "guards failed: mode == 'a'; mode == 'aa'. Then Dynamo's recompile limit stopped it"
    assert said in err, err
    [section] = [s for s in _report_sections(report) if s["title"] == "Recompiles"]
    assert said in section["text"], section


def _command(*argv: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "instrumented_backend", *argv], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def test_a_command_line_mistake_is_named_with_what_comes_close_and_leaves_nothing_behind(tmp_path):
    """No script: only the script is named as missing (its arguments are optional). A misspelt
    option: the one it comes close to. An unknown ``--fault`` op: refused before the script runs,
    exit 2, and no empty ``--out`` folder left behind."""
    script = tmp_path / "s.py"
    script.write_text("import torch\ntorch.compile(lambda x: x + 1)(torch.ones(2))\n")
    missing = _command("diagnose", cwd=tmp_path)
    assert missing.returncode == 2 and "required: script" in missing.stderr and "script_args" not in missing.stderr
    typo = _command("diagnose", "--minfy-seconds", "5", str(script), cwd=tmp_path)
    assert typo.returncode == 2 and "did you mean --minify-seconds?" in typo.stderr, typo.stderr
    bad_fault = _command("diagnose", "--fault", "bogus*2", "--out", str(tmp_path / "out"), str(script), cwd=tmp_path)
    assert bad_fault.returncode == 2 and "--fault: no C++ lowering named 'bogus'" in bad_fault.stderr
    assert not (tmp_path / "out").exists()


def test_help_answers_without_importing_torch(tmp_path):
    """Every command's ``--help``, and a command line refused, answer before torch is imported
    (seconds on a cold machine); the package's names are imported on first use."""
    for argv in (["--help"], ["diagnose", "--help"], ["profile", "--help"], ["run", "--help"], ["diagnose"]):
        proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "instrumented_backend", *argv], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
        imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()
                    if line.startswith("import time")}
        assert proc.returncode in (0, 2) and "usage:" in proc.stdout + proc.stderr, (argv, proc.stderr[-2000:])
        assert "torch" not in imported and "instrumented_backend.capture" not in imported, (argv, sorted(imported))


def test_ctrl_c_stops_diagnose_in_one_line_and_leaves_nothing_half_written(tmp_path):
    """Ctrl-C (SIGINT to the process group, as a terminal sends it) while the script runs: exit 130,
    one line, no traceback, and the --out folder it was making is gone."""
    import os
    import signal
    import time

    ready = tmp_path / "ready"
    script = tmp_path / "long.py"
    script.write_text("import time, torch\ntorch.compile(lambda x: x.sin() + 1)(torch.randn(8))\n"
                      f"open({str(ready)!r}, 'w').close()\ntime.sleep(120)\n")
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "instrumented_backend", "diagnose", "--out", str(out), str(script)],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 180
        while not ready.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert ready.exists(), "the script never reached its sleep"
        os.killpg(proc.pid, signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, stderr
    assert stderr.strip() == "instrumented_backend diagnose: interrupted; nothing written", stderr
    assert "Traceback" not in stdout + stderr and not out.exists()


def test_run_shows_a_raising_scripts_traceback_as_python_would(tmp_path):
    script = tmp_path / "raiser.py"
    script.write_text("import torch\n\ndef f(x):\n    raise ValueError('bad input')\n\nf(1)\n")
    proc = _command("run", str(script), cwd=tmp_path)
    trace = proc.stderr.split("ValueError: bad input")[0]
    assert proc.returncode == 1 and "Traceback (most recent call last):" in trace
    assert "cli.py" not in trace and "redirect.py" not in trace, trace
    assert trace.split("Traceback (most recent call last):\n")[1].startswith(f'  File "{script}", line 6')
