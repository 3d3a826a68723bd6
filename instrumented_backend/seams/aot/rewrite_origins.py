"""Seam: ``torch.fx.passes.graph_transform_observer.GraphTransformObserver``.

Inductor runs every graph pass (pre-grad, joint-graph, post-grad, pattern-matcher rewrites)
inside ``GraphTransformObserver(gm, passname)``. While a :class:`~..recording.rewrites.RewriteLog` is
active on the thread, entering the observer registers two record-only FX hooks on its ``gm``
(``GraphModule._register_create_node_hook`` and ``_register_replace_node_hook``) and leaving
it removes them. The hooks write nothing into the graph or its nodes' metadata; they only tell
the log which nodes the pass made and what each one replaced.
"""

from __future__ import annotations

from typing import Any

from ...recording import rewrites
from .. import SeamMoved, install_once

__all__ = ["install", "check"]

_HOOKS = "_instrumented_backend_rewrite_hooks"


@install_once
def install() -> None:
    """Patch GraphTransformObserver.__enter__ and __exit__ once per process."""
    from torch.fx.passes.graph_transform_observer import GraphTransformObserver

    original_enter = GraphTransformObserver.__enter__
    original_exit = GraphTransformObserver.__exit__

    def enter(self: Any) -> Any:
        result = original_enter(self)
        log = rewrites.active_log()
        gm = getattr(self, "gm", None)
        if log is not None and gm is not None and getattr(self, _HOOKS, None) is None:
            gm._register_create_node_hook(log.on_create)
            gm._register_replace_node_hook(log.on_replace)
            setattr(self, _HOOKS, (gm, log))
        return result

    def exit_(self: Any, *exc_info: Any) -> Any:
        hooks = getattr(self, _HOOKS, None)
        if hooks is not None:
            gm, log = hooks
            setattr(self, _HOOKS, None)
            for unregister, hook in ((gm._unregister_create_node_hook, log.on_create),
                                     (gm._unregister_replace_node_hook, log.on_replace)):
                try:
                    unregister(hook)
                except ValueError:  # the pass dropped the hook lists (a deep copy): nothing to remove
                    pass
        return original_exit(self, *exc_info)

    GraphTransformObserver.__enter__ = enter
    GraphTransformObserver.__exit__ = exit_


def check() -> None:
    """Raise SeamMoved unless passes still run in GraphTransformObserver and FX still calls node hooks."""
    import inspect

    import torch.fx
    from torch.fx.passes.graph_transform_observer import GraphTransformObserver

    for method in ("__enter__", "__exit__", "apply_graph_pass", "apply_gm_pass"):
        if not callable(getattr(GraphTransformObserver, method, None)):
            raise SeamMoved(f"rewrite_origins: GraphTransformObserver.{method} is gone")
    if "with self" not in inspect.getsource(GraphTransformObserver.apply_graph_pass):
        raise SeamMoved("rewrite_origins: GraphTransformObserver.apply_graph_pass no longer enters the observer")
    for method in ("_register_create_node_hook", "_unregister_create_node_hook",
                   "_register_replace_node_hook", "_unregister_replace_node_hook"):
        if not callable(getattr(torch.fx.GraphModule, method, None)):
            raise SeamMoved(f"rewrite_origins: GraphModule.{method} is gone")
    # The hooks still fire: a created node and a replacement reach the log.
    log = rewrites.RewriteLog()
    gm = torch.fx.symbolic_trace(lambda x: x.relu() + 1)
    gm._register_create_node_hook(log.on_create)
    gm._register_replace_node_hook(log.on_replace)
    relu = next(n for n in gm.graph.nodes if n.op == "call_method")
    with gm.graph.inserting_after(relu):
        new = gm.graph.call_function(torch.sigmoid, (relu.args[0],))
    relu.replace_all_uses_with(new)
    if new.name not in log.created or [s.name for s in log.sources(new.name)] != [relu.name]:
        raise SeamMoved("rewrite_origins: FX no longer calls the create/replace node hooks")
