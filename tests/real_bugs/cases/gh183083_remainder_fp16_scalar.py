# issue: https://github.com/pytorch/pytorch/issues/183083
# title: `torch.remainder` returns incorrect results with float16 tensor and Python scalar on Inductor CPU
# expected: bug
# verdict: inaccurate
# culprit: aten.remainder.Scalar on float16 (compiled divides by the fp32 scalar 3.14, eager by its fp16 rounding 3.140625: 3.140625 % 3.14 -> 0 eager, 6.2e-4 compiled; the thread itself names no mechanism)
# grad: no
# discussion: closed; labels oncall: cpu inductor, triage review (bot-triaged); a contributor (khushi-411) took it with a PR.
#   Reported on 2.10.0+cpu; 3.140625 % 3.14 gives 0.0 in eager and 6.2e-04 compiled. Max-diff print added.
# reproduces: yes on 2.13.0 CPU, max abs diff 0.00195 (float16 output; 5 of 8 elements differ)
import torch

def f(x):
    return torch.remainder(x, 3.14)

x = torch.tensor(
    [-4.0, -1.5, -0.0, 0.0, 0.1, 1.0, 3.140625, 8.0],
    dtype=torch.float16,
)

eager = f(x)
compiled = torch.compile(f, backend="inductor")(x)

print("eager =", eager)
print("compiled =", compiled)
print("max abs diff:", (eager.float() - compiled.float()).abs().max().item())
