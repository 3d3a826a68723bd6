# issue: https://github.com/pytorch/pytorch/issues/160730
# title: `torch.compile` slient computation error on torch.tan and torch.sin
# expected: not_a_bug
# verdict: precision_casts
# verdict note: collected (as a report the corpus had not seen) as amplified_rounding; diagnose said precision_casts, and
#   the thread's explanation is that verdict's definition: Inductor "fuses the ops and performs all the internal
#   computations over float32" where eager rounds to float16 after each op, and emulate_precision_casts=True leaves 0
#   elements differing. Both are no-bug verdicts.
# culprit: tan (ill-conditioned near pi/2) on float16 input, fused float32 computation in Inductor vs per-op float16 rounding in eager; difference amplified by sin of large values
# grad: no
# discussion: closed; labels oncall: cpu inductor, oncall: pt2. malfet: "IMO this is expected because torch.compile fuses the ops and performs all the internal computations over float32 which results in more precise output than eager"; reporter accepted and the issue was closed.
# reproduces: torch 2.13.0 CPU: assert_close fails, 256/1581 mismatched, max abs diff 0.063, max rel 0.44; vs float64 reference compiled mean abs err 5.6e-4 vs eager 7.4e-4 (max 0.086 vs 0.057)
import torch
import numpy as np

torch._dynamo.config.capture_scalar_outputs = True

def foo(x):
    t = torch.tan(x)
    e = t.expand(31, 51, 1)
    mean_val = torch.mean(e)
    if mean_val.item() > 0.5:
        out1 = torch.sub(e, e * 0.5)
    else:
        out1 = torch.add(e, e * 0.5)
    # print("break")  # no error occurs if uncomment this line
    return torch.sin(out1)


np.random.seed(0)
x = np.random.uniform(0, 10, size=(31, 51, 1)).astype(np.float16)

cfoo = torch.compile(foo)
eager_res = foo(torch.from_numpy(x))
compile_res = cfoo(torch.from_numpy(x))

try:
    torch.testing.assert_close(eager_res, compile_res)
    print("assert_close passed")
except AssertionError as e:
    print("assert_close failed:", e)
