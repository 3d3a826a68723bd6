# issue: https://github.com/pytorch/pytorch/issues/141561
# title: [Inductor] [CPU] `Conv2d` outputs differnet results with `Inductor` on `CPU`
# expected: not_a_bug
# verdict: passed
# verdict note: collected (as a report the corpus had not seen) as "amplified_rounding (arguably passed)"; the thread calls
#   the difference acceptable, and at 3.6e-7 on float32 values it is within the package's float32 tolerance (1e-4), where
#   amplified_rounding needs a difference past allclose: passed, by the verdicts' definitions.
# culprit: nn.Conv2d: inductor feeds conv in channels-last layout, eager in channels-first; different oneDNN/ATen conv kernels -> different summation order
# grad: no
# discussion: closed; labels module: inductor, oncall: cpu inductor, oncall: pt2, triaged. jiayisunx: "the input to conv2d in eager mode is in channels fist format, while ... in inductor mode is in channels last format ... I think this level of difference is acceptable, and if you manually convert the input to channels last format, the result will be exactly the same." Reporter accepted; closed without fix.
# reproduces: yes on torch 2.13.0+cpu: max abs diff 3.5763e-07, torch.allclose (default rtol 1e-5, atol 1e-8) False
import torch
import torch.nn as nn

SEED = 0

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(4, 1, kernel_size=3, stride=1, padding=1)

    def forward(self, x):
        x = self.conv(x)
        return x


model = Model().eval()
c_model = torch.compile(model)

torch.manual_seed(SEED)
x = torch.randn(1, 4, 64, 64)  # only `in_channels = 4`, `H=64`, `W=64` can trigger inconsistency
inputs = [x]

torch.manual_seed(SEED)
output = model(*inputs)
torch.manual_seed(SEED)
c_output = c_model(*inputs)


print(torch.max(torch.abs(output - c_output)))
print(torch.allclose(output, c_output))
