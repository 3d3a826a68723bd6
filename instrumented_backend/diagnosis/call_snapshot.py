"""A graph's latest call arguments, kept where a crash of this process cannot lose them.

The diagnose command's child keeps, for each compiled graph, the arguments of its latest call in a
file it maps shared (``MAP_SHARED``): what is copied there is in the kernel's page cache, so it
outlives the child when a kernel kills it. Each call costs one copy of the arguments' bytes (no
pickling, no write system call); the layout (shapes, strides, dtypes, plain values) is written
again only when it changes. :func:`read_snapshot` reads the last call back in another process.

Arguments that are not plain strided tensors or plain values (a sparse tensor, an object) are
refused with :class:`SnapshotUnsupported`; the caller keeps them its own way.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Optional

import torch

__all__ = ["CallSnapshot", "SnapshotUnsupported", "read_snapshot"]

_HEADER = 64  # bytes before the first argument: the call's number (int64), then padding
_ALIGN = 64
_PLAIN = (bool, int, float, str, type(None))


class SnapshotUnsupported(TypeError):
    """An argument this snapshot cannot hold (not a strided tensor or a plain value)."""


def _aligned(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


def _layout(args: list[Any]) -> list[dict[str, Any]]:
    """Where each argument goes in the mapped file and how to rebuild it; the offsets are filled
    in order. Raises :class:`SnapshotUnsupported` for an argument it cannot hold."""
    entries, offset = [], _HEADER
    for index, value in enumerate(args):
        if isinstance(value, torch.Tensor):
            if value.layout != torch.strided or value.is_quantized or value.is_nested or value.device.type == "meta":
                raise SnapshotUnsupported(f"argument {index} is a {value.layout} {value.device.type} tensor")
            nbytes = value.untyped_storage().nbytes()
            entries.append({"tensor": True, "offset": offset, "nbytes": nbytes, "dtype": str(value.dtype),
                            "shape": list(value.shape), "stride": list(value.stride()),
                            "storage_offset": value.storage_offset(), "device": str(value.device)})
            offset = _aligned(offset + nbytes)
        elif isinstance(value, _PLAIN):
            entries.append({"tensor": False, "value": value})
        else:
            raise SnapshotUnsupported(f"argument {index} is a {type(value).__name__}")
    return entries


def _size(entries: list[dict[str, Any]]) -> int:
    ends = [e["offset"] + e["nbytes"] for e in entries if e["tensor"]]
    return _aligned(max(ends, default=_HEADER))


def _meta_path(path: Path) -> Path:
    return path.with_name(f"{path.name}.json")


def _storage_bytes(value: torch.Tensor) -> torch.Tensor:
    """The bytes of ``value``'s whole storage, as a uint8 tensor on its device (no copy)."""
    return torch.empty(0, dtype=torch.uint8, device=value.device).set_(value.untyped_storage())


class CallSnapshot:
    """The latest call of one graph, kept in ``<path>.bin`` (mapped shared) and ``<path>.json``
    (its layout). :meth:`write` before each call; :func:`read_snapshot` after a crash."""

    def __init__(self, path: "str | Path") -> None:
        self.path = Path(path)
        self.meta = _meta_path(self.path)
        self._layout: Optional[list[dict[str, Any]]] = None
        self._mapped: Optional[torch.Tensor] = None  # uint8 over the whole mapped file
        self._generation = 0

    def write(self, number: int, args: list[Any]) -> None:
        """Copy call ``number``'s ``args`` over the call before's (a new file when the layout changed)."""
        layout = _layout(args)
        if layout != self._layout:
            self._remap(layout)
        mapped = self._mapped
        with torch.no_grad():
            for entry, value in zip(layout, args):
                if entry["tensor"] and entry["nbytes"]:
                    mapped.narrow(0, entry["offset"], entry["nbytes"]).copy_(_storage_bytes(value))
            mapped.narrow(0, 0, 8).view(torch.int64)[0] = number  # last: the bytes above are this call's

    def _remap(self, layout: list[dict[str, Any]]) -> None:
        self._generation += 1
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = self.path.with_name(f"{self.path.name}.{self._generation}.bin")
        size = _size(layout)
        with open(data, "wb") as handle:
            handle.truncate(size)
        storage = torch.UntypedStorage.from_file(str(data), shared=True, nbytes=size)
        self._mapped = torch.empty(0, dtype=torch.uint8).set_(storage)
        self._mapped.narrow(0, 0, 8).view(torch.int64)[0] = 0  # no call copied yet
        partial = self.path.with_name(f"{self.path.name}.partial")
        partial.write_text(json.dumps({"data": data.name, "size": size, "args": layout}))
        os.replace(partial, self.meta)  # the layout and its file, together
        old = self.path.with_name(f"{self.path.name}.{self._generation - 1}.bin")
        old.unlink(missing_ok=True)
        self._layout = layout

    def discard(self) -> None:
        """Forget the kept call (its arguments could not be kept this time)."""
        self.meta.unlink(missing_ok=True)
        self._layout, self._mapped = None, None


def read_snapshot(path: "str | Path") -> Optional[tuple[int, list[Any]]]:
    """``(call number, arguments)`` of the last call written at ``path``, tensors rebuilt with
    their strides (on their device when it is available here, else on the CPU); None when no call
    was kept."""
    path = Path(path)
    meta_path = _meta_path(path)
    if not meta_path.is_file():
        return None
    meta = json.loads(meta_path.read_text())
    data = torch.from_file(str(path.with_name(meta["data"])), shared=False, size=meta["size"], dtype=torch.uint8)
    number = int(data.narrow(0, 0, 8).view(torch.int64)[0])
    if number == 0:
        return None
    args = []
    for entry in meta["args"]:
        if not entry["tensor"]:
            args.append(entry["value"])
            continue
        dtype = getattr(torch, entry["dtype"].removeprefix("torch."))
        flat = data.narrow(0, entry["offset"], entry["nbytes"]).clone().view(dtype)
        value = torch.as_strided(flat, entry["shape"], entry["stride"], entry["storage_offset"])
        device = torch.device(entry["device"])
        if device.type != "cpu" and _available(device):
            value = value.to(device)
        args.append(value)
    return number, args


def _available(device: torch.device) -> bool:
    module = getattr(torch, device.type, None)
    return bool(module is not None and getattr(module, "is_available", lambda: False)())
