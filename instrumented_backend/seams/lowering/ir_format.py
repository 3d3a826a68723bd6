"""Seam: formatting scheduler nodes as ``ir_pre_fusion.txt`` / ``ir_post_fusion.txt`` text, quickly.

The text is Inductor's own (``DebugFormatter._write_ir``, what TORCH_COMPILE_DEBUG writes), and
it must be taken while the nodes are in the state being logged: fusion mutates them afterwards,
so it cannot be deferred. It is the largest part of an instrumented compile's overhead, and
a few things dominate it, all of which we make cheaper without changing a byte of the text:

* every sympy expression (sizes, strides, indexing) is printed with a fresh ``StrPrinter``,
  thousands of times for the same few hundred expression objects: while we format, ``str`` and
  ``repr`` of a sympy object are memoised **by object identity** (sympy objects are immutable;
  identity rather than equality, because structurally equal objects may print differently),
  through ``sympy.printing.str.sstr``, which sympy's ``__str__`` imports at each call (patching
  the module function rather than sympy's base class spares invalidating the method caches of
  sympy's hundreds of classes twice per log), and a linear form of symbols (most indexing) is
  written directly, as sympy writes it (:mod:`.sympy_linear_text`);
* every node's reads and writes are printed two or three times each (sorted by their text, then
  pretty-printed), in both logs: the scheduler's dependency objects are frozen dataclasses of
  immutable fields, so their ``repr`` is memoised by identity the same way;
* ``LoopBodyBlock.debug_str`` builds and ``exec``-compiles a throw-away ``GraphModule`` only to
  read its ``.code``: while we format, it takes the same text from ``Graph.python_code``, exactly
  as ``GraphModule.recompile`` does (and without making the throw-away module the graph's owner;
  for the usual block shapes, written directly by :mod:`.fx_block_code`),
  and the post-fusion log reuses the text of a block whose graph is provably unchanged since the
  pre-fusion log (:class:`IrTextMemo`).
* the scheduler's ``pformat`` (every node's writes, unmet and met dependencies, every buffer's
  layout) runs ``pprint.pformat`` on a sorted list of dependencies: pprint's general machinery
  (a ``PrettyPrinter`` per call, a recursive safe-repr, a stream) only ever puts such a list on
  one line if it fits in 80 columns and one item per line otherwise; while we format, a list of
  objects pprint prints as their ``repr`` (neither containers nor strings, nor dataclasses with a
  generated repr) is written that way directly, anything else through pprint
  (:func:`_flat_pformat`);
* every buffer's layout is printed once per node that reads or writes it, each time comparing
  its sympy offset with 0 and printing its sizes and strides: a layout's text is reused while
  the layout holds the very same attribute objects (layouts are mutable: frozen, padded);
* the post-fusion log prints every scheduler node fused into a kernel again, as the pre-fusion log
  did: a ``SchedulerNode``'s text is reused when everything it is printed from is the very same
  objects, container contents included (its dependencies, sizes, loop body and blocks, output
  buffers and their users, the layouts printed), and formatted afresh otherwise;
* each node's text is written line by line into an ``IndentedBuffer`` and read back, a fused
  node's holding the text of every node in it: while we format, the scheduler's buffers write
  and read plain strings in bulk (:mod:`.ir_text_buffer`).

The patches are in place only while some thread is inside :func:`formatting` (as
:func:`format_ir` is), and act only on such a thread; elsewhere they delegate to the originals.
``check()`` reads the source of the Inductor and sympy functions they stand in for, so a change
there is reported instead of silently producing different text.
"""

from __future__ import annotations

import contextlib
import inspect
import operator
import re
from typing import Any, Callable, Iterator, Optional

import torch.fx

from ...recording.thread_state import thread_local
from .. import Replacement, ScopedPatches, SeamMoved, install_once
from . import fx_block_code, ir_text_buffer, sympy_linear_text

__all__ = ["install", "format_ir", "formatting", "IrTextMemo", "check"]

_state = thread_local("IrFormatState", memo=None)

# What LoopBodyBlock.debug_str does, which _fast_block_debug_str reproduces.
_BLOCK_DEBUG_STR_SOURCE = (
    "torch.fx.GraphModule(self.body.submodules, self.graph).code",
    'code.strip().replace("def forward(", f"def {name}(")',
)
# What the scheduler's debug text reads of each object, per function: the node fingerprint covers
# exactly these (check() fails if Inductor starts printing anything else).
_NODE_TEXT_READS = {
    ("scheduler", "BaseSchedulerNode.debug_str"): {"debug_str_extra", "get_name", "get_outputs", "max_input_distance",
                                                   "min_input_distance", "read_writes", "unmet_dependencies"},
    ("scheduler", "BaseSchedulerNode.get_outputs"): {"outputs"},
    ("scheduler", "BaseSchedulerNode._debug_str_for_device"): {"debug_device_str"},
    ("scheduler", "SchedulerBuffer.debug_str"): {"get_aliases", "get_mutations", "get_name", "node", "users"},
    ("scheduler", "SchedulerNode.debug_str_extra"): {"_body", "_debug_str_for_device", "_sizes", "get_name", "group",
                                                     "node", "read_writes"},
    ("loop_body", "LoopBody.debug_str"): {"var_ranges", "indexing_exprs", "root_block", "subblocks"},
}
# Printed thousands of times (every node's reads and writes, sorted by their text, then pprinted).
_DEPENDENCY_CLASSES = ("MemoryDep", "StarDep", "WeakDep", "IndexExprDep")


class IrTextMemo:
    """Text already produced for objects that cannot have changed since, within one compile.

    Pass the same memo to the pre- and post-fusion :func:`format_ir` calls of a graph: sympy
    objects and scheduler dependencies are immutable, so their text is reused by identity (the
    object is kept, so its id is not reused); a loop body block's text is reused only if its
    graph still has the very same nodes with the very same names, targets, argument tuples and
    types (fusion normally builds new bodies rather than editing old ones, but nothing is assumed);
    a ``SchedulerNode``'s text likewise, only while :func:`_node_fingerprint` finds the very same
    objects (fusion does edit some nodes in place: those are formatted again).
    """

    def __init__(self) -> None:
        self.immutable_text: dict[int, tuple[Any, str]] = {}
        self.block_text: dict[tuple[int, str], tuple[Any, Any, str]] = {}
        self.node_text: dict[int, tuple[Any, Any, str]] = {}
        self.layout_text: dict[int, tuple[Any, Any, str]] = {}


def format_ir(nodes: Any, memo: Optional[IrTextMemo] = None) -> str:
    """Format scheduler nodes exactly as TORCH_COMPILE_DEBUG writes them to ir_*_fusion.txt."""
    from torch._inductor.debug import DebugFormatter

    with formatting(memo if memo is not None else IrTextMemo()):
        return DebugFormatter._write_ir(nodes)


@contextlib.contextmanager
def formatting(memo: IrTextMemo) -> Iterator[None]:
    """The fast paths in place, reading and filling ``memo`` on this thread, for the block.

    The patches are applied when the first thread starts formatting and taken out when the last
    one ends, so Inductor's own printing (sympy expressions in every kernel's code, dependency
    reprs) pays nothing for them the rest of the time.
    """
    install()
    with _patches.active():
        previous = _state.memo
        _state.memo = memo
        try:
            yield
        finally:
            _state.memo = previous


def _memoised_text(original: Callable[[Any], str]) -> Callable[[Any], str]:
    def text(self: Any) -> str:
        memo = _state.memo
        if memo is None:
            return original(self)
        hit = memo.immutable_text.get(id(self))
        if hit is not None and hit[0] is self:
            return hit[1]
        result = original(self)
        memo.immutable_text[id(self)] = (self, result)
        return result

    text.__wrapped__ = original  # type: ignore[attr-defined]
    return text


def _memoised_sstr(original: Callable[..., str]) -> Callable[..., str]:
    """``sympy.printing.str.sstr``, memoised by identity for what ``str(expr)`` asks (``order=None``)."""

    def sstr(expr: Any, **settings: Any) -> str:
        memo = _state.memo
        if memo is None or settings != _STR_SETTINGS:
            return original(expr, **settings)
        hit = memo.immutable_text.get(id(expr))
        if hit is not None and hit[0] is expr:
            return hit[1]
        result = sympy_linear_text.linear_text(expr)
        if result is None:
            result = original(expr, **settings)
        memo.immutable_text[id(expr)] = (expr, result)
        return result

    sstr.__wrapped__ = original  # type: ignore[attr-defined]
    return sstr


_STR_SETTINGS = {"order": None}  # what Printable.__str__ (and so __repr__) passes to sstr

# What the scheduler's pformat does around pprint, which _fast_pformat reproduces.
_PFORMAT_SOURCE = ("obj = sorted(obj, key=str)", "pprint.pformat(obj, indent=4)",
                   "textwrap.indent(result, ' ' * 4)")
_PPRINT_WIDTH, _PPRINT_INDENT = 80, 4  # pprint.pformat's default width; the scheduler's indent


def _prints_as_its_repr(kind: type, cache: dict[type, bool] = {}) -> bool:  # noqa: B006 - a per-type cache
    """Whether pprint writes an object of type ``kind`` as ``repr(obj)`` whatever its length: not a
    type pprint formats itself (containers, strings: ``PrettyPrinter._dispatch``), nor a dataclass
    whose repr dataclasses generated (pprint lays those out field by field)."""
    known = cache.get(kind)
    if known is None:
        import dataclasses
        import pprint

        repr_function = kind.__repr__
        generated = dataclasses.is_dataclass(kind) and "__create_fn__" in getattr(
            getattr(repr_function, "__wrapped__", None), "__qualname__", "")
        known = cache[kind] = (repr_function not in pprint.PrettyPrinter._dispatch  # type: ignore[attr-defined]
                               and repr_function not in (list.__repr__, tuple.__repr__, dict.__repr__)
                               and not issubclass(kind, type) and not generated)
    return known


def _flat_pformat(obj: Any) -> Optional[str]:
    """``pprint.pformat(obj, indent=4)`` for an object pprint prints as its repr, or a list of such
    objects; None for anything else (pprint's own layout then)."""
    if type(obj) is not list:
        return repr(obj) if _prints_as_its_repr(type(obj)) else None
    for item in obj:
        if not _prints_as_its_repr(type(item)):
            return None
    reprs = [repr(item) for item in obj]
    one_line = "[" + ", ".join(reprs) + "]"
    if len(one_line) <= _PPRINT_WIDTH:
        return one_line
    return "[" + " " * (_PPRINT_INDENT - 1) + (",\n" + " " * _PPRINT_INDENT).join(reprs) + "]"


def _fast_pformat(original: Callable[[Any], str]) -> Callable[[Any], str]:
    """The scheduler's ``pformat``, writing a flat list of dependencies without pprint's machinery."""
    import textwrap

    from torch.utils._ordered_set import OrderedSet

    def pformat(obj: Any) -> str:
        if _state.memo is None:
            return original(obj)
        result = _flat_pformat(sorted(obj, key=str) if isinstance(obj, (OrderedSet, set)) else obj)
        if result is None:
            return original(obj)
        if "\n" in result:
            return f"\n{textwrap.indent(result, ' ' * _PPRINT_INDENT)}"
        return result

    pformat.__wrapped__ = original  # type: ignore[attr-defined]
    return pformat


def _graph_fingerprint(graph: torch.fx.Graph) -> list[Any]:
    """Every node of ``graph`` with the objects its printed line is made of, in order.

    Two fingerprints match only if they hold the very same objects (:func:`_same_objects`): FX
    never edits a node's ``args``/``kwargs`` in place (they are immutable containers, replaced
    on every change), so holding on to them is enough to see any change, at the cost of one
    list per block instead of a printed copy.
    """
    fingerprint: list[Any] = []
    for n in graph.nodes:
        fingerprint += (n, n.name, n.op, n.target, n._args, n._kwargs, n.type)
    return fingerprint


def _same_objects(old: list[Any], new: list[Any]) -> bool:
    return len(old) == len(new) and all(map(operator.is_, old, new))


def _text_while_unchanged(table: dict[Any, tuple[Any, Any, str]], key: Any, owner: Any, fingerprint: list[Any],
                          produce: Callable[[], str]) -> str:
    """The text ``table`` holds for ``owner`` under ``key`` if it was made while ``fingerprint``
    held the very same objects; else ``produce()``, kept there with this fingerprint."""
    hit = table.get(key)
    if hit is not None and hit[0] is owner and _same_objects(hit[1], fingerprint):
        return hit[2]
    text = produce()
    table[key] = (owner, fingerprint, text)
    return text


def _fast_block_debug_str(original: Callable[..., str]) -> Callable[..., str]:
    def debug_str(self: Any, name: str = "block") -> str:
        memo = _state.memo
        if memo is None:
            return original(self, name)
        return _text_while_unchanged(memo.block_text, (id(self), name), self, _graph_fingerprint(self.graph),
                                     lambda: _block_text(self.graph, name))

    debug_str.__wrapped__ = original  # type: ignore[attr-defined]
    return debug_str


def _block_text(graph: torch.fx.Graph, name: str) -> str:
    """What ``LoopBodyBlock.debug_str(name)`` prints for a block of ``graph``: FX's code of it."""
    from torch.fx.experimental import _config as fx_experimental_config

    record_func = fx_experimental_config.enrich_profiler_metadata
    code = None if record_func else fx_block_code.block_code(graph)  # FX's text, written directly
    if code is None:
        code = graph.python_code(root_module="self", record_func=record_func).src.strip()
    code = code.replace("def forward(", f"def {name}(")
    return fx_block_code.DELETIONS.sub("", code) if ";" in code else code


# Brackets around a container's items in a flat fingerprint, so that an edit in place shows.
_OPEN, _OPEN_DICT, _CLOSE = object(), object(), object()
_CONTAINERS = frozenset({list, tuple, dict})


def _add(fingerprint: list[Any], value: Any) -> None:
    """Append ``value`` to a flat fingerprint: a list, tuple or dict as its items between brackets,
    anything else as itself (fingerprints are compared object by object, by identity)."""
    kind = type(value)
    if kind is list or kind is tuple:
        fingerprint.append(_OPEN)
        for item in value:
            if type(item) in _CONTAINERS:
                _add(fingerprint, item)
            else:
                fingerprint.append(item)
        fingerprint.append(_CLOSE)
    elif kind is dict:
        fingerprint.append(_OPEN_DICT)
        for key, item in value.items():
            fingerprint.append(key)
            if type(item) in _CONTAINERS:
                _add(fingerprint, item)
            else:
                fingerprint.append(item)
        fingerprint.append(_CLOSE)
    else:
        fingerprint.append(value)


def _add_items(fingerprint: list[Any], items: Any) -> None:
    """Append the items of a container of immutable objects (a set of dependencies) between brackets."""
    fingerprint.append(_OPEN)
    fingerprint.extend(items)
    fingerprint.append(_CLOSE)


class _NotMemoisable(Exception):
    """A scheduler node prints something the fingerprint does not cover: format it every time."""


def _add_layout(fingerprint: list[Any], layout: Any) -> None:
    from torch._inductor.ir import Layout, NoneLayout

    kind = type(layout)
    if kind is not NoneLayout and getattr(kind, "__str__", None) is not Layout.__str__:
        raise _NotMemoisable(kind.__name__)
    fingerprint.append(kind)
    _add(fingerprint, vars(layout))


def _node_fingerprint(node: Any) -> list[Any]:
    """Every object a ``SchedulerNode``'s debug text is printed from (see ``BaseSchedulerNode.debug_str``,
    ``SchedulerBuffer.debug_str``, ``SchedulerNode.debug_str_extra``), in one flat list, containers as
    their items between brackets: two fingerprints holding the very same objects mean the same text."""
    from torch._inductor.dependencies import WeakDep
    from torch._inductor.virtualized import V

    read_writes, body = node.read_writes, node._body
    fingerprint: list[Any] = [node.node, node.get_name(), read_writes]
    _add_items(fingerprint, read_writes.reads)
    _add_items(fingerprint, read_writes.writes)
    _add_items(fingerprint, node.unmet_dependencies)
    fingerprint += (node.min_input_distance, node.max_input_distance, vars(node).get("debug_device_str"), body)
    _add(fingerprint, node.group)
    _add(fingerprint, node._sizes)
    fingerprint.append(_OPEN)
    for output in node.get_outputs():
        fingerprint += (output, output.node)
        _add_layout(fingerprint, output.node.layout)
        _add_items(fingerprint, [part for user in output.users for part in (user.node, user.can_inplace, user.is_weak)])
        _add_items(fingerprint, output.get_aliases())
        _add_items(fingerprint, output.get_mutations())
    fingerprint += (_CLOSE, _OPEN)
    for dep in read_writes.reads_and_writes():
        if not isinstance(dep, WeakDep):
            buffer = V.graph.get_buffer(dep.name)
            fingerprint.append(buffer)
            _add_layout(fingerprint, getattr(buffer, "layout", None))
    fingerprint.append(_CLOSE)
    if body is not None:
        _add(fingerprint, dict(body.var_ranges))
        _add(fingerprint, dict(body.indexing_exprs))
        for block in (body.root_block, *body.subblocks.values()):
            fingerprint.append(block)
            _add_items(fingerprint, _graph_fingerprint(block.graph))
        _add_items(fingerprint, body.subblocks)
    return fingerprint


# What Layout.__str__ reads of the layout; the memo fingerprints the layout's vars(), which hold
# them (check() verifies the properties read plain attributes).
_LAYOUT_TEXT_READS = {"device", "dtype", "is_pinned", "offset", "size", "stride"}
_LAYOUT_PROPERTIES = {"offset": "_offset", "size": "_size", "stride": "_stride"}


def _memoised_layout_text(original: Callable[[Any], str]) -> Callable[[Any], str]:
    from torch._inductor.ir import Layout

    plain_kinds: dict[type, bool] = {}

    def text(self: Any) -> str:
        memo = _state.memo
        if memo is None:
            return original(self)
        kind = type(self)
        plain = plain_kinds.get(kind)
        if plain is None:  # the text is Layout's, from attributes read as Layout reads them
            plain = plain_kinds[kind] = all(getattr(kind, name, None) is getattr(Layout, name, None)
                                            for name in (*_LAYOUT_PROPERTIES, "__str__", "__repr__"))
        if not plain:
            return original(self)
        fingerprint: list[Any] = [kind]
        _add(fingerprint, vars(self))
        return _text_while_unchanged(memo.layout_text, id(self), self, fingerprint, lambda: original(self))

    text.__wrapped__ = original  # type: ignore[attr-defined]
    return text


def _memoised_node_text(original: Callable[[Any], str], node_class: type) -> Callable[[Any], str]:
    def debug_str(self: Any) -> str:
        memo = _state.memo
        if memo is None or type(self) is not node_class:
            return original(self)
        try:
            fingerprint = _node_fingerprint(self)
        except _NotMemoisable:
            return original(self)
        return _text_while_unchanged(memo.node_text, id(self), self, fingerprint, lambda: original(self))

    debug_str.__wrapped__ = original  # type: ignore[attr-defined]
    return debug_str


@install_once
def install() -> None:
    """Check, once per process, that the functions the fast paths stand in for are as expected
    (the patches themselves are in place only while :func:`formatting`)."""


def _replacements() -> list[Replacement]:
    """Sympy's ``sstr``, LoopBodyBlock.debug_str, SchedulerNode.debug_str and the dependency
    classes' reprs, each wrapped as it is when the patches are applied."""
    import sympy.printing.str as sympy_str
    from torch._inductor import scheduler
    from torch._inductor.ir import Layout
    from torch._inductor.loop_body import LoopBodyBlock
    from torch._inductor.scheduler import SchedulerNode

    return [(sympy_str, "sstr", _memoised_sstr),
            (scheduler, "pformat", _fast_pformat),
            (Layout, "__str__", _memoised_layout_text),
            (Layout, "__repr__", _memoised_layout_text),
            (LoopBodyBlock, "debug_str", _fast_block_debug_str),
            (SchedulerNode, "debug_str", lambda original: _memoised_node_text(original, SchedulerNode)),
            (scheduler, "IndentedBuffer", lambda original: ir_text_buffer.formatting_buffer(original, _state)),
            *[(dependency, "__repr__", _memoised_text) for dependency in _frozen_dependency_classes()]]


_patches = ScopedPatches(_replacements)


def _frozen_dependency_classes() -> list[type]:
    """The scheduler's dependency classes whose text can be memoised: frozen dataclasses of
    immutable fields (names, sympy expressions, tuples) with their own ``__repr__``."""
    from torch._inductor import dependencies

    classes = []
    for name in _DEPENDENCY_CLASSES:
        cls = getattr(dependencies, name, None)
        params = getattr(cls, "__dataclass_params__", None)
        if cls is not None and params is not None and params.frozen and "__repr__" in vars(cls):
            classes.append(cls)
    return classes


def check() -> None:
    """Raise SeamMoved unless the functions the fast paths stand in for still do what we reproduce."""
    try:
        from sympy.core._print_helpers import Printable
        from torch._inductor.debug import DebugFormatter
        from torch._inductor.loop_body import LoopBodyBlock
    except ImportError as exc:  # pragma: no cover - only on a moved torch/sympy
        raise SeamMoved(f"ir_format: cannot import what IR formatting uses: {exc}") from exc
    if not callable(getattr(DebugFormatter, "_write_ir", None)):
        raise SeamMoved("ir_format: DebugFormatter._write_ir (the ir_*_fusion.txt formatter) is gone")
    block_debug_str = inspect.unwrap(LoopBodyBlock.debug_str)
    source = inspect.getsource(block_debug_str)
    missing = [fragment for fragment in _BLOCK_DEBUG_STR_SOURCE if fragment not in source]
    if missing or 'r";[^\\n]*"' not in source:
        raise SeamMoved(
            "ir_format: LoopBodyBlock.debug_str no longer formats a block as "
            f"GraphModule(...).code with '; ...' suffixes stripped (missing: {missing or ['the regex']})"
        )
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    node = graph.call_function(torch.neg, (x,), {})
    if getattr(node, "_args", None) is not node.args or getattr(node, "_kwargs", None) is not node.kwargs:
        raise SeamMoved("ir_format: torch.fx.Node no longer keeps its args/kwargs in _args/_kwargs "
                        "(the loop-body memo fingerprints them by identity)")
    found = {cls.__name__ for cls in _frozen_dependency_classes()}
    if found != set(_DEPENDENCY_CLASSES):
        raise SeamMoved("ir_format: the scheduler's dependency classes "
                        f"{sorted(set(_DEPENDENCY_CLASSES) - found)} are gone or no longer frozen dataclasses "
                        "with their own __repr__ (their text is memoised by identity)")
    _check_node_text_reads()
    ir_text_buffer.check()
    sympy_linear_text.check()
    _check_pformat()
    _check_layout_text()
    printable_str = inspect.getsource(inspect.unwrap(Printable.__str__))
    if ("from sympy.printing.str import sstr" not in printable_str or "sstr(self, order=None)" not in printable_str
            or Printable.__repr__ is not Printable.__str__):
        raise SeamMoved("ir_format: sympy's Printable.__str__ (and __repr__) no longer print with "
                        "sstr(self, order=None), imported at each call")


class _Item:
    """A stand-in for a dependency in :func:`_check_pformat`: an object pprint prints as its repr."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _check_pformat() -> None:
    import pprint

    from torch._inductor import scheduler

    source = inspect.getsource(inspect.unwrap(scheduler.pformat))
    missing = [fragment for fragment in _PFORMAT_SOURCE if fragment not in source]
    if missing:
        raise SeamMoved(f"ir_format: the scheduler's pformat no longer does {missing} (the flat-list fast path "
                        "reproduces it)")
    samples: list[Any] = [_Item("x" * 100), _Item("a")]
    samples += [[_Item(text) for text in texts]
                for texts in ([], ["a"], ["x" * 30, "y" * 30], ["x" * 39, "y" * 39], ["x" * 100, "y", "z" * 90])]
    for sample in samples:
        if _flat_pformat(sample) != pprint.pformat(sample, indent=_PPRINT_INDENT):
            raise SeamMoved(f"ir_format: pprint.pformat no longer lays out {sample!r} as the flat fast path does "
                            "(an object as its repr; a list on one line up to 80 columns, else one item per line)")
    if _flat_pformat(["a"]) is not None or _flat_pformat(("a",)) is not None:
        raise SeamMoved("ir_format: the flat pformat fast path takes strings or tuples, which pprint lays out itself")


def _check_layout_text() -> None:
    import torch
    from torch._inductor.ir import FixedLayout, Layout

    text_function = inspect.unwrap(Layout.__str__)
    read = set(re.findall(r"self\.(\w+)", inspect.getsource(text_function)))
    if read != _LAYOUT_TEXT_READS or inspect.unwrap(Layout.__repr__) is not text_function:
        raise SeamMoved(f"ir_format: Layout's text now reads {sorted(read)} (the memo covers "
                        f"{sorted(_LAYOUT_TEXT_READS)}), or its repr is no longer its str")
    for name, attribute in _LAYOUT_PROPERTIES.items():
        getter = getattr(getattr(Layout, name, None), "fget", None)
        if getter is None or f"return self.{attribute}" not in inspect.getsource(getter):
            raise SeamMoved(f"ir_format: Layout.{name} is no longer a property returning self.{attribute}")
    layout = FixedLayout(torch.device("cpu"), torch.float32, [2, 3], [3, 1])
    if not {"device", "dtype", "is_pinned", *_LAYOUT_PROPERTIES.values()} <= set(vars(layout)):
        raise SeamMoved("ir_format: a layout no longer keeps device, dtype, is_pinned, _size, _stride and _offset "
                        "as attributes (the layout text memo fingerprints them)")


def _check_node_text_reads() -> None:
    import importlib

    for (module_name, qualname), covered in _NODE_TEXT_READS.items():
        module = importlib.import_module(f"torch._inductor.{module_name}")
        owner, _, attr = qualname.partition(".")
        function = inspect.unwrap(getattr(getattr(module, owner, None), attr, None) or (lambda: None))
        try:
            source = inspect.getsource(function)
        except (OSError, TypeError) as exc:
            raise SeamMoved(f"ir_format: {qualname} is gone or unreadable ({exc})") from exc
        read = set(re.findall(r"self\.(\w+)", source))
        if not read <= covered:
            raise SeamMoved(f"ir_format: {qualname} now prints {sorted(read - covered)} too, which the scheduler-node "
                            "text memo does not fingerprint")
