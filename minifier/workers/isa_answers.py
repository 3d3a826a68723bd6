"""Remember, across worker starts, which of the CPU's vector-ISA test libraries load.

Before its first C++ compile, a process running Inductor decides which vector ISA to build for:
for each ISA the CPU advertises it builds a small test library (kept in Inductor's cache) and
starts a fresh Python process to ``dlopen`` it. Here that is three processes loading libtorch,
about 0.27 s each, on every worker start: CPU time a cold ``python -m minifier`` spends while
its own two processes import torch on a two-core machine.

A worker remembers each successful load under a key made of everything the answer depends on:
the test library's bytes, the Python and libtorch that load it, the CPU (its model and flags),
the kernel and host, and ``LD_LIBRARY_PATH``. A later worker with the same key reads the answer
instead of loading again; anything else that changes the answer changes the key. Failed loads
are never remembered: they are probed again, as Inductor does. ``MINIFIER_FRESH_ISA_PROBE=1``
turns this off. Only workers use it; the user's own process and a written repro probe as
Inductor does.

Nothing here imports torch (:func:`remember_loads` is given Inductor's class).
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
from typing import Any, Callable, Optional

from .private import user_folder

__all__ = ["answer_key", "remember_loads", "answers_folder"]

_LIBRARIES = ("libtorch_cpu.so", "libtorch.so", "libc10.so")


@functools.lru_cache(maxsize=1)
def _machine() -> str:
    """The CPU (model and flags of its first processor), kernel and host; "" if unknown."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            text = cpuinfo.read().split("\n\n")[0]
    except OSError:
        return ""
    wanted = [line for line in text.splitlines() if line.split(":")[0].strip() in ("model name", "flags", "Features")]
    if not wanted:
        return ""
    return "\n".join([*wanted, " ".join(os.uname())])


def _library_stamps(torch_lib: str) -> str:
    """Identity (path, size, modification time) of the torch libraries a test library links."""
    stamps = []
    for name in _LIBRARIES:
        path = os.path.join(torch_lib, name)
        try:
            status = os.stat(path)
        except OSError:
            continue
        stamps.append(f"{os.path.realpath(path)}:{status.st_size}:{status.st_mtime_ns}")
    return "\n".join(stamps)


def answer_key(library: str, isa: str, torch_lib: str) -> Optional[str]:
    """The key a load of ``library`` (built for ``isa``) is remembered under; None when some part
    of it cannot be read (then nothing is remembered)."""
    machine = _machine()
    try:
        with open(library, "rb") as built:
            content = built.read()
    except OSError:
        return None
    if not machine or not content:
        return None
    digest = hashlib.sha256()
    for part in (isa, os.path.realpath(sys.executable), sys.version, _library_stamps(torch_lib), machine,
                 os.environ.get("LD_LIBRARY_PATH", "")):
        digest.update(part.encode() + b"\0")
    digest.update(content)
    return digest.hexdigest()


def answers_folder(root: Optional[str] = None) -> Optional[str]:
    """Where the answers are kept: a per-user folder only this user can write to (or None)."""
    return user_folder("isa-answers", root)


def remember_loads(vec_isa: type, torch_lib: str, root: Optional[str] = None) -> bool:
    """Wrap ``vec_isa._probe_load`` (Inductor's ``VecISA``) in this process so that a load another
    worker saw succeed is not repeated. Returns whether it was wrapped."""
    if os.environ.get("MINIFIER_FRESH_ISA_PROBE") == "1":
        return False
    folder = answers_folder(root)
    probe: Callable[[Any, str], bool] = vec_isa.__dict__.get("_probe_load")
    if folder is None or not callable(probe) or getattr(probe, "remembers_loads", False):
        return False

    @functools.wraps(probe)
    def probe_load(self: Any, output_path: str) -> bool:
        key = answer_key(output_path, str(self), torch_lib)
        marker = os.path.join(folder, key) if key else None
        if marker is not None and os.path.isfile(marker):
            return True
        loaded = probe(self, output_path)
        if loaded and marker is not None:
            try:
                with open(marker, "x"):
                    pass
            except OSError:  # another worker wrote it first, or the folder is gone: no matter
                pass
        return loaded

    probe_load.remembers_loads = True  # type: ignore[attr-defined]
    vec_isa._probe_load = probe_load
    return True
