# issue: https://github.com/pytorch/pytorch/issues/185337
# title: [inductor] CPU codegen does not preserve explicit float32 to float16 to float32 cast semantics
# expected: not_a_bug
# verdict: precision_casts
# culprit: fp16 round trip skipped (x.to(fp16).to(fp32) collapsed to x in CPU codegen)
# grad: no
# discussion: closed by PR #185847 (eellison) "[inductor][cpu] Preserve explicit lowp-fp round-trips under
#   emulate_precision_casts" -- scoped to emulate_precision_casts=True, "Default-config behavior is unchanged".
#   Labels bot-triaged, module: correctness (silent), module: cpu, module: half, module: inductor.
#   Final prints reconstructed (thread excerpt cut after the first print).
# reproduces: yes on 2.13.0 CPU: compiled_y equals x (no fp16 rounding), max diff y 8.4e-4, sum 1.4e-3; TORCHINDUCTOR_EMULATE_PRECISION_CASTS=1 gives diff 0
import torch

def fn(x):
    y = x.to(dtype=torch.float16).to(dtype=torch.float32)
    return y, y.sum(dim=1)

x = torch.arange(20, dtype=torch.float32).reshape(5, 4).t() / 7.0

compiled_fn = torch.compile(fn, backend="inductor", dynamic=False)

eager_y, eager_sum = fn(x)
compiled_y, compiled_sum = compiled_fn(x)

print("eager_y:", eager_y)
print("compiled_y:", compiled_y)
print("eager_sum:", eager_sum)
print("compiled_sum:", compiled_sum)
print("max diff y:  ", (eager_y - compiled_y).abs().max().item())
print("max diff sum:", (eager_sum - compiled_sum).abs().max().item())
