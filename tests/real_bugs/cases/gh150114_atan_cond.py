# issue: https://github.com/pytorch/pytorch/issues/150114
# title: [Miscompilation] inductor produce inconsistent inference results with the eager mode
# expected: not_a_bug
# verdict: amplified_rounding
# culprit: torch.linalg.cond of a singular matrix (arctan(ones(2,2)) is rank 1); tiny atan rounding differences (vectorized Sleef atan vs ATen) amplified by the infinite condition number
# grad: no
# discussion: open; labels oncall: pt2 only; no fix. leslie-fang-intel: "Feels like a numerical issue"; CaoE reproduced (eager 59147852 vs compiled 2.546e+08) and posted generated cpp_fused_atan kernel; no one called it a compiler bug. Matrix is exactly singular, so cond is +inf mathematically and any finite result is rounding noise.
# reproduces: yes on torch 2.13.0+cpu: eager 5.9147852e+07, compiled 2.5461e+08, allclose False; (separately checked: float64 eager gives 9.14e+16, so both float32 results are noise)
import torch

class SimpleModel(torch.nn.Module):
    def forward(self, x):
        x = torch.arctan(x)
        x = torch.linalg.cond(x)
        return x

model = SimpleModel()
inputs = torch.ones(2, 2, dtype=torch.float32)
res = model(inputs)

compiled_model = torch.compile(model, backend='inductor')
with torch.no_grad():
    compiled_out = compiled_model(inputs)
print(res)
print(compiled_out)
non_nan_mask = ~torch.isnan(res)
print(torch.allclose(res[non_nan_mask], compiled_out[non_nan_mask]))
