# issue: https://github.com/pytorch/pytorch/issues/189803
# title: Inductor produces large numerical discrepancy in reciprocal(elu + exp(elu)) due to catastrophic cancellation near zero
# expected: bug
# verdict: inaccurate
# culprit: aten.elu -> expm1 (CPU vectorized codegen lowers expm1(x) to exp(x) - 1, eager uses Sleef Vectorized::expm1); reciprocal amplifies the drift near the zero crossing
# grad: no
# discussion: closed by PR #190533 "[Inductor] Use Sleef expm1 in CPU vec codegen" (merge requested 2026-07-21, not in 2.13.0);
#   labels module: inductor, pt2: numerics-discrepancy, topic: fuzzer, triaged. PR states repro goes from max diff ~215 to 0.
#   Tail of the script reconstructed (thread excerpt cut inside the final prints).
# reproduces: yes on 2.13.0 CPU, max abs diff 108.35 (eager vs inductor; both are ~86 off the fp64 ref at the ill-conditioned point)
import torch
import torch.nn as nn
import torch.nn.functional as F

class BugModule(nn.Module):
    def __init__(self, alpha: float = 1.24):
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        elu_val = F.elu(x, alpha=self.alpha)
        exp_elu = torch.exp(elu_val)
        v = torch.add(elu_val, exp_elu)
        return torch.reciprocal(v)

torch.manual_seed(42)
x = torch.randn(24, 57, 37, dtype=torch.float32, device="cpu")

model = BugModule(alpha=1.24)

with torch.no_grad():
    eager_out = model(x)

with torch.no_grad():
    aot_out = torch.compile(model, backend="aot_eager")(x)

with torch.no_grad():
    ind_out = torch.compile(model, mode="default")(x)

# fp64 reference
x_fp64 = x.to(torch.float64)
model_fp64 = BugModule(alpha=1.24)
with torch.no_grad():
    fp64_ref = model_fp64(x_fp64).to(torch.float32)

print(f"max |aot_eager - inductor|  : {(aot_out - ind_out).abs().max().item()}")
print(f"max |eager - inductor|      : {(eager_out - ind_out).abs().max().item()}")
print(f"max |eager - fp64|          : {(eager_out - fp64_ref).abs().max().item()}")
print(f"max |inductor - fp64|       : {(ind_out - fp64_ref).abs().max().item()}")
