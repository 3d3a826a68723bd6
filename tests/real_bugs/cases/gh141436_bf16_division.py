# issue: https://github.com/pytorch/pytorch/issues/141436
# title: Numerical differences on bf16/fp32 division and fp32 torch.cumsum
# expected: not_a_bug
# verdict: precision_casts
# culprit: bf16 round trip skipped (y.to(bf16) rounding and the bf16 division result are fused in fp32)
# grad: no
# discussion: closed; labels module: inductor, module: pt2 accuracy, oncall: pt2, triaged. eellison points at the
#   emulate_precision_casts config comment in torch/_inductor/config.py: "with this config on there is no difference."
#   Only the division part of the report is used (cumsum part not visible in the thread excerpt); device cuda -> cpu.
# reproduces: yes on 2.13.0 CPU: allclose False, max diff 16 (bf16, near-zero divisors); TORCHINDUCTOR_EMULATE_PRECISION_CASTS=1 gives diff 0 / allclose True
import torch

def division(Y, y):
    return (Y / y.to(Y.dtype).unsqueeze(-1))

Y, y = torch.randn(size=(1, 6, 128, 4, 32), dtype=torch.bfloat16, device='cpu'), torch.randn(size=(1, 6, 128, 4), dtype=torch.float32, device='cpu')

print("Y.mean()", Y.mean())
print("Y.std()", Y.std())
print("y.mean()", y.mean())
print("y.std()", y.std())

out_eager = division(Y, y)
out_compiled = torch.compile(division)(Y, y)

print(torch.allclose(out_eager, out_compiled))
print("diff", (out_eager - out_compiled).abs().max())
print("torch.version", torch.__version__)
