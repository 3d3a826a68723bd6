# issue: https://github.com/pytorch/pytorch/issues/195675
# title: torch.clamp with a bound unrepresentable in the tensor dtype: eager raises, torch.compile ignores the bound
# expected: bug
# verdict: eager_error_compiled_returns
# culprit: aten.clamp / aten.clamp_min with a float scalar bound beyond float32 range (Inductor lowers the bound as a constant without eager's "value cannot be converted to type float without overflow" check)
# grad: no
# discussion: open; labels module: correctness (silent), module: decompositions, module: inductor (bot-triaged). Reproduced by the
#   reporter on 2.11.0 and 2.14.0+cpu; the reporter notes the compiled answer is arguably the reasonable one. Open PR #196114
#   "Fix clamp scalar overflow handling in Inductor" adds the eager validation to the Inductor clamp paths.
# reproduces: yes on 2.13.0 CPU: eager raises RuntimeError (float overflow), inductor returns the unclamped tensor (no max abs diff: eager has no value)
import torch

def f(x):
    return torch.clamp(x, min=-3.4e39, max=3.4e39)   # beyond float32 range

x = torch.randn(4)

with torch.no_grad():
    try:
        f(x)
    except Exception as e:
        print("eager:", type(e).__name__ + ":", str(e).splitlines()[0])
    out = torch.compile(f, backend="inductor")(x)
    print("compiled:", out.dtype, "max|out| =", out.abs().max().item())
