# issue: https://github.com/pytorch/pytorch/issues/197739
# title: [torch.compile] `torch.compile` returns incorrect argmin index for non-contiguous (transposed) tensor
# expected: bug
# verdict: inaccurate
# culprit: argmin reduction over a transposed (non-contiguous) view: CPU codegen reports the physical loop index instead of the logical index
# grad: no
# discussion: open; labels high priority, module: correctness (silent), module: inductor; same family as the argmin/argmax-on-transposed fixes (PR #165983 for Triton, PR #184191 extending logical index to CPU codegen); triggered when a pointwise op sits between .t() and argmin.
# reproduces: yes on 2.13.0 CPU, eager argmin 1 vs compiled 2 (abs diff 1)
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        xt = x.t()
        out = xt + 0.5
        return out.argmin()

torch.manual_seed(0)
x = torch.randn((2, 2))
print(x)
# tensor([[ 1.5410, -0.2934],
#         [-2.1788,  0.5684]])

model = Model()
cmodel = torch.compile(model)

out1 = model(x)
print(out1)   # tensor(1)

out2 = cmodel(x)
print(out2)   # tensor(2)   <-- wrong

try:
    torch.testing.assert_close(out1, out2)  # fails
    print("MATCH")
except AssertionError as e:
    print("MISMATCH:", e)
