# issue: https://github.com/pytorch/pytorch/issues/189799
# title: Inductor systematically mishandles negative zero (-0.0) sign across multiple operations (add, elu, sqrt+rsqrt fusion)
# expected: bug
# verdict: inaccurate
# culprit: aten.add with zeros_like (x + 0 simplified to x, keeping -0.0 where IEEE gives +0.0), then aten.reciprocal turns the sign into +inf vs -inf
# grad: no
# discussion: open; labels module: correctness (silent), module: edge cases, module: inductor (bot-triaged), found by a fuzzer.
#   aot_eager matches eager; an XPU re-run (intel/torch-xpu-ops#4478) confirms the shared Inductor path. First of the three
#   repros in the report (ceil -> add zeros -> reciprocal).
# reproduces: yes on 2.13.0 CPU, max abs diff inf (eager [inf, inf, inf], inductor [-inf, -inf, -inf])
import torch
import torch.nn as nn

class BugModule(nn.Module):
    def forward(self, x):
        v = torch.ceil(x)          # ceil(-0.5) = -0.0
        v = torch.add(v, torch.zeros_like(v))  # should be +0.0, inductor gives -0.0
        v = torch.reciprocal(v)    # reciprocal(+0.0) = +inf, reciprocal(-0.0) = -inf
        return v

x = torch.tensor([-0.5, -0.1, -0.9], dtype=torch.float32)

with torch.no_grad():
    eager_out = BugModule()(x)
with torch.no_grad():
    aot_out = torch.compile(BugModule(), backend="aot_eager")(x)
with torch.no_grad():
    ind_out = torch.compile(BugModule(), mode="default")(x)

print("Eager:  ", eager_out.tolist())   # [inf, inf, inf]
print("aot:    ", aot_out.tolist())     # [inf, inf, inf]
print("Induct: ", ind_out.tolist())     # [-inf, -inf, -inf]
print("max abs diff:", (eager_out - ind_out).abs().max().item())
