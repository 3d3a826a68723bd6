# issue: https://github.com/pytorch/pytorch/issues/182131
# title: torch.compile/Inductor produces different result for float16 cast before elementwise add
# expected: not_a_bug
# verdict: precision_casts
# culprit: fp16 round trip skipped (z.to(fp16) + x.to(fp16) fused and computed in fp32, rounded once)
# grad: no
# discussion: closed via PR #182882 (BoyuanFeng) which only makes CPU cpp codegen respect emulate_precision_casts=True:
#   "I verified that the issue in #182131 is fixed when running with TORCHINDUCTOR_EMULATE_PRECISION_CASTS=1"; default
#   behaviour unchanged (same family: #183761, jansel: "intended Inductor behavior rather than a compiler bug").
# reproduces: yes on 2.13.0 CPU: eager sum 20.5996 vs compiled 20.6000, max elementwise diff 0.0010; TORCHINDUCTOR_EMULATE_PRECISION_CASTS=1 gives diff 0
import torch

print(torch.__version__)

x = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4) / 10
c = (torch.arange(24) % 5 == 0).reshape(2, 3, 4)

def f(x, c):
    z = torch.where(c, torch.full_like(x, 0.5), torch.full_like(x, -0.5))
    y = z.to(torch.float16) + x.to(torch.float16)
    return y, y.float().sum()

eager = f(x, c)
compiled = torch.compile(f, backend="inductor", fullgraph=True)(x, c)

print("eager sum:   ", eager[1])
print("compiled sum:", compiled[1])
print("max diff:    ", (eager[0].float() - compiled[0].float()).abs().max())

# torch.testing.assert_close(..., rtol=0, atol=0) in the original; printed instead
