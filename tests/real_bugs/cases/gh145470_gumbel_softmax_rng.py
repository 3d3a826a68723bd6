# issue: https://github.com/pytorch/pytorch/issues/145470
# title: [inductor] [cuda] [silence] `F.gumbel_softmax` return inconsistent resutls compared with eager
# expected: not_a_bug
# verdict: random_draws         (the package's verdict for random numbers drawn otherwise than eager, by design)
# culprit: gumbel_softmax RNG (exponential_ noise drawn anew per call; no manual_seed between calls, the two eager calls already differ)
# grad: no
# discussion: closed; labels oncall: pt2. eellison: "gumbel_softmax uses rng so you need to manual seed between
#   invocations. it's a good idea to always do that in fuzzing." (with manual_seed before each call they match).
#   Author titled it cuda-only; device cuda -> cpu here.
# reproduces: yes on 2.13.0 CPU: eager one-hot at index 0, compiled at index 3 (max diff 1.0), same outputs as the CUDA log
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
torch.set_grad_enabled(False)
from torch._inductor import config
config.fallback_random = True



class Model(nn.Module):

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x):
        return F.gumbel_softmax(x, tau=1, hard=True)


model = Model()


x = torch.randn(1, 10)

inputs = [x]


model(*inputs)

output = model(*inputs)

model = torch.compile(model)

c_output = model(*inputs)


print(output)
print(c_output)
print("max diff:", (output - c_output).abs().max().item())
