# issue: https://github.com/pytorch/pytorch/issues/183607
# title: torch.compile changes fp16 overflow behavior for cast-to-float16 multiplication
# expected: not_a_bug
# verdict: precision_casts
# culprit: fp16 rounding/overflow skipped in the fused kernel (x*x kept in fp32: y/x and isinf(y) see 90000, not inf)
# grad: no
# discussion: open; labels bot-triaged, module: correctness (silent), module: half, module: inductor, oncall: pt2.
#   jansel's PR #183639 ("See #183607") only adds regression coverage for emulate_precision_casts=True and states
#   "Default compute-type behavior is unchanged"; emulate mode makes the outputs match eager. Script is the CPU repro
#   posted in the thread by cuiliaomei-beep (the original description's script is not in the excerpt).
# reproduces: yes on 2.13.0 CPU: eager [inf, inf, True, 0.0], compiled [inf, 300.0, False, inf], emulate_precision_casts [inf, inf, True, 0.0]
import torch

def f(x):
    y = x * x
    return y, y / x, torch.isinf(y), torch.where(torch.isinf(y), torch.zeros_like(y), y)

x = torch.full((40,), 300.0, dtype=torch.float16)
print("eager   ", [o[0].item() for o in f(x)])
print("compiled", [o[0].item() for o in torch.compile(f)(x)])
torch._dynamo.reset()
with torch._inductor.config.patch(emulate_precision_casts=True):
    print("emulate ", [o[0].item() for o in torch.compile(f)(x)])
