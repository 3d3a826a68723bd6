# issue: https://github.com/pytorch/pytorch/issues/143182
# title: [Inductor] [CPU] `nn.LayerNorm` outputs numerical error compared with eager
# expected: bug
# verdict: eager_error_compiled_returns
# verdict note: decided as passed when collected, from the thread's subject (the first call, which diagnose passes at
#   0.19% of the tolerance). The script's second call, c_model(x.double()), gives float64 input to a float32 LayerNorm:
#   eager raises 'mixed dtype (CPU)', the compiled code returns a value. That is a check the compiled program skips,
#   the same class as #185885/#195675/#198071 in this corpus; the thread never discusses that call. Maintainers treat
#   this exact check as one to keep: #151478 (layer_norm with mismatched dtypes runs decomposed, raises in eager: "ideally
#   we want the same behavior across eager and compile"), #150993 (bdhirsh: "If eager is raising an error, we should
#   probably make sure that compile raises that same error"; fixed by 2.12).
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
