"""Write captures to disk with TORCH_COMPILE_DEBUG's file names (:mod:`.load` reads them back).

Layout::

    DIR/index.json                       # format, torch version, the graph folders in order
    DIR/000_0-0_forward/capture.json     # the GraphCapture's fields (kernels, inputs, ...)
    DIR/000_0-0_forward/dynamo_graph.py
    DIR/000_0-0_forward/fx_graph_runnable.py
    DIR/000_0-0_forward/fx_graph_transformed.py
    DIR/000_0-0_forward/ir_pre_fusion.txt
    DIR/000_0-0_forward/ir_post_fusion.txt
    DIR/000_0-0_forward/output_code.py

The large texts live only in their own files; capture.json holds the rest. A graph compiled by
a rank of a torch.distributed run goes under ``DIR/rank_<r>/`` instead, each rank's folder a dump
of its own (:mod:`.load` reads them all).

Writes are atomic: a graph folder is written under a temporary name and renamed into place, and
index.json is replaced in one step, so a crash mid-dump never leaves a folder that loads half.
Dumping a session into a folder replaces the graph folders an earlier dump left there. Anything
unreadable raises :class:`DumpError`, naming the file and what is wrong with it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Union

if TYPE_CHECKING:
    from ..graphs import GraphCapture

__all__ = ["FORMAT", "TEXT_FILES", "DumpError", "dump_graph", "dump_session", "append_to_dump",
           "graph_folder_name", "rank_folder", "RANK_FOLDER"]

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
RANK_FOLDER = re.compile(r"^rank_(\d+)$")
_GRAPH_FOLDER = re.compile(r"^\d{3,}_[0-9A-Za-z-]+_(inference|forward|backward)$")


class DumpError(ValueError):
    """A dump (or a file in it) that cannot be read: ``path`` and what is wrong."""

    def __init__(self, path: PathLike, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = Path(path)
        self.problem = problem


def graph_folder_name(graph: GraphCapture) -> str:
    """``000_0-0_forward``: index, compile id and kind, safe as a folder name."""
    compile_id = re.sub(r"[^0-9A-Za-z]+", "-", graph.compile_id).strip("-") or "na"
    return f"{graph.index:03d}_{compile_id}_{graph.kind}"


def dump_graph(graph: GraphCapture, directory: PathLike) -> Path:
    """Write one graph's folder under ``directory`` (replacing one of the same name); returns it."""
    folder = Path(directory) / graph_folder_name(graph)
    staging = folder.with_name(f".{folder.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        data = graph.to_dict()
        for field_name, file_name in TEXT_FILES.items():
            (staging / file_name).write_text(data.pop(field_name) or "", encoding="utf-8")
        data["format"] = FORMAT
        _write_json(staging / "capture.json", data)
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(staging, folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
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


def rank_folder(graph: GraphCapture, directory: PathLike) -> Path:
    """Where ``graph`` is dumped: ``directory``, or ``directory/rank_<r>`` for a distributed rank's."""
    root = Path(directory)
    return root if graph.rank is None else root / f"rank_{graph.rank}"


def dump_session(graphs: Iterable[GraphCapture], directory: PathLike) -> Path:
    """Write every graph and an index.json listing them in order; returns ``directory``.

    Graph folders an earlier dump left in ``directory`` that this one does not list are removed.
    A rank's graphs go to ``directory/rank_<r>`` (see :func:`rank_folder`).
    """
    by_folder: dict[Path, list[GraphCapture]] = {}
    for graph in graphs:
        by_folder.setdefault(rank_folder(graph, directory), []).append(graph)
    for folder, members in (by_folder or {Path(directory): []}).items():  # no graphs: an empty index
        _dump_folder(members, folder)
    return Path(directory)


def _dump_folder(graphs: list[GraphCapture], root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    folders = [dump_graph(g, root).name for g in graphs]
    _write_index(root, folders)
    for stale in root.iterdir():
        if stale.is_dir() and _GRAPH_FOLDER.match(stale.name) and stale.name not in folders:
            shutil.rmtree(stale, ignore_errors=True)


def append_to_dump(graph: GraphCapture, directory: PathLike) -> Path:
    """Write one graph and add it to ``directory``'s index (used by the dump_dir option); a rank's
    graph goes to ``directory/rank_<r>``."""
    root = rank_folder(graph, directory)
    root.mkdir(parents=True, exist_ok=True)
    with _append_lock:
        folder = dump_graph(graph, root)
        folders = read_index(root) if (root / "index.json").exists() else []
        if folder.name not in folders:
            folders.append(folder.name)
        _write_index(root, folders)
    return folder


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object from ``path``; DumpError when it is missing, unreadable or not an object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DumpError(path, "missing") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DumpError(path, f"cannot be read ({exc})") from exc
    except json.JSONDecodeError as exc:
        raise DumpError(path, f"is not valid JSON (truncated or edited?): {exc}") from exc
    if not isinstance(data, dict):
        raise DumpError(path, f"holds a JSON {type(data).__name__}, not an object")
    return data


def read_index(root: Path) -> list[str]:
    """The graph folders ``root/index.json`` lists, in order; DumpError when it is not a dump's index."""
    path = root / "index.json"
    data = read_json(path)
    if data.get("format") != FORMAT:
        raise DumpError(path, f"is not an instrumented-backend dump (format {data.get('format')!r})")
    graphs = data.get("graphs")
    if not isinstance(graphs, list) or not all(isinstance(name, str) for name in graphs):
        raise DumpError(path, "has no list of graph folders under 'graphs'")
    return graphs
