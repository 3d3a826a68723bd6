"""Write captures to disk with TORCH_COMPILE_DEBUG's file names, and read them back.

Layout::

    DIR/index.json                       # format, torch version, the graph folders in order
    DIR/000_0-0_forward/capture.json     # the GraphCapture's fields (kernels, inputs, ...)
    DIR/000_0-0_forward/dynamo_graph.py
    DIR/000_0-0_forward/fx_graph_runnable.py
    DIR/000_0-0_forward/fx_graph_transformed.py
    DIR/000_0-0_forward/ir_pre_fusion.txt
    DIR/000_0-0_forward/ir_post_fusion.txt
    DIR/000_0-0_forward/output_code.py

The large texts live only in their own files; capture.json holds the rest.
"""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path
from typing import Any, Iterable, Union

from .model import CaptureSession, GraphCapture

__all__ = ["FORMAT", "TEXT_FILES", "dump_graph", "dump_session", "append_to_dump", "load", "graph_folder_name"]

FORMAT = "instrumented-backend/1"
# GraphCapture field -> file name (TORCH_COMPILE_DEBUG's names where it has one)
TEXT_FILES = {
    "dynamo_graph_code": "dynamo_graph.py",
    "aot_graph": "fx_graph_runnable.py",
    "post_grad_graph_code": "fx_graph_transformed.py",
    "ir_pre_fusion": "ir_pre_fusion.txt",
    "ir_post_fusion": "ir_post_fusion.txt",
    "output_code": "output_code.py",
}
PathLike = Union[str, "os.PathLike[str]"]
_append_lock = threading.Lock()


def graph_folder_name(graph: GraphCapture) -> str:
    """``000_0-0_forward``: index, compile id and kind, safe as a folder name."""
    compile_id = re.sub(r"[^0-9A-Za-z]+", "-", graph.compile_id).strip("-") or "na"
    return f"{graph.index:03d}_{compile_id}_{graph.kind}"


def dump_graph(graph: GraphCapture, directory: PathLike) -> Path:
    """Write one graph's folder under ``directory``; returns the folder."""
    folder = Path(directory) / graph_folder_name(graph)
    folder.mkdir(parents=True, exist_ok=True)
    data = graph.to_dict()
    for field_name, file_name in TEXT_FILES.items():
        (folder / file_name).write_text(data.pop(field_name) or "", encoding="utf-8")
    data["format"] = FORMAT
    _write_json(folder / "capture.json", data)
    return folder


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_suffix(path.suffix + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)


def _write_index(directory: Path, folders: Iterable[str]) -> None:
    import torch

    _write_json(
        directory / "index.json",
        {"format": FORMAT, "torch_version": torch.__version__, "graphs": list(folders)},
    )


def dump_session(graphs: Iterable[GraphCapture], directory: PathLike) -> Path:
    """Write every graph and an index.json listing them in order; returns ``directory``."""
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    folders = [dump_graph(g, root).name for g in graphs]
    _write_index(root, folders)
    return root


def append_to_dump(graph: GraphCapture, directory: PathLike) -> Path:
    """Write one graph and add it to ``directory``'s index (used by the dump_dir option)."""
    root = Path(directory)
    with _append_lock:
        folder = dump_graph(graph, root)
        folders = _read_index(root) if (root / "index.json").exists() else []
        if folder.name not in folders:
            folders.append(folder.name)
        _write_index(root, folders)
    return folder


def _read_index(root: Path) -> list[str]:
    data = json.loads((root / "index.json").read_text(encoding="utf-8"))
    if data.get("format") != FORMAT:
        raise ValueError(f"{root / 'index.json'} is not an instrumented-backend dump (format {data.get('format')!r})")
    return list(data["graphs"])


def _load_graph(folder: Path) -> GraphCapture:
    meta_path = folder / "capture.json"
    if not meta_path.exists():
        raise FileNotFoundError(f"{folder} has no capture.json: not a graph folder of an instrumented-backend dump")
    data = json.loads(meta_path.read_text(encoding="utf-8"))
    data.pop("format", None)
    for field_name, file_name in TEXT_FILES.items():
        path = folder / file_name
        data[field_name] = path.read_text(encoding="utf-8") if path.exists() else ""
    return GraphCapture.from_dict(data)


def load(directory: PathLike) -> CaptureSession:
    """Read a dump back: a dump folder (with index.json) or a single graph folder (capture.json).

    Live objects (GraphModules, compiled callables) are not saved and are None after loading.
    """
    root = Path(directory)
    if not root.exists():
        raise FileNotFoundError(f"no dump at {root}")
    if (root / "index.json").exists():
        return CaptureSession([_load_graph(root / name) for name in _read_index(root)])
    if (root / "capture.json").exists():
        return CaptureSession([_load_graph(root)])
    raise FileNotFoundError(f"{root} holds neither index.json nor capture.json: not an instrumented-backend dump")
