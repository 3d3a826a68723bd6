# issue: https://github.com/pytorch/pytorch/issues/197108
# title: [inductor] `torch.var_mean` / `torch.std_mean` on an empty tensor return mean `0.` instead of `nan` under `torch.compile`
# expected: bug
# verdict: inaccurate
# culprit: aten.var_mean.correction (fused welford reduction): for zero elements the mean comes from the codegen's reduction identity (0.) instead of 0/0 = nan
# grad: no
# discussion: open; labels module: empty tensor, module: inductor, oncall: pt2, release triage (bot-triaged). eager, backend="eager"
#   and aot_eager return (nan, nan); Inductor returns (nan, 0.) for var_mean/std_mean, correction 0 and 1, float32/float16, shapes
#   (0,) and (0, 1); torch.mean/var/std alone are correct. The report's code block is not visible in the thread excerpt: this script
#   is reconstructed from its text. The "degrees of freedom is <= 0" warning is expected.
# reproduces: yes on 2.13.0 CPU: all 8 variants give mean 0.0 compiled vs nan eager (nan mismatch, no finite max abs diff)
import warnings
warnings.filterwarnings("ignore")
import torch

for shape in ((0,), (0, 1)):
    for correction in (0, 1):
        for name, op in (("var_mean", torch.var_mean), ("std_mean", torch.std_mean)):
            fn = lambda x, op=op, correction=correction: op(x, correction=correction)
            x = torch.empty(shape)
            e = fn(x)
            torch._dynamo.reset()
            c = torch.compile(fn)(x)
            print(f"{name} shape={shape} correction={correction}: eager ({e[0].item()}, {e[1].item()})  "
                  f"inductor ({c[0].item()}, {c[1].item()})")
