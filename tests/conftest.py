"""Shared fixtures. Importing this sets a fresh Inductor cache folder for the whole test run.

Tests must never pass or fail because of what an earlier run cached: every pytest session gets
its own TORCHINDUCTOR_CACHE_DIR (set before torch reads it), and tests that need a warm cache
build it themselves in a subprocess.
"""

from __future__ import annotations

import itertools
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any, Callable

_CACHE_ROOT = tempfile.mkdtemp(prefix="ib-test-inductor-cache-")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = _CACHE_ROOT

import pytest  # noqa: E402
import torch  # noqa: E402

from instrumented_backend.fail_soft import reset_warnings  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def pytest_configure(config: pytest.Config) -> None:
    """Every process that runs a test (not an xdist controller) settles the vector-ISA question once."""
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        _answer_the_isa_probe_for_child_processes()


def _answer_the_isa_probe_for_child_processes() -> None:
    """Tell this run's child processes which vector ISAs are usable, when Inductor's probe here found
    exactly the ones the CPU advertises.

    A fresh process that compiles C++ first probes each ISA the CPU advertises: it builds a test
    library (cached in the run's folder) and starts a bare Python process to load it, about ten
    of them, 2.4 s of a 2-core machine's time in every test that starts a Python process that
    compiles (a script, a repro, the command line). Here the probe runs as Inductor runs it, and
    only when its answer is every advertised ISA do the children get ``TORCHINDUCTOR_VEC_ISA_OK=1``
    (Inductor's own switch: take each advertised ISA without probing), which gives them that same
    list. This process keeps probing (its config was read before the variable is set), and tests
    of the probe itself take it out of their children's environment (:func:`real_isa_probe_env`).
    """
    import platform

    from torch._inductor import cpu_vec_isa

    if platform.machine() not in ("x86_64", "AMD64") or not sys.platform.startswith("linux"):
        return
    probed = [str(isa) for isa in cpu_vec_isa.valid_vec_isa_list()]
    flags = cpu_vec_isa.x86_isa_checker()
    advertised = [str(isa) for isa in cpu_vec_isa.supported_vec_isa_list
                  if all(flag in flags for flag in str(isa).split())]
    if probed and probed == advertised:
        os.environ["TORCHINDUCTOR_VEC_ISA_OK"] = "1"


def real_isa_probe_env() -> dict[str, str]:
    """This process's environment without the run's ISA answer: a child that probes as a user's would."""
    return {key: value for key, value in os.environ.items() if key != "TORCHINDUCTOR_VEC_ISA_OK"}


def pytest_unconfigure(config: pytest.Config) -> None:
    """The run's Inductor cache folder goes when the run (or this xdist worker) ends."""
    shutil.rmtree(_CACHE_ROOT, ignore_errors=True)


def reset_aot_counter(start: int = 1000) -> None:
    """AOT graph ids ('# AOT ID' in output code) come from a process-wide counter; pin it."""
    import torch._functorch.aot_autograd as aot_autograd

    aot_autograd.AOT_COUNTER = itertools.count(start)


def compile_and_run(fn: Callable[..., Any], *inputs: Any, backend: str = "instrumented", aot_id: int = 1000,
                    **compile_kwargs: Any) -> tuple[Any, list[str]]:
    """Compile ``fn`` fresh, run it once, return (result, output code texts) via Inductor's own hook."""
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    reset_aot_counter(aot_id)
    compiled = torch.compile(fn, backend=backend, **compile_kwargs)
    return run_and_get_code(compiled, *inputs)


def run_python(code: str, env: dict[str, str] | None = None, timeout: int = 300) -> str:
    """Run ``code`` in a fresh interpreter (the package not imported beforehand); return stdout."""
    import subprocess

    full_env = {**os.environ, **(env or {})}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full_env,
                          timeout=timeout, cwd=str(REPO))
    if proc.returncode != 0:
        raise AssertionError(f"subprocess failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


def scratch_tmpdir_env(scratch: "str | Path") -> dict[str, str]:
    """``TMPDIR`` for a subprocess that would leave folders in /tmp (torchrun's logs): ``scratch``,
    with Inductor's machine-wide folder linked into it. Inductor keeps its precompiled headers
    there (``default_cache_dir()``, under the temp folder, whatever TORCHINDUCTOR_CACHE_DIR
    says): without the link each such subprocess built a 150 MB header again (about 8 s)."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    machine_wide = Path(default_cache_dir())
    machine_wide.mkdir(parents=True, exist_ok=True)
    link = Path(scratch) / machine_wide.name
    if not link.exists():
        link.symlink_to(machine_wide, target_is_directory=True)  # rmtree of scratch removes the link only
    return {"TMPDIR": str(scratch)}


def recompiling_script(path: Path, *, as_module: bool) -> Path:
    """Write a script whose compiled target (a module's ``forward``, line 5, or a function, line 4)
    recompiles on each new string argument, past a recompile limit of 2 that the script sets for
    its process (a test running it in-process restores the limit)."""
    target = ("class Scaled(torch.nn.Module):\n    def forward(self, x, mode):\n"
              "        return torch.relu(x) * len(mode)\n\nstep = torch.compile(Scaled())\n") if as_module else (
        "def scaled(x, mode):\n    return torch.relu(x) * len(mode)\n\nstep = torch.compile(scaled)\n")
    path.write_text("import torch\ntorch._dynamo.config.recompile_limit = 2\n\n" + target +
                    "for n in range(1, 5):\n    step(torch.randn(64), 'a' * n)\n")
    return path


def fresh_inductor_cache(destination: Path) -> Path:
    """A new Inductor cache folder for a subprocess, with no FX-graph or AOTAutograd entry: hard
    links to this run's other files (the vector-ISA probe's test libraries above all: a cache
    without them spends about 16 s building ten of them on a 2-core machine; and C++ kernels,
    keyed by their source and flags, so a link never changes what a kernel computes)."""
    import shutil

    from torch._inductor import cpu_vec_isa

    cpu_vec_isa.valid_vec_isa_list()  # the probe, in this run's cache (once per test process)
    shutil.copytree(_CACHE_ROOT, destination, copy_function=os.link,
                    ignore=shutil.ignore_patterns("fxgraph", "aotautograd", "locks"))
    return destination


@pytest.fixture(autouse=True)
def _fresh_warning_state() -> None:
    reset_warnings()


def foo1(x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
    """The tutorial's example."""
    a = torch.neg(x1)
    b = torch.maximum(x2, a)
    y = torch.cat([b], dim=0)
    return y


def float32_mix_under_autocast(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Under a caller's ``torch.autocast``: a bfloat16 matmul, then a float32 ``bmm`` in a region
    with autocast off, then ``tanh``. Its post-grad graph's ``bmm_1`` is float32."""
    scores = q @ k.transpose(-1, -2)  # bfloat16 under the caller's autocast
    with torch.autocast("cpu", enabled=False):
        mixed = scores.float() @ v.float()  # a float32 bmm
    return torch.tanh(mixed) * 2


def tutorial_inputs(dtype: torch.dtype = torch.uint8) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    if dtype == torch.uint8:
        return (torch.randint(256, (1, 8), dtype=dtype, generator=gen),
                torch.randint(256, (8390, 8), dtype=dtype, generator=gen))
    return torch.randn((1, 8), generator=gen, dtype=dtype), torch.randn((8390, 8), generator=gen, dtype=dtype)


warnings.filterwarnings("ignore", category=DeprecationWarning)


class Blocks(torch.nn.Module):
    """Blocks of torch's own layers (``nn.Sequential``s in a ``ModuleList``), run in turn: their ops
    have no user line of their own (every Linear's source is ``Linear.forward``), so only the module
    path, ``blocks.<i>.<j>``, says which layer is which."""

    def __init__(self, *blocks: torch.nn.Sequential) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList(blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x
