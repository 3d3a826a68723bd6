# issue: https://github.com/pytorch/pytorch/issues/183120
# title: torch.compile Inductor produces wrong output for BatchNorm2d + ELU + GroupNorm + log clamp chain
# expected: not_a_bug
# verdict: amplified_rounding
# verdict note: decided as inaccurate (bug) from the labels when collected; changed to amplified_rounding, a verdict
#   added for this mechanism. float64 finds compiled code exact (the group norm of constant values is 0) and eager
#   3.6e-6 off, which log(clamp(t, 1e-6)) amplifies to 1.29; the fix PR (#184644) describes itself as "avoiding
#   log(clamp) amplification of small rounding differences" by matching eager's kernel numerics, and #150165's
#   maintainer calls the same situation "torch.compile being more accurate than eager". Not a miscompile.
# culprit: aten.native_group_norm decomposition (var_mean/Welford on near-constant input after eval BatchNorm) -> GroupNorm output collapses
# grad: no
# discussion: open; labels module: correctness (silent), module: inductor, module: norms and normalization. PT2 repro agent
#   reproduced on 2.13.0.dev nightly and bisected to the native_group_norm decomposition (same root cause as #181696; fix attempts #183654/#187092).
# reproduces: yes on 2.13.0 CPU, max abs diff 1.288699
import torch
import torch.nn as nn

bn = nn.BatchNorm2d(5).eval()
elu = nn.ELU()
gn = nn.GroupNorm(5, 5).eval()

def fn():
    x = torch.ones([4, 5, 6, 6])
    t = bn(x)
    t = elu(t)
    t = gn(t)
    return torch.log(torch.clamp(t, min=1e-6))

eager = fn()

torch._dynamo.reset()
compiled = torch.compile(fn, backend="inductor")()

diff = (eager - compiled).abs().max().item()
print(f"max_diff = {diff:.6f}")
print("BUG" if diff > 1e-4 else "OK")
