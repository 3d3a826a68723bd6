# issue: https://github.com/pytorch/pytorch/issues/183768
# title: torch.compile returns inf for torch.acosh on large finite float32 inputs while eager returns finite values
# expected: bug
# verdict: inaccurate
# culprit: aten.acosh on float32 (CPU vectorized lowering -> Sleef-style log(x + sqrt(x*x - 1)); x*x overflows float32 for x > ~1.8e19)
# grad: no
# discussion: open; labels module: correctness (silent), module: inductor, repro:agent:h100:repro_success:reproduce (bot-triaged).
#   Reported on 2.13.0.dev20260513+cpu; the PT2 repro agent confirmed 3/3, TORCHINDUCTOR_EMULATE_PRECISION_CASTS=1 does not help.
#   PR #184359 (Sleef float cosh/sinh/acosh -> std:: fallback) lists it. The three trailing asserts are replaced by prints.
# reproduces: yes on 2.13.0 CPU, max abs diff inf (3 of 4 elements inf in compiled, eager ~51..60)
import warnings
warnings.filterwarnings("ignore")

import numpy as np
import torch

def fn(x):
    return torch.acosh(x)

x = torch.tensor([5e22, 9e25, 7e21, 2.0], dtype=torch.float32)

eager = fn(x).cpu().numpy()

torch._dynamo.reset()
compiled = torch.compile(fn, backend="inductor", fullgraph=True)(x).cpu().numpy()

print(f"input: {x.cpu().numpy()}")
print(f"eager: {eager}")
print(f"comp : {compiled}")

print("eager[0] finite in (50, 60):", bool(np.isfinite(eager[0]) and 50 < eager[0] < 60))
print("compiled[0], compiled[1] inf:", bool(np.isinf(compiled[0])), bool(np.isinf(compiled[1])))
print("max abs diff:", float(np.abs(eager.astype(np.float64) - compiled.astype(np.float64)).max()))
