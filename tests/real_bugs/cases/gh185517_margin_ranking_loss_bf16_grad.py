# issue: https://github.com/pytorch/pytorch/issues/185517
# title: [Inductor][CPU][bf16] Gradient mismatch in F.margin_ranking_loss backward with bfloat16 tensors and float scalar
# expected: bug
# verdict: wrong_gradient
# culprit: aten.add/sub with a Python float scalar on bf16 tensors: Inductor keeps the scalar (margin=1.7) in fp32 instead of rounding it to bf16 like eager CPU, so the clamp_min boundary mask (ge) flips and the backward gradient becomes 0
# grad: yes
# discussion: closed; labels high priority, module: bfloat16, module: correctness (silent), module: decompositions.
#   Fix PR #186818 "[inductor] Round bf16/fp16 scalars to tensor dtype for add/sub on CPU and MPS" (root cause analysis in the PR).
# reproduces: yes on 2.13.0 CPU, max abs diff 0.5 (grad of input1 and input2: eager -0.5/+0.5, compiled 0)
import torch

def test_margin_ranking_loss_boundary():
    x_val = 1.703125
    margin_val = 1.7

    input1 = torch.tensor([x_val, x_val], dtype=torch.bfloat16, requires_grad=True)
    input2 = torch.tensor([0.0, 0.0], dtype=torch.bfloat16, requires_grad=True)
    target = torch.tensor([1.0, 1.0], dtype=torch.bfloat16)

    def fn(x, y, t):
        return torch.nn.functional.margin_ranking_loss(x, y, t, margin=margin_val, reduction='mean')

    loss_eager = fn(input1, input2, target)
    loss_eager.backward()
    g1_eager, g2_eager = input1.grad.clone(), input2.grad.clone()

    c1 = input1.detach().clone().requires_grad_(True)
    c2 = input2.detach().clone().requires_grad_(True)
    compiled_fn = torch.compile(fn)
    loss_comp = compiled_fn(c1, c2, target)
    loss_comp.backward()

    print("eager loss:", loss_eager.item(), "compiled loss:", loss_comp.item())
    print("eager grad input1:", g1_eager, "compiled:", c1.grad)
    print("eager grad input2:", g2_eager, "compiled:", c2.grad)
    diff = max((g1_eager.float() - c1.grad.float()).abs().max().item(),
               (g2_eager.float() - c2.grad.float()).abs().max().item())
    print("max abs grad diff:", diff)

test_margin_ranking_loss_boundary()
