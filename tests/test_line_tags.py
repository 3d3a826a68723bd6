"""The line tags live beside Inductor's buffers, never in their text (no compile needed).

The first wave wrote inline marks into the text; Inductor's CSE keys on buffer text
(``CSE.generate`` with an ``IndentedBuffer`` keys on ``getvalue()``), so the same code emitted
for two IR ops missed the cache and the output code gained a second ``vec_to_array`` lambda.
These tests drive Inductor's own buffer and CSE classes with a recorder active.
"""

from __future__ import annotations

import pytest
from torch._inductor.codegen.common import CSE, DeferredLine
from torch._inductor.utils import IndentedBuffer

from instrumented_backend.recording import recorder as provenance
from instrumented_backend.seams.codegen import line_tags

NEG = provenance.origin_of("ops.neg", "neg")
LOAD = provenance.origin_of("ops.load", "gather")


@pytest.fixture
def recorder():
    """An active recorder, inside a stand-in kernel and graph (what CSE and DeferredLine consult)."""
    from types import SimpleNamespace

    from torch._inductor.codegen.common import CSEVariable
    from torch._inductor.virtualized import V

    kernel = SimpleNamespace(current_node=None, removed_buffers=set(), inplaced_to_remove=set(),
                             create_cse_var=lambda name, bounds, dtype, shape: CSEVariable(name, bounds, dtype, shape))
    graph = SimpleNamespace(removed_buffers=set(), inplaced_to_remove=set())
    recorder = provenance.LineRecorder()
    previous = provenance.activate(recorder)
    with line_tags.tagging(), V.set_kernel_handler(kernel), V.set_graph_handler(graph):
        yield recorder
    provenance.activate(previous)


def _lambda_buffer() -> IndentedBuffer:
    code = IndentedBuffer()
    code.writeline("[&]")
    with code.indent():
        code.writeline("__at_align__ std::array<int64_t, 8> tmpbuf;")
        code.writeline("tmp0.store(tmpbuf.data(), static_cast<int64_t>(8));")
        code.writeline("return tmpbuf;")
    code.writeline("()")
    return code


def test_text_is_inductors_own_and_cse_hits_across_ops(recorder):
    cse = CSE(prefix="auto ", suffix=";")
    out = IndentedBuffer()
    provenance.set_emission(NEG)
    first_buffer = _lambda_buffer()
    first = cse.generate(out, first_buffer, write=False)
    provenance.set_emission(LOAD)
    second = cse.generate(out, _lambda_buffer(), write=False)
    provenance.set_emission(None)
    assert first is second, "the same code emitted for two ops must hit Inductor's CSE cache"
    assert first_buffer.getvalue() == (
        "[&]\n    __at_align__ std::array<int64_t, 8> tmpbuf;\n"
        "    tmp0.store(tmpbuf.data(), static_cast<int64_t>(8));\n    return tmpbuf;\n()\n")
    assert all(type(line) is str for line in first_buffer._lines), "entries stay plain str objects"


def test_tags_follow_lines_through_splices_and_texts(recorder):
    inner = IndentedBuffer()
    provenance.set_emission(NEG)
    inner.writeline("auto tmp0 = -x;")
    inner.writeline(DeferredLine("buf0", "out_ptr0[x0] = tmp0;"))
    provenance.set_emission(None)
    inner.writeline("// untagged")

    kernel = IndentedBuffer()
    kernel.writeline('extern "C" void kernel()')
    with kernel.indent():
        kernel.splice(inner)  # re-sliced into new objects: tags carried one for one
    provenance.set_emission(LOAD)
    with kernel.indent():
        kernel.splice(inner.getvalue())  # a text written back: its own tags win over the emission
    provenance.set_emission(None)
    source = kernel.getvalue()
    assert source.splitlines() == ['extern "C" void kernel()', "    auto tmp0 = -x;", "    out_ptr0[x0] = tmp0;",
                                   "    // untagged", "    auto tmp0 = -x;", "    out_ptr0[x0] = tmp0;",
                                   "    // untagged"]
    origins = recorder.kernel_origins(source)
    assert origins[:7] == [[], [NEG], [NEG], [], [NEG], [NEG], [LOAD]]


@pytest.mark.parametrize("path", ["in one pass", "line by line"])
def test_a_splice_during_an_emission_gives_it_the_lines_that_carry_no_tag(recorder, monkeypatch, path):
    """A splice tags what it writes in one pass after Inductor's splice (line by line by
    writeline's hook only for a buffer with multi-line entries): both give each line the tag it
    carried, else the emission's, and leave blank lines untagged."""
    if path == "line by line":
        monkeypatch.setattr(line_tags, "_single_line_entries", lambda entries: False)
    inner = IndentedBuffer()
    with inner.indent():  # dedented by the splice: every line becomes a new object
        provenance.set_emission(NEG)
        inner.writeline("auto tmp0 = -x;")
        provenance.set_emission(None)
        inner.writeline("// helper")
        inner.writeline("")
        inner.writeline(DeferredLine("buf0", "out_ptr0[x0] = tmp0;"))
    flat = IndentedBuffer()
    provenance.set_emission(NEG)
    flat.writeline("auto tmp2 = -z;")  # spliced as the very same object (no margin)
    provenance.set_emission(None)
    kernel = IndentedBuffer()
    provenance.set_emission(LOAD)
    kernel.splice(inner)
    kernel.splice(flat)
    kernel.splice("auto tmp1 = y;\n\n  // more")  # a text no buffer returned: new lines
    provenance.set_emission(None)
    kernel.splice(inner)  # no emission: only the carried tags
    source = kernel.getvalue()
    assert source.splitlines() == ["auto tmp0 = -x;", "// helper", "", "out_ptr0[x0] = tmp0;", "auto tmp2 = -z;",
                                   "auto tmp1 = y;", "", "  // more",
                                   "auto tmp0 = -x;", "// helper", "", "out_ptr0[x0] = tmp0;"]
    assert recorder.kernel_origins(source)[:12] == [[NEG], [LOAD], [], [LOAD], [NEG], [LOAD], [], [LOAD],
                                                    [NEG], [], [], []]
    assert provenance.active_recorder() is recorder, "the recorder is back after the splice"


def test_a_buffer_with_multi_line_entries_is_spliced_line_by_line(recorder):
    inner = IndentedBuffer()
    provenance.set_emission(NEG)
    inner.writeline("auto tmp0 = -x;\nauto tmp1 = tmp0;")  # one entry, two lines
    provenance.set_emission(LOAD)
    kernel = IndentedBuffer()
    kernel.splice(inner)
    provenance.set_emission(None)
    source = kernel.getvalue()
    assert source.splitlines() == ["auto tmp0 = -x;", "auto tmp1 = tmp0;"]
    assert recorder.kernel_origins(source)[:2] == [[NEG], [NEG]]


def test_a_kernel_rendered_by_formatting_takes_its_lines_tags_in_order(recorder):
    provenance.set_emission(NEG)
    body = IndentedBuffer()
    body.writeline("auto tmp0 = -x;")
    provenance.set_emission(LOAD)
    body.writeline("auto tmp1 = in_ptr0[x0];")
    provenance.set_emission(None)
    rendered = "template <int N>\nvoid kernel() {\n  auto tmp1 = in_ptr0[x0];\n  auto tmp0 = -x;\n}\n"
    assert recorder.kernel_origins(rendered) == [[], [], [LOAD], [NEG], [], []]


def test_no_recorder_no_tags():
    assert provenance.active_recorder() is None
    provenance.set_emission(NEG)
    try:
        with line_tags.tagging():
            buffer = IndentedBuffer()
            buffer.writeline("auto tmp0 = -x;")
            assert buffer.getvalue() == "auto tmp0 = -x;\n"
    finally:
        provenance.set_emission(None)


def test_buffers_are_hooked_only_inside_an_instrumented_compile():
    """Plain Inductor work elsewhere in the process runs IndentedBuffer's own methods."""
    originals = (IndentedBuffer.writeline, IndentedBuffer.splice, IndentedBuffer.getvaluewithlinemap)
    with line_tags.tagging():
        assert IndentedBuffer.writeline is not originals[0]
        with line_tags.tagging():  # nested (or on another thread): shared
            pass
        assert (IndentedBuffer.writeline, IndentedBuffer.splice) != originals[:2]
    assert (IndentedBuffer.writeline, IndentedBuffer.splice, IndentedBuffer.getvaluewithlinemap) == originals


def test_a_moved_buffer_contract_is_reported(monkeypatch):
    from instrumented_backend.seams import SeamMoved

    original = IndentedBuffer.splice

    def splice_as_one_entry(self, other_code, strip=False):
        text = other_code.getvalue() if isinstance(other_code, IndentedBuffer) else other_code
        self._lines.append(text)

    monkeypatch.setattr(IndentedBuffer, "splice", splice_as_one_entry)
    with pytest.raises(SeamMoved, match="splice no longer writes one entry per spliced entry"):
        line_tags.check()
    monkeypatch.setattr(IndentedBuffer, "splice", original)
    line_tags.check()


def test_a_splice_that_no_longer_takes_the_margin_off_is_reported(monkeypatch):
    """Kernel buffers are spliced by our own copy of Inductor's splice: a change in Inductor's is reported."""
    from instrumented_backend.seams import SeamMoved

    original = IndentedBuffer.splice

    def splice_keeping_the_margin(self, other_code, strip=False):
        if isinstance(other_code, IndentedBuffer):
            for line in other_code._lines:
                IndentedBuffer.writeline(self, line)
        else:
            original(self, other_code, strip)

    monkeypatch.setattr(IndentedBuffer, "splice", splice_keeping_the_margin)
    with pytest.raises(SeamMoved, match="no longer writes .* as _splice_entries does"):
        line_tags.check()


def test_a_finished_recorder_keeps_its_kernels_and_lets_go_of_the_lines(recorder):
    provenance.set_emission(NEG)
    buffer = IndentedBuffer()
    buffer.writeline("auto tmp0 = -x;")
    provenance.set_emission(None)
    source = buffer.getvalue()
    recorder.record_kernel("k", source, recorder.kernel_origins(source))
    recorder.finish()
    assert recorder.entry_tag(buffer._lines[0]) is None and recorder.text_tag(source) is None
    assert recorder.kernels["k"][0].line_origins[0] == [NEG]


def test_tags_follow_the_lines_a_scalar_tail_loop_rewrites(recorder):
    """A vectorized reduction with a scalar tail renames ``x0`` to ``x0_tail`` and the accumulator to
    ``tmp_acc0_arr[...]``; each rewrite makes new line objects, and they keep the old ones' tags."""
    from torch._inductor.codegen import cpp

    from instrumented_backend.seams.codegen import cpp_line_rewrites

    cpp_line_rewrites.install()
    acc = provenance.origin_of("ops.reduction", "sum_1")
    stores = IndentedBuffer()
    for text, origin in [("auto tmp0 = in_ptr0[x0];", LOAD), ("auto tmp1 = -tmp0;", NEG),
                         ("tmp_acc0 = cascade_sum_combine(tmp1, &tmp_acc0_cascade_helper);", acc)]:
        recorder.tag_entry(text, (origin,))
        stores._lines.append(text)
    cpp.replace_acc_name(stores, "tmp_acc0", "tmp_acc0_arr[x0_tail - 0]")
    cpp.replace_cascade_sum_with_add(stores)
    moved = cpp.move_code_under_inner_loop(stores, "x0", "x0_tail", 0, 8)
    texts = [line.strip() for line in moved.getvalue().splitlines()]
    assert texts[2:5] == ["auto tmp0 = in_ptr0[x0_tail];", "auto tmp1 = -tmp0;",
                          "tmp_acc0_arr[x0_tail - 0] = tmp_acc0_arr[x0_tail - 0] + tmp1;"]
    assert [recorder.entry_tag(line) for line in moved._lines[2:5]] == [(LOAD,), (NEG,), (acc,)]


class _BracketedBuffer(IndentedBuffer):
    """A buffer that indents its own way: the hook indents its lines with its own prefix()."""

    def prefix(self) -> str:
        return "> " * self._indent


def test_a_plain_line_written_directly_is_what_inductors_writeline_writes(recorder):
    lines = ["a = 1;", "", "   ", "\tb = 2;", "  c = 3;  ", "\x0c"]

    def write_all(buffer: IndentedBuffer) -> IndentedBuffer:
        for line in lines:
            buffer.writeline(line)
        with buffer.indent(2):
            for line in lines:
                buffer.writeline(line)
        with buffer.set_tabwidth(2), buffer.indent():
            buffer.writeline("d = 4;")
        return buffer

    provenance.set_emission(NEG)
    hooked = [write_all(IndentedBuffer()), write_all(_BracketedBuffer(initial_indent=1))]
    provenance.set_emission(None)
    previous = provenance.activate(None)  # Inductor's own writeline, no recorder
    try:
        plain = [write_all(IndentedBuffer()), write_all(_BracketedBuffer(initial_indent=1))]
    finally:
        provenance.activate(previous)
    for ours, inductors in zip(hooked, plain):
        assert ours._lines == inductors._lines
        for entry in ours._lines:
            assert (recorder.entry_tag(entry) == (NEG,)) == bool(entry.strip()), entry
    assert hooked[1]._lines[-1] == "> > d = 4;"


def test_a_writeline_that_no_longer_indents_with_prefix_is_reported(monkeypatch):
    from instrumented_backend.seams import SeamMoved

    original = IndentedBuffer.writeline

    # the same lines, written another way: the hook cannot know it still matches
    def same_lines_other_source(self, line):
        original(self, line)

    monkeypatch.setattr(IndentedBuffer, "writeline", same_lines_other_source)
    with pytest.raises(SeamMoved, match="the hook writes it directly"):
        line_tags.check()
