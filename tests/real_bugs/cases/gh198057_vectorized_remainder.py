# issue: https://github.com/pytorch/pytorch/issues/198057
# title: [inductor][cpu] Vectorized `torch.remainder` / `%` returns NaN for an infinite divisor and 0 for large quotients; elements handled by the scalar tail are correct, so the result depends on the tensor length
# expected: bug
# verdict: inaccurate
# culprit: aten.remainder (CPU vectorized lowering computes a - floor_divide(a, b) * b instead of the fmod + sign correction used by the scalar path and eager)
# grad: no
# discussion: open; labels module: correctness (silent), module: cpu, module: inductor, module: vectorization.
#   aot_eager, torch.fmod and CUDA match eager; an n=8 tensor takes the vector path, a 3-element one the (correct) scalar tail.
#   Tail of the script reconstructed (thread excerpt cut after the n=8 print).
# reproduces: yes on 2.13.0 CPU, max abs diff 2.0 on non-nan elements (1e20 % 3: 2.0 vs 0.0) plus 3 nan-vs-finite elements (inf divisor)
import torch

INF = float("inf")
a = torch.tensor([5.5, -5.5, 0.0, 1e20, 2147483648.0, 7.0, 1.0, -0.0])
b = torch.tensor([INF, -INF, INF, 3.0, 3.0, 0.7, 0.1, 1.0])
f = lambda a, b: torch.remainder(a, b)

eager = f(a, b)
print("eager          ", eager.tolist())
torch._dynamo.reset()
compiled = torch.compile(f)(a, b)
print("inductor, n=8  ", compiled.tolist())
torch._dynamo.reset()
print("inductor, n=3  ", torch.compile(f)(a[:3], b[:3]).tolist())

diff = (eager - compiled).abs()
nan_mismatch = (eager.isnan() != compiled.isnan())
print("nan mismatches:", int(nan_mismatch.sum()))
print("max abs diff (finite, both non-nan):", diff[~eager.isnan() & ~compiled.isnan()].max().item())
