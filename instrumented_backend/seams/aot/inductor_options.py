"""Seam: how ``torch.compile(mode=..., options=...)`` becomes Inductor config patches.

We reuse the very object the ``inductor`` backend uses (``torch._TorchCompileInductorWrapper``)
so option validation, ``mode`` presets and the compiler bisector's config changes are exactly
those of ``backend="inductor"``.
"""

from __future__ import annotations

import functools
from typing import Any, ContextManager, Mapping, Optional

from .. import SeamMoved

__all__ = ["inductor_config_patches", "inductor_config_keys", "inductor_config_patch", "plain_inductor_config",
           "check"]


def inductor_config_patches(mode: Optional[str], options: Optional[Mapping[str, Any]]) -> dict[str, Any]:
    """Config patches the inductor backend would apply for this ``mode`` and ``options``.

    Raises RuntimeError (Inductor's own message) for an unknown key or a value of the wrong type.
    """
    try:
        key = (mode, tuple(sorted((name, type(value), value) for name, value in (options or {}).items())))
        hash(key)  # the value's type too: True and 1 are equal keys, not equal options
    except TypeError:  # an unhashable value (a dict option): not cached
        return _config_patches(mode, dict(options or {}))
    return dict(_cached_config_patches(key))


def _config_patches(mode: Optional[str], options: dict[str, Any]) -> dict[str, Any]:
    import torch

    return dict(torch._TorchCompileInductorWrapper(mode, options, None).config)


@functools.lru_cache(maxsize=64)
def _cached_config_patches(key: tuple[Optional[str], tuple[tuple[str, type, Any], ...]]) -> dict[str, Any]:
    """The patches for one (mode, options): the wrapper validates options against a deep copy of
    the whole Inductor config, a millisecond per graph compiled otherwise. The options name
    existing config keys, so the answer cannot change while the process runs."""
    return _config_patches(key[0], {name: value for name, _, value in key[1]})


@functools.lru_cache(maxsize=1)
def inductor_config_keys() -> frozenset[str]:
    """Every Inductor config key (dotted for nested ones, e.g. ``cpp.simdlen``).

    Read once per process: the keys are declared when ``torch._inductor.config`` is imported, and
    ``get_config_copy`` deep-copies every value (a few ms per compile otherwise).
    """
    from torch._inductor import config

    return frozenset(config.get_config_copy())


_PLAIN = (bool, int, float, str, type(None))


def plain_inductor_config() -> dict[str, Any]:
    """Every Inductor config value that is a literal (bools, numbers, strings, None; dotted keys):
    what a script can set and a later compile must see again. Deep-copies the config: once per
    compiled target, not per compile."""
    from torch._inductor import config

    return {k: v for k, v in config.get_config_copy().items() if isinstance(v, _PLAIN)}


def inductor_config_patch(patches: Mapping[str, Any]) -> ContextManager[None]:
    """``torch._inductor.config.patch(patches)``: Inductor config changes (dotted keys) for the block."""
    import torch._inductor.config as inductor_config

    return inductor_config.patch(dict(patches))


def check() -> None:
    """Raise SeamMoved unless the inductor backend's option wrapper and the config patch are usable."""
    import torch

    wrapper_cls = getattr(torch, "_TorchCompileInductorWrapper", None)
    if wrapper_cls is None:
        raise SeamMoved("inductor_options: torch._TorchCompileInductorWrapper is gone")
    try:
        patches = inductor_config_patches(None, {"cpp.simdlen": 1})
    except Exception as exc:
        raise SeamMoved(f"inductor_options: the option wrapper no longer accepts options: {exc}") from exc
    if patches != {"cpp.simdlen": 1}:
        raise SeamMoved(f"inductor_options: wrapper.config has a new shape: {patches!r}")
    import torch._inductor.config as inductor_config

    before = inductor_config.cpp.simdlen
    with inductor_config_patch({"cpp.simdlen": 1}):
        if inductor_config.cpp.simdlen != 1:
            raise SeamMoved("inductor_options: torch._inductor.config.patch no longer takes dotted keys")
    if inductor_config.cpp.simdlen != before:
        raise SeamMoved("inductor_options: torch._inductor.config.patch no longer restores on exit")
    with inductor_config_patch({"cpp.simdlen": 1}):
        values = plain_inductor_config()
    if values.get("cpp.simdlen") != 1 or values.get("epilogue_fusion") is not inductor_config.epilogue_fusion:
        raise SeamMoved("inductor_options: torch._inductor.config.get_config_copy no longer gives every value "
                        "by its dotted key (a diagnosed target's config at its first call is read with it)")
