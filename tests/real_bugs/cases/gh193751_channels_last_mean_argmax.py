# issue: https://github.com/pytorch/pytorch/issues/193751
# title: [inductor] Fused reduction + argmax/argmin mis-indexes `channels_last` inputs (logical index not preserved), CPU and CUDA
# expected: bug
# verdict: inaccurate
# culprit: aten.argmax fused with a trailing-dim reduction (aten.mean) over a channels_last input: the arg-reduction reports the kernel's flat physical iteration index instead of the logical row-major index
# grad: no
# discussion: closed; labels module: correctness (silent), module: inductor, module: memory format. Reporter: all six ops (mean/sum/amax/var/
#   logsumexp/prod + argmax/argmin) fail on 2.13 CPU. Fixed by jansel's PR #195063 "[inductor] Fix argmax/argmin logical index for non-row-major fused inputs" (Aug 2026).
# reproduces: yes on 2.13.0 CPU, eager argmax 14 vs compiled 25 (index diff 11; value diff 1.1618)
import torch
torch.manual_seed(1234)
x = torch.randn(4, 4, 8, 8).to(memory_format=torch.channels_last)  # strides (256, 1, 32, 4)

def fn(t):
    return torch.argmax(torch.mean(t, dim=-1))

e = fn(x).item()
c = torch.compile(fn)(x).item()
m = torch.mean(x, dim=-1).flatten()
print("eager   =", e, "value", m[e].item())                # 14 (correct, value 0.751697 == max)
print("compiled=", c, "value", m[c].item())                # 25 (wrong, value -0.410133)
print("abs diff of indices:", abs(e - c), "; value diff:", abs(m[e] - m[c]).item())
