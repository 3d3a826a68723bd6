# issue: https://github.com/pytorch/pytorch/issues/158699
# title: reports of torch.compile'd rmsnorm numerics different from eager
# expected: not_a_bug
# verdict: passed
# culprit: bf16 round trip skipped (x.to(orig_dtype) * weight fused: compiled keeps the fp32 normalized value) -> compiled closer to fp64
# grad: no
# discussion: open; labels module: inductor, module: vllm, oncall: pt2, triaged, vllm-compile. zou3519 (description):
#   "as far as I can tell, the compiled version of this has better rtol than eager when compared to the float64 baseline";
#   asks what bitwise equality would take (i.e. a feature request, not a miscompile). device cuda -> cpu; the comparison
#   prints at the end are added (the thread's script stops after computing eager64). BoyuanFeng: EMULATE_PRECISION_CASTS
#   "should help numerics"; max diff 0.0078 for bf16 matches FlashInfer's hand-tuned kernel.
# reproduces: yes on 2.13.0 CPU: max diff 0.0078 (1 bf16 ulp); vs fp64 compiled max 0.0039 / mean 6.5e-4, eager max 0.0077 / mean 8.8e-4 (compiled more accurate); with emulate_precision_casts max diff stays 0.0078 but both errors equal
import torch

def rms_norm(x, residual, weight, acc=torch.float32):
    orig_dtype = x.dtype
    x = x.to(acc)
    if residual is not None:
        x = x + residual.to(acc)
        residual = x.to(orig_dtype)

    hidden_size = x.shape[-1]
    x_var = x
    variance = x_var.pow(2).mean(dim=-1, keepdim=True)

    x = x * torch.rsqrt(variance + 1e-5)
    x = x.to(orig_dtype)
    x = x * weight
    return x

rms_norm_compiled = torch.compile(rms_norm, fullgraph=True)

x = torch.rand(2048, 4096, dtype=torch.bfloat16, device="cpu")
residual = torch.rand(2048, 4096, dtype=torch.bfloat16, device="cpu")
weight = torch.rand(4096, dtype=torch.bfloat16, device="cpu")

out = rms_norm_compiled(x, residual, weight)
eager = rms_norm(x, residual, weight)

eager64 = rms_norm(x.double(), residual.double(), weight.double(), acc=torch.float64)

print("max |eager - compiled|:", (eager.float() - out.float()).abs().max().item())
print("max |eager - fp64|:    ", (eager.double() - eager64).abs().max().item())
print("max |compiled - fp64|: ", (out.double() - eager64).abs().max().item())
print("mean |eager - fp64|:    ", (eager.double() - eager64).abs().mean().item())
print("mean |compiled - fp64|: ", (out.double() - eager64).abs().mean().item())
