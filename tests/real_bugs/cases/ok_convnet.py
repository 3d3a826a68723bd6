# issue: none
# title: small conv net inference (no-false-alarm check)
# expected: not_a_bug
# verdict: passed
# culprit: -
# grad: no
# discussion: own script; Conv2d/BatchNorm2d(eval)/ReLU/MaxPool/AdaptiveAvgPool/Linear in fp32, eval mode.
# reproduces: runs clean on 2.13.0 CPU: max diff 1.6e-7, allclose True
import torch
import torch.nn as nn

torch.manual_seed(0)


class ConvNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(32, num_classes)

    def forward(self, x):
        return self.head(torch.flatten(self.features(x), 1))


model = ConvNet()
# give BatchNorm non-trivial running statistics
with torch.no_grad():
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 1.5)
model.eval()
x = torch.randn(4, 3, 32, 32)

with torch.no_grad():
    eager = model(x)
    compiled = torch.compile(model)(x)

print("max diff:", (eager - compiled).abs().max().item())
print("allclose:", torch.allclose(eager, compiled, rtol=1e-4, atol=1e-5))
