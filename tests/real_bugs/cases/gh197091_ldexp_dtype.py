# issue: https://github.com/pytorch/pytorch/issues/197091
# title: [inductor] `torch.ldexp` output dtype differs from eager in both directions (int/bool × half → float32; half × float32 → half)
# expected: bug
# verdict: inaccurate
# culprit: Inductor's aten.ldexp lowering: the fallback path (x * pow(2, n)) hardcodes out_dtype = float32 if x is integral else x.dtype, ignoring the exponent's dtype, so the result dtype differs from eager's type promotion (bool x fp16 -> float32 instead of float16; fp16 x fp32 -> float16 instead of float32)
# grad: no
# discussion: open; labels module: correctness (silent), module: inductor, oncall: pt2, release triage. aot_eager agrees with eager.
#   Fix PR #197162 "[inductor] Fix ldexp output dtype to match eager type promotion" (open, draft).
# reproduces: yes on 2.13.0 CPU, dtype differs in 3 of 3 cases (bool x fp16 -> float32, int64 x bf16 -> float32, fp16 x fp32 -> float16); max abs value diff 0.0265
import torch

torch.manual_seed(0)
cases = {
    "bool  x fp16": (torch.ones(3, 4, dtype=torch.bool), torch.randn(3, 4).half()),
    "int64 x bf16": (torch.randint(1, 4, (3, 4)), torch.randn(3, 4).bfloat16()),
    "fp16  x fp32": (torch.randn(3, 4).half(), torch.randn(3, 4)),
}

def f(x, n):
    return torch.ldexp(x, n)

mismatches = 0
worst = 0.0
for name, (x, n) in cases.items():
    torch._dynamo.reset()
    e = f(x, n)
    c = torch.compile(f)(x, n)
    same = e.dtype == c.dtype
    mismatches += not same
    d = (e.double() - c.double()).abs().max().item()
    worst = max(worst, d)
    print(f"{name}: eager {e.dtype}  inductor {c.dtype}  {'OK' if same else 'DTYPE MISMATCH'}  max abs diff {d:.3g}")
print("dtype mismatches:", mismatches, "of", len(cases), "; max abs value diff:", worst)
