"""A warm judging process: ``python -m minifier._worker`` (started by :mod:`minifier.workers`).

Protocol on stdin/stdout: length-prefixed pickles. The first message is the setup
(``{"imports": [...], "warm": bool}``); the worker imports torch, those modules and Inductor's
compile path (detecting the CPU's vector ISA meanwhile), compiles a trivial graph to warm
Inductor when asked, answers ``{"ready": ...}`` and then judges one candidate per
message (``{"module", "inputs", "spec"}``) until stdin closes. Anything the compiler or the
graph prints goes to stderr (a log file the parent reads when the worker dies).
"""

from __future__ import annotations

import importlib
import os
import pickle
import struct
import sys
import time
from typing import Any, BinaryIO, Optional


def read_message(stream: BinaryIO) -> Optional[Any]:
    header = stream.read(8)
    if len(header) < 8:
        return None
    (size,) = struct.unpack("<Q", header)
    payload = stream.read(size)
    if len(payload) < size:
        return None
    return pickle.loads(payload)


def encode_message(message: Any) -> bytes:
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return struct.pack("<Q", len(payload)) + payload


def send_encoded(stream: BinaryIO, encoded: bytes) -> None:
    stream.write(encoded)
    stream.flush()


def write_message(stream: BinaryIO, message: Any) -> None:
    send_encoded(stream, encode_message(message))


def _warm(judge: Any) -> None:
    import torch

    class Tiny(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor]:
            return (torch.ops.aten.add.Tensor(x, 1),)

    gm = torch.fx.symbolic_trace(Tiny())
    judge(gm, [torch.zeros(4)], {"level": "aten", "want": "compile"})


def main() -> int:
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # stray prints (compilers, graphs) must not corrupt the protocol
    requests = sys.stdin.buffer
    setup = read_message(requests) or {}
    start = time.perf_counter()
    from minifier._seams import start_cpu_isa_probe

    probe = start_cpu_isa_probe()  # its child processes run while the imports below do
    for name in setup.get("imports", []):
        importlib.import_module(name)
    import torch._inductor.compile_fx  # noqa: F401 - the first candidate's compile needs it

    from minifier.judge import INVALID, judge, outcome

    if probe is not None:
        probe.join()

    if setup.get("warm", True):
        try:
            _warm(judge)
        except Exception as exc:  # noqa: BLE001 - a cold worker still works
            print(f"minifier worker: warm-up failed: {exc!r}", file=sys.stderr)
    write_message(replies, {"ready": True, "seconds": time.perf_counter() - start, "pid": os.getpid()})
    while True:
        request = read_message(requests)
        if request is None:
            return 0
        try:
            result = judge(request["module"], request["inputs"], request["spec"])
        except BaseException as exc:  # noqa: BLE001 - report, keep serving
            result = outcome(INVALID, f"{type(exc).__name__}: judging failed", repr(exc))
        write_message(replies, result)


if __name__ == "__main__":
    sys.exit(main())
