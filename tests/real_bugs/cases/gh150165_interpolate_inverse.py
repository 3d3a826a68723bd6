# issue: https://github.com/pytorch/pytorch/issues/150165
# title: Inconsistency inference results using eager and inductor compiler.
# expected: not_a_bug
# verdict: amplified_rounding
# verdict note: decided as passed when collected; amplified_rounding is the package's not-a-bug verdict for
#   a difference past allclose that float64 finds no worse than eager's, added later (this is the thread's mechanism).
# culprit: ill-conditioned torch.inverse (bilinear 32->64 upsample gives rank <= 32; tiny interpolate reordering differences amplified)
# grad: no
# discussion: open; labels oncall: pt2. eellison: "This is another case of torch.compile being more accurate than eager"
#   and posts this script, which judges with torch._dynamo.utils.same(..., fp64_ref=res64). Script is eellison's version
#   from the thread (default device cuda -> cpu).
# reproduces: yes on 2.13.0 CPU: |eager - compiled| up to 2.5e8, but both are ~5.7e17 from the fp64 result; same(..., fp64_ref=res64) -> True
import torch

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = torch.nn.functional.interpolate(x, size=(64, 64), mode='bilinear', align_corners=True)
        x = torch.inverse(x)
        return x

model = Model()
inputs = torch.randn(1, 3, 32, 32)
res = model(inputs)
res64 = model(inputs.to(torch.float64))

compiled_model = torch.compile(model, backend='inductor')
with torch.no_grad():
    compiled_out = compiled_model(inputs)

print(torch._dynamo.utils.same(res, compiled_out, fp64_ref=res64))
print("max |eager - compiled|:", (res - compiled_out).abs().max().item())
print("max |eager - fp64|:    ", (res.double() - res64).abs().max().item())
print("max |compiled - fp64|: ", (compiled_out.double() - res64).abs().max().item())
