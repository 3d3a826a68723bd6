"""The state a Dynamo graph holds as attributes, copied, so that judging a call never changes it.

Dynamo installs what a compiled function reads but does not take as an argument as attributes of
its graph: an optimizer's moments and step counts (``get_attr``), a module it could not inline
(``call_module``). A graph that updates them (``opt.step()`` compiled) and is run eagerly to judge
its compiled call would apply the update a second time to the user's own tensors. A
:class:`GraphState` copies that state before the compiled call; each eager run gets fresh copies
of it, and after the runs the updated attributes (and inputs) are compared like outputs.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch
import torch.fx

from minifier.graph import attribute, install_attribute
from minifier.judge import widen_graph, widened

from .copies import same_values

__all__ = ["GraphState", "updated_inputs"]


def _floating_to_fp64(value: torch.Tensor) -> torch.Tensor:
    return widened(value) if value.is_floating_point() or value.is_complex() else value


@dataclass
class GraphState:
    """Copies of a graph's tensor attributes and called submodules, by attribute path."""

    tensors: dict[str, torch.Tensor] = field(default_factory=dict)
    modules: dict[str, torch.nn.Module] = field(default_factory=dict)

    @classmethod
    def of(cls, graph: torch.fx.GraphModule) -> "GraphState":
        """A copy of the state ``graph`` holds now."""
        state = cls()
        for node in graph.graph.nodes:
            target = str(node.target)
            if node.op == "get_attr" and target not in state.tensors:
                value = attribute(graph, target)
                if isinstance(value, torch.Tensor):
                    state.tensors[target] = value.detach().clone()
            elif node.op == "call_module" and target not in state.modules:
                state.modules[target] = copy.deepcopy(attribute(graph, target))
        return state

    def module(self, graph: torch.fx.GraphModule, *, fp64: bool = False) -> torch.fx.GraphModule:
        """``graph``'s code over fresh copies of this state (float64 ones with ``fp64``, the code's
        low-precision casts widened too): running it changes neither this state nor the graph's own."""
        root = torch.nn.Module()
        for node in graph.graph.nodes:  # attributes that are not state (subgraphs, constants) are shared
            if node.op == "get_attr" and str(node.target) not in self.tensors:
                install_attribute(root, str(node.target), attribute(graph, str(node.target)))
        for path, value in self.tensors.items():
            fresh = value.clone()
            install_attribute(root, path, _floating_to_fp64(fresh) if fp64 else fresh)
        for path, module in self.modules.items():
            fresh_module = copy.deepcopy(module)
            install_attribute(root, path, fresh_module.double() if fp64 else fresh_module)
        code = torch.fx.Graph()
        code.output(code.graph_copy(graph.graph, {}))
        if fp64:  # its casts to a low precision too (the shared subgraphs are left as they are)
            widen_graph(code)
        return torch.fx.GraphModule(root, code)

    def changed(self, module: torch.nn.Module) -> list[str]:
        """The tensor attributes whose value in ``module`` differs from this state's copy."""
        return [path for path, value in self.tensors.items()
                if not same_values(attribute(module, path), value)]

    def caller(self, graph: torch.fx.GraphModule, *, fp64: bool = False) -> Callable[..., Any]:
        """A function running ``graph`` eagerly on fresh state that returns (its outputs, its
        arguments after the call, the module it ran, whose attributes hold their values after)."""

        def call(*args: Any) -> tuple[Any, list[Any], torch.nn.Module]:
            module = self.module(graph, fp64=fp64)
            return module(*args), list(args), module

        return call


def updated_inputs(before: Sequence[Any], *afters: Sequence[Any]) -> list[int]:
    """The indices of the tensor arguments that any of ``afters`` holds changed from ``before``."""
    return [i for i, value in enumerate(before) if isinstance(value, torch.Tensor)
            and any(i < len(after) and isinstance(after[i], torch.Tensor) and not same_values(after[i], value)
                    for after in afters)]
