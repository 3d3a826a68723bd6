# issue: https://github.com/pytorch/pytorch/issues/141727
# title: inductor and eager gives slightly different results for rms_norm, with `emulate_precision_casts=True`
# expected: not_a_bug
# verdict: passed
# culprit: fp32 reduction order in rms_norm flips a few bf16 roundings (eager and compiled equally close to fp64)
# grad: no
# discussion: open; no labels in the excerpt. Chillee: "There's never any guarantee of exact matches between compiled code
#   and eager code, due to tiling." Reporter (bdhirsh) notes compile and eager are equally close to the fp64 result.
#   device cuda:0 -> cpu.
# reproduces: yes on 2.13.0 CPU (emulate_precision_casts=True as in the script): eager vs compiled max diff 0.0312 (1 bf16 ulp), both exactly 0.0312 from fp64; allclose False
import torch
torch._inductor.config.emulate_precision_casts = True

def f(x, scale):
    y = x.float()
    z = torch.rms_norm(y, (4096,), scale, 1e-05)
    return z.to(dtype=torch.bfloat16)

torch.manual_seed(0)
x = torch.randn(2, 157, 4096, device='cpu', dtype=torch.bfloat16)
scale = torch.randn(4096, device='cpu', dtype=torch.bfloat16)

f_compiled = torch.compile(f)
out_eager = f(x, scale)
out = f_compiled(x, scale)
out_fp64 = torch.rms_norm(x.to(dtype=torch.float64), (4096,), scale.to(dtype=torch.float64), 1e-05)

print(torch.max(torch.abs(out_fp64 - out_eager)))
print(torch.max(torch.abs(out_fp64 - out)))
print(torch.max(torch.abs(out_eager - out)))
print(torch.allclose(out_eager, out))
