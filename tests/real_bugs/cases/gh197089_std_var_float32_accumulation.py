# issue: https://github.com/pytorch/pytorch/issues/197089
# title: [inductor][cpu] `torch.std`/`var` accumulate in float32: inf/NaN for 1e30-scale inputs, and **zero output with an all-zero gradient** for 1e-30-scale inputs (eager and float64 are correct)
# expected: bug
# verdict: inaccurate
# culprit: aten.var / aten.std (var_mean welford reduction) on CPU: Inductor accumulates float32 input in float32, eager CPU accumulates in double, so M2 overflows for 1e30-scale input (and underflows to 0 for 1e-30-scale input)
# grad: no
# discussion: open; labels module: correctness (silent), module: cpu, module: inductor, module: NaNs and Infs (bot-triaged).
#   Reporter (torch 2.14.0 and nightly): eager matches a float64 reference; compiled std/std_mean return inf/NaN for ~1e30
#   inputs and 0 (with an all-zero gradient) for ~1e-30 inputs. The report's code block is not visible in the thread excerpt:
#   this script is reconstructed from its text (the 1e30 and 1e-30 cases for std and var, forward only).
# reproduces: yes on 2.13.0 CPU: std of 1e30-scale input eager 1.03e30 vs compiled nan (var inf vs nan); std of 1e-30-scale input 1.03e-30 vs 0 (max abs diff nan/inf-class)
import torch

torch.manual_seed(0)
base = torch.randn(1000)
for scale in (1e30, 1e-30):
    x = base * scale
    ref = torch.std(x.double()).item()
    for name, fn in (("std", torch.std), ("var", torch.var)):
        torch._dynamo.reset()
        e = fn(x).item()
        c = torch.compile(fn)(x).item()
        print(f"scale={scale:g} {name}: eager {e:.6g}  compiled {c:.6g}  (float64 std {ref:.6g})")
