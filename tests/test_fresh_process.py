"""Behaviour that needs a fresh interpreter: the entry point, and warm FX-graph/AOTAutograd caches."""

from __future__ import annotations

import json

import pytest
from conftest import fresh_inductor_cache, run_python

ENTRY_POINT = r"""
import sys, torch
assert "instrumented_backend" not in sys.modules
fn = torch.compile(lambda x: torch.relu(x) - 1, backend="instrumented")  # loaded via the entry point
fn(torch.randn(10))
import instrumented_backend as ib
print("instrumented" in torch._dynamo.list_backends(), len(ib.captures()), ib.last_capture().complete)
"""


def test_backend_resolves_through_entry_point_without_import(tmp_path):
    out = run_python(ENTRY_POINT, env={"TORCHINDUCTOR_CACHE_DIR": str(fresh_inductor_cache(tmp_path / "cache"))})
    assert out.split() == ["True", "1", "True"]


WARM_CACHE = r"""
import json, os, torch
from pathlib import Path

def step(x, w):
    return (torch.tanh(x @ w) * 3).sum()

def run(backend):
    torch._dynamo.reset()
    w = torch.randn(16, 16, requires_grad=True)
    torch.compile(step, backend=backend)(torch.randn(8, 16), w).backward()
    return w.grad

from instrumented_backend.seams.aot.caches import cache_counters
cache = Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])
files = lambda: sorted(str(p) for p in cache.rglob("*")
                       if p.is_file() and ("fxgraph" in p.parts or "aotautograd" in p.parts))
run("inductor")
after_inductor, entries_before = cache_counters(), files()
import instrumented_backend as ib
with ib.capture() as session:
    run("instrumented")
print(json.dumps({
    "inductor": after_inductor,
    "instrumented_delta": {k: v - after_inductor[k] for k, v in cache_counters().items()},
    "cache_entries_unchanged": entries_before == files(),
    "cache_entries": len(entries_before),
    "graphs": [dict(kind=g.kind, complete=g.complete, ir=len(g.ir_pre_fusion) > 0 and len(g.ir_post_fusion) > 0,
                    code=len(g.output_code) > 0, kernels=len(g.kernels), post_grad=len(g.post_grad_graph_code) > 0)
               for g in session],
    "dumped": len(ib.load(os.environ["INSTRUMENTED_BACKEND_DUMP_DIR"])),
}))
"""


@pytest.fixture(scope="module")
def warm_runs(tmp_path_factory):
    cache = fresh_inductor_cache(tmp_path_factory.mktemp("cache") / "shared_cache")
    results = []
    for run in range(2):
        dump = tmp_path_factory.mktemp(f"env_dump{run}")
        out = run_python(WARM_CACHE, env={"TORCHINDUCTOR_CACHE_DIR": str(cache),
                                          "INSTRUMENTED_BACKEND_DUMP_DIR": str(dump)})
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def test_second_process_really_had_a_warm_cache(warm_runs):
    first, second = warm_runs
    assert first["cache_entries"] > 0
    hits = second["inductor"]["fxgraph_cache_hit"] + second["inductor"]["autograd_cache_hit"]
    assert hits > 0, f"the second process should hit the cache: {second['inductor']}"


def test_instrumented_compiles_are_complete_with_a_warm_cache(warm_runs):
    for run in warm_runs:
        assert [g["kind"] for g in run["graphs"]] == ["forward", "backward"]
        for graph in run["graphs"]:
            assert graph == dict(graph, complete=True, ir=True, code=True, post_grad=True)
            assert graph["kernels"] > 0


def test_instrumented_compiles_neither_read_nor_write_the_caches(warm_runs):
    for run in warm_runs:
        assert all(v == 0 for k, v in run["instrumented_delta"].items() if "hit" in k or "miss" in k), run
        assert run["cache_entries_unchanged"]


def test_environment_variable_dumps_scripts_you_cannot_edit(warm_runs):
    assert [run["dumped"] for run in warm_runs] == [2, 2]
