# issue: https://github.com/pytorch/pytorch/issues/198119
# title: [inductor] `avg_pool1d/2d` backward with `ceil_mode=True` divides the overhanging last window by the full kernel size, so the compiled gradient is wrong where eager and `aot_eager` agree; forward is correct
# expected: bug
# verdict: wrong_gradient
# culprit: Inductor avg_pool2d_backward lowering uses scale = kH*kW under count_include_pad instead of the window clipped to the padded input (ceil_mode overhang)
# grad: yes
# discussion: open; labels bot-triaged, module: correctness (silent), module: inductor, module: pooling, oncall: pt2; report pins it to the backward lowering's divisor (forward lowering and eager clip the window); aot_eager matches eager, so decompositions are fine. Script tail reconstructed from the description (excerpt cut off after "x").
# reproduces: yes on 2.13.0 CPU, last-window grads eager 0.5 vs inductor 0.333; max abs grad diff 0.167 (1d) and 0.25 (2d)
import torch, torch.nn.functional as F

def grad_of(f, x, backend=None):
    x = x.detach().clone().requires_grad_()
    (f if backend is None else torch.compile(f, backend=backend))(x).sum().backward()
    return x.grad

# (the excerpt is cut after "x"; inputs below follow its description: kernel 3, stride 2,
#  ceil_mode=True, last window covering two of its three positions)
x = torch.arange(6, dtype=torch.float32).reshape(1, 1, 6)
f1 = lambda x: F.avg_pool1d(x, 3, 2, ceil_mode=True)
x2 = torch.arange(36, dtype=torch.float32).reshape(1, 1, 6, 6)
f2 = lambda x: F.avg_pool2d(x, 3, 2, ceil_mode=True)
for name, f, inp in (("avg_pool1d", f1, x), ("avg_pool2d", f2, x2)):
    torch._dynamo.reset()
    e = grad_of(f, inp)
    a = grad_of(f, inp, "aot_eager")
    torch._dynamo.reset()
    c = grad_of(f, inp, "inductor")
    print(name, "eager grad", e.flatten()[:6].tolist())
    print(name, "aot_eager ", a.flatten()[:6].tolist())
    print(name, "inductor  ", c.flatten()[:6].tolist())
    print(name, "max abs grad diff eager vs inductor:", (e - c).abs().max().item())
