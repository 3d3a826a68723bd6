"""A faster linker for the kernels a worker builds: same objects, same libraries, less waiting.

Every C++ kernel Inductor builds is compiled and linked by one ``g++`` call; on a small
machine the link against libtorch is about a third of it (GNU ld reads libtorch_cpu's symbol
tables: 0.26 s of a 0.7 s build here; gold takes 0.13 s). A candidate is mostly those builds,
so a worker links with ``ld.lld`` or ``ld.gold`` when the machine has one that works.

It is chosen through the compiler driver's ``COMPILER_PATH`` (a directory whose ``ld`` is the
faster linker), not by changing Inductor's command line: the command line, and so every cache
key, stays the one a user's own compile has. The linker does not compile: the kernel's machine
code is the same object either way, linked against the same libraries. Only a worker's
environment changes, never the user's process, and a repro runs with the user's toolchain.

Nothing here imports torch.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Optional

from .private import private_directory, user_folder

__all__ = ["FAST_LINKERS", "fast_linker_directory", "use_fast_linker"]

FAST_LINKERS = ("ld.lld", "ld.gold")  # fastest first
_TEST_SOURCE = "int minifier_linker_probe(void) { return 1; }\n"


def _compiler() -> str:
    """The C++ compiler Inductor will call (its default reads ``CXX``, else ``g++``)."""
    return os.environ.get("CXX") or "g++"


def _search_path(directory: str) -> str:
    """``COMPILER_PATH`` with ``directory`` searched first."""
    return os.pathsep.join(p for p in (directory, os.environ.get("COMPILER_PATH")) if p)


def _links(compiler: str, directory: str, workdir: str) -> bool:
    """Does ``compiler`` build a shared library with the ``ld`` in ``directory``?"""
    source = os.path.join(workdir, "probe.c")
    Path(source).write_text(_TEST_SOURCE)
    command = [compiler, "-x", "c", source, "-shared", "-fPIC", "-o", os.path.join(workdir, "probe.so")]
    try:
        done = subprocess.run(command, env={**os.environ, "COMPILER_PATH": _search_path(directory)},
                              capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def _linker_directory(root: str, name: str, linker: str) -> Optional[str]:
    """``root/name``, holding ``ld`` linked to ``linker`` (made once, shared by every worker).
    ``root`` is already private (:func:`~.private.user_folder`); ``name`` must be too: another
    user could otherwise swap the ``ld`` between the check and the compile."""
    directory = os.path.join(root, name)
    link = os.path.join(directory, "ld")
    try:
        if not private_directory(directory):
            return None
        if os.path.realpath(link) != os.path.realpath(linker):
            staged = f"{link}.{os.getpid()}"
            os.symlink(linker, staged)
            os.replace(staged, link)  # atomic: a worker starting beside this one sees one or the other
    except OSError:
        return None
    return directory


def fast_linker_directory(root: Optional[str] = None) -> Optional[str]:
    """A directory holding ``ld``, a link to the first of :data:`FAST_LINKERS` this machine has
    that the compiler builds a shared library with; None when there is none (the default linker
    stays). ``root`` defaults to a per-user folder in the temporary directory."""
    compiler = shutil.which(_compiler())
    if compiler is None:
        return None
    root = user_folder("linkers", root)
    if root is None:
        return None
    for name in FAST_LINKERS:
        linker = shutil.which(name)
        directory = _linker_directory(root, name, linker) if linker else None
        if directory is None:
            continue
        with tempfile.TemporaryDirectory(prefix="minifier-link-check-") as workdir:
            if _links(compiler, directory, workdir):
                return directory
    return None


def use_fast_linker() -> Optional[str]:
    """Make this process's compiler calls link with a faster linker (see the module docstring).
    Returns the linker's directory, or None when the default linker stays. Set
    ``MINIFIER_DEFAULT_LINKER=1`` to keep the default."""
    if os.environ.get("MINIFIER_DEFAULT_LINKER") == "1":
        return None
    directory = fast_linker_directory()
    if directory is not None:
        os.environ["COMPILER_PATH"] = _search_path(directory)
    return directory
