# issue: https://github.com/pytorch/pytorch/issues/193492
# title: [inductor] Wrong argmax after `adaptive_avg_pool1d` when the pool input is a non-contiguous (transposed) view — CPU and CUDA
# expected: bug
# verdict: inaccurate
# culprit: aten._adaptive_avg_pool2d lowering (used by adaptive_avg_pool1d) fused into aten.argmax: the pointwise pool loader assumes a contiguous layout of the transposed input, so argmax runs over the wrong data
# grad: no
# discussion: closed (Aug 2026); label oncall: pt2. Reporter saw it on torch 2.13.0 CPU and CUDA; a commenter reproduced on 2.10.0+cpu and
#   proposed x = ir.ExternKernel.require_contiguous(x) in the lowering. Follow-ups #193661 / #193751 cover the generic reduction path.
# reproduces: yes on 2.13.0 CPU, eager argmax 15 vs compiled 27 (index diff 12; pooled value 0.821 vs 0.530)
import torch

def fn(x):
    x = torch.adaptive_avg_pool1d(input=x, output_size=2)
    return torch.argmax(input=x)

torch.manual_seed(123)
x = torch.rand([4, 4, 3], dtype=torch.float64).transpose(0, 1)  # non-contiguous

eager = fn(x.clone())
compiled = torch.compile(fn, backend="inductor")(x.clone())

print("eager   =", eager.item())     # 15
print("compiled=", compiled.item())  # 27 (wrong: value at 27 is not the max)

# pooled max location:
p = torch.adaptive_avg_pool1d(input=x, output_size=2)
print("true max at", torch.argmax(p).item(), "value", p.flatten().max().item())
print("value at compiled index:", p.flatten()[compiled.item()].item())
print("abs diff of indices:", abs(eager.item() - compiled.item()))
