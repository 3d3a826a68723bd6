# issue: https://github.com/pytorch/pytorch/issues/143182
# title: [Inductor] [CPU] `nn.LayerNorm` outputs numerical error compared with eager
# expected: not_a_bug
# verdict: passed
# culprit: LayerNorm over 10M elements: reduction order differs between Inductor's decomposed layer_norm and the ATen CPU kernel
# grad: no
# discussion: closed; labels module: correctness (silent), oncall: cpu inductor, triaged; IvanKobzarev noted it passes at the 1e-3 tolerances Inductor tests use (not high-pri), and eellison asked for an fp64 comparison, showing compiled is as close or closer to fp64 than eager, i.e. float reduction-order noise, not a miscompile.
# reproduces: yes on 2.13.0 CPU, prints allclose True, max abs diff 9.5e-07; eager vs fp64 7.4e-07, compiled vs fp64 9.8e-07 (both at fp32 noise level)
import torch
import torch.nn as nn


class Model(nn.Module):

    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm([10000, 1000])  # LayerNorm for 2D input

    def forward(self, x):
        x = self.ln(x)
        return x


model = Model().eval()

x = torch.randn(1, 3, 10000, 1000)  # As `H` and `W` increase, the error might be amplified

inputs = [x]

c_model = torch.compile(model)

output = model(*inputs)

c_output = c_model(*inputs)

print(torch.allclose(output, c_output, 1e-5, 1e-5))  # loose check in fp32
print(torch.max(torch.abs(output - c_output)))

fp_64_ref = c_model(x.double())
print("Eager divergence", torch.max(torch.abs(output - fp_64_ref)))
print("Compile divergence divergence", torch.max(torch.abs(c_output - fp_64_ref)))
