"""Line-level provenance: which IR op and FX node produced each line of a generated kernel.

Tagging happens at the point of emission, not by matching text afterwards:

1. When Inductor lowers an FX node into a ``Loops`` IR node, its ``inner_fn`` is wrapped so
   that calling it pushes that FX node as the *current FX origin* (nested calls give the
   innermost producer); stores push the origin of the buffer they write.
2. When a ``LoopBody`` is traced, every node it creates is stamped with the current FX origin
   (a body re-traced from another body inherits the stamp of the node being re-run).
3. During codegen, while a LoopBody node runs, every line a kernel buffer receives is *tagged*
   with (IR op, FX node) in a side table of the :class:`LineRecorder`, keyed by the identity of
   the line object Inductor appended. Nothing is written into the text: every string Inductor
   reads, compares, hashes or keys on (CSE caches, kernel dedup, ``getvalue()``) is exactly the
   string plain Inductor makes, by construction.
4. Tags follow a line as Inductor moves it: a buffer spliced into another (innermost tag wins),
   a buffer's text (``getvalue()``) spliced or written back as a string, and the kernel source
   handed to ``define_kernel``, where the tags of its lines are recorded under the kernel's name.

The Inductor-facing hooks live in ``seams/lowering/ir_origins.py``, ``seams/lowering/loop_body_origins.py`` and
``seams/codegen/line_tags.py``; this module holds the thread-local state they share and does nothing
unless an instrumented compile has activated a :class:`LineRecorder` on the current thread.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional, Sequence

from .thread_state import thread_local

__all__ = ["Origin", "origin_of", "LineRecorder", "LineTag", "active_recorder", "activate", "push_fx_origin",
           "pop_fx_origin", "current_fx_origin", "set_emission", "current_emission", "fx_label", "subgraph_paths"]


@dataclass(frozen=True)
class Origin:
    """What produced one emitted line: the IR op (``ops.neg``) and the post-grad FX node name."""

    ir_op: Optional[str]
    fx_node: Optional[str]


@functools.lru_cache(maxsize=8192)
def origin_of(ir_op: Optional[str], fx_node: Optional[str]) -> Origin:
    """The (shared) Origin for this pair: the codegen hooks ask for one per LoopBody node run."""
    return Origin(ir_op=ir_op, fx_node=fx_node)


# The origin of each physical line of one buffer entry (an entry may hold several lines).
LineTag = tuple[Optional[Origin], ...]


@dataclass
class TaggedKernel:
    """A kernel's tags, recorded in define_kernel: for each line of its source, its origins."""

    clean_source: str
    line_origins: list[list[Origin]] = field(default_factory=list)


def physical_lines(text: str) -> int:
    """How many lines ``text`` occupies once written (``getvalue`` counts them the same way)."""
    return text.count("\n") + 1


class LineRecorder:
    """Per-AOT-graph registry of line tags and of the tagged kernels Inductor defined.

    Three side tables, none of which Inductor ever reads:

    * entries: ``id(line object) -> line object`` and ``id(line object) -> LineTag`` for the
      strings and deferred lines in Inductor's buffers (the first table keeps each object alive,
      so no other object can have its id meanwhile: a tag is found by ``id`` alone; two plain
      dicts rather than one of pairs, because a pair per line is a container the garbage
      collector counts, thousands per compile);
    * texts: ``text -> origin per physical line`` for each buffer text ``getvalue()`` returned
      with at least one tagged line, so a text written back into a buffer keeps its tags;
    * fresh: the lines emitted (not moved) since the last kernel was defined, with their tags,
      for kernel sources Inductor assembles by string formatting rather than from one buffer
      (read line by line only for such a source: most kernels are one buffer's known text).
    """

    def __init__(self, root: Any = None) -> None:
        # The graph module being compiled (the post-grad passes edit it in place); the labels of
        # its subgraphs' nodes are qualified by their submodule path (:func:`fx_label`).
        self._root = root
        self._subgraph_paths: Optional[dict[int, tuple[Any, str]]] = None
        self._entry_lines: dict[int, Any] = {}
        self._entry_tags: dict[int, LineTag] = {}
        self._texts: dict[str, list[Optional[Origin]]] = {}
        self._fresh_lines: list[Any] = []  # and their tags, in step
        self._fresh_tags: list[LineTag] = []
        self.kernels: dict[str, list[TaggedKernel]] = {}
        self.problems: list[str] = []
        # Buffers the wrapper names -> FX nodes lowered into them; the graph's input names.
        self.buffer_origins: dict[str, list[str]] = {}
        self.buffer_nodes: dict[str, str] = {}  # buffer -> the FX node it is the value of
        self.graph_inputs: list[str] = []
        self.wrapper_code: str = ""  # the output code Inductor went on to load
        # kernel name -> {"reads": [...], "writes": [...]} (seams.codegen.kernel_traffic)
        self.traffic: dict[str, dict[str, list[dict[str, Any]]]] = {}

    # -- tags of buffer entries -------------------------------------------------------------

    def entry_tag(self, entry: Any) -> Optional[LineTag]:
        """The tag of this very line object, or None."""
        return self._entry_tags.get(id(entry))  # the table keeps it alive: its id is its own

    def entry_tags(self, entries: Sequence[Any]) -> list[Optional[LineTag]]:
        """:meth:`entry_tag` of each line object of a buffer (one call for a whole buffer)."""
        return list(map(self._entry_tags.get, map(id, entries)))

    def text_tag(self, text: str) -> Optional[list[Optional[Origin]]]:
        """Origins per physical line of a buffer text ``getvalue()`` returned, or None."""
        return self._texts.get(text)

    def tag_entry(self, entry: Any, tag: LineTag, fresh: bool = False) -> None:
        """Tag a line object Inductor appended to a buffer.

        ``fresh`` says the line was just emitted (not moved from another buffer): it then also
        joins the lines that kernel sources built by formatting are matched against.
        """
        key = id(entry)
        self._entry_lines[key] = entry
        self._entry_tags[key] = tag
        if fresh:
            self._fresh_lines.append(entry)
            self._fresh_tags.append(tag)

    def register_text(self, text: str, origins: Sequence[Optional[Origin]]) -> None:
        """Remember the origin of each physical line of ``text`` (a buffer's ``getvalue()``)."""
        self._texts[text] = list(origins)

    def kernel_origins(self, source: str) -> list[list[Origin]]:
        """The origins of each line of a kernel's source, as handed to ``define_kernel``.

        The source is usually a buffer's text, known line for line. Otherwise (a template
        rendered by formatting) each line takes the origin of a line of the same text tagged
        since the previous kernel, in order. Either way the pending table starts afresh.
        """
        fresh = zip(self._fresh_lines, self._fresh_tags)
        self._fresh_lines, self._fresh_tags = [], []
        known = self._texts.get(source)
        lines = source.split("\n")
        if known is not None and len(known) == len(lines):
            return [[origin] if origin is not None else [] for origin in known]
        pending = _by_stripped_line(fresh)
        used: dict[str, int] = {}
        result: list[list[Origin]] = []
        for line in lines:
            key = line.strip()
            candidates = pending.get(key) if key else None
            if not candidates:
                result.append([])
                continue
            index = used.get(key, 0)
            used[key] = index + 1
            result.append([candidates[min(index, len(candidates) - 1)]])
        return result

    def record_kernel(self, kernel_name: str, source: str, line_origins: list[list[Origin]]) -> None:
        self.kernels.setdefault(kernel_name, []).append(TaggedKernel(source, line_origins))

    def label(self, node: Any, name: str) -> str:
        """``name``, prefixed by its submodule's path if ``node`` belongs to a subgraph of the root."""
        graph = getattr(node, "graph", None)
        root = self._root
        if root is None or graph is getattr(root, "graph", None):
            return name
        paths = self._subgraph_paths
        hit = paths.get(id(graph)) if paths is not None else None
        if hit is None or hit[0] is not graph:  # a subgraph not seen yet: (re)read the root's submodules
            paths = self._subgraph_paths = subgraph_paths(root)
            hit = paths.setdefault(id(graph), (graph, ""))
        return f"{hit[1]}.{name}" if hit[1] else name

    def finish(self) -> None:
        """Drop the side tables once the compile is over: every kernel's tags are in ``kernels``,
        and the tables hold every line object Inductor wrote (the record may be read much later)."""
        self._root = self._subgraph_paths = None
        self._entry_lines.clear()
        self._entry_tags.clear()
        self._texts.clear()
        self._fresh_lines.clear()
        self._fresh_tags.clear()


def _by_stripped_line(fresh: Iterable[tuple[Any, LineTag]]) -> dict[str, list[Origin]]:
    """``stripped line -> origins``, in order, of the tagged physical lines of emitted entries."""
    pending: dict[str, list[Origin]] = {}
    for entry, tag in fresh:
        text = entry if isinstance(entry, str) else getattr(entry, "line", "")
        if not isinstance(text, str):
            continue
        for line, origin in zip(text.split("\n"), tag):
            if origin is not None and line.strip():
                pending.setdefault(line.strip(), []).append(origin)
    return pending


# emission_tag: the tag ``(emission,)`` last given to a fresh line, shared by the lines that follow
# while the emission is the same (``writeline`` reads and sets it).
_state = thread_local("LineTagState", recorder=None, emission=None, emission_tag=None, fx_stack=None)


def thread_state() -> threading.local:
    """The thread-local the functions below read (``recorder``, ``emission``, ``fx_stack``; and
    ``emission_tag``, writeline's own), for the hooks hot enough that a function call per access
    shows in the compile time: ``writeline``
    (every line Inductor writes) reads it, LoopBody's ``run_node`` (every op of every kernel)
    reads it and sets and restores ``emission`` as :func:`set_emission` would, and the IR nodes'
    ``inner_fn`` wrappers and LightTracer's ``create_node`` (every op traced) push, pop and read
    ``fx_stack`` as :func:`push_fx_origin`, :func:`pop_fx_origin` and :func:`current_fx_origin`
    would. Everything else goes through the functions below."""
    return _state


def active_recorder() -> Optional[LineRecorder]:
    """The recorder of the instrumented compile running on this thread, or None."""
    return _state.recorder


def activate(recorder: Optional[LineRecorder]) -> Optional[LineRecorder]:
    """Make ``recorder`` this thread's active recorder; returns the previous one."""
    previous = _state.recorder
    _state.recorder = recorder
    if recorder is None:
        _state.fx_stack = []
        _state.emission = _state.emission_tag = None
    return previous


def pause() -> Optional[LineRecorder]:
    """Stop tagging lines on this thread (fx origin and emission kept); returns the recorder for
    :func:`resume`. For text we write ourselves with Inductor's buffers (the IR logs), whose
    thousands of lines no kernel ever contains."""
    recorder = _state.recorder
    _state.recorder = None
    return recorder


def resume(recorder: Optional[LineRecorder]) -> None:
    """Undo :func:`pause`."""
    _state.recorder = recorder


# The hooks run thousands of times per compile, so they call plain push/pop (set/restore)
# functions in a try/finally: a generator context manager costs more than the hook's own work.

def push_fx_origin(node_name: Optional[str]) -> None:
    """Push ``node_name`` as the FX node producing whatever IR ops are created until the pop."""
    stack = _state.fx_stack
    if stack is None:
        stack = _state.fx_stack = []
    stack.append(node_name)


def pop_fx_origin() -> None:
    """Undo the matching :func:`push_fx_origin`."""
    _state.fx_stack.pop()


def current_fx_origin() -> Optional[str]:
    """The innermost FX node currently being lowered/traced, or None."""
    stack = _state.fx_stack
    return stack[-1] if stack else None


def subgraph_paths(root: Any) -> dict[int, tuple[Any, str]]:
    """``{id(graph): (graph, submodule path)}`` for every subgraph module under ``root`` (a
    ``torch.cond`` branch: ``true_graph_0``; nested: ``true_graph_0.false_graph_0``)."""
    import torch.fx

    paths: dict[int, tuple[Any, str]] = {}
    for path, module in root.named_modules():
        if path and isinstance(module, torch.fx.GraphModule):
            paths[id(module.graph)] = (module.graph, path)
    return paths


def fx_label(node: Any) -> Optional[str]:
    """The name the line map knows an FX node by: its name, prefixed by its submodule's path when
    it belongs to a subgraph of the graph being compiled (``true_graph_0.sin``, a ``torch.cond``
    branch's ``sin``), so that it never passes for the root graph's node of the same name."""
    name = getattr(node, "name", None)
    recorder = _state.recorder
    if name is None or recorder is None:
        return name
    return recorder.label(node, name)


def set_emission(origin: Optional[Origin]) -> Optional[Origin]:
    """Mark lines written from now on with ``origin``; returns the previous one, to restore."""
    previous = _state.emission
    _state.emission = origin
    return previous


def current_emission() -> Optional[Origin]:
    """The origin to mark emitted lines with, or None outside a LoopBody node's codegen."""
    return _state.emission
