# issue: https://github.com/pytorch/pytorch/issues/198094
# title: [inductor] Scatter result reinplaced into a graph input that a later, unrelated mutation overwrites: y = slice_scatter(x, src); x.zero_(); return y returns zeros
# expected: bug
# verdict: inaccurate
# culprit: Inductor reinplacing pass (reinplace_inplaceable_ops_core.can_inplace) turns the functional aten.slice_scatter on graph input x into an in-place write into x's buffer because a copy_ epilogue into x exists; the later x.zero_() copy_ epilogue then overwrites the returned result
# grad: no
# discussion: open; labels module: correctness (silent), module: inductor, module: pt2-dispatcher, module: reinplacing.
#   Fix PR #198096 "[inductor] Do not reinplace into a graph input that a later, unrelated mutation overwrites" (open).
# reproduces: yes on 2.13.0 CPU, max abs diff 23 (compiled returns all zeros)
import torch

def fn(x, src):
    y = torch.slice_scatter(x, src[1:3], dim=0, start=1, end=3)   # fresh tensor in eager
    x.zero_()
    return y

x   = torch.arange(24, dtype=torch.int64, device="cpu").reshape(4, 6)
src = torch.arange(-12, 12, dtype=torch.int64, device="cpu").reshape(4, 6)
eager = fn(x.clone(), src.clone())
compiled = torch.compile(fn, backend="inductor")(x.clone(), src.clone())
print(eager.flatten().tolist()[:8])     # eager:    [0, 1, 2, 3, 4, 5, -6, -5]
print(compiled.flatten().tolist()[:8])  # inductor: [0, 0, 0, 0, 0, 0, 0, 0]
print("max abs diff:", (eager - compiled).abs().max().item())
