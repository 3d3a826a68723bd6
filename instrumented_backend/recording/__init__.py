"""What the seams record into while Inductor compiles, read afterwards by :mod:`..provenance`.

* :mod:`.recorder` - the :class:`~.recorder.LineRecorder`: each kernel line Inductor writes, and
  the IR op and FX node that were current when it was written;
* :mod:`.rewrites` - the :class:`~.rewrites.RewriteLog`: which FX nodes a graph pass created in
  place of which;
* :mod:`.thread_state` - the thread-local state both keep, whose attributes always exist.

It imports nothing of this package but itself: the seams (one layer up) write into it, and the
provenance (above them) assembles the line and node maps from it.
"""
