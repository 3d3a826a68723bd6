"""Where captures go: sessions (a backward compiled inside the block), and the bounded process list."""

from __future__ import annotations

import pytest
import torch

import instrumented_backend as ib
from instrumented_backend.capture import registry


def _scaled_tanh(x: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x) * 3


@pytest.fixture(scope="module")
def forward_outside_backward_inside():
    torch.compiler.reset()
    x = torch.randn(8, 8, requires_grad=True)
    out = torch.compile(_scaled_tanh, backend="instrumented")(x)  # the forward compiles here
    with ib.capture() as session:
        out.sum().backward()  # ... and the lazy backward here, inside the block
    return session


def test_a_backward_compiled_inside_the_block_joins_it(forward_outside_backward_inside):
    assert [g.kind for g in forward_outside_backward_inside] == ["backward"]


def test_the_process_list_is_bounded_and_evicted_captures_let_go_of_live_objects(forward_outside_backward_inside):
    [backward] = forward_outside_backward_inside.graphs
    previous = registry.capture_limit()
    try:
        with ib.capture() as held:
            torch.compiler.reset()
            torch.compile(lambda x: torch.relu(x) + 1, backend="instrumented")(torch.randn(4))
        [kept_by_session] = held.graphs
        for step in range(3):
            torch.compiler.reset()
            torch.compile(lambda x, k=step: x * (k + 2), backend="instrumented")(torch.randn(4))
        ib.set_capture_limit(2)
        assert len(ib.captures()) == 2
        assert backward not in ib.captures().graphs and not backward.live
        assert backward.kernels and backward.nodes and backward.post_grad_graph_code, "the record reads the same"
        assert kept_by_session.live is False  # its session is closed: nothing holds it any more
    finally:
        ib.set_capture_limit(previous)


def test_an_open_session_keeps_its_graphs_live():
    previous = registry.capture_limit()
    try:
        ib.set_capture_limit(1)
        with ib.capture() as session:
            for step in range(2):
                torch.compiler.reset()
                torch.compile(lambda x, k=step: x - k, backend="instrumented")(torch.randn(4))
            assert len(ib.captures()) == 1
            assert all(g.live for g in session), "evicted from the process list, still live for the open session"
    finally:
        ib.set_capture_limit(previous)


def test_bad_limits_are_refused(monkeypatch):
    with pytest.raises(ValueError, match="positive int or None"):
        ib.set_capture_limit(0)
    monkeypatch.setenv("INSTRUMENTED_BACKEND_MAX_CAPTURES", "lots")
    with pytest.raises(ValueError, match="INSTRUMENTED_BACKEND_MAX_CAPTURES must be"):
        registry._limit_from_environment()


def test_repr_is_one_line(forward_outside_backward_inside):
    [backward] = forward_outside_backward_inside.graphs
    text = repr(backward)
    assert text.startswith("GraphCapture(#") and "backward" in text and "kernels" in text and len(text) < 200


def test_a_kept_capture_holds_its_records_not_the_compile_that_made_them(monkeypatch):
    """A capture in the process list must not keep its compile's working state alive: the
    CaptureBuilder (whose IR-text memo holds Inductor's scheduler nodes, loop bodies and layouts)
    or any scheduler node. A long job keeps up to 100 captures, and every full garbage collection
    walks what they hold: one stray closure over the builder once tripled what a capture kept."""
    import gc
    import weakref

    from torch._inductor.scheduler import BaseSchedulerNode

    from instrumented_backend.capture import builder as builder_module

    builders = []
    original_init = builder_module.CaptureBuilder.__init__

    def remembering_init(self, **kwargs):
        original_init(self, **kwargs)
        builders.append(weakref.ref(self))

    monkeypatch.setattr(builder_module.CaptureBuilder, "__init__", remembering_init)
    gc.collect()  # scheduler nodes earlier tests' objects still hold (held here too: their ids stay theirs)
    earlier = [o for o in gc.get_objects() if isinstance(o, BaseSchedulerNode)]
    earlier_ids = {id(o) for o in earlier}
    torch.compiler.reset()
    x = torch.randn(8, 8, requires_grad=True)
    out = torch.compile(lambda t: (torch.relu(t) * 2).sum(dim=0), backend="instrumented")(x)
    out.sum().backward()  # forward and backward: two compiles
    del out
    torch.compiler.reset()  # Dynamo lets go of the compiled code; the process list keeps the captures
    gc.collect()
    kept = [g for g in ib.captures() if g.live][-2:]
    assert [g.kind for g in kept] == ["forward", "backward"]
    # Nothing read yet: every record is still waiting to be assembled from what the capture holds.
    assert len(builders) >= 2 and all(ref() is None for ref in builders), "a capture keeps its CaptureBuilder alive"
    stray = [o for o in gc.get_objects() if isinstance(o, BaseSchedulerNode) and id(o) not in earlier_ids]
    assert not stray, f"{len(stray)} of Inductor's scheduler nodes outlive the compile"
    assert all(g.kernels and g.nodes and g.post_grad_graph is not None and g.recompile_reason == "" for g in kept)
