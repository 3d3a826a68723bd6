"""The crash child's snapshot of a graph's latest call: exact arguments back, in another process."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest
import torch

from instrumented_backend.diagnosis.call_snapshot import CallSnapshot, SnapshotUnsupported, read_snapshot


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (a.dtype == b.dtype and a.shape == b.shape and a.stride() == b.stride()
            and a.storage_offset() == b.storage_offset() and torch.equal(a, b))


def test_the_latest_call_comes_back_with_strides_offsets_dtypes_and_plain_values(tmp_path):
    base = torch.arange(24.0).reshape(4, 6)
    args = [base.t(), base[1:, 2:], torch.tensor([True, False]), torch.arange(5, dtype=torch.int64)[::2],
            torch.zeros(0, 3), torch.randn(3).to(torch.bfloat16), 7, 0.5, None]
    snapshot = CallSnapshot(tmp_path / "g")
    snapshot.write(2, args)
    number, back = read_snapshot(tmp_path / "g")
    assert number == 2
    for original, restored in zip(args, back):
        if isinstance(original, torch.Tensor):
            assert _same(original, restored), (original, restored)
        else:
            assert restored == original
    snapshot.write(3, [t + 1 if isinstance(t, torch.Tensor) and t.dtype == torch.float32 else t for t in args])
    number, back = read_snapshot(tmp_path / "g")
    assert number == 3 and torch.equal(back[0], base.t() + 1)
    snapshot.write(4, [torch.ones(2, 2)])  # a new layout: a new file, the old one gone
    number, back = read_snapshot(tmp_path / "g")
    assert number == 4 and torch.equal(back[0], torch.ones(2, 2)) and len(back) == 1
    assert len(list(tmp_path.glob("g.*.bin"))) == 1


def test_nothing_is_read_before_a_call_is_copied_or_after_it_is_discarded(tmp_path):
    snapshot = CallSnapshot(tmp_path / "g")
    assert read_snapshot(tmp_path / "g") is None
    snapshot.write(2, [torch.ones(3)])
    snapshot.discard()
    assert read_snapshot(tmp_path / "g") is None
    with pytest.raises(SnapshotUnsupported, match="argument 0 is a torch.sparse_coo"):
        snapshot.write(3, [torch.eye(2).to_sparse()])


def test_the_snapshot_outlives_a_process_killed_by_a_signal(tmp_path):
    """The point of mapping the file shared: what the child copied before it died is read back."""
    script = (f"import os, signal, torch\n"
              f"from instrumented_backend.diagnosis.call_snapshot import CallSnapshot\n"
              f"s = CallSnapshot({str(tmp_path / 'g')!r})\n"
              f"s.write(2, [torch.zeros(1000)])\n"
              f"s.write(3, [torch.full((1000,), 3.0), 4])\n"
              f"os.kill(os.getpid(), signal.SIGSEGV)\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGSEGV, proc.stderr
    number, back = read_snapshot(tmp_path / "g")
    assert number == 3 and torch.equal(back[0], torch.full((1000,), 3.0)) and back[1] == 4
