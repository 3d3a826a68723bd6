# issue: https://github.com/pytorch/pytorch/issues/183986
# title: `torch.compile` silently produces wrong results for `index_add`/`index_copy`/`index_fill`/`index_put` on expanded (stride-0) tensors
# expected: bug
# verdict: inaccurate
# culprit: Inductor reinplace pass turns functional aten.index_add into an in-place write on an expanded (stride-0, internally overlapping) tensor, so writes to different logical rows collide in the shared storage
# grad: no
# discussion: closed; labels has workaround, module: advanced indexing, module: correctness (silent), module: inductor. Repro agent
#   reproduced on 2.13.0.dev20260514. Fix PR #184488 "Fix index ops on expanded tensors in Inductor".
# reproduces: yes on 2.13.0 CPU, max abs diff 3.0 (rows collide through the stride-0 storage)
import torch

def fn(src, idx):
    x = torch.zeros(1, 8, device="cpu").expand(4, -1)  # stride-0 in dim 0
    return x.index_add(0, idx, src)

src = torch.ones(3, 8, device="cpu")
idx = torch.tensor([0, 1, 0], device="cpu")

eager = fn(src, idx)
compiled = torch.compile(fn, backend="inductor")(src, idx)

print("Eager row 0:", eager[0].tolist())
print("Compiled row 0:", compiled[0].tolist())
print("Eager row 2:", eager[2].tolist())
print("Compiled row 2:", compiled[2].tolist())
print("max abs diff:", (eager - compiled).abs().max().item())
