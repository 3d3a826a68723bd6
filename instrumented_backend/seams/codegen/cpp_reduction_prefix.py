"""Seam: ``CppKernel._gen_reduction_prefix`` (C++ reduction accumulator set-up).

The C++ kernel does not write a reduction's accumulator declarations (``float tmp_acc0 = 0;``)
while ``ops.reduction`` runs: it stores a generator made by ``_gen_reduction_prefix`` and splices
its text later, outside any LoopBody node. We capture the emission origin when the generator is
made and tag the lines it generates with it, so they are attributed to their reduction.
"""

from __future__ import annotations

from typing import Any, Callable

from ...recording import recorder as recording
from .. import SeamMoved, install_once, names_used

__all__ = ["install", "check"]



@install_once
def install() -> None:
    """Patch CppKernel._gen_reduction_prefix once per process."""
    from torch._inductor.codegen.cpp import CppKernel

    original = CppKernel._gen_reduction_prefix

    def gen_reduction_prefix(self: Any, *args: Any, **kwargs: Any) -> Callable[..., Any]:
        generator = original(self, *args, **kwargs)
        origin = recording.current_emission()
        if origin is None or not callable(generator):
            return generator

        def generate_with_origin(*g_args: Any, **g_kwargs: Any) -> Any:
            return _tag_generated(generator(*g_args, **g_kwargs), origin)

        return generate_with_origin

    CppKernel._gen_reduction_prefix = gen_reduction_prefix


def _tag_generated(generated: Any, origin: recording.Origin) -> Any:
    """Tag what the generator made with ``origin`` (a text, or a buffer's entries); return it unchanged."""
    from torch._inductor.utils import IndentedBuffer

    from .line_tags import entry_text

    recorder = recording.active_recorder()
    if recorder is None:
        return generated
    if isinstance(generated, str):
        recorder.register_text(generated, [origin if line.strip() else None for line in generated.split("\n")])
    elif isinstance(generated, IndentedBuffer):
        for entry in generated._lines:
            text = entry_text(entry)
            if text and text.strip() and recorder.entry_tag(entry) is None:
                recorder.tag_entry(entry, (origin,) * recording.physical_lines(text), fresh=True)
    return generated


def check() -> None:
    """Raise SeamMoved unless CppKernel still defers accumulator set-up through _gen_reduction_prefix."""
    from torch._inductor.codegen.cpp import CppKernel

    if not callable(getattr(CppKernel, "_gen_reduction_prefix", None)):
        raise SeamMoved("cpp_reduction_prefix: CppKernel._gen_reduction_prefix is gone")
    if "reduction_prefix_generators" not in names_used(CppKernel):
        raise SeamMoved("cpp_reduction_prefix: CppKernel no longer uses reduction_prefix_generators")
