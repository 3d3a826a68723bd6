# issue: https://github.com/pytorch/pytorch/issues/198134
# title: [inductor][cpu] Vectorized float64 `torch.acosh` returns `inf` for inputs above 1.34e154 under `torch.compile` (eager and the scalar tail are finite): `Vectorized<double>::acosh` squares its argument
# expected: bug
# verdict: inaccurate
# culprit: aten.acosh on float64 (CPU vectorized lowering -> Vectorized<double>::acosh = log(x + sqrt(x*x - 1)), x*x overflows above sqrt(DBL_MAX) ~ 1.34e154; the scalar tail uses std::acosh)
# grad: no
# discussion: open; labels module: correctness (silent), module: cpu, module: inductor, module: sleef (bot-triaged).
#   n=3 (scalar tail) is finite, n>=8 (vector body) is inf. The second loop of the report was cut in the thread excerpt;
#   it is completed here to print eager vs compiled for the same three values.
# reproduces: yes on 2.13.0 CPU, max abs diff inf (n>=8 or x>=1.35e154: compiled inf, eager finite)
import torch

compiled = torch.compile(torch.acosh)
max_diff = 0.0
for n in (3, 8, 64):
    x = torch.full((n,), 1e200, dtype=torch.float64)
    e, c = torch.acosh(x), compiled(x)
    print(f"n={n:2d}  eager {e[0].item():.6g}   compiled {c[0].item():.6g}")
    max_diff = max(max_diff, (e - c).abs().max().item())
for v in (1.34e154, 1.35e154, 1e308):
    x = torch.full((16,), v, dtype=torch.float64)
    e, c = torch.acosh(x), compiled(x)
    print(f"x={v:.3g}  eager {e[0].item():.6g}   compiled {c[0].item():.6g}")
    max_diff = max(max_diff, (e - c).abs().max().item())
print("max abs diff:", max_diff)
