# issue: https://github.com/pytorch/pytorch/issues/197434
# title: [torch.compile] adaptive_max_pool2d returns incorrect result for transposed tensor when return_indices=True
# expected: bug
# verdict: inaccurate
# culprit: aten.adaptive_max_pool2d (evenly divisible case -> max_pool2d_with_indices lowering): argmax offset within the window is computed over the reordered (stride-sorted) reduction loop but decoded row-major by _pool_offsets_to_indices, so indices come out transposed for an input whose spatial dims are transposed
# grad: no
# discussion: closed (Sep 2026); labels module: correctness (silent), module: inductor, release triage. Reported on 2.14.0; fix PR #197596
#   "[inductor] Fix max_pool for non-contiguous input" (root-cause analysis in the PR). Values are right, only indices are wrong.
# reproduces: yes on 2.13.0 CPU, 27 of 32 indices wrong, max abs diff 55
import torch
import torch._inductor.config
torch._inductor.config.fallback_random = True

import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
        out = F.adaptive_max_pool2d(x, (2, 2), return_indices=True)
        return out[1]

model = Model()
cmodel = torch.compile(model)
torch.manual_seed(0)
x = torch.randn(2, 4, 12, 12).transpose(2, 3)
out1 = model(x)
out2 = cmodel(x)
print("mismatched indices:", int((out1 != out2).sum()), "of", out1.numel())
print("max abs diff:", (out1 - out2).abs().max().item())
