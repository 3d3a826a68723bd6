"""Read a dump written by :mod:`.dump` back into captures; anything unreadable raises DumpError."""

from __future__ import annotations

from pathlib import Path

from ..graphs import CaptureSession, GraphCapture
from .dump import FORMAT, RANK_FOLDER, TEXT_FILES, DumpError, PathLike, read_index, read_json

__all__ = ["load"]


_REQUIRED = ("index", "compile_id", "kind", "graph_id")


def _load_graph(folder: Path) -> GraphCapture:
    meta_path = folder / "capture.json"
    if not meta_path.exists():
        raise DumpError(folder, "has no capture.json: not a graph folder of an instrumented-backend dump")
    data = read_json(meta_path)
    if data.pop("format", FORMAT) != FORMAT:
        raise DumpError(meta_path, "is not an instrumented-backend capture")
    missing = [name for name in _REQUIRED if name not in data]
    if missing:
        raise DumpError(meta_path, f"lacks {', '.join(missing)} (truncated or edited?)")
    for field_name, file_name in TEXT_FILES.items():
        path = folder / file_name
        if not path.exists():  # every dump writes each file, empty or not
            raise DumpError(path, "is missing: every dump writes it (deleted or not copied?)")
        try:
            data[field_name] = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise DumpError(path, f"cannot be read ({exc})") from exc
    try:
        return GraphCapture.from_dict(data)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise DumpError(meta_path, f"does not describe a capture ({type(exc).__name__}: {exc})") from exc


def load(directory: PathLike) -> CaptureSession:
    """Read a dump back: a dump folder (with index.json), a single graph folder (capture.json), or
    a distributed run's folder (``rank_<r>/`` dumps, read in rank order after any graphs of its own).

    Live objects (GraphModules, compiled callables) are not saved and are None after loading.
    Raises :class:`DumpError` (a ValueError) for anything that is not a readable dump.
    """
    root = Path(directory)
    if not root.exists():
        raise DumpError(root, "no dump at this path")
    if (root / "capture.json").exists():
        return CaptureSession([_load_graph(root)])
    ranks = sorted((int(match.group(1)), path) for path in root.iterdir()
                   if (match := RANK_FOLDER.match(path.name)) and (path / "index.json").exists())
    if (root / "index.json").exists() or ranks:
        graphs = [_load_graph(root / name) for name in read_index(root)] if (root / "index.json").exists() else []
        for _, folder in ranks:
            graphs.extend(_load_graph(folder / name) for name in read_index(folder))
        return CaptureSession(graphs)
    raise DumpError(root, "holds neither index.json nor capture.json: not an instrumented-backend dump")
