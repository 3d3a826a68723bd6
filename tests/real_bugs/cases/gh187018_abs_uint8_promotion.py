# issue: https://github.com/pytorch/pytorch/issues/187018
# title: abs on uint8 silently miscompiled via std::abs integer promotion
# expected: bug
# verdict: inaccurate
# culprit: aten.abs on uint8 (CPU codegen std::abs promotes to int, so -abs(x) is not wrapped to uint8 before cat + sum)
# grad: no
# discussion: closed; labels module: correctness (silent), module: inductor, module: unsigned int, oncall: cpu inductor.
#   f_bug and f_ok are the same math; reporter got -800 vs 224 on 2.13.0.dev20260609+cpu. Eager reference print added.
# reproduces: yes on 2.13.0 CPU, max abs diff 1024 (eager 224, compiled f_bug -800)
import sys, platform
import torch
import numpy as np

print(f"python   : {sys.version.split()[0]}")
print(f"platform : {platform.platform()}")
print(f"torch    : {torch.__version__}")
print("-" * 50)

def f_bug(x):
    y = -x.abs()
    return torch.cat([y, y]).sum()

def f_ok(x):
    return torch.cat([-x.abs(), -x.abs()]).sum()

x = torch.tensor([200, 200], dtype=torch.uint8)
eager = f_bug(x).item()
compiled_bug = torch.compile(f_bug)(x).item()
compiled_ok = torch.compile(f_ok)(x).item()
print(compiled_bug, compiled_ok)
print("eager:", eager)
print("max abs diff:", abs(eager - compiled_bug))
