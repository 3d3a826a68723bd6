# issue: https://github.com/pytorch/pytorch/issues/183761
# title: torch.compile produces different fp16 results for where + full_like + cast + add pattern
# expected: not_a_bug
# verdict: precision_casts
# culprit: explicit .to(torch.float16) casts of both operands before add; Inductor elides the fp16 downcast/upcast pair and adds in float32
# grad: no
# discussion: closed; labels bot-triaged, module: correctness (silent), module: cpu, module: half, module: inductor. jansel: "this looks like intended Inductor behavior rather than a compiler bug. By default Inductor may elide fp16/bf16 downcast-upcast pairs across fused pointwise ops ... The exact-eager mode is TORCHINDUCTOR_EMULATE_PRECISION_CASTS=1"; the emulate flag makes output and sum match eager exactly.
# reproduces: torch 2.13.0 CPU: eager_sum 62.6470 vs compiled_sum 62.6429, max_abs_diff 0.0020 over 4 elements (exit 0 = differs); with TORCHINDUCTOR_EMULATE_PRECISION_CASTS=1 diff is 0
import sys
import torch

x = torch.arange(30, dtype=torch.float32).reshape(2, 3, 5) / 7
m = (torch.arange(30) % 4 == 0).reshape(2, 3, 5)

def f(x, m):
    z = torch.where(m, torch.full_like(x, 0.75), torch.full_like(x, -0.25))
    y = z.to(torch.float16) + x.to(torch.float16)
    return y, y.float().sum()

eager = f(x, m)
compiled = torch.compile(f, backend="inductor", fullgraph=True)(x, m)

diff = (eager[0].float() - compiled[0].float()).abs()

print("input_head:", x.reshape(-1)[:10])
print("mask_head:", m.reshape(-1)[:10])
print("eager_sum:", eager[1])
print("compiled_sum:", compiled[1])
print("max_abs_diff:", diff.max())
print("diff_count:", int((diff != 0).sum()))

sys.exit(0 if (not torch.equal(eager[0], compiled[0]) or not torch.equal(eager[1], compiled[1])) else 1)
