# issue: none
# title: small MLP inference (no-false-alarm check)
# expected: not_a_bug
# verdict: passed
# culprit: -
# grad: no
# discussion: own script; Linear/GELU/LayerNorm MLP in fp32, eval mode, no randomness inside forward.
# reproduces: runs clean on 2.13.0 CPU: max diff 4.8e-7, allclose True
import torch
import torch.nn as nn

torch.manual_seed(0)


class MLP(nn.Module):
    def __init__(self, d_in=64, d_hidden=256, d_out=10):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d_in, d_hidden),
            nn.GELU(),
            nn.LayerNorm(d_hidden),
            nn.Linear(d_hidden, d_hidden),
            nn.ReLU(),
            nn.Linear(d_hidden, d_out),
        )

    def forward(self, x):
        return torch.log_softmax(self.net(x), dim=-1)


model = MLP().eval()
x = torch.randn(32, 64)

with torch.no_grad():
    eager = model(x)
    compiled = torch.compile(model)(x)

print("max diff:", (eager - compiled).abs().max().item())
print("allclose:", torch.allclose(eager, compiled, rtol=1e-4, atol=1e-5))
