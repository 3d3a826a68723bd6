# issue: https://github.com/pytorch/pytorch/issues/183765
# title: torch.compile overflows torch.cosh near float32 boundary while eager returns finite values
# expected: bug
# verdict: inaccurate
# culprit: aten.cosh (per PR #184359: Vectorized<float>::cosh calls Sleef coshf, whose exp(x) intermediate overflows for |x| > ~88.7 although cosh(x) < FLT_MAX; eager stays finite on this input)
# grad: no
# discussion: closed; labels module: correctness (silent), module: edge cases, module: inductor (bot-triaged). Reported on
#   2.13.0.dev20260513+cpu. PR #184359 (Sleef float cosh/sinh/acosh -> std:: scalar fallback) targets it; jansel later could not
#   reproduce on a newer trunk commit. The two trailing asserts are replaced by prints.
# reproduces: yes on 2.13.0 CPU, max abs diff inf (eager ~1.9e38..2.7e38, compiled inf for all 4 elements)
import warnings
warnings.filterwarnings("ignore")

import numpy as np
import torch

def fn(x):
    return torch.cosh(x)

x = torch.tensor([88.85, 88.9, 89.1, -89.2], dtype=torch.float32)

eager = fn(x).cpu().numpy()

torch._dynamo.reset()
compiled = torch.compile(fn, backend="inductor", fullgraph=True)(x).cpu().numpy()

print(f"input: {x.cpu().numpy()}")
print(f"eager: {eager}")
print(f"comp : {compiled}")

print("eager finite and > 1e38:", bool(np.isfinite(eager[0]) and eager[0] > 1e38))
print("compiled inf:", bool(np.isinf(compiled[0])))
print("max abs diff:", float(np.abs(eager.astype(np.float64) - compiled.astype(np.float64)).max()))
