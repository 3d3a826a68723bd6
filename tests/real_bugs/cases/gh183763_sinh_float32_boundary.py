# issue: https://github.com/pytorch/pytorch/issues/183763
# title: torch.compile overflows torch.sinh near float32 boundary while eager returns finite values
# expected: bug
# verdict: inaccurate
# culprit: aten.sinh on float32 (per PR #184359: Vectorized<float>::sinh calls Sleef sinhf, documented domain [-88.5, 88.5], whose exp intermediate overflows although sinh(x) < FLT_MAX)
# grad: no
# discussion: closed; labels module: correctness (silent), module: decompositions, module: edge cases, module: inductor (bot-triaged).
#   Reported on 2.13.0.dev20260513+cpu. PR #184359 "use scalar for torch.sinh, torch.acosh on f32 inputs" says it closes it;
#   older eager-side report #48641 / sleef#364. The trailing asserts (the second one references an undefined `comp`) are replaced by prints.
# reproduces: yes on 2.13.0 CPU, max abs diff inf (all 4 compiled elements +-inf, eager finite ~1.9e38..2.7e38)
import warnings
warnings.filterwarnings("ignore")

import numpy as np
import torch

def fn(x):
    return torch.sinh(x)

x = torch.tensor([88.85, 89.2, 88.95, -89.0], dtype=torch.float32)

eager = fn(x).cpu().numpy()

torch._dynamo.reset()
compiled = torch.compile(fn, backend="inductor", fullgraph=True)(x).cpu().numpy()

print(f"input: {x.cpu().numpy()}")
print(f"eager: {eager}")
print(f"comp : {compiled}")

print("eager[0] finite and > 1e38:", bool(np.isfinite(eager[0]) and eager[0] > 1e38))
print("compiled[0] inf:", bool(np.isinf(compiled[0])))
print("max abs diff:", float(np.abs(eager.astype(np.float64) - compiled.astype(np.float64)).max()))
