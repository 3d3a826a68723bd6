# issue: https://github.com/pytorch/pytorch/issues/186799
# title: `torch.compile` silently produces wrong gradient for `atan2(x, y).amin(dim)` on float32
# expected: bug
# verdict: wrong_gradient
# culprit: aten.amin backward (amin/amax grad = mask (x == result) / count) fused with the atan2 recomputation in Inductor's backward kernel: the recomputed atan2 no longer compares equal to the saved amin, so the gradient at the argmin position is dropped (0)
# grad: yes
# discussion: open; labels module: autograd, oncall: cpu inductor, oncall: pt2, triaged. Reporter: forward matches exactly, aot_eager is
#   correct, reproduced on 2.13.0.dev20260608+cpu; a later comment shows the same with .amax in fp16/bf16. No fix PR linked.
# reproduces: yes on 2.13.0 CPU, max abs diff 0.136625 (x.grad at an argmin position is 0 in compiled)
import torch

torch.manual_seed(0)
x_init = torch.randn(2, 3)
y = torch.randn(2, 3)

def fn(x, y):
    return torch.atan2(x, y).amin(dim=-1)

x_e = x_init.detach().clone().requires_grad_(True)
fn(x_e, y).sum().backward()

x_c = x_init.detach().clone().requires_grad_(True)
torch.compile(fn)(x_c, y).sum().backward()

print("eager grad   :", x_e.grad.flatten().tolist())
print("compiled grad:", x_c.grad.flatten().tolist())
print("max diff:", (x_e.grad - x_c.grad).abs().max().item())
