# issue: https://github.com/pytorch/pytorch/issues/197098
# title: [inductor] `binary_cross_entropy` with a weight of another dtype and `huber_loss` with mixed low-precision inputs return float32 under Inductor; eager and aot_eager return the input dtype
# expected: bug
# verdict: inaccurate
# culprit: Inductor lowering/decomposition of aten.binary_cross_entropy (weight of a different floating dtype) and aten.huber_loss (mixed bf16/fp16 inputs) promotes the result to float32 instead of eager's input dtype (bf16/fp16)
# grad: no
# discussion: open; labels bot-triaged, oncall: cpu inductor, oncall: pt2. Reporter (torch 2.14.0 and nightly, CPU): eager and aot_eager
#   return bfloat16/float16, Inductor float32; mse_loss/l1_loss/smooth_l1_loss agree. Script written from the description.
# reproduces: yes on 2.13.0 CPU, both losses return float32 instead of bfloat16; max abs value diff 0.00176
import torch
import torch.nn.functional as F

torch.manual_seed(0)
inp = torch.rand(4, 5).bfloat16()
tgt = torch.rand(4, 5).bfloat16()
w = torch.rand(4, 5)  # float32 weight

def bce(i, t, w):
    return F.binary_cross_entropy(i, t, weight=w)

def huber(a, b):
    return F.huber_loss(a, b)

e = bce(inp, tgt, w)
c = torch.compile(bce)(inp, tgt, w)
print("binary_cross_entropy: eager", e.dtype, e.item(), " inductor", c.dtype, c.item())

a = torch.randn(4, 5).bfloat16()
b = torch.randn(4, 5).half()
torch._dynamo.reset()
e2 = huber(a, b)
c2 = torch.compile(huber)(a, b)
print("huber_loss(bf16, fp16): eager", e2.dtype, e2.item(), " inductor", c2.dtype, c2.item())
print("dtype mismatches:", int(e.dtype != c.dtype) + int(e2.dtype != c2.dtype), "of 2; max abs value diff:",
      max(abs(e.double() - c.double()).item(), abs(e2.double() - c2.double()).item()))
