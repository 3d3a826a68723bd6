# issue: https://github.com/pytorch/pytorch/issues/196681
# title: [inductor] CPU 2D-tiled reduction stores a full-width vector in the tail block: heap overflow (SIGABRT) or silent wrong results
# expected: bug
# verdict: crashed
# culprit: CPP codegen 2D-tiled reduction (matmul decomposed to mul+sum over padded permuted GELU): tail block uses sum_masked_reduce but writes back with a full-width vector store
# grad: no
# discussion: open; labels bot-triaged, module: correctness (silent), module: crash, module: inductor, module: vectorization; root-caused in the report to the tail write-back of the CPU 2D-tiled reduction kernel overrunning the output row.
# reproduces: yes on 2.13.0 CPU, max abs diff 20.208; the process then usually aborts at exit with glibc heap corruption (rc 134)
# verdict note: decided as inaccurate when collected; changed to crashed, the other outcome the thread's title names,
#   after the first diagnosis: under diagnose the out-of-bounds store aborts the process before any output is judged.
import torch
import torch.nn.functional as F

def f(x):
    v = (x * 0.5) * (torch.erf(x * 0.7071067811865476) + 1)   # GELU, x is channels_last
    a = v.permute(3, 2, 1, 0)                                  # (66, 66, 8, 1)
    p = F.pad(a, (0, 0, 0, 58), value=0.5)                     # (66, 66, 66, 1)
    q = F.pad(v, (0, 0, 0, 0, 0, 58), value=0.5)               # (1, 66, 66, 66)
    return torch.matmul(q, p)                                  # (66, 66, 66, 1)

torch.manual_seed(0)
x = torch.randn(1, 8, 66, 66).contiguous(memory_format=torch.channels_last)
ref = f(x)
out = torch.compile(f)(x)
print("max abs diff:", (out - ref).abs().max().item())
