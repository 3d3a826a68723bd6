# issue: https://github.com/pytorch/pytorch/issues/191499
# title: [Inductor][CPU] torch.compile returns 0 for short positive uint8/int8 amin reductions on Apple Silicon
# expected: bug
# verdict: inaccurate
# culprit: CPU Inductor vectorized min/max/argmin/argmax reduction for uint8/int8 (>= 16 elements): the vector accumulator's initial/padding value is 0 instead of the dtype's max/min, so min of all-positive values returns 0 (argmin -1)
# grad: no
# discussion: open; labels bot-triaged, oncall: cpu inductor. A follow-up comment shows it is not Apple-specific: x86-64 AVX2 (torch 2.14.0+cpu
#   and 2.15 nightly) is wrong once the reduction has 16 or more elements, for min, max, argmin, argmax. No fix PR linked.
# reproduces: yes on 2.13.0 CPU, 6 of 12 results wrong; min/max values off by 1 (0 instead of 1/-1), argmin returns a garbage index
import torch

pos = torch.tensor([5, 1, 100, 3, 7, 8, 9, 13, 100, 120, 127, 2, 6, 4, 11, 12, 90, 80])
worst = 0
mismatches = 0
for dtype, x in ((torch.uint8, pos), (torch.int8, pos), (torch.int8, -pos)):
    x = x.to(dtype)
    for name, fn in (("min", torch.min), ("max", torch.max), ("argmin", torch.argmin), ("argmax", torch.argmax)):
        torch._dynamo.reset()
        e, c = fn(x).item(), torch.compile(fn)(x.clone()).item()
        if e != c:
            mismatches += 1
            if name in ("min", "max"):
                worst = max(worst, abs(e - c))
            print(f"{str(dtype):12s} first={x[0].item():3d}  {name:6s} eager={e:4d}  inductor={c:4d}")
print("mismatching results:", mismatches, "of 12; max abs diff of min/max values:", worst)
