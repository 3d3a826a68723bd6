# issue: https://github.com/pytorch/pytorch/issues/197895
# title: [inductor] Floating-point floor division is off by one: `torch.compile` makes `1.0 // 0.1` return `10.0` (eager and Python: `9.0`)
# expected: bug
# verdict: inaccurate
# culprit: aten.floor_divide / aten.div.Tensor_mode(rounding_mode="floor") (Inductor lowers float floor division to floor(a / b) instead of eager's fmod-based div_floor)
# grad: no
# discussion: open; labels module: correctness (silent), module: inductor, release triage. Reporter traces it to the
#   floor(div_rn(a, b)) lowering shared by all devices; aot_eager matches eager. Tail of the script reconstructed
#   (the thread excerpt was cut after the loop header): it prints eager vs compiled for each variant.
# reproduces: yes on 2.13.0 CPU, max abs diff 1.0
import torch

print("python   :", 1.0 // 0.1, 0.5 // 0.1, 6.0 // 0.2)
max_diff = 0.0
for dtype in (torch.float32, torch.float64):
    a = torch.tensor([1.0, 0.5, 6.0, 1.0], dtype=dtype)
    b = torch.tensor([0.1, 0.1, 0.2, 1 / 3], dtype=dtype)
    for name, fn in (("a // b", lambda a, b: a // b),
                     ("div(floor)", lambda a, b: torch.div(a, b, rounding_mode="floor")),
                     ("floor_divide", lambda a, b: torch.floor_divide(a, b))):
        eager = fn(a, b)
        torch._dynamo.reset()
        compiled = torch.compile(fn)(a, b)
        print(dtype, name, "eager", eager.tolist(), "compiled", compiled.tolist())
        max_diff = max(max_diff, (eager - compiled).abs().max().item())
print("max abs diff:", max_diff)
