# issue: none
# title: one SGD training step of a small MLP, compiled vs eager (no-false-alarm check)
# expected: not_a_bug
# verdict: passed
# culprit: -
# grad: yes
# discussion: own script; identical weights (deepcopy), cross-entropy loss, backward and one SGD(momentum) step;
#   compares loss, gradients and updated parameters. No dropout / RNG inside the step.
# reproduces: runs clean on 2.13.0 CPU: loss diff 0, max grad diff 1.5e-8, max param diff after SGD step 7.5e-9
import copy
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

model_e = nn.Sequential(nn.Linear(20, 64), nn.Tanh(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 5))
model_c = copy.deepcopy(model_e)
opt_e = torch.optim.SGD(model_e.parameters(), lr=0.1, momentum=0.9)
opt_c = torch.optim.SGD(model_c.parameters(), lr=0.1, momentum=0.9)

x = torch.randn(16, 20)
y = torch.randint(0, 5, (16,))


def step(model, opt, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


compiled_model = torch.compile(model_c)
loss_e = step(model_e, opt_e, x, y)
loss_c = step(compiled_model, opt_c, x, y)

print("loss diff:", (loss_e - loss_c).abs().item())
max_grad = max((pe.grad - pc.grad).abs().max().item() for pe, pc in zip(model_e.parameters(), model_c.parameters()))
max_param = max((pe - pc).abs().max().item() for pe, pc in zip(model_e.parameters(), model_c.parameters()))
print("max grad diff:", max_grad)
print("max param diff after step:", max_param)
