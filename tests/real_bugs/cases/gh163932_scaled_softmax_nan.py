# issue: https://github.com/pytorch/pytorch/issues/163932
# title: softmax+
# expected: bug
# verdict: inaccurate
# culprit: aten._softmax after mul by a huge scale (1e14): Inductor's joint-graph scaled-softmax pattern (pass_pattern_1, rewrites scale*x - amax(scale*x)) plus CPU FMA contraction makes exp overflow -> compiled softmax is all NaN while eager is a finite one-hot
# grad: no
# discussion: open; label oncall: pt2. PT2 repro agent reproduced on 2.13.0.dev20260516 and the compiler bisector pinned
#   inductor / joint_graph_passes / pass_pattern_1; reporter says CPU only. No fix PR linked.
# reproduces: yes on 2.13.0 CPU, eager finite one-hot vs compiled all-NaN (25/25); max abs diff 1.0 after nan_to_num
import torch


class Test(torch.nn.Module):
    def __init__(self, scale: float = 1e14):
        super().__init__()
        self.register_buffer("scale", torch.tensor([scale]))

    def forward(self, x):
        x = x.view(-1, 2)
        x = x.sin_()
        x = x.t()
        x = x[0]
        x = x * self.scale
        out = torch.softmax(x, dim=0)
        return x, out


torch._dynamo.reset()
test_model = Test(scale=1e14)
compiled_model = torch.compile(test_model, backend="inductor")
torch.manual_seed(0)
x1 = torch.randn(10, 5)
x2 = x1.clone()

out1 = test_model(x1)
out2 = compiled_model(x2)

eager_softmax_in, eager_softmax_out = out1
compiled_softmax_in, compiled_softmax_out = out2

print("softmax inputs allclose:", torch.allclose(eager_softmax_in, compiled_softmax_in, atol=1e-4))
print("eager softmax:", eager_softmax_out)
print("compiled softmax:", compiled_softmax_out)
print("eager NaNs:", int(torch.isnan(eager_softmax_out).sum()), "compiled NaNs:", int(torch.isnan(compiled_softmax_out).sum()))
print("max abs diff (nan_to_num):", (eager_softmax_out.nan_to_num(0) - compiled_softmax_out.nan_to_num(0)).abs().max().item())
