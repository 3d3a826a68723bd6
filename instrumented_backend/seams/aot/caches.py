"""Seam: Inductor's FX-graph cache and AOTAutograd's cache.

On a hit both caches skip codegen entirely, so nothing would be captured, and neither cache key
sees in-memory patches (a fault injected into codegen would be served from, or written into,
the cache). Instrumented compiles therefore bypass both: the Inductor switches go into the
``config_patches`` that ``compile_fx`` re-applies around the lazily compiled backward too, and
the AOTAutograd switch is patched around the forward compile, where that cache is consulted.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from .. import SeamMoved

__all__ = ["CACHE_BYPASS_PATCHES", "autograd_cache_disabled", "compile_caches_disabled", "cache_counters", "check"]

CACHE_BYPASS_PATCHES: dict[str, Any] = {
    "fx_graph_cache": False,
    "fx_graph_remote_cache": False,
}


@contextlib.contextmanager
def autograd_cache_disabled() -> Iterator[None]:
    """Disable AOTAutograd's local and remote caches for the duration of the block."""
    import torch._functorch.config as functorch_config

    with functorch_config.patch(enable_autograd_cache=False, enable_remote_autograd_cache=False):
        yield


@contextlib.contextmanager
def compile_caches_disabled() -> Iterator[None]:
    """Turn both caches off process-wide for the block (every backend, every thread)."""
    from torch._inductor import config as inductor_config

    with inductor_config.patch(CACHE_BYPASS_PATCHES), autograd_cache_disabled():
        yield


def cache_counters() -> dict[str, int]:
    """Current FX-graph and AOTAutograd cache hit/miss/bypass counters of this process."""
    from torch._dynamo.utils import counters

    names = ("fxgraph_cache_hit", "fxgraph_cache_miss", "fxgraph_cache_bypass")
    result = {name: int(counters["inductor"][name]) for name in names}
    for name in ("autograd_cache_hit", "autograd_cache_miss", "autograd_cache_bypass"):
        result[name] = int(counters["aot_autograd"][name])
    return result


def check() -> None:
    """Raise SeamMoved unless the cache switches read here still exist."""
    import torch._functorch.config as functorch_config
    from torch._inductor import config as inductor_config

    known = set(inductor_config.get_config_copy())
    for key in CACHE_BYPASS_PATCHES:
        if key not in known:
            raise SeamMoved(f"caches: Inductor config has no {key!r} any more")
    for key in ("enable_autograd_cache", "enable_remote_autograd_cache"):
        if key not in functorch_config.get_config_copy():
            raise SeamMoved(f"caches: torch._functorch.config has no {key!r} any more")
