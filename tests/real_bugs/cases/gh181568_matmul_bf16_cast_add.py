# issue: https://github.com/pytorch/pytorch/issues/181568
# title: torch.compile mismatch for matmul followed by bfloat16 cast and fp32 add
# expected: not_a_bug
# verdict: precision_casts
# culprit: bf16 round trip skipped ((x @ w).to(bf16) + fp32 bias fused: the matmul result is not rounded to bf16 first)
# grad: no
# discussion: closed; labels bot-triaged, high priority, module: inductor, oncall: pt2,
#   repro:agent:h100:repro_success:mitigation. PT2 Repro Agent (karthickai) classified it PREDEFINED_MITIGATION:
#   "Re-running with TORCHINDUCTOR_EMULATE_PRECISION_CASTS=1 reduces max_abs_diff to 0.0 ... the documented
#   emulate_precision_casts mitigation fixes the divergence". No human not-a-bug comment visible in the thread excerpt.
# reproduces: yes on 2.13.0 CPU: out max diff 0.0307 on 510/510 elements, mean 0.0046; TORCHINDUCTOR_EMULATE_PRECISION_CASTS=1 gives out diff 0, mean 2.4e-7
import torch

print(torch.__version__)

torch.manual_seed(119)

def f(x, w, b):
    y = (x @ w).to(torch.bfloat16) + b
    return y, y.mean(-1)

x = torch.randn(2, 15, 32)
w = torch.randn(32, 17)
b = torch.randn(17)

ref = f(x, w, b)
got = torch.compile(
    f,
    backend="inductor",
    fullgraph=True,
    dynamic=True,
)(x, w, b)

for name, r, g in zip(["out", "mean"], ref, got):
    diff = (r.float() - g.float()).abs()
    print(
        name,
        "max_abs_diff =", diff.max().item(),
        "mean_abs_diff =", diff.mean().item(),
        "diff_count =", int((diff != 0).sum()),
        "numel =", r.numel(),
    )
    # torch.testing.assert_close(r, g) in the original; printed instead
