"""Warm worker processes that judge candidates, so a crash or a hang costs a candidate, not the user.

Importing torch and warming Inductor costs seconds, so workers are started once and reused
across candidates and across ``minify`` calls with the same setup. A worker that dies
(segfault, abort) is replaced and the death is reported as a ``crash`` outcome with its signal;
one that overruns its timeout is killed, replaced, and reported as ``timeout``.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence

from ._worker import encode_message, read_message, send_encoded, write_message

if TYPE_CHECKING:  # this module imports no torch: the CLI starts a worker before it imports torch
    import torch

    from .context import CarriedContext

__all__ = ["WorkerSetup", "Worker", "WorkerPool", "pool", "prewarm"]

_PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent)


@dataclasses.dataclass(frozen=True)
class WorkerSetup:
    """What a worker needs before judging: modules to import and environment variables.

    ``warm`` says whether a new worker compiles a trivial graph before it reports ready. That
    pays Inductor's first-compile costs early, which helps a worker started ahead of need
    (:func:`prewarm`) and only delays one that is needed at once (it then pays them on its first
    candidate anyway), so ``minify`` starts its workers cold. It is not part of a worker's
    identity: a warm worker serves a cold setup.
    """

    imports: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    warm: bool = True

    @classmethod
    def for_context(cls, context: CarriedContext, *, warm: bool = True) -> "WorkerSetup":
        """The setup that carries ``context`` (its imports and environment) into a worker."""
        return cls(imports=context.imports, env=context.env, warm=warm)

    @property
    def key(self) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
        """What makes two setups need different workers."""
        return self.imports, self.env


def _signal_name(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"exit status {returncode}"


class Worker:
    """One judging subprocess."""

    def __init__(self, setup: WorkerSetup) -> None:
        self.setup = setup
        env = dict(os.environ)
        env.update(dict(setup.env))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
        self.log = tempfile.NamedTemporaryFile(prefix="minifier-worker-", suffix=".log", delete=False)
        self.process = subprocess.Popen([sys.executable, "-m", "minifier._worker"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=self.log, env=env)
        self.started = time.perf_counter()
        self.ready = False
        self.startup_seconds = 0.0
        write_message(self.process.stdin, {"imports": list(setup.imports), "warm": setup.warm})

    def alive(self) -> bool:
        return self.process.poll() is None

    def _read(self, timeout: Optional[float]) -> Optional[Any]:
        """The next reply, ``None`` when the worker died, or raise TimeoutError."""
        stdout = self.process.stdout
        ready, _, _ = select.select([stdout], [], [], timeout)
        if not ready:
            raise TimeoutError
        return read_message(stdout)

    def wait_ready(self, timeout: float = 600.0) -> None:
        if self.ready:
            return
        reply = self._read(timeout)
        if reply is None:
            raise RuntimeError(f"minifier worker failed to start ({_signal_name(self.process.wait())}): {self.log_tail()}")
        self.ready = True
        self.startup_seconds = time.perf_counter() - self.started

    def log_tail(self, chars: int = 2000) -> str:
        try:
            return Path(self.log.name).read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def judge(self, module: torch.nn.Module, inputs: Sequence[Any], spec: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Judge one candidate here; a death or an overrun becomes a crash or timeout outcome."""
        from .judge import CRASH, TIMEOUT, outcome

        try:  # before anything is written: a request that cannot be sent is not a crash
            request = encode_message({"module": module, "inputs": list(inputs), "spec": spec})
        except Exception as exc:
            raise TypeError(f"minifier: this candidate cannot be sent to a worker process ({exc!r}); "
                            "judge in process with isolate=False") from exc
        self.wait_ready()
        start = time.perf_counter()
        try:
            send_encoded(self.process.stdin, request)
            reply = self._read(timeout)
        except TimeoutError:
            self.kill()
            return outcome(TIMEOUT, "timeout", f"no answer within {timeout:.0f} s; worker killed",
                           seconds=time.perf_counter() - start)
        except (BrokenPipeError, EOFError):  # the worker died while reading or answering
            reply = None
        if reply is None:
            code = self.process.wait()
            tail = self.log_tail()
            return outcome(CRASH, _signal_name(code), f"worker died ({_signal_name(code)})\n{tail}",
                           seconds=time.perf_counter() - start)
        return reply

    def kill(self) -> None:
        if self.alive():
            self.process.kill()
            self.process.wait()

    def close(self, wait: bool = True) -> None:
        """End the worker: it exits when its input closes. ``wait=False`` does not wait for its
        teardown (about a second of torch shutting down), for when this process is exiting too."""
        try:
            if self.alive():
                self.process.stdin.close()
                if wait:
                    self.process.wait(timeout=5)
        except Exception:  # noqa: BLE001
            self.kill()
        try:
            os.unlink(self.log.name)
        except OSError:
            pass


class WorkerPool:
    """Keeps one warm worker per setup; replaces a dead one in the background."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._workers: dict[tuple[Any, ...], Worker] = {}
        self.crashes = 0
        self.restarts = 0

    def get(self, setup: WorkerSetup) -> Worker:
        with self._lock:
            for other in [k for k in self._workers if k != setup.key]:
                self._workers.pop(other).close(wait=False)  # it exits once its imports end; do not wait
            worker = self._workers.get(setup.key)
            if worker is None or not worker.alive():
                if worker is not None:
                    self.restarts += 1
                    worker.close()
                worker = self._workers[setup.key] = Worker(setup)
            return worker

    def judge(self, setup: WorkerSetup, module: torch.nn.Module, inputs: Sequence[Any], spec: dict[str, Any],
              timeout: float) -> dict[str, Any]:
        from .judge import CRASH, TIMEOUT

        result = self.get(setup).judge(module, inputs, spec, timeout)
        if result["kind"] in (CRASH, TIMEOUT):
            self.crashes += 1
            self.get(setup)  # start the replacement now: it warms while the caller carries on
        return result

    def shutdown(self, wait: bool = True) -> None:
        with self._lock:
            for worker in self._workers.values():
                worker.close(wait=wait)
            self._workers.clear()


pool = WorkerPool()
atexit.register(pool.shutdown, wait=False)  # workers see their input close and exit on their own


def prewarm(setup: WorkerSetup = WorkerSetup()) -> Worker:
    """Start (or keep) the worker for ``setup`` now, so the first candidate does not wait for it."""
    return pool.get(setup)
