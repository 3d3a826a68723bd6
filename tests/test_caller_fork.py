"""The minifier's zygote forked from the calling process (``minifier.workers.caller_fork``).

A process that has compiled with Inductor has OpenMP's thread pool, Inductor's compile threads
and tqdm's monitor running: the fork must happen anyway (that is where ``minify()`` is called
from), give workers that judge for real, leave the caller working, and hold none of its pipes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest
import torch
from conftest import REPO, fresh_inductor_cache

from minifier.workers import caller_fork

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the caller is forked on Linux only")

_SCRIPT = r"""
import json, os, select, threading, time
import torch
from torch.fx.experimental.proxy_tensor import make_fx
import instrumented_backend as ib
from minifier import AccuracyFailure, minify
from minifier.workers import pool

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.GELU(), torch.nn.LayerNorm(32))
compiled = torch.compile(model)
x = torch.randn(16, 32)
compiled(x).sum().backward()  # OpenMP's pool, Inductor's compile threads, tqdm's monitor
before = compiled(x).detach()
a = torch.randn(300, 300)
product = torch.mm(a, a)
threads_before = sorted(t.name for t in threading.enumerate() if t is not threading.main_thread())
read_end, write_end = os.pipe()  # the caller's own pipe: the fork must not keep it open

def story(x, y):
    return (torch.cat([torch.maximum(torch.neg(x), y), torch.relu(y)]) * 2,)

u, v = torch.randn(8, 8), torch.randn(8, 8)
gm = make_fx(story)(u, v)
# Called under no_grad, inference mode and float64 as the default dtype: the copy judges as a
# fresh worker would, with none of them (the repro, re-checked afresh, agrees with it).
torch.set_default_dtype(torch.float64)
with ib.faults.doubling_neg(), torch.no_grad(), torch.inference_mode():
    result = minify(gm, [u, v], check=AccuracyFailure(), echo=lambda line: None)
torch.set_default_dtype(torch.float32)
from minifier.workers.caller_fork import _as_in_a_fresh_process
torch.set_default_dtype(torch.float64)
with torch.no_grad(), torch.inference_mode(), torch.autocast("cpu"):
    guards = _as_in_a_fresh_process()  # what the copy does first
    reset = (torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
             and not torch.is_autocast_enabled("cpu") and torch.get_default_dtype() == torch.float32)
    guards[0].__exit__(None, None, None)
(zygote,) = pool._zygotes.values()
with open(f"/proc/{zygote.process.pid}/stat") as stat:
    zygote_parent = int(stat.read().rsplit(")", 1)[1].split()[1])

class ScriptTensor(torch.Tensor):  # defined in __main__: a fresh worker, and a repro, cannot load it
    pass

from minifier import CompileFailure, UnbuildableGraph
try:
    minify(torch.fx.symbolic_trace(lambda t: (torch.neg(t),)), [torch.randn(8).as_subclass(ScriptTensor)],
           check=CompileFailure(), echo=lambda line: None)
    unloadable = "loaded"
except UnbuildableGraph as exc:
    unloadable = str(exc)
# The first copy was closed without waiting when the setup changed: reaped, not left a zombie.
from minifier.workers import caller_fork
deadline = time.monotonic() + 30
while os.path.exists(f"/proc/{zygote.process.pid}") and time.monotonic() < deadline:
    caller_fork._reap_ended()
    time.sleep(0.1)
first_reaped = not os.path.exists(f"/proc/{zygote.process.pid}")
os.close(write_end)
ended = bool(select.select([read_end], [], [], 10)[0]) and os.read(read_end, 1) == b""
print(json.dumps({
    "from_caller": zygote.from_caller, "refusal": pool.caller_fork_refusal, "zygote": zygote.process.pid,
    "zygote_parent": zygote_parent, "me": os.getpid(), "final": result.final_nodes,
    "ops": sorted(str(n.target) for n in result.graph_module.graph.nodes if n.op == "call_function"),
    "reproduced": result.reproduced, "threads_before": threads_before, "pipe_ended": ended,
    "caller_still_right": torch.equal(compiled(x).detach(), before) and torch.equal(torch.mm(a, a), product),
    "threads": torch.get_num_threads(), "unloadable": unloadable, "reset": reset, "first_reaped": first_reaped,
    "second_from_caller": next(iter(pool._zygotes.values())).from_caller,
    "second_zygote": next(iter(pool._zygotes.values())).process.pid,
}))
"""


def _gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.1)
    return not os.path.exists(f"/proc/{pid}")


def _run_script(script: str, tmp_path) -> dict:
    """Run ``script`` in a fresh process (forking allowed, a fresh Inductor cache); the JSON object
    its last line prints."""
    env = dict(os.environ, PYTHONPATH=str(REPO), TORCHINDUCTOR_CACHE_DIR=str(fresh_inductor_cache(tmp_path / "cache")))
    env.pop("MINIFIER_FORK_CALLER", None)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                          cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_minify_forks_a_process_that_compiled_and_its_workers_judge_for_real(tmp_path):
    seen = _run_script(_SCRIPT, tmp_path)
    assert seen["from_caller"] and seen["refusal"] is None, seen
    assert seen["zygote_parent"] == seen["me"]  # a fork of the caller, not a fresh interpreter
    assert "ThreadPoolExecutor" in " ".join(seen["threads_before"]), seen  # Inductor's idle compile threads
    assert seen["final"] == 1 and seen["ops"] == ["aten.neg.default"] and seen["reproduced"]
    assert seen["pipe_ended"]  # the copy pointed the caller's descriptors at /dev/null
    assert seen["reset"]  # grad mode, inference mode, autocast and the default dtype as in a fresh process
    assert seen["caller_still_right"] and seen["threads"] == torch.get_num_threads()
    # The copy cannot see the caller's script, as a fresh worker cannot: the class is refused by name.
    assert seen["second_from_caller"] and "cannot load this graph (AttributeError" in seen["unloadable"], seen
    assert seen["first_reaped"]  # closed when the setup changed, then reaped (no zombie)
    assert _gone(seen["second_zygote"], within=30)  # it ends with the caller


def test_a_caller_in_a_state_a_fresh_worker_lacks_is_not_forked():
    """Each state that would make a copy judge differently from a fresh worker, or hang in it,
    refuses the fork and says why (the pool then spawns its zygote, as before)."""
    assert caller_fork.refusal() is None or "threads" in caller_fork.refusal()  # pytest-xdist's own thread
    with torch.no_grad(), torch.autocast("cpu"):  # the copy resets these (the first test checks it)
        assert caller_fork._state_refusal() is None

    class Watching(torch.overrides.TorchFunctionMode):
        pass

    with Watching():
        assert "function or dispatch mode" in caller_fork._state_refusal()
    stop = threading.Event()
    busy = threading.Thread(target=stop.wait, name="users-own-thread")
    busy.start()
    try:
        assert "users-own-thread" in caller_fork.refusal()
    finally:
        stop.set()
        busy.join()
    import _thread

    started = threading.Event()
    stop = threading.Event()
    _thread.start_new_thread(lambda: (started.set(), stop.wait()), ())  # not in threading.enumerate()
    started.wait(10)
    try:
        assert "other threads run here" in caller_fork.refusal()
    finally:
        stop.set()
    os.environ["MINIFIER_FORK_CALLER"] = "0"
    try:
        assert caller_fork.refusal() == "MINIFIER_FORK_CALLER=0"
    finally:
        del os.environ["MINIFIER_FORK_CALLER"]


def test_a_forked_zygote_that_cannot_run_an_op_hands_over_to_a_spawned_one(tmp_path):
    """A copy whose own child cannot run an op (a lock copied while held) says so instead of
    serving; that first worker is spawned, and the pool replaces the copy with a spawned zygote."""
    script = r"""
import json, torch
from torch.fx.experimental.proxy_tensor import make_fx
from minifier.workers import caller_fork, parent as workers
caller_fork._forks_work = lambda within: False  # what a copy holding a lock finds
pool = workers.WorkerPool()
setup = workers.WorkerSetup(warm=False)
worker = pool.get(setup, fork_caller=True)
gm = make_fx(lambda x: (torch.relu(x),))(torch.randn(8))
verdict = worker.judge(gm, [torch.randn(8)], {"level": "aten", "want": "compile"}, timeout=300)
copied = worker.zygote
second = pool.get(setup, 1)
print(json.dumps({"verdict": verdict["kind"], "copied": copied.from_caller, "copied_serves": copied.can_fork,
                  "spawned_underneath": worker._spawned is not None,
                  "replaced": second.zygote is not copied and not second.zygote.from_caller}))
pool.shutdown()
"""
    seen = _run_script(script, tmp_path)
    assert seen == {"verdict": "pass", "copied": True, "copied_serves": False, "spawned_underneath": True,
                    "replaced": True}


def test_a_minification_whose_zygote_was_not_forked_says_why(monkeypatch, tmp_path):
    """A zygote started afresh costs seconds of imports: the log says so, and why."""
    from torch.fx.experimental.proxy_tensor import make_fx

    import instrumented_backend as ib
    from minifier import CompileFailure, minify
    from minifier.workers import pool

    monkeypatch.setenv("MINIFIER_FORK_CALLER", "0")
    x = torch.randint(256, (8, 8), dtype=torch.uint8)
    lines: list[str] = []
    try:
        with ib.faults.cast_dropping_neg():
            result = minify(make_fx(lambda v: (torch.maximum(torch.neg(v), v),))(x), [x], check=CompileFailure(),
                            repro_dir=tmp_path, echo=lines.append)
    finally:
        pool.shutdown(wait=False)
    assert result.reproduced  # the compile error needs both nodes: nothing to shrink, but found and re-checked
    said = [line for line in lines if line.startswith("Workers: a fresh process")]
    assert len(said) == 1 and said[0].endswith(": MINIFIER_FORK_CALLER=0"), lines
